// One timed drain per system: queue a backlog (untimed), start the consumer,
// and time until every event was handled once. Handlers are no-ops that only
// report key and seq to a HandlingTracker.
import type pg from 'pg';
import type { BenchDatabase } from './databases.js';
import { withBenchDatabase } from './databases.js';
import { DrainStalled, HandlingTracker, type HandlingCounts } from './handling-tracker.js';
import { readMark } from './payload.js';
import type { BenchResults } from './results.js';
import type { BenchSettings, WorkloadName } from './settings.js';
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

/** Updates of wharf.provider_event over a drain, and how many of them were heap-only (HOT). */
export interface EventTableUpdates {
  updates: number;
  hot: number;
}

export interface DrainSample extends HandlingCounts {
  eventsPerSecond: number;
  cpu: DrainCpu;
  errors: number;
  /** Events a stalled consumer had not handled when the wait ran out (pg-boss only). */
  unfinished?: number;
  /** Wharf's drains only: what the drain's claims and completions did to the event table. */
  eventTable?: EventTableUpdates;
}

/** The HOT share of an event table's updates, as a percentage (NaN when nothing was updated). */
export function hotPercent(updates: EventTableUpdates): number {
  return updates.updates === 0 ? Number.NaN : (100 * updates.hot) / updates.updates;
}

/**
 * The event table's update counters as the shared statistics hold them now.
 * A backend adds its own counts there lazily (PostgreSQL 15: when it goes
 * idle, at most once a second, and when it exits), so a figure read while a
 * session that updated the table is still connected may miss its last
 * second; see `waitForSessionsToEnd`.
 */
async function eventTableUpdates(pool: pg.Pool): Promise<EventTableUpdates> {
  const { rows } = await pool.query<{ updates: string; hot: string }>(
    `SELECT n_tup_upd AS updates, n_tup_hot_upd AS hot FROM pg_stat_user_tables
      WHERE schemaname = 'wharf' AND relname = 'provider_event'`);
  return { updates: Number(rows[0]?.updates ?? 0), hot: Number(rows[0]?.hot ?? 0) };
}

/** The application_name the Wharf consumer's sessions carry, so that the harness can tell them from its own. */
const consumerApplicationName = 'wharf-bench-consumer';

export function withApplicationName(db: BenchDatabase, name: string): BenchDatabase {
  const url = new URL(db.url);
  url.searchParams.set('application_name', name);
  return { ...db, url: url.toString() };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Waits until no session named `applicationName` is connected to the pool's
 * database. A backend flushes its statistics as it exits, before it leaves
 * pg_stat_activity (PostgreSQL 15's pgstat_shutdown_hook runs among the
 * before_shmem_exit callbacks, the removal of its pg_stat_activity entry
 * among the later on_shmem_exit ones), so once its row is gone every update
 * it made is counted in pg_stat_user_tables. That holds however the session
 * ended; one that lingers past `graceMs` (a pool that did not close it) is
 * terminated, which makes it exit, and flush, the same way.
 */
export async function waitForSessionsToEnd(pool: pg.Pool, applicationName: string, graceMs = 10_000): Promise<void> {
  const remaining = async () => {
    const { rows } = await pool.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`, [applicationName]);
    return rows.map((row) => row.pid);
  };
  const began = performance.now();
  let terminated = false;
  for (let pids = await remaining(); pids.length > 0; pids = await remaining()) {
    if (!terminated && performance.now() - began > graceMs) {
      await pool.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [pids]);
      terminated = true;
    } else if (performance.now() - began > 2 * graceMs) {
      throw new Error(`sessions ${pids.join(', ')} of ${applicationName} did not end: their statistics cannot be read whole`);
    }
    await sleep(20);
  }
}

/**
 * The figures recorded beside a drain's rate, in the ordered and unordered drains:
 * its CPU per event (`<id>.cpu_node`, `<id>.cpu_postgres`) where `withCpu`,
 * and for Wharf's drains the HOT share of the event table's updates
 * (`<id>.hot_share`, in %).
 */
export function recordDrainDetails(
  results: BenchResults, workload: WorkloadName, id: string, label: string, sample: DrainSample, withCpu: boolean,
): void {
  const { node, postgres } = sample.cpu;
  if (withCpu) {
    results.add(workload, `${id}.cpu_node`, `${label}: Node CPU per event`, 'µs CPU', node);
    if (postgres !== undefined) results.add(workload, `${id}.cpu_postgres`, `${label}: PostgreSQL CPU per event`, 'µs CPU', postgres);
  }
  if (sample.eventTable && sample.eventTable.updates > 0) {
    results.add(workload, `${id}.hot_share`, `${label}: HOT share of the event table's updates`, '%', hotPercent(sample.eventTable));
  }
}

/** The same figures for the log line. */
export function drainDetails(sample: DrainSample, withCpu: boolean): string {
  const { node, postgres } = sample.cpu;
  const parts: string[] = [];
  if (withCpu) parts.push(`CPU per event Node ${node.toFixed(0)} µs, PostgreSQL ${postgres === undefined ? '?' : postgres.toFixed(0)} µs`);
  if (sample.eventTable) {
    parts.push(`${hotPercent(sample.eventTable).toFixed(1)} % of ${sample.eventTable.updates} event-table updates HOT ` +
      `(${(sample.eventTable.updates / Math.max(1, sample.handled)).toFixed(2)} per event)`);
  }
  return parts.length > 0 ? `; ${parts.join('; ')}` : '';
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

/**
 * Wharf's createWorker; localQueue as graphile-worker's (0: claims sized to
 * the free handlers). Also counts the event table's updates over the drain
 * and how many were HOT: the harness's own sessions update no event row (the
 * backlog is inserted, and the meters only read), so the difference of the
 * table's counters before the consumer starts and after its sessions ended
 * is the consumer's claims, renewals and completions, the last completions,
 * which its stop flushes, included.
 */
export async function drainWharf(settings: BenchSettings, shape: DrainShape, localQueue = 0): Promise<DrainSample> {
  return withBenchDatabase(settings.serverUrl, 'wharf_drain', { wharf: true, poolSize: shape.concurrency + 2 }, async (db) => {
    const connectionId = await setupWharfInstallation(db.pool, 0);
    await loadWharfBacklog(db.pool, connectionId, shape.events, shape.scopes);
    const before = await eventTableUpdates(db.pool);
    const consumerDb = withApplicationName(db, consumerApplicationName);
    const result = await timeDrain(db, shape.events, settings.drainTimeoutMs, (tracker) =>
      startWharfConsumer(consumerDb, shape.concurrency, (mark) => tracker.record(mark.key, mark.seq),
        (error) => tracker.fail(error), localQueue),
    );
    // timeDrain stopped the consumer, whose pool ends its sessions; read
    // the counters once the server saw every one of them exit.
    await waitForSessionsToEnd(db.pool, consumerApplicationName);
    const after = await eventTableUpdates(db.pool);
    const eventTable = { updates: after.updates - before.updates, hot: after.hot - before.hot };
    return { ...result, errors: 0, eventTable };
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
