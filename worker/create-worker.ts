// createWorker: assembles one host's claim loop, listener, reaper, retention
// and metrics around a pool, and, when asked, its forwarder to destinations
// (worker/forwarding/) on a small pool of its own; and stops them in order.
import { EventEmitter } from 'node:events';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import pg from 'pg';
import { pino, type Logger } from 'pino';
import type { Registry } from 'prom-client';
import { createPool, describeDatabase } from '../db/pool.js';
import { runClaimLoop } from './claim-loop.js';
import { classOf } from './classify.js';
import { readReadiness, type Readiness } from '../db/readiness.js';
import { CompletionBatcher } from './completion-batcher.js';
import { closingWriteRetryMs, EventRun, type RunHost, type RunOutcome } from './event-run.js';
import { HandlerDeadlines } from './handler-deadlines.js';
import { findHandler, handledKeys, type HandlerMap } from './handlers.js';
import { Listener } from './listener.js';
import { addQueueStatsSource, leaseLostTotal, workerRegistry } from './metrics.js';
import type { Periodic } from './periodic.js';
import { startReaper } from './reaper.js';
import { startRetention, type RetentionResult } from './retention.js';
import { resolveSettings, type WorkerSettings } from './settings.js';
import type { Lease, ProviderEventRow } from './sql/event-row.js';
import { completeEvents, readQueueStats, type Completion } from './sql/claim-lease.js';
import { retryOnConnectionTrouble } from './transient.js';
import { renewHeldLeases } from './lease-renewal.js';
import { LocalQueue } from './local-queue.js';
import { NextDue } from './next-due.js';
import { Wakeup } from './wakeup.js';
import { parseKeyRing, type KeyRing } from '../db/secret-box.js';
import { addressPolicy, publicOnly, type AddressPolicy, type Lookup } from './forwarding/address-guard.js';
import { Forwarder, type ForwardedDelivery } from './forwarding/forward-loop.js';

/**
 * Forwarding to destinations (DESIGN.md, "Destinations"): this host also
 * claims destination deliveries and sends them as signed HTTP requests.
 */
export interface ForwardOptions {
  /**
   * The key ring the destinations' secrets are sealed with: WHARF_SECRET_KEYS's
   * text, or a ring parsed already. Without it a delivery cannot be signed:
   * it is released for a host that has it, and this host says so in its log.
   */
  secretKeys?: string | KeyRing;
  /**
   * Which addresses a destination may resolve to. Default: public unicast
   * only. `allowPrivate` (WHARF_FORWARD_ALLOW_PRIVATE) also allows loopback,
   * private, link-local and unique-local addresses; `allowNetworks`
   * (WHARF_FORWARD_ALLOW_NETWORKS) is a comma-separated list of CIDRs that
   * pass whatever their range.
   */
  addresses?: AddressPolicy | { allowPrivate?: boolean | string; allowNetworks?: string };
  /** Requests this host keeps open at once over every destination. Default 32. */
  concurrency?: number;
  /**
   * Where the forwarder's statements and its LISTEN wharf_delivery connection
   * go. Default: a small pool of its own (5 connections) made like the
   * handlers' pool, so that a slow destination never holds up claims.
   */
  pool?: pg.Pool;
  /** The resolver the address guard uses (tests). */
  lookup?: Lookup;
}

export interface WorkerOptions {
  /** Either a connection string (the worker owns its pool) or a pool it borrows. */
  connectionString?: string;
  pool?: pg.Pool;
  /**
   * Where handlers' business transactions (ctx.step, ctx.transaction) run:
   * a pool of the application's own role, which needs EXECUTE on the
   * token-taking wharf.step and wharf.fence and nothing else of the inbox.
   * Default: a pool of `concurrency` connections the worker makes from
   * `connectionString` (or `pool`'s settings), apart from the one its own
   * statements use, so that hung handlers never hold up claims, renewals,
   * completions or the reaper. A pool given here should set
   * `options: '-c client_connection_check_interval=1000'`: when an attempt
   * ends, its open transactions have their connection cut, and a statement
   * that is running notices only at that interval.
   */
  handlerPool?: pg.Pool;
  handlers: HandlerMap;
  /**
   * Claim every event type and complete those without a handler as
   * `ignored`, instead of leaving them for a host that handles them. For a
   * deployment where no host handles them anywhere; off by default, so that
   * during a rolling deploy old hosts never ignore what only new ones handle.
   */
  ignoreUnhandled?: boolean;
  /** How many handlers run at once. Default 4. */
  concurrency?: number;
  /**
   * How many claimed events may wait for a free handler, besides those
   * running. Claims then take up to this many at once instead of one per free
   * handler, which saves a statement and a commit per few events when
   * handlers are short; the waiting leases are renewed together and given
   * back on stop. Default 0: claims are sized to the free handlers.
   */
  localQueue?: number;
  /** Overrides of wharf.setting values and host timings, in milliseconds. */
  settings?: Partial<WorkerSettings>;
  logger?: Logger;
  /** Names this host in leased_by and its listener; unique per host. */
  workerId?: string;
  /** Forward destination deliveries from this host too (`wharf worker` does by default). Default: off. */
  forward?: ForwardOptions | boolean;
}

