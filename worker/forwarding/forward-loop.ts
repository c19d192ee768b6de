// The forwarder: claims deliveries (wharf.claim_deliveries), sends each as a
// signed request, concurrently, and records how it ended
// (wharf.complete_deliveries, in batches that form by themselves as the
// handlers' completions do; wharf.fail_delivery). Every limit (rate, in flight
// per destination, order per scope, paused and open-breaker destinations) is
// the claim's, kept in PostgreSQL across hosts; this loop bounds only how
// many requests this host has open at once.
//
// One claim serves several requests: besides a delivery per idle slot it
// leases up to `concurrency` more, kept here and started as requests end, and
// claims again when half of those are gone. Kept deliveries not started
// within `maxAheadMs` of their claim are released unsent, all at once (their
// lease, at least the timeout and 5 s, must cover the request); while
// requests take long on average nothing is kept ahead. A claim made while
// every slot is busy still asks for one delivery to send at once, so that a
// rate-limited destination's deliveries and probes, which are only ever
// claimed that way (send_now), go first at the next free slot: a bucket's
// rate stays the rate requests leave at.
//
// It holds no pooled connection while a request is open or while it waits:
// each statement takes a connection from the pool and gives it back. It
// wakes on a notification on wharf_delivery (the host's listener, listener.ts), on a
// finished request (a slot, and for an ordered destination the next of its
// scope), at wharf.next_delivery_at() (a retry due, a rate limit's next
// token, a breaker's probe), and at the poll interval. When the database
// says something is due but a claim finds nothing (its scope's head or the
// destination's in-flight bound is another host's, whose end notifies no
// one), it looks again after a growing pause, up to the poll interval.
//
// Stopping: no more claims; deliveries kept ahead are released; requests
// still open get the drain timeout to end and be recorded; those that do not
// are aborted and their deliveries released (attempt uncounted). A host killed outright leaves its leases to
// any host's reaper (wharf.reap_deliveries, every ~30 s): the deliveries are
// sent again under the same webhook-id.
import type pg from 'pg';
import type { Logger } from 'pino';
import type { Agent } from 'undici';
import { spread } from '../../db/backoff.js';
import { SecretKeyError, type KeyRing } from '../../db/secret-box.js';
import { classOf } from '../classify.js';
import {
  destinationDeliveriesTotal, destinationInFlight, destinationRequestSeconds,
} from '../metrics.js';
import { runPeriodically, type Periodic } from '../periodic.js';
import { CompletionBatcher } from '../completion-batcher.js';
import { claimDeliveries } from '../sql/claim-deliveries.js';
import { completeDeliveries, type DeliveryCompletion } from '../sql/complete-deliveries.js';
import type { ClaimedDelivery, DeliveryLease } from '../sql/delivery-row.js';
import { failDelivery } from '../sql/fail-delivery.js';
import { readNextDeliveryIn } from '../sql/next-delivery-at.js';
import { reapDeliveries } from '../sql/reap-deliveries.js';
import { releaseDelivery } from '../sql/release-delivery.js';
import { isConnectionTrouble, retryOnConnectionTrouble } from '../transient.js';
import { Wakeup } from '../wakeup.js';
import type { AddressPolicy, Lookup } from './address-guard.js';
import { buildDeliveryRequest } from './delivery-request.js';
import { outcomeOf } from './delivery-outcome.js';
import { SecretOpener, secretTexts, type OpenedSecrets } from './open-secrets.js';
import { guardedAgent } from './guarded-agent.js';
import { sendDelivery } from './send-delivery.js';

export type ForwardOutcome = 'handled' | 'retried' | 'dead' | 'gone' | 'released' | 'lease_lost';

export interface ForwardedDelivery {
  deliveryId: string;
  destinationId: string;
  eventId: string;
  attempt: number;
  outcome: ForwardOutcome;
  /** The HTTP status, when there was an answer. */
  status: number | null;
  errorClass: string | null;
}

