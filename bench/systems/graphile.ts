// graphile-worker 0.16 as users would run it: `run()` with a task list, jobs
// added through graphile_worker.add_jobs, one named queue per ordering key
// when order matters. 0.16 has no `localQueue` (it arrives in 0.17), so its
// per-key figure here is the defaults one.
import { Logger, run, runMigrations, type Runner } from 'graphile-worker';
import type pg from 'pg';
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

/** Queues jobs in add_jobs batches, in seq order; `perKeyQueue` puts each key in its own named queue. */
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
         ARRAY(SELECT ROW('bench', j.payload, j.queue, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec
                 FROM jsonb_to_recordset($1::jsonb) AS j(payload json, queue text, ord int)
                ORDER BY j.ord))`,
      [
        JSON.stringify(
          slice.map((job, ord) => ({
            payload: makePayload(job.key, job.seq),
            queue: perKeyQueue ? job.key : null,
            ord,
          })),
        ),
      ],
    );
  }
}

/** Adds one job now (the latency workload's producer). */
export async function addGraphileJob(pool: pg.Pool, job: GraphileJob): Promise<void> {
  await pool.query(`SELECT graphile_worker.add_job('bench', $1::json)`, [makePayload(job.key, job.seq)]);
}

export async function startGraphileWorker(options: {
  connectionString: string;
  concurrency: number;
  handle(payload: unknown): void | Promise<void>;
}): Promise<RunningConsumer> {
  const runner: Runner = await run({
    connectionString: options.connectionString,
    concurrency: options.concurrency,
    maxPoolSize: options.concurrency + 2,
    noHandleSignals: true,
    logger: silent,
    taskList: {
      bench: async (payload) => {
        await options.handle(payload);
      },
    },
  });
  return {
    async stop() {
      await runner.stop();
    },
  };
}