export interface WorkerEvents {
  /** One attempt ended and its row was written (or deliberately not). */
  settled: [{ eventId: string; outcome: RunOutcome }];
  /** The loop found nothing to do and sleeps. */
  idle: [];
  reaped: [count: number];
  retention: [result: RetentionResult];
  /** One delivery attempt to a destination ended and was recorded (or released). */
  forwarded: [delivery: ForwardedDelivery];
}

export interface Worker extends EventEmitter<WorkerEvents> {
  readonly id: string;
  /** The Prometheus registry the worker counts into (shared by the process's workers). */
  readonly registry: Registry;
  start(): Promise<void>;
  /** Stops claiming, aborts handlers, drains up to drainTimeout, releases the rest, closes. */
  stop(): Promise<void>;
  /** True when the database answers now as a writable primary (a readiness probe). */
  ready(): Promise<boolean>;
  /** The same, said in a word for /readyz: 'standby' when the server is in recovery or read-only. */
  readiness(): Promise<Readiness>;
}

export function createWorker(options: WorkerOptions): Worker {
  return new WharfWorker(options);
}

class WharfWorker extends EventEmitter<WorkerEvents> implements Worker {
  readonly id: string;
  readonly registry = workerRegistry;
  private readonly pool: pg.Pool;
  private readonly ownsPool: boolean;
  private readonly handlerPool: pg.Pool;
  private readonly ownsHandlerPool: boolean;
  /** Handlers past their timeout that have not returned. */
  private abandoned = 0;
  private readonly concurrency: number;
  private readonly logger: Logger;
  private readonly wakeup = new Wakeup();
  private readonly nextDue = new NextDue();
  private readonly waiting: LocalQueue;
  private readonly completions: CompletionBatcher<Completion>;
  /** What every run shares (worker/event-run.ts). */
  private readonly runHost: RunHost;
  private readonly listener: Listener;
  /** Every run from claim until its closing write is done. */
  private readonly running = new Set<EventRun>();
  /** Runs whose handler has not ended yet: what `concurrency` bounds. */
  private handling = 0;
  private settings: WorkerSettings | undefined;
  private periodic: Periodic[] = [];
  private loop: Promise<void> | undefined;
  private removeStatsSource: (() => void) | undefined;
  private stopping = false;
  private stopped: Promise<void> | undefined;
  /** Ends a start that still waits for the database. */
  private readonly startAbort = new AbortController();
  /** Ends the retries of closing writes once shutdown stops waiting for them. */
  private readonly closingAbort = new AbortController();
  private readonly forwardOptions: ForwardOptions | undefined;
  private forwardPool: pg.Pool | undefined;
  private ownsForwardPool = false;
  private forwarder: Forwarder | undefined;
  private forwardPolicy: AddressPolicy = publicOnly;

