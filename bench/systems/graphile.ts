// graphile-worker 0.18 as users would run it: `run()` with a task list, jobs
// added through graphile_worker.add_jobs, one named queue per ordering key
// when order matters (a named queue runs its jobs one at a time). Two
// configurations: the defaults (each of `concurrency` slots fetches one job
// per statement) and the local queue (`graphileLocalQueuePreset` below),
// which fetches and locks up to 100 jobs per statement (at most one per named
// queue, so per-queue order holds in 0.18; 0.17's did not) and completes the
// jobs that ended in the same tick in one statement. The local queue, polling
// every 100 ms, is its fastest configuration that keeps per-key order.
import { Logger, run, runMigrations, type Runner } from 'graphile-worker';
import pg from 'pg';
import { makePayload } from '../payload.js';
import type { RunningConsumer } from './wharf-consumer.js';

const silent = new Logger(() => () => {});

export interface GraphileJob {
  key: string;
  seq: number;
}

/** Installs graphile-worker's schema (its migrations run on the first start). */
export async function migrateGraphile(connectionString: string): Promise<void> {
  await runMigrations({ connectionString, logger: silent });
}

/**
 * Queues jobs in seq order, 2,000 per statement; `perKeyQueue` puts each key in
 * its own named queue. graphile-worker (0.16 to 0.18) picks a queue's next job by
 * (priority, run_at) with no tie-breaker, and every job added in one
 * transaction gets the same now(), so each job is given a run_at of its own,
 * increasing with its place in the list and already past. (Loading through
 * add_jobs with the default run_at showed thousands of order violations that
 * were the loader's ties, not the queue's fault.)
 */
export async function loadGraphileJobs(
  pool: pg.Pool,
  jobs: readonly GraphileJob[],
  perKeyQueue: boolean,
): Promise<void> {
  const batch = 2_000;
  for (let start = 0; start < jobs.length; start += batch) {
    const slice = jobs.slice(start, start + batch);
    await pool.query(
      `SELECT count(*) FROM graphile_worker.add_jobs(
         ARRAY(SELECT ROW('bench', j.payload, j.queue,
                          timestamptz '2000-01-01 00:00:00+00' + j.place * interval '1 millisecond',
                          NULL, NULL, NULL, NULL)::graphile_worker.job_spec
                 FROM jsonb_to_recordset($1::jsonb) AS j(payload json, queue text, place int)))`,
      [
        JSON.stringify(
          slice.map((job, n) => ({
            payload: makePayload(job.key, job.seq),
            queue: perKeyQueue ? job.key : null,
            place: start + n,
          })),
        ),
      ],
    );
  }
}

/**
 * Adds one job now with `graphile_worker.add_job` (the latency workload's
 * producer, and the admission workload's); `perKeyQueue` names the key's queue.
 */
export async function addGraphileJob(
  client: Pick<pg.ClientBase, 'query'>,
  job: GraphileJob,
  perKeyQueue = false,
): Promise<void> {
  await client.query(`SELECT graphile_worker.add_job('bench', $1::json, queue_name => $2)`,
    [makePayload(job.key, job.seq), perKeyQueue ? job.key : null]);
}

/**
 * The fastest configuration that keeps per-queue order (issue 18). With
 * named queues a refetch can come back empty while the queue's own jobs hold
 * every remaining queue's lock; the local queue then sleeps `pollInterval`
 * (2 s by default), since completing a job sends no notification. That made
 * its per-key drain swing between about 1,400 and 7,000 events/s from run to
 * run at 20,000 events over 200 keys, and crawl at 11 events/s over 20 keys;
 * at 100 ms it ran at 6,600 to 7,700/s and 200/s (one run each, 2026-12-02).
 */
export const graphileLocalQueuePreset = {
  worker: { localQueue: { size: 100 }, completeJobBatchDelay: 0, pollInterval: 100 },
};

export async function startGraphileWorker(options: {
  connectionString: string;
  concurrency: number;
  /** Use the local queue preset (`graphileLocalQueuePreset`). */
  localQueue: boolean;
  handle(payload: unknown): void | Promise<void>;
  /** Hears its warnings and errors (the fault scenarios keep them); silent without. */
  onLog?: (level: string, message: string) => void;
  /** Told when the runner stops by itself (not through stop()), with why. */
  onStopped?: (reason: unknown) => void;
}): Promise<RunningConsumer> {
  // Our pool, not one run() makes: the benchmark drops the database with
  // FORCE right after stop(), and a connection graphile-worker had not closed
  // yet would then raise an unhandled pool error.
  const pgPool = new pg.Pool({ connectionString: options.connectionString, max: options.concurrency + 2 });
  pgPool.on('error', () => {});
  // graphile-worker 0.18 checks that a pool it is given handles its clients' errors too.
  pgPool.on('connect', (client) => {
    client.on('error', () => {});
  });
  let runner: Runner;
  try {
    runner = await run({
      pgPool,
      concurrency: options.concurrency,
      ...(options.localQueue ? { preset: graphileLocalQueuePreset } : {}),
      noHandleSignals: true,
      logger: options.onLog
        ? new Logger(() => (level, message) => {
          if (level === 'error' || level === 'warning') options.onLog!(level, message);
        })
        : silent,
      taskList: {
        bench: async (payload) => {
          await options.handle(payload);
        },
      },
    });
  } catch (error) {
    await pgPool.end();
    throw error;
  }
  let stopping = false;
  runner.promise.then(
    () => !stopping && options.onStopped?.(undefined),
    (error: unknown) => !stopping && options.onStopped?.(error),
  );
  return {
    async stop() {
      stopping = true;
      await runner.stop();
      await pgPool.end();
    },
  };
}
