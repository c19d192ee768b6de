// One timed drain per system: queue a backlog (untimed), start the consumer,
// and time until every event was handled once. Handlers are no-ops that only
// report key and seq to a HandlingTracker.
import type { BenchDatabase } from './databases.js';
import { withBenchDatabase } from './databases.js';
import { DrainStalled, HandlingTracker, type HandlingCounts } from './handling-tracker.js';
import { readMark } from './payload.js';
import type { BenchSettings } from './settings.js';
import { meterDatabaseBackends } from './process-cpu.js';
import { loadGraphileJobs, migrateGraphile, startGraphileWorker } from './systems/graphile.js';
import { loadPgBossJobs, startPgBoss, startPgBossWorkers } from './systems/pgboss.js';
import { createPlainQueue, loadPlainJobs, startPlainLoop } from './systems/plain-queue.js';
import { startWharfConsumer, type RunningConsumer } from './systems/wharf-consumer.js';
import { loadWharfBacklog, setupWharfInstallation, subjectOf } from './systems/wharf-inbox.js';

export interface DrainShape {
  events: number;
  scopes: number;
  concurrency: number;
}

/** CPU per handled event in µs over a drain: where its time went. */
export interface DrainCpu {
  /** This process: the consumer, and the tracker that every system shares. */
  node: number;
  /** The database's backends; absent when the server is not on this machine. */
  postgres?: number;
}

export interface DrainSample extends HandlingCounts {
  eventsPerSecond: number;
  cpu: DrainCpu;
  errors: number;
  /** Events a stalled consumer had not handled when the wait ran out (pg-boss only). */
  unfinished?: number;
}

function jobsOf(shape: DrainShape): { key: string; seq: number }[] {
  return Array.from({ length: shape.events }, (_, seq) => ({ key: subjectOf(seq % shape.scopes), seq }));
}

async function timeDrain(
  db: BenchDatabase,
  events: number,
  timeoutMs: number,
  start: (tracker: HandlingTracker) => Promise<RunningConsumer>,
  options: { recordStall?: boolean } = {},
): Promise<HandlingCounts & { eventsPerSecond: number; cpu: DrainCpu; unfinished?: number }> {
  const tracker = new HandlingTracker();
  const postgres = await meterDatabaseBackends(db.pool);
  const own = process.cpuUsage();
  const began = performance.now();
  const consumer = await start(tracker);
  let unfinished: number | undefined;
  let postgresMicros: number | undefined;
  try {
    await tracker.waitFor(events, timeoutMs);
  } catch (error) {
    // A competitor that stalls is a finding to report, not a broken run.
    if (!(options.recordStall && error instanceof DrainStalled)) throw error;
    unfinished = events - tracker.handled;
  } finally {
    // Read while the consumer's backends are still connected.
    postgresMicros = await postgres().catch(() => undefined);
    await consumer.stop();
  }
  const seconds = (performance.now() - began) / 1000;
  const used = process.cpuUsage(own);
  // Counted after the stop, so a late second handling still shows.
  const counts = tracker.counts();
  const perEvent = (micros: number) => micros / Math.max(1, counts.handled);
  const cpu: DrainCpu = {
    node: perEvent(used.user + used.system),
    ...(postgresMicros !== undefined ? { postgres: perEvent(postgresMicros) } : {}),
  };
  return { ...counts, eventsPerSecond: counts.handled / seconds, cpu, ...(unfinished !== undefined ? { unfinished } : {}) };
}

/** Wharf's createWorker; localQueue as graphile-worker's (0: claims sized to the free handlers). */
export async function drainWharf(settings: BenchSettings, shape: DrainShape, localQueue = 0): Promise<DrainSample> {
  return withBenchDatabase(settings.serverUrl, 'wharf_drain', { wharf: true, poolSize: shape.concurrency + 2 }, async (db) => {
    const connectionId = await setupWharfInstallation(db.pool, 0);
    await loadWharfBacklog(db.pool, connectionId, shape.events, shape.scopes);
    const result = await timeDrain(db, shape.events, settings.drainTimeoutMs, (tracker) =>
      startWharfConsumer(db, shape.concurrency, (mark) => tracker.record(mark.key, mark.seq), (error) => tracker.fail(error), localQueue),
    );
    return { ...result, errors: 0 };
  });
}

export async function drainGraphile(
  settings: BenchSettings,
  shape: DrainShape,
  perKeyQueue: boolean,
  localQueue: boolean,
): Promise<DrainSample> {
  return withBenchDatabase(settings.serverUrl, 'graphile_drain', { wharf: false, poolSize: 4 }, async (db: BenchDatabase) => {
    await migrateGraphile(db.url);
    await loadGraphileJobs(db.pool, jobsOf(shape), perKeyQueue);
    const result = await timeDrain(db, shape.events, settings.drainTimeoutMs, (tracker) =>
      startGraphileWorker({
        connectionString: db.url,
        concurrency: shape.concurrency,
        localQueue,
        handle: (payload) => {
          const mark = readMark(payload);
          tracker.record(mark.key, mark.seq);
        },
      }),
    );
    return { ...result, errors: 0 };
  });
}

export async function drainPgBoss(
  settings: BenchSettings,
  shape: DrainShape,
  mode: 'ordered' | 'unordered',
): Promise<DrainSample> {
  return withBenchDatabase(settings.serverUrl, 'pgboss_drain', { wharf: false, poolSize: 2 }, async (db) => {
    const queue = await startPgBoss({ connectionString: db.url, poolSize: shape.concurrency + 2, mode });
    try {
      await loadPgBossJobs(queue, jobsOf(shape));
      const result = await timeDrain(db, shape.events, settings.drainTimeoutMs, (tracker) =>
        startPgBossWorkers(queue, shape, (data) => {
          const mark = readMark(data);
          tracker.record(mark.key, mark.seq);
        }),
        { recordStall: true },
      );
      return { ...result, errors: queue.errors() };
    } finally {
      await queue.stop();
    }
  });
}

export async function drainPlain(settings: BenchSettings, shape: DrainShape): Promise<DrainSample> {
  return withBenchDatabase(settings.serverUrl, 'plain_drain', { wharf: false, poolSize: shape.concurrency + 2 }, async (db) => {
    await createPlainQueue(db.pool);
    await loadPlainJobs(db.pool, shape.events);
    const result = await timeDrain(db, shape.events, settings.drainTimeoutMs, async (tracker) =>
      startPlainLoop({
        pool: db.pool,
        onError: (error) => tracker.fail(error),
        concurrency: shape.concurrency,
        handle: (payload) => {
          const mark = readMark(payload);
          tracker.record(mark.key, mark.seq);
        },
      }),
    );
    return { ...result, errors: 0 };
  });
}
