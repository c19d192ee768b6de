// One leased event from claim to its single closing write: complete, fail,
// release, or nothing at all when the lease is gone or the event was erased.
// While the handler runs, the host renews its lease with the others it holds
// (worker/lease-renewal.ts), up to handler_timeout, after which the handler
// is abandoned.
import type pg from 'pg';
import type { Logger } from 'pino';
import { AttemptTransactions } from './attempt-transactions.js';
import type { CompletionBatcher, CompletionWaiter } from './completion-batcher.js';
import { classifyFailure, classOf, type Classification } from './classify.js';
import { createHandlerContext } from './context.js';
import { HandlerTimeoutError, LeaseLostError, WorkerStoppingError } from './errors.js';
import type { HandlerDeadlines, TimedHandler } from './handler-deadlines.js';
import type { Handler } from './handlers.js';
import { LazyAbort } from './lazy-abort.js';
import {
  abandonedHandlers,
  completedTotal,
  handledAttemptsTotal,
  deadTotal,
  droppedTotal,
  handlerDuration,
  leaseLostTotal,
  releasedTotal,
  retryTotal,
} from './metrics.js';
import { appFrames, sanitizeCauses } from './sanitize.js';
import { retryOnConnectionTrouble } from './transient.js';
import type { Lease, ProviderEventRow } from './sql/event-row.js';
import { failEvent } from './sql/failure-dead-letters.js';
import { releaseEvent, type Completion } from './sql/claim-lease.js';

/** How an attempt ended, as the worker's events and metrics name it. */
export type RunOutcome =
  | 'handled'
  | 'ignored'
  | 'retried'
  | 'dead'
  | 'released'
  | 'dropped'
  | 'lease-lost'
  | 'write-failed';

/**
 * What every run of one worker shares, made once per worker: a run is one
 * per event, and the objects and closures it would otherwise make for these
 * are garbage the drain pays for on every event (bench/worker-profile.ts).
 */
export interface RunHost {
  pool: pg.Pool;
  /** Where the handler's business transactions run (WorkerOptions.handlerPool). */
  handlerPool: pg.Pool;
  /** Where successful endings go: one commit for the completions of many runs. */
  completions: CompletionBatcher<Completion>;
  logger: Logger;
  /** Aborts the retries of a closing write when the worker stops waiting for them. */
  closingSignal: AbortSignal;
  /** The handler timeout of a run starting now (the settings may change while the worker runs). */
  handlerTimeout(): number;
  /** Ends each run whose handler outlives its timeout: one timer for them all. */
  deadlines: HandlerDeadlines;
  /** The handler is over (or never ran): its slot is free while the closing write goes on. */
  handlerEnded(run: EventRun): void;
  /** A handler past its timeout is still running (+1), or has returned at last (-1). */
  abandonedChanged(run: EventRun, change: 1 | -1): void;
  settled(run: EventRun, outcome: RunOutcome): void;
}

/**
 * How long a closing write is retried while the database is unreachable. The
 * lease outlives a short outage; past it the reaper hands the row out again.
 */
export const closingWriteRetryMs = 5 * 60_000;

type Ending =
  | { by: 'success' }
  | { by: 'no-handler' }
  | { by: 'error'; error: unknown }
  | { by: 'timeout' }
  | { by: 'release' };

/** Every ending but a completion: written alone, by close(). */
type ClosingEnding = Exclude<Ending, { by: 'success' | 'no-handler' }>;

// The endings without a value, made once.
const success: Ending = { by: 'success' };
const noHandler: Ending = { by: 'no-handler' };
const timedOut: Ending = { by: 'timeout' };
const released: ClosingEnding = { by: 'release' };

export class EventRun implements TimedHandler, CompletionWaiter<Completion> {
  readonly lease: Lease;
  /** How the run ended, once its closing write is done. */
  private outcome: RunOutcome | undefined;
  /** Made only when someone waits for the run (a stopping host): most runs end unwatched. */
  private settledPromise: Promise<RunOutcome> | undefined;
  private resolveSettled: ((outcome: RunOutcome) => void) | undefined;
  private ending: Ending | undefined;
  private readonly handlerAbort = new LazyAbort();
  /** The handler's business transactions: closed before the closing write (worker/attempt-transactions.ts). */
  private readonly transactions = new AttemptTransactions();
  private readonly started = performance.now();
  private childLogger: Logger | undefined;
  private leaseLost = false;
  private handlerReturned = false;