  constructor(private readonly options: WorkerOptions) {
    super();
    if (!options.pool && !options.connectionString) throw new TypeError('createWorker needs a pool or a connectionString');
    this.concurrency = options.concurrency ?? 4;
    if (!Number.isInteger(this.concurrency) || this.concurrency < 1) {
      throw new RangeError('concurrency must be a positive integer');
    }
    this.waiting = new LocalQueue(options.localQueue ?? 0);
    if (!Number.isInteger(this.waiting.capacity) || this.waiting.capacity < 0) {
      throw new RangeError('localQueue must be zero or a positive integer');
    }
    this.id = options.workerId ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
    this.logger = (options.logger ?? pino({ name: 'wharf-worker' })).child({ worker: this.id });
    this.ownsPool = !options.pool;
    // Owned pool: handlers' transactions, renewals and closing writes, plus
    // the listener; idle connections close soon, so an idle host holds one.
    this.pool =
      options.pool ??
      createPool(options.connectionString!, {
        max: this.concurrency + 3, idleTimeoutMillis: 2_000,
        // A partitioned or black-holed server must fail a connect, not hang it.
        connectionTimeoutMillis: 10_000, keepAlive: true,
      });
    this.pool.on('error', (error) => this.logger.warn({ error_class: classOf(error) }, 'idle pool connection lost'));
    this.ownsHandlerPool = !options.handlerPool;
    // A statement of an attempt whose connection was cut stops within a second (worker/attempt-transactions.ts).
    const handlerPoolOptions = {
      max: this.concurrency, idleTimeoutMillis: 2_000,
      options: [options.pool?.options.options, '-c client_connection_check_interval=1000'].filter(Boolean).join(' '),
    };
    this.handlerPool = options.handlerPool ?? (options.pool
      // The borrowed pool's settings, its Client (a multi-host one included) too.
      ? new pg.Pool({ ...options.pool.options, ...handlerPoolOptions })
      : createPool(options.connectionString!, { connectionTimeoutMillis: 10_000, keepAlive: true, ...handlerPoolOptions }));
    if (this.ownsHandlerPool) {
      this.handlerPool.on('error', (error) => this.logger.warn({ error_class: classOf(error) }, 'idle handler connection lost'));
    }
    this.completions = new CompletionBatcher(this.pool, completeEvents, this.logger, this.closingAbort.signal, closingWriteRetryMs);
    this.runHost = {
      pool: this.pool,
      handlerPool: this.handlerPool,
      completions: this.completions,
      logger: this.logger,
      closingSignal: this.closingAbort.signal,
      handlerTimeout: () => this.current.handlerTimeout,
      deadlines: new HandlerDeadlines(),
      handlerEnded: () => {
        this.handling -= 1;
        this.startWaiting();
        this.wakeup.wake();
      },
      abandonedChanged: (run, change) => {
        this.abandoned += change;
        if (change === 1) this.logger.warn({ event_id: run.row.id, abandoned: this.abandoned }, 'handler abandoned past its timeout');
      },
      settled: (run, outcome) => {
        this.running.delete(run);
        if (outcome === 'retried') this.nextDue.retryScheduled();
        if (this.listenerCount('settled') > 0) this.emit('settled', { eventId: run.row.id, outcome });
        this.wakeup.wake();
      },
    };
    this.forwardOptions = options.forward === true ? {} : options.forward || undefined;
    if (this.forwardOptions) {
      const addresses = this.forwardOptions.addresses;
      // A malformed setting fails here, before anything starts.
      this.forwardPolicy = addresses === undefined ? publicOnly
        : Array.isArray(addresses.allowNetworks) ? addresses as AddressPolicy
          : addressPolicy(addresses as { allowPrivate?: boolean | string; allowNetworks?: string });
      const concurrency = this.forwardOptions.concurrency ?? 32;
      if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError('forward.concurrency must be a positive integer');
      this.ownsForwardPool = !this.forwardOptions.pool;
      const forwardPoolOptions = { max: 5, idleTimeoutMillis: 2_000 };
      this.forwardPool = this.forwardOptions.pool ?? (options.pool
        ? new pg.Pool({ ...options.pool.options, ...forwardPoolOptions })
        : createPool(options.connectionString!, { connectionTimeoutMillis: 10_000, keepAlive: true, ...forwardPoolOptions }));
      if (this.ownsForwardPool) {
        this.forwardPool.on('error', (error) => this.logger.warn({ error_class: classOf(error) }, 'idle forwarding connection lost'));
      }
    }
    this.listener = new Listener({
      pool: this.pool,
      name: this.id,
      logger: this.logger,
      onNotification: () => this.wakeup.wake(),
      // One LISTEN connection per host, the forwarder's channel on it too.
      ...(this.forwardOptions ? { onDeliveryNotification: () => this.forwarder?.wake() } : {}),
    });
  }