export interface ForwarderOptions {
  /** Where every statement runs, one at a time per connection, and where the listener's connection comes from. */
  pool: pg.Pool;
  workerId: string;
  logger: Logger;
  /** WHARF_SECRET_KEYS: opens the destinations' sealed secrets. */
  keyRing: KeyRing | undefined;
  policy: AddressPolicy;
  /** Requests this host keeps open at once, over every destination. */
  concurrency: number;
  pollEvery: () => number;
  reapEvery: () => number;
  drainTimeout: () => number;
  /** The resolver the address guard uses (tests). */
  lookup?: Lookup;
  onSettled?: (delivery: ForwardedDelivery) => void;
  onIdle?: () => void;
  onReaped?: (count: number) => void;
}

const firstErrorBackoff = 100;
/** The first pause when something is due but nothing could be claimed; it doubles up to the poll interval. */
const firstBusyPause = 10;
/** How long a host that cannot open a destination's secrets stops claiming (other hosts may hold the key ring). */
const secretTroublePause = 60_000;
/** How long a closing write keeps trying through a database outage (the lease is the database's 2 minutes). */
const closingWriteGiveUp = 120_000;
/** Longest a delivery claimed ahead may wait for a slot: its lease (at least timeout + 5 s) still covers its request and the answer's write. */
const maxAheadMs = 2_000;
/** Nothing is kept ahead while requests take longer than this on average: kept deliveries would mostly go stale. */
const slowRequestMs = 500;

interface KeptAhead {
  row: ClaimedDelivery;
  claimedAt: number;
}

export class Forwarder {
  private readonly wakeup = new Wakeup();
  private readonly opener: SecretOpener;
  /** Every request's connections, kept alive per origin, each opened to an address the guard checked. */
  private readonly agent: Agent;
  private readonly running = new Set<Promise<void>>();
  /** Claimed, not yet started: those to send at once first, then the rest in claim order. */
  private readonly ahead: KeptAhead[] = [];
  /** Releases of kept deliveries that went stale, in flight (stopping waits for them). */
  private readonly releasing = new Set<Promise<void>>();
  /** Requests' duration, a moving average (ms). */
  private requestMs = 0;
  /** Aborts the requests still open when the drain ends. */
  private readonly abortRequests = new AbortController();
  /** Ends the retries of closing writes once shutdown stops waiting for them. */
  private readonly abortClosing = new AbortController();
  /** Successes, one statement for those that finish together. */
  private readonly completions: CompletionBatcher<DeliveryCompletion>;
  private loop: Promise<void> | undefined;
  private reaper: Periodic | undefined;
  private stopping = false;
  private stopped: Promise<void> | undefined;
  private pausedUntil = 0;

  constructor(private readonly options: ForwarderOptions) {
    if (!Number.isInteger(options.concurrency) || options.concurrency < 1) {
      throw new RangeError('forwarding concurrency must be a positive integer');
    }
    this.opener = new SecretOpener(options.keyRing);
    this.agent = guardedAgent(options.policy, options.lookup);
    this.completions = new CompletionBatcher(options.pool, completeDeliveries, options.logger, this.abortClosing.signal, closingWriteGiveUp);
  }

  /** Something became claimable: the host's listener heard wharf_delivery. */
  wake(): void {
    this.wakeup.wake();
  }

  /** Requests open now. */
  get inFlight(): number {
    return this.running.size;
  }

  async start(): Promise<void> {
    this.reaper = runPeriodically(() => spread(this.options.reapEvery()), () => this.reap(), () => 1_000 + Math.random() * 2_000);
    this.loop = this.run().catch((error: unknown) => {
      this.options.logger.fatal({ error_class: classOf(error) }, 'forward loop crashed');
    });
  }

  stop(): Promise<void> {
    this.stopped ??= this.shutDown();
    return this.stopped;
  }

  private async shutDown(): Promise<void> {
    this.stopping = true;
    this.wakeup.wake();
    await this.loop;
    await Promise.all([...this.ahead.splice(0).map((kept) => this.releaseUnsent(kept.row)), ...this.releasing]);
    if (this.running.size > 0) {
      const drained = Promise.all(this.running);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([drained, new Promise<void>((resolve) => {
        timer = setTimeout(resolve, this.options.drainTimeout());
      })]);
      clearTimeout(timer);
      // What is still open is aborted and released.
      this.abortRequests.abort(new Error('forwarder stopped'));
      const giveUp = setTimeout(() => this.abortClosing.abort(new Error('forwarder stopped')), this.options.drainTimeout());
      await Promise.all(this.running);
      clearTimeout(giveUp);
    }
    await this.reaper?.stop();
    await this.agent.close();
  }