  constructor(
    private readonly host: RunHost,
    readonly row: ProviderEventRow,
    /** undefined only for a host that claims every type (WorkerOptions.ignoreUnhandled). */
    private readonly handler: Handler | 'ignore' | undefined,
  ) {
    this.lease = { id: row.id, epoch: row.lease_epoch };
  }

  /** Resolves once the closing write is done: the slot is free again. */
  get settled(): Promise<RunOutcome> {
    if (this.outcome !== undefined) return Promise.resolve(this.outcome);
    this.settledPromise ??= new Promise((resolve) => {
      this.resolveSettled = resolve;
    });
    return this.settledPromise;
  }

  /** Made at the run's first log line: most runs write none and pay nothing for it. */
  private get logger(): Logger {
    // Ids and types only: payloads and headers never reach a log.
    this.childLogger ??= this.host.logger.child({
      event_id: this.row.id,
      provider: this.row.provider,
      event_type: this.row.event_type,
      attempt: this.row.attempt,
    });
    return this.childLogger;
  }

  start(): void {
    const { handler, row } = this;
    if (handler === undefined || handler === 'ignore') {
      this.end(noHandler);
      return;
    }
    this.host.deadlines.watch(this, this.host.handlerTimeout());
    const ctx = createHandlerContext({
      pool: this.host.handlerPool, row, abort: this.handlerAbort, attempt: this.transactions, logger: () => this.logger,
    });
    // Called now, not in a later microtask: the claim loop's next statement
    // (a socket write, about 0.1 ms on loopback TCP here) would otherwise go
    // first and delay every handler's start. A handler that throws
    // synchronously is a failure like any other.
    let handled: Promise<void> | void;
    try {
      handled = handler(ctx);
    } catch (error) {
      handled = Promise.reject(error);
    }
    Promise.resolve(handled).then(
      () => this.returned(success),
      (error: unknown) => this.returned({ by: 'error', error }),
    );
  }

  /** Its handler outlived handler_timeout (worker/handler-deadlines.ts). */
  timedOut(): void {
    this.end(timedOut);
  }

  /** The handler returned or threw: the run ends, unless the timeout or the drain ended it first. */
  private returned(ending: Ending): void {
    this.handlerReturned = true;
    this.end(ending);
    if (this.ending?.by === 'timeout') this.abandoned(-1);
  }

  /** The worker is stopping: tell the handler, let it finish within the drain. */
  abort(): void {
    this.handlerAbort.abort(new WorkerStoppingError('worker stopping'));
  }

  /** The drain is over: give the row back unless the handler already ended. */
  release(): Promise<RunOutcome> {
    this.end(released);
    return this.settled;
  }

  /** The handler has not ended: its lease is still to be renewed. */
  get handling(): boolean {
    return this.ending === undefined;
  }

  /** A renewal found the lease gone while the handler ran: tell the handler, write nothing at its end. */
  leaseGone(): void {
    if (this.ending) return;
    this.leaseLost = true;
    this.handlerAbort.abort(new LeaseLostError('lease lost'));
  }

  private end(ending: Ending): void {
    if (this.ending) return;
    this.ending = ending;
    this.host.deadlines.forget(this);
    if (ending.by === 'timeout') {
      this.handlerAbort.abort(new HandlerTimeoutError('handler timeout'));
      // Still running after the timeout: counted until it returns, if ever.
      if (!this.handlerReturned) this.abandoned(1);
    }
    // No business transaction of this attempt commits after this point, and
    // the open ones are cut off, so that the closing write below, which
    // waits for them in SQL, ends the lease after them (top of sql/30).
    this.transactions.close();
    this.host.handlerEnded(this);
    if (ending.by === 'success' || ending.by === 'no-handler') {
      // The common ending: handed to the batcher, which answers this run
      // itself (completed, completionFailed), with no promise in between.
      if (this.leaseLost) this.finish(this.lost());
      else this.host.completions.complete({ id: this.row.id, epoch: this.row.lease_epoch, outcome: ending.by === 'success' ? 'handled' : 'ignored' }, this);
      return;
    }
    this.close(ending).then(
      (outcome) => this.finish(outcome),
      (error: unknown) => {
        // The database is unreachable: the lease expires and the reaper
        // hands the row out again.
        this.logger.error({ error_class: classOf(error) }, 'could not record the end of an attempt');
        this.finish('write-failed');
      },
    );
  }