  async start(): Promise<void> {
    if (this.settings) throw new Error('worker already started');
    const overrides = this.options.settings ?? {};
    // A malformed key ring fails the start before anything runs.
    const forwardKeys = this.forwardOptions?.secretKeys;
    const forwardRing = typeof forwardKeys === 'string' || forwardKeys === undefined ? await parseKeyRing(forwardKeys) : forwardKeys;
    this.settings = await this.waitForDatabase(overrides);
    await this.listener.start();
    this.removeStatsSource = addQueueStatsSource(() => readQueueStats(this.pool));
    this.periodic = [
      startReaper({
        pool: this.pool,
        every: () => this.current.reapEvery,
        logger: this.logger,
        onReaped: (count) => {
          this.emit('reaped', count);
          void this.refreshSettings(overrides);
        },
      }),
      startRetention({
        pool: this.pool,
        every: () => this.current.retentionEvery,
        logger: this.logger,
        onRun: (result) => this.emit('retention', result),
      }),
      renewHeldLeases({
        pool: this.pool,
        every: () => this.current.renewEvery,
        logger: this.logger,
        held: () => this.heldLeases(),
        onLost: (lost) => this.leasesLost(lost),
      }),
    ];
    this.loop = runClaimLoop({
      pool: this.pool,
      workerId: this.id,
      handles: this.options.ignoreUnhandled ? null : handledKeys(this.options.handlers),
      listener: this.listener,
      wakeup: this.wakeup,
      nextDue: this.nextDue,
      logger: this.logger,
      pollEvery: () => this.current.pollEvery,
      freeSlots: () => this.freeSlots(),
      stopping: () => this.stopping,
      startRun: (row) => this.accept(row),
      onIdle: () => this.emit('idle'),
      database: databaseAddress(this.options),
    }).catch((error: unknown) => {
      // Every expected failure is handled inside the loop; this is a bug.
      this.logger.fatal({ error_class: classOf(error) }, 'claim loop crashed');
    });
    if (this.forwardOptions && this.forwardPool) await this.startForwarder(this.forwardOptions, this.forwardPool, forwardRing);
    this.logger.info({ concurrency: this.concurrency, forwarding: this.forwarder !== undefined }, 'worker started');
  }

  private async startForwarder(forward: ForwardOptions, pool: pg.Pool, keyRing: KeyRing | undefined): Promise<void> {
    const forwarder = new Forwarder({
      pool,
      workerId: this.id,
      logger: this.logger.child({ part: 'forwarder' }),
      keyRing,
      policy: this.forwardPolicy,
      concurrency: forward.concurrency ?? 32,
      pollEvery: () => this.current.pollEvery,
      reapEvery: () => this.current.reapEvery,
      drainTimeout: () => this.current.drainTimeout,
      ...(forward.lookup ? { lookup: forward.lookup } : {}),
      onSettled: (delivery) => {
        if (this.listenerCount('forwarded') > 0) this.emit('forwarded', delivery);
      },
    });
    await forwarder.start();
    this.forwarder = forwarder;
  }

  async ready(): Promise<boolean> {
    return (await this.readiness()) === 'ready';
  }

  async readiness(): Promise<Readiness> {
    // Every slot's handler hung past its timeout: this host is wedged, whatever the database says.
    if (this.abandoned >= this.concurrency) return 'unavailable';
    return readReadiness(this.pool);
  }

  stop(): Promise<void> {
    this.startAbort.abort(new Error('worker stopped before it started'));
    this.stopped ??= this.shutDown();
    return this.stopped;
  }

  /**
   * A database that is not reachable yet (starting up, restarting, a network
   * partition) is waited for, with bounded jittered backoff and one line
   * naming where, instead of failing the start. A refusal (wrong password, no
   * schema) fails it.
   */
  private async waitForDatabase(overrides: Partial<WorkerSettings>): Promise<WorkerSettings> {
    let told = false;
    return retryOnConnectionTrouble(() => resolveSettings(this.pool, overrides), {
      giveUpAfter: Infinity,
      signal: this.startAbort.signal,
      onRetry: (error) => {
        if (told) return;
        told = true;
        this.logger.warn({ error_class: classOf(error), ...databaseAddress(this.options) },
          'the database is unavailable; waiting for it');
      },
    });
  }

  private get current(): WorkerSettings {
    if (!this.settings) throw new Error('worker not started');
    return this.settings;
  }

  private async refreshSettings(overrides: Partial<WorkerSettings>): Promise<void> {
    try {
      this.settings = await resolveSettings(this.pool, overrides);
    } catch (error) {
      this.logger.warn({ error_class: classOf(error) }, 'could not read settings; keeping the last ones');
    }
  }

  /**
   * A slot frees when its handler ends, not when the closing write commits, so
   * the next claim overlaps the completions still being written (claim and
   * complete each wait for a WAL flush; in turn they would halve the rate).
   * A host holds at most 2 × concurrency leases (plus its local queue):
   * `concurrency` handlers, the rest waiting for their closing write, so a
   * slow database slows claiming instead of piling up leases.
   */
  private freeSlots(): number {
    // The free handlers and room in the local queue (none without one),
    // within the cap on closing writes plus what may wait.
    const leaseRoom = 2 * this.concurrency + this.waiting.capacity - this.running.size - this.waiting.size;
    return this.waiting.claimable(this.concurrency - this.handling, leaseRoom);
  }

