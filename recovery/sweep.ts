// One sweep of one GitHub App: take the App's sweep lease (one host at a
// time), walk GitHub's list of the App's deliveries page by page, newest
// first, back to the start of the window, and for every delivery GUID whose
// attempts in the window failed (none answered 2xx, whatever page each is
// on) and that the inbox has not stored, record the ask and ask GitHub to
// redeliver it. Wharf's dedupe makes a redelivery of something already
// stored harmless; the asks table keeps two sweepers from asking for the
// same attempt twice.
//
// The cursor moves only once a page is done, so a sweep that dies resumes at
// the page it was on; the lease is renewed while the sweep runs, and a host
// whose lease was taken over is fenced out of every later write.
import type { Database } from '../db/database.js';
import { environment } from '../db/environment.js';
import { errorCode } from '../db/error-codes.js';
import { RecoveryConfigError } from './config.js';
import { sleep } from '../db/backoff.js';
import { GitHubApiError, type DeliveryPage, type GitHubAppClient } from './github.js';
import type { RedeliveryMetrics } from './metrics.js';
import {
  abandonSweep, advanceSweep, beginSweep, finishSweep, missingDeliveries, renewSweep, requestRedelivery,
  settleRedelivery, sweepPage, type FailedDelivery, type HeldSweep, type SweepKey,
} from './sql.js';