  private abandoned(change: 1 | -1): void {
    abandonedHandlers.inc(change);
    this.host.abandonedChanged(this, change);
  }

  private finish(outcome: RunOutcome): void {
    this.outcome = outcome;
    handlerDuration.observe({ outcome }, (performance.now() - this.started) / 1000);
    this.host.settled(this, outcome);
    this.resolveSettled?.(outcome);
  }

  /** The batcher wrote this run's completion: true when the row is DONE, false when its lease was gone. */
  completed(done: boolean, { outcome }: Completion): void {
    if (!done) {
      this.finish(this.lost());
      return;
    }
    completedTotal.inc({ outcome });
    if (outcome === 'handled') handledAttemptsTotal.inc(this.row.attempt);
    this.finish(outcome);
  }

  /** The completion could not be written (the database stayed unreachable): the lease expires and the reaper hands the row out again. */
  completionFailed(error: unknown): void {
    this.logger.error({ error_class: classOf(error) }, 'could not record the end of an attempt');
    this.finish('write-failed');
  }

  /** The closing writes other than a completion, each alone. */
  private async close(ending: ClosingEnding): Promise<RunOutcome> {
    const { pool } = this.host;
    switch (ending.by) {
      case 'release':
        if (!(await this.throughOutages(() => releaseEvent(pool, this.lease)))) return this.lost();
        releasedTotal.inc();
        this.logger.info('released');
        return 'released';
      case 'timeout':
        return this.fail(
          { action: 'fail', kind: 'unknown', errorClass: 'HandlerTimeout' },
          new HandlerTimeoutError('handler timeout'),
        );
      case 'error': {
        const classification = classifyFailure(ending.error);
        if (classification.action === 'drop') {
          droppedTotal.inc({ reason: classification.reason });
          this.logger.warn({ reason: classification.reason, error_class: classification.errorClass }, 'dropped');
          return 'dropped';
        }
        if (classification.action === 'lease-lost' || this.leaseLost) return this.lost();
        // Stopped mid-way: the row goes back as if never tried.
        if (this.handlerAbort.reason instanceof WorkerStoppingError) return this.close(released);
        return this.fail(classification, ending.error);
      }
    }
  }

  private async fail(classification: Classification & { action: 'fail' }, error: unknown): Promise<RunOutcome> {
    // Where it was thrown groups it into its issue (sql/97); the message never leaves the process.
    const frames = appFrames(error);
    const state = await this.throughOutages(
      () => failEvent(this.host.pool, this.lease, classification.kind, classification.errorClass, frames),
    );
    if (state === null) return this.lost();
    const facts = { kind: classification.kind, error_class: classification.errorClass, state };
    // Cause types and frames once per event and again at its end, not on every retry.
    const detailed = state === 'DEAD' || this.row.attempt === 1;
    const fields = detailed ? { ...facts, causes: sanitizeCauses(error) } : facts;
    if (state === 'DEAD') {
      deadTotal.inc({ kind: classification.kind });
      this.logger.error(fields, 'dead letter');
      return 'dead';
    }
    retryTotal.inc({ outcome: classification.kind });
    this.logger.warn(fields, 'attempt failed');
    return 'retried';
  }

  /** A closing write, tried again while the database is unreachable (worker/transient.ts). */
  private throughOutages<T>(write: () => Promise<T>): Promise<T> {
    return retryOnConnectionTrouble(write, {
      giveUpAfter: closingWriteRetryMs,
      signal: this.host.closingSignal,
      onRetry: (error, attempt) => {
        if (attempt === 0) this.logger.warn({ error_class: classOf(error) }, 'database unavailable; retrying the closing write');
      },
    });
  }

  private lost(): RunOutcome {
    leaseLostTotal.inc();
    this.logger.warn('lease lost: nothing written');
    return 'lease-lost';
  }
}