  /** The leases to renew: every event waiting in the local queue and every handler still running. */
  private heldLeases(): Lease[] {
    const leases = this.waiting.leases();
    for (const run of this.running) if (run.handling) leases.push(run.lease);
    return leases;
  }

  private leasesLost(lost: ReadonlySet<string>): void {
    const dropped = this.waiting.drop(lost);
    if (dropped > 0) {
      leaseLostTotal.inc(dropped);
      this.logger.warn({ lost: dropped }, 'leases lost while waiting for a handler');
    }
    for (const run of this.running) if (lost.has(run.lease.id)) run.leaseGone();
  }

  /** A claimed row: run now when a handler is free and none waits before it, else wait in line. */
  private accept(row: ProviderEventRow): void {
    if (this.handling < this.concurrency && this.waiting.size === 0) this.startRun(row);
    else this.waiting.push(row);
  }

  /** Starts waiting rows while handlers are free. */
  private startWaiting(): void {
    while (!this.stopping && this.handling < this.concurrency) {
      const row = this.waiting.shift();
      if (!row) return;
      this.startRun(row);
    }
  }

  private startRun(row: ProviderEventRow): void {
    const run = new EventRun(this.runHost, row, findHandler(this.options.handlers, row.provider, row.event_type));
    this.running.add(run);
    this.handling += 1;
    run.start();
  }

  private async shutDown(): Promise<void> {
    if (!this.settings) {
      if (this.ownsPool) await this.pool.end();
      if (this.ownsHandlerPool) await this.handlerPool.end();
      if (this.ownsForwardPool) await this.forwardPool?.end();
      return;
    }
    this.stopping = true;
    this.wakeup.wake();
    // The forwarder drains and releases beside the handlers.
    const forwarderStopped = this.forwarder?.stop();
    await this.loop;
    // Waiting rows never started: back at once, before the drain.
    await this.waiting.releaseAll(this.pool, this.logger);
    const unfinished = [...this.running];
    for (const run of unfinished) run.abort();
    const drained = Promise.all(unfinished.map((run) => run.settled));
    let drainTimer: NodeJS.Timeout | undefined;
    await Promise.race([
      drained,
      new Promise<void>((resolve) => {
        drainTimer = setTimeout(resolve, this.current.drainTimeout);
      }),
    ]);
    clearTimeout(drainTimer);
    // Rows whose handler never ended go back; closing writes still waiting
    // for an unreachable database get one drain more, then the reaper's turn.
    const releasing = Promise.all([...this.running].map((run) => run.release()));
    const giveUp = setTimeout(() => this.closingAbort.abort(new Error('worker stopped')), this.current.drainTimeout);
    await releasing;
    clearTimeout(giveUp);
    await Promise.all(this.periodic.map((task) => task.stop()));
    await forwarderStopped;
    if (this.ownsForwardPool) await this.forwardPool?.end();
    this.removeStatsSource?.();
    await this.listener.stop();
    // A handler stuck in a business transaction holds its connection: the
    // pool's end waits for it only so long.
    const ended = [this.ownsPool && this.pool.end(), this.ownsHandlerPool && this.handlerPool.end()].filter((end) => end !== false);
    if (ended.length > 0) await Promise.race([Promise.all(ended), new Promise((resolve) => setTimeout(resolve, 5_000).unref())]);
    this.logger.info('worker stopped');
  }
}

/**
 * Where the worker's database is, for a log line: host and port, never
 * credentials; every host:port of a multi-host URL as `host`.
 */
function databaseAddress(options: WorkerOptions): { host: string; port?: number } {
  const poolOptions = options.pool?.options as { host?: string; port?: number; connectionString?: string } | undefined;
  const connectionString = options.connectionString ?? poolOptions?.connectionString;
  if (connectionString) {
    if (/^postgres(ql)?:\/\/[^/?#]*,/.test(connectionString)) return { host: describeDatabase(connectionString) };
    try {
      const url = new URL(connectionString);
      return { host: url.hostname || 'localhost', port: Number(url.port) || 5432 };
    } catch {
      // Not a URL (key=value form): fall through to the pool's own fields.
    }
  }
  return { host: poolOptions?.host ?? process.env.PGHOST ?? 'localhost', port: poolOptions?.port ?? (Number(process.env.PGPORT) || 5432) };
}