  private async reap(): Promise<void> {
    try {
      const reaped = await reapDeliveries(this.options.pool);
      if (reaped > 0) this.options.logger.warn({ reaped }, 'expired delivery leases taken back');
      this.options.onReaped?.(reaped);
    } catch (error) {
      // An outage is the event reaper's and the claim loop's to say at warn; anything else is a bug to look at.
      this.options.logger[isConnectionTrouble(error) ? 'debug' : 'error']({ error_class: classOf(error) }, 'delivery reaper failed');
    }
  }

  private async run(): Promise<void> {
    const { options, wakeup } = this;
    let errorBackoff = firstErrorBackoff;
    let busyPause = firstBusyPause;
    let unavailable = false;
    while (!this.stopping) {
      const pausedFor = this.pausedUntil - Date.now();
      if (pausedFor > 0) {
        wakeup.reset();
        await wakeup.sleep(Math.min(pausedFor, options.pollEvery()));
        continue;
      }
      // Reset before looking: a request that ends from here on wakes the sleep below.
      wakeup.reset();
      this.startKept();
      // Slots nothing kept will fill, and room to keep more: claim when a slot would idle or half the room is free.
      const idle = Math.max(0, options.concurrency - this.running.size - this.ahead.length);
      const room = this.requestMs > slowRequestMs ? idle
        : 2 * options.concurrency - this.running.size - this.ahead.length;
      if (idle === 0 && room < Math.ceil(options.concurrency / 2)) {
        await wakeup.sleep(this.untilStale(options.pollEvery()));
        continue;
      }
      // At least one to send at once: what may only be claimed that way (a rate limit's, a probe) is never starved.
      const now = Math.max(idle, 1);
      const wanted = Math.max(room, now);
      let rows: ClaimedDelivery[];
      // The lease starts in the claim: the kept delivery's time is counted from before it.
      const claimedAt = performance.now();
      try {
        rows = await claimDeliveries(options.pool, options.workerId, now, wanted - now);
        errorBackoff = firstErrorBackoff;
        if (unavailable) options.logger.info('forwarding again: the database answers');
        unavailable = false;
      } catch (error) {
        if (!isConnectionTrouble(error)) {
          options.logger.error({ error_class: classOf(error), retry_in_ms: errorBackoff }, 'claiming deliveries failed');
        } else if (!unavailable) {
          // The host's claim loop says the outage at warn, once, with where: here it is told at info.
          unavailable = true;
          options.logger.info({ error_class: classOf(error) }, 'forwarding waits for the database; claiming deliveries again with backoff');
        }
        await wakeup.sleep(errorBackoff);
        errorBackoff = Math.min(options.pollEvery(), errorBackoff * 2);
        continue;
      }
      const sendNow = rows.filter((row) => row.send_now).map((row) => ({ row, claimedAt }));
      this.ahead.unshift(...sendNow);
      for (const row of rows) if (!row.send_now) this.ahead.push({ row, claimedAt });
      this.startKept();
      if (rows.length > 0) busyPause = firstBusyPause;
      if (rows.length === wanted || this.stopping) continue;

      let sleepMs = this.untilStale(options.pollEvery());
      // Every slot busy: a request that ends wakes the loop, and what it claims then may be kept ahead.
      if (this.running.size >= options.concurrency) {
        await wakeup.sleep(sleepMs);
        continue;
      }
      try {
        const dueIn = await readNextDeliveryIn(options.pool);
        if (dueIn !== null) {
          if (dueIn > 0) sleepMs = Math.min(sleepMs, dueIn);
          else if (rows.length === 0) {
            // Due, yet nothing could be claimed: what holds it ends on another host, which notifies no one.
            sleepMs = Math.min(sleepMs, busyPause);
            busyPause = Math.min(options.pollEvery(), busyPause * 2);
          } else sleepMs = 0;
        }
      } catch (error) {
        options.logger.warn({ error_class: classOf(error) }, 'could not read when the next delivery is due');
      }
      if (rows.length === 0) options.onIdle?.();
      await wakeup.sleep(sleepMs);
    }
  }

