// createWorker: assembles one host's claim loop, listener, reaper, retention
// and metrics around a pool, and stops them in order.
import { EventEmitter } from 'node:events';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import pg from 'pg';
import { pino, type Logger } from 'pino';
import type { Registry } from 'prom-client';
import { runClaimLoop } from './claim-loop.js';
import { classOf } from './classify.js';
import { CompletionBatcher } from './completion-batcher.js';
import { EventRun, type RunOutcome } from './event-run.js';
import { findHandler, type HandlerMap } from './handlers.js';
import { Listener } from './listener.js';
import { addQueueStatsSource, workerRegistry } from './metrics.js';
import type { Periodic } from './periodic.js';
import { startReaper } from './reaper.js';
import { startRetention, type RetentionResult } from './retention.js';
import { resolveSettings, type WorkerSettings } from './settings.js';
import type { ProviderEventRow } from './sql/event-row.js';
import { readQueueStats } from './sql/claim-lease.js';
import { Wakeup } from './wakeup.js';

export interface WorkerOptions {
  /** Either a connection string (the worker owns its pool) or a pool it borrows. */
  connectionString?: string;
  pool?: pg.Pool;
  /**
   * Where handlers' business transactions (ctx.step, ctx.transaction) run:
   * a pool of the application's own role, which needs EXECUTE on the
   * token-taking wharf.step and wharf.fence and nothing else of the inbox.
   * Default: `pool`.
   */
  handlerPool?: pg.Pool;
  handlers: HandlerMap;
  /** How many handlers run at once. Default 4. */
  concurrency?: number;
  /** Overrides of wharf.setting values and host timings, in milliseconds. */
  settings?: Partial<WorkerSettings>;
  logger?: Logger;
  /** Names this host in leased_by and its listener; unique per host. */
  workerId?: string;
}

export interface WorkerEvents {
  /** One attempt ended and its row was written (or deliberately not). */
  settled: [{ eventId: string; outcome: RunOutcome }];
  /** The loop found nothing to do and sleeps. */
  idle: [];
  reaped: [count: number];
  retention: [result: RetentionResult];
}

export interface Worker extends EventEmitter<WorkerEvents> {
  readonly id: string;
  /** The Prometheus registry the worker counts into (shared by the process's workers). */
  readonly registry: Registry;
  start(): Promise<void>;
  /** Stops claiming, aborts handlers, drains up to drainTimeout, releases the rest, closes. */
  stop(): Promise<void>;
}

export function createWorker(options: WorkerOptions): Worker {
  return new WharfWorker(options);
}

class WharfWorker extends EventEmitter<WorkerEvents> implements Worker {
  readonly id: string;
  readonly registry = workerRegistry;
  private readonly pool: pg.Pool;
  private readonly ownsPool: boolean;
  private readonly concurrency: number;
  private readonly logger: Logger;
  private readonly wakeup = new Wakeup();
  private readonly completions: CompletionBatcher;
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

  constructor(private readonly options: WorkerOptions) {
    super();
    if (!options.pool && !options.connectionString) throw new TypeError('createWorker needs a pool or a connectionString');
    this.concurrency = options.concurrency ?? 4;
    if (!Number.isInteger(this.concurrency) || this.concurrency < 1) {
      throw new RangeError('concurrency must be a positive integer');
    }
    this.id = options.workerId ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
    this.logger = (options.logger ?? pino({ name: 'wharf-worker' })).child({ worker: this.id });
    this.ownsPool = !options.pool;
    // Owned pool: handlers' transactions, renewals and closing writes, plus
    // the listener; idle connections close soon, so an idle host holds one.
    this.pool =
      options.pool ??
      new pg.Pool({ connectionString: options.connectionString, max: this.concurrency + 3, idleTimeoutMillis: 2_000 });
    this.pool.on('error', (error) => this.logger.warn({ error_class: classOf(error) }, 'idle pool connection lost'));
    this.completions = new CompletionBatcher(this.pool, this.logger);
    this.listener = new Listener({
      pool: this.pool,
      name: this.id,
      logger: this.logger,
      onNotification: () => this.wakeup.wake(),
    });
  }

  async start(): Promise<void> {
    if (this.settings) throw new Error('worker already started');
    const overrides = this.options.settings ?? {};
    this.settings = await resolveSettings(this.pool, overrides);
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
    ];
    this.loop = runClaimLoop({
      pool: this.pool,
      workerId: this.id,
      listener: this.listener,
      wakeup: this.wakeup,
      logger: this.logger,
      pollEvery: () => this.current.pollEvery,
      freeSlots: () => this.freeSlots(),
      stopping: () => this.stopping,
      startRun: (row) => this.startRun(row),
      onIdle: () => this.emit('idle'),
    }).catch((error: unknown) => {
      // Every expected failure is handled inside the loop; this is a bug.
      this.logger.fatal({ error_class: classOf(error) }, 'claim loop crashed');
    });
    this.logger.info({ concurrency: this.concurrency }, 'worker started');
  }

  stop(): Promise<void> {
    this.stopped ??= this.shutDown();
    return this.stopped;
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
   * A host holds at most 2 × concurrency leases: `concurrency` handlers, the
   * rest waiting for their closing write, so a slow database slows claiming
   * instead of piling up leases.
   */
  private freeSlots(): number {
    return Math.min(this.concurrency - this.handling, 2 * this.concurrency - this.running.size);
  }

  private startRun(row: ProviderEventRow): void {
    const settings = this.current;
    const run = new EventRun({
      pool: this.pool,
      handlerPool: this.options.handlerPool ?? this.pool,
      completions: this.completions,
      row,
      handler: findHandler(this.options.handlers, row.provider, row.event_type),
      renewEvery: settings.renewEvery,
      handlerTimeout: settings.handlerTimeout,
      logger: this.logger,
      onHandlerEnded: () => {
        this.handling -= 1;
        this.wakeup.wake();
      },
      onSettled: (outcome) => {
        this.running.delete(run);
        this.emit('settled', { eventId: row.id, outcome });
        this.wakeup.wake();
      },
    });
    this.running.add(run);
    this.handling += 1;
    run.start();
  }

  private async shutDown(): Promise<void> {
    if (!this.settings) {
      if (this.ownsPool) await this.pool.end();
      return;
    }
    this.stopping = true;
    this.wakeup.wake();
    await this.loop;
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
    await Promise.all([...this.running].map((run) => run.release()));
    await Promise.all(this.periodic.map((task) => task.stop()));
    this.removeStatsSource?.();
    await this.listener.stop();
    if (this.ownsPool) await this.pool.end();
    this.logger.info('worker stopped');
  }
}