/** pino's call shape; fields hold ids, counts and classes, never a secret or a payload. */
export interface RecoveryLogger {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

export const silentLogger: RecoveryLogger = { info() {}, warn() {}, error() {} };

/**
 * How long a sweep's lease lasts without a renewal (renewed every third of
 * it): how soon another host takes over the sweep of a host that died.
 */
export const defaultSweepLeaseMs = environment.WHARF_SWEEP_LEASE.default;

export interface SweepOptions {
  db: Database;
  github: GitHubAppClient;
  /** Wharf's name of the App (the :app of /hooks/github/:app): logs and metrics. */
  app: string;
  key: SweepKey;
  /** Who sweeps, shown to other hosts while the lease runs. */
  holder: string;
  /** An operator's window: sweep back to this time (else: since the last sweep). */
  since?: Date;
  /** How long the lease lasts without a renewal; renewed every third of it (default defaultSweepLeaseMs, 1 min). */
  leaseMs?: number;
  /**
   * How long an ask recorded by a host that lost its lease may still be in
   * flight before it is asked again (default 2 min; longer than a request's
   * timeout).
   */
  staleMs?: number;
  /** How far a sweep reaches back before the end of the last one (default 10 min). */
  overlapMs?: number;
  /** How far the App's first sweep reaches back (default 1 h). */
  firstLookbackMs?: number;
  /** Asks per delivery GUID before the sweeper gives up on it (default 10). */
  maxAsks?: number;
  /** How long to wait for another host's sweep of the App to end (default 0: give up at once). */
  waitForLeaseMs?: number;
  signal?: AbortSignal;
  logger?: RecoveryLogger;
  metrics?: RedeliveryMetrics;
  /** After each page, and once when the sweep begins. */
  onProgress?: (progress: SweepProgress) => void;
}

export interface SweepProgress {
  /** The window's start: deliveries after it are swept. */
  since: Date | undefined;
  resumed: boolean;
  pages: number;
  /** Deliveries in the window that this run looked at. */
  deliveries: number;
  /** Delivery GUIDs found failed. */
  failed: number;
  redelivered: number;
  alreadyStored: number;
  /** Failed GUIDs whose redelivery was asked for already (by this or another sweep). */
  alreadyRequested: number;
  errors: number;
  /** The oldest delivery time looked at so far. */
  reachedBack: Date | undefined;
  /** Failed deliveries not stored that the sweep gave up on, each named. */
  gaveUp: GaveUp[];
}

/**
 * A failed delivery the sweeper asks no more for: it was asked for `asks`
 * (maxAsks) times and is still not stored (`max-asks`), or GitHub refused to
 * redeliver it (`rejected`, e.g. too old; its status when this sweep asked).
 * An operator redelivers it by hand once Wharf can store it.
 */
export interface GaveUp {
  guid: string;
  /** GitHub's id of its newest failed attempt. */
  deliveryId: string;
  event: string | null;
  reason: 'max-asks' | 'rejected';
  asks?: number;
  status?: number;
}

export type SweepOutcome =
  /** The window was swept to its end. */
  | 'done'
  /** Another host holds the App's sweep. */
  | 'busy'
  /** Stopped by the caller's signal; the next sweep resumes where it stopped. */
  | 'stopped'
  /** An error stopped it; the next sweep resumes where it stopped. */
  | 'failed';

export interface SweepResult extends SweepProgress {
  outcome: SweepOutcome;
  /** For `busy`: who holds the sweep, and until when. */
  holder?: string | null;
  leasedUntil?: Date | null;
  error?: Error;
  /** For `done`: how far the App's deliveries are now swept. */
  sweptUntil?: Date | null;
}

/** The result for an App that was not swept at all: its configuration cannot be read, or the sweep could not start. */
export function notSwept(error: Error): SweepResult {
  return {
    outcome: 'failed', error, since: undefined, resumed: false, pages: 0, deliveries: 0, failed: 0, redelivered: 0,
    alreadyStored: 0, alreadyRequested: 0, errors: 1, reachedBack: undefined, gaveUp: [],
  };
}

class LeaseLost extends Error {
  override name = 'LeaseLost';
}

/**
 * The kind of error, recorded with the sweep (as its class) and counted in
 * webhook_redelivery_errors_total{kind}: `config` (the App's credentials
 * cannot be read), one of GitHub's failures (GitHubFailure), `lease-lost` or
 * `database`.
 */
export function errorKind(error: unknown): string {
  if (error instanceof RecoveryConfigError) return 'config';
  if (error instanceof GitHubApiError) return error.failure;
  if (error instanceof LeaseLost) return 'lease-lost';
  if (errorCode(error) === 'WH412') return 'lease-lost';
  return 'database';
}

export async function sweepApp(options: SweepOptions): Promise<SweepResult> {
  const { db, github, key, app } = options;
  const logger = options.logger ?? silentLogger;
  const leaseMs = options.leaseMs ?? defaultSweepLeaseMs;
  const staleMs = options.staleMs ?? 120_000;
  const progress: SweepProgress = {
    since: undefined, resumed: false, pages: 0, deliveries: 0, failed: 0, redelivered: 0,
    alreadyStored: 0, alreadyRequested: 0, errors: 0, reachedBack: undefined, gaveUp: [],
  };
  const countError = (kind: string): void => {
    progress.errors++;
    options.metrics?.errors.inc({ app, kind });
  };

  const began = await takeLease(options, leaseMs);
  if (!began.held) return { ...progress, outcome: began.stopped ? 'stopped' : 'busy', holder: began.holder, leasedUntil: began.leasedUntil };
  const sweep: HeldSweep = began;
  progress.since = sweep.since;
  progress.resumed = sweep.resumed;
  logger.info({ app, since: sweep.since.toISOString(), resumed: sweep.resumed, pages_done: sweep.pagesDone },
    sweep.resumed ? 'redelivery sweep resumed' : 'redelivery sweep began');
  options.onProgress?.({ ...progress });

  // The sweep stops when the caller's signal aborts or the lease is lost.
  const stop = new AbortController();
  const onAbort = (): void => stop.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', onAbort, { once: true });
  let leaseLost = false;
  const renewal = setInterval(() => {
    renewSweep(db, key, sweep.token, leaseMs).then((held) => {
      if (!held && !leaseLost) {
        leaseLost = true;
        stop.abort(new LeaseLost('another host took over this sweep (its lease ran out)'));
      }
    }, () => {
      // A database blip: the next renewal tries again, and the fence of the
      // next write says whether the lease survived.
    });
  }, Math.max(50, leaseMs / 3));

  try {
    const sweptUntil = await walk(options, sweep, progress, stop.signal, staleMs, leaseMs, countError);
    options.metrics?.lastSuccess.set({ app }, Date.now() / 1000);
    logger.info({ app, ...summary(progress), swept_until: sweptUntil?.toISOString() ?? null }, 'redelivery sweep done');
    return { ...progress, outcome: 'done', sweptUntil };
  } catch (error) {
    const stoppedByCaller = options.signal?.aborted === true && !leaseLost;
    if (stoppedByCaller) {
      await abandonSweep(db, key, sweep.token, null).catch(() => false);
      logger.info({ app, ...summary(progress) }, 'redelivery sweep stopped; the next one resumes here');
      return { ...progress, outcome: 'stopped' };
    }
    const failure = leaseLost || errorKind(error) === 'lease-lost'
      ? new LeaseLost('another host took over this sweep (its lease ran out)')
      : error as Error;
    const kind = errorKind(failure);
    countError(kind);
    if (kind !== 'lease-lost') await abandonSweep(db, key, sweep.token, errorClass(kind)).catch(() => false);
    logger.error({ app, error_kind: kind, ...failureFields(failure), ...summary(progress) },
      `redelivery sweep failed${explained(failure) ? `: ${failure.message}` : ''}; the next one resumes here`);
    return { ...progress, outcome: 'failed', error: failure };
  } finally {
    clearInterval(renewal);
    options.signal?.removeEventListener('abort', onAbort);
  }
}

async function takeLease(
  options: SweepOptions, leaseMs: number,
): Promise<({ held: true } & HeldSweep) | { held: false; stopped: boolean; holder: string | null; leasedUntil: Date | null }> {
  const deadline = Date.now() + (options.waitForLeaseMs ?? 0);
  for (;;) {
    const began = await beginSweep(options.db, options.key, options.holder, {
      leaseMs,
      ...(options.since ? { since: options.since } : {}),
      overlapMs: options.overlapMs ?? 10 * 60_000,
      firstLookbackMs: options.firstLookbackMs ?? 60 * 60_000,
    });
    if (began.held) return began;
    const untilExpiry = began.leasedUntil ? began.leasedUntil.getTime() - Date.now() : 0;
    if (Date.now() >= deadline) return { ...began, stopped: false };
    try {
      await sleep(Math.min(Math.max(100, untilExpiry + 50), 1000, Math.max(0, deadline - Date.now())), options.signal);
    } catch {
      return { ...began, stopped: true };
    }
  }
}

async function walk(
  options: SweepOptions, sweep: HeldSweep, progress: SweepProgress, signal: AbortSignal,
  staleMs: number, leaseMs: number, countError: (kind: string) => void,
): Promise<Date | null> {
  const { db, github, key, app } = options;
  const logger = options.logger ?? silentLogger;
  const maxAsks = options.maxAsks ?? 10;
  let cursor = sweep.cursor;
  let restarted = false;

  for (;;) {
    signal.throwIfAborted();
    let page: DeliveryPage;
    try {
      page = await github.listDeliveries(cursor, signal);
    } catch (error) {
      // A cursor GitHub no longer knows (kept from a sweep that died long
      // ago): the window again from its first page; asks already made are
      // not made again.
      if (error instanceof GitHubApiError && error.failure === 'rejected' && cursor !== undefined && !restarted) {
        logger.warn({ app, status: error.status }, 'GitHub refused the saved cursor; sweeping the window again from its first page');
        cursor = undefined;
        restarted = true;
        continue;
      }
      throw error;
    }
    signal.throwIfAborted();

    const reachedEnd = page.nextCursor === undefined || page.deliveries.some((delivery) => delivery.deliveredAt <= sweep.since);
    // One GUID's attempts can sit on several pages in either order: SQL
    // decides each GUID once every attempt of it in the window is read,
    // remembering the rest with the cursor.
    const failed = await sweepPage(db, key, sweep.token, page.deliveries, reachedEnd);
    progress.deliveries += page.deliveries.filter((delivery) => delivery.deliveredAt > sweep.since).length;
    progress.failed += failed.length;
    options.metrics?.foundFailed.inc({ app }, failed.length);

    const byGuid = new Map(failed.map((delivery) => [delivery.guid, delivery]));
    const missing = await missingDeliveries(db, key.source, [...byGuid.keys()]);
    const stored = failed.length - missing.length;
    progress.alreadyStored += stored;
    options.metrics?.alreadyStored.inc({ app }, stored);

    for (const guid of missing) {
      await redeliverOne(options, sweep, byGuid.get(guid)!, progress, signal, staleMs, maxAsks, countError);
    }

    progress.pages++;
    const oldest = page.deliveries.at(-1);
    if (oldest && (!progress.reachedBack || oldest.deliveredAt < progress.reachedBack)) progress.reachedBack = oldest.deliveredAt;
    if (reachedEnd) {
      const sweptUntil = await finishSweep(db, key, sweep.token);
      // Nothing older is left in the window: it is covered back to its start.
      progress.reachedBack = sweep.since;
      options.onProgress?.({ ...progress });
      return sweptUntil;
    }
    await advanceSweep(db, key, sweep.token, page.nextCursor!, leaseMs);
    cursor = page.nextCursor;
    options.onProgress?.({ ...progress });
  }
}

async function redeliverOne(
  options: SweepOptions, sweep: HeldSweep, delivery: FailedDelivery, progress: SweepProgress, signal: AbortSignal,
  staleMs: number, maxAsks: number, countError: (kind: string) => void,
): Promise<void> {
  const { db, github, key, app } = options;
  const logger = options.logger ?? silentLogger;
  let decision = await requestRedelivery(db, key, sweep.token, delivery.guid, delivery.deliveryId, staleMs, maxAsks);
  // A host that lost its lease recorded this ask and may be sending it
  // still: wait until it is stale rather than ask twice.
  const waitUntil = Date.now() + staleMs * 2;
  while (decision === 'wait' && Date.now() < waitUntil) {
    await sleep(Math.min(Math.max(100, staleMs / 4), 5000), signal);
    decision = await requestRedelivery(db, key, sweep.token, delivery.guid, delivery.deliveryId, staleMs, maxAsks);
  }
  switch (decision) {
    case 'asked':
      progress.alreadyRequested++;
      return;
    case 'exhausted':
      countError('gave-up');
      progress.gaveUp.push({ ...delivery, reason: 'max-asks', asks: maxAsks });
      logger.warn({ app, guid: delivery.guid, delivery_id: delivery.deliveryId, event: delivery.event, max_asks: maxAsks },
        'delivery still not stored after the most redeliveries the sweeper asks for; redeliver it by hand once the edge is healthy');
      return;
    case 'refused':
      // GitHub refused this attempt's redelivery on an earlier sweep.
      progress.gaveUp.push({ ...delivery, reason: 'rejected' });
      return;
    case 'wait':
      throw new GitHubApiError('unavailable', undefined, `an earlier ask for ${delivery.guid} never settled`);
    case 'ask':
      break;
  }
  try {
    await github.redeliver(delivery.deliveryId, signal);
  } catch (error) {
    if (error instanceof GitHubApiError && error.failure === 'rejected') {
      // About this delivery only (too old, gone): the sweep goes on.
      await settleRedelivery(db, key, sweep.token, delivery.guid, delivery.deliveryId, 'rejected');
      countError('rejected');
      progress.gaveUp.push({ ...delivery, reason: 'rejected', ...(error.status !== undefined ? { status: error.status } : {}) });
      logger.warn({ app, guid: delivery.guid, delivery_id: delivery.deliveryId, status: error.status }, 'GitHub refused to redeliver a delivery');
      return;
    }
    // The ask may not have got through: a later sweep asks again, from this page.
    await settleRedelivery(db, key, sweep.token, delivery.guid, delivery.deliveryId, 'failed').catch(() => {});
    throw error;
  }
  await settleRedelivery(db, key, sweep.token, delivery.guid, delivery.deliveryId, 'accepted');
  progress.redelivered++;
  options.metrics?.redelivered.inc({ app });
  logger.info({ app, guid: delivery.guid, delivery_id: delivery.deliveryId, event: delivery.event }, 'asked GitHub to redeliver');
}

function errorClass(kind: string): string {
  return {
    'rate-limited': 'GitHubRateLimited', unavailable: 'GitHubUnavailable', unreachable: 'GitHubUnreachable',
    unauthorized: 'GitHubUnauthorized', rejected: 'GitHubRejected', config: 'ConfigurationError', database: 'DatabaseError',
    'lease-lost': 'LeaseLost',
  }[kind] ?? kind;
}

/**
 * Whether the error's message is one this part wrote for the operator (what
 * to fix, or what happened at which URL), with no secret and no payload in
 * it; a database error's message is not logged.
 */
function explained(error: Error): boolean {
  return error instanceof GitHubApiError || error instanceof RecoveryConfigError || error instanceof LeaseLost;
}

/** The fields of a failure worth a log line's structure: GitHub's status, the URL, why no answer, the variable to fix. */
export function failureFields(error: Error): Record<string, unknown> {
  if (error instanceof GitHubApiError) {
    return {
      ...(error.status !== undefined ? { status: error.status } : {}), ...(error.url ? { url: error.url } : {}),
      ...(error.noAnswer ? { no_answer: error.noAnswer } : {}),
    };
  }
  if (error instanceof RecoveryConfigError && error.variable) return { variable: error.variable };
  return {};
}

function summary(progress: SweepProgress): Record<string, unknown> {
  return {
    pages: progress.pages, deliveries: progress.deliveries, failed: progress.failed, redelivered: progress.redelivered,
    already_stored: progress.alreadyStored, already_requested: progress.alreadyRequested, errors: progress.errors,
    gave_up: progress.gaveUp.length,
  };
}