  /** Starts kept deliveries while slots are free. */
  private startKept(): void {
    this.releaseStale();
    while (!this.stopping && this.running.size < this.options.concurrency && this.ahead.length > 0) {
      this.launch(this.ahead.shift()!.row);
    }
  }

  /** Releases, unsent and all at once, the kept deliveries claimed more than maxAheadMs ago. */
  private releaseStale(): void {
    const now = performance.now();
    if (!this.ahead.some((kept) => now - kept.claimedAt > maxAheadMs)) return;
    const stale = this.ahead.filter((kept) => now - kept.claimedAt > maxAheadMs);
    const fresh = this.ahead.filter((kept) => now - kept.claimedAt <= maxAheadMs);
    this.ahead.splice(0, this.ahead.length, ...fresh);
    for (const kept of stale) {
      const release: Promise<void> = this.releaseUnsent(kept.row).finally(() => this.releasing.delete(release));
      this.releasing.add(release);
    }
  }

  /** `cap`, or less: until the oldest kept delivery goes stale. */
  private untilStale(cap: number): number {
    if (this.ahead.length === 0) return cap;
    const oldest = Math.min(...this.ahead.map((kept) => kept.claimedAt));
    return Math.max(0, Math.min(cap, oldest + maxAheadMs - performance.now() + 1));
  }

  private launch(row: ClaimedDelivery): void {
    const task: Promise<void> = this.forward(row)
      .catch((error: unknown) => {
        // Every expected failure is handled in forward(); this is a bug. The lease expires and is reaped.
        this.options.logger.error({ error_class: classOf(error), delivery_id: row.delivery_id }, 'forwarding a delivery failed unexpectedly');
      })
      .finally(() => {
        this.running.delete(task);
        this.startKept();
        this.wakeup.wake();
      });
    this.running.add(task);
  }

  /** Gives back a delivery claimed ahead and never sent: attempt uncounted. */
  private async releaseUnsent(row: ClaimedDelivery): Promise<void> {
    if (await this.release({ id: row.delivery_id, epoch: row.epoch })) this.settle(row, 'released');
  }

  /** How a delivery's turn here ended: counted by destination, and told to onSettled. */
  private settle(row: ClaimedDelivery, outcome: ForwardOutcome, status: number | null = null, errorClass: string | null = null): void {
    destinationDeliveriesTotal.inc({ destination_id: row.destination_id, outcome });
    this.options.onSettled?.({
      deliveryId: row.delivery_id, destinationId: row.destination_id, eventId: row.event_id, attempt: row.attempt,
      outcome, status, errorClass,
    });
  }

  private async forward(row: ClaimedDelivery): Promise<void> {
    const lease: DeliveryLease = { id: row.delivery_id, epoch: row.epoch };
    const destination = { destination_id: row.destination_id };
    destinationInFlight.inc(destination);
    try {
      let secrets: OpenedSecrets;
      let request;
      try {
        secrets = await this.opener.open(row);
        request = buildDeliveryRequest(row, secrets, new Date());
      } catch (error) {
        if (error instanceof SecretKeyError) {
          this.secretTrouble(row, error);
          if (await this.release(lease)) this.settle(row, 'released');
          return;
        }
        // A secret that opened but cannot sign, a request that cannot be built: the breaker and an issue will say so.
        await this.record(lease, row, { kind: 'transient', errorClass: classOf(error), status: null, durationMs: 0, response: null, retryAfterMs: null });
        return;
      }
      const result = await sendDelivery(request, {
        dispatcher: this.agent, signal: this.abortRequests.signal, secrets: secretTexts(secrets),
      });
      if (result.type === 'stopped') {
        if (await this.release(lease)) this.settle(row, 'released');
        return;
      }
      destinationRequestSeconds.observe(destination, result.durationMs / 1000);
      this.requestMs = this.requestMs * 0.9 + result.durationMs * 0.1;
      const outcome = outcomeOf(result);
      if (outcome.kind === 'handled') {
        const completed = await this.complete({
          id: lease.id, epoch: lease.epoch, status: outcome.status, durationMs: outcome.durationMs, response: outcome.response,
        });
        if (completed === undefined) return;
        this.settle(row, completed ? 'handled' : 'lease_lost', outcome.status);
        if (!completed) this.options.logger.warn({ delivery_id: row.delivery_id, destination_id: row.destination_id }, 'delivery lease gone before its success was recorded');
        return;
      }
      await this.record(lease, row, outcome);
    } finally {
      destinationInFlight.dec(destination);
    }
  }

  private async record(
    lease: DeliveryLease, row: ClaimedDelivery,
    failure: { kind: 'transient' | 'permanent' | 'gone'; errorClass: string; status: number | null; durationMs: number; response: string | null; retryAfterMs: number | null },
  ): Promise<void> {
    const state = await this.closingWrite(() => failDelivery(this.options.pool, lease, failure));
    if (state === undefined) return;
    const outcome: ForwardOutcome = state === null ? 'lease_lost'
      : failure.kind === 'gone' ? 'gone' : state === 'DEAD' ? 'dead' : 'retried';
    this.settle(row, outcome, failure.status, failure.errorClass);
    const log = outcome === 'dead' || outcome === 'gone' ? 'warn' : 'info';
    // The class, the status and where: never the URL's path or query, a header or the answer.
    this.options.logger[log]({
      delivery_id: row.delivery_id, destination_id: row.destination_id, attempt: row.attempt, host: safeHost(row.url),
      error_class: failure.errorClass, status: failure.status, kind: failure.kind, state,
    }, 'delivery attempt failed');
  }

  /** Records a success in the completions' next batch; undefined when it could not be written (as closingWrite). */
  private complete(completion: DeliveryCompletion): Promise<boolean | undefined> {
    return new Promise((resolve) => {
      this.completions.complete(completion, {
        completed: (done) => resolve(done),
        completionFailed: (error) => {
          this.writeLost(error);
          resolve(undefined);
        },
      });
    });
  }

  /**
   * A closing write, retried through a database outage until it goes
   * through or shutdown gives up on it (the reaper then takes the lease
   * back). undefined when given up.
   */
  private async closingWrite<T>(write: () => Promise<T>): Promise<T | undefined> {
    try {
      return await retryOnConnectionTrouble(write, { giveUpAfter: closingWriteGiveUp, signal: this.abortClosing.signal });
    } catch (error) {
      this.writeLost(error);
      return undefined;
    }
  }

  private writeLost(error: unknown): void {
    this.options.logger.error({ error_class: classOf(error) }, 'could not record a delivery attempt; its lease will expire and be reaped');
  }

  private async release(lease: DeliveryLease): Promise<boolean> {
    try {
      return await retryOnConnectionTrouble(() => releaseDelivery(this.options.pool, lease), {
        giveUpAfter: this.options.drainTimeout(), signal: this.abortClosing.signal,
      });
    } catch (error) {
      this.options.logger.warn({ error_class: classOf(error), delivery_id: lease.id }, 'could not release a delivery; its lease will expire');
      return false;
    }
  }

  /** The key ring cannot open a destination's secrets: say so once per pause, and stop claiming here for a while. */
  private secretTrouble(row: ClaimedDelivery, error: SecretKeyError): void {
    const first = this.pausedUntil <= Date.now();
    this.pausedUntil = Date.now() + secretTroublePause;
    if (!first) return;
    const message = this.opener.hasKeyRing
      ? 'cannot open a destination\'s secrets with WHARF_SECRET_KEYS (a key of the ring that sealed them is missing): deliveries wait for a host that can'
      : 'destination deliveries need WHARF_SECRET_KEYS (the key ring their secrets were sealed with), which is not set on this host: deliveries wait for a host that has it';
    // SecretKeyError's message names the destination and the key id, never a secret.
    this.options.logger.error({ destination_id: row.destination_id, error_class: classOf(error), reason: error.message, retry_in_ms: secretTroublePause }, message);
  }
}

/** A URL's host alone: what a log may say of a destination. */
function safeHost(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return 'invalid-url';
  }
}
