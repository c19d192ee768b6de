// The plain-SQL limit: a bare table and the textbook claim/complete loop with
// FOR UPDATE SKIP LOCKED, no ordering, no lease, no fence. What any queue on
// PostgreSQL pays at least.
import type pg from 'pg';
import { payloadTemplate } from '../payload.js';
import type { RunningConsumer } from './wharf-consumer.js';

export async function createPlainQueue(pool: pg.Pool): Promise<void> {
  await pool.query(`
    CREATE TABLE plain_job (
      id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      payload  jsonb NOT NULL,
      state    text NOT NULL DEFAULT 'queued',
      done_at  timestamptz
    );
    CREATE INDEX plain_job_queued ON plain_job (id) WHERE state = 'queued';`);
}

export async function loadPlainJobs(pool: pg.Pool, events: number): Promise<void> {
  await pool.query(
    `INSERT INTO plain_job (payload)
     SELECT jsonb_set($1::jsonb, '{bench}', jsonb_build_object('key', 'repo:acme/r' || g, 'seq', g))
       FROM generate_series(0, $2::int - 1) g ORDER BY g`,
    [payloadTemplate, events],
  );
  await pool.query('ANALYZE plain_job');
}

export function startPlainLoop(options: {
  pool: pg.Pool;
  concurrency: number;
  handle(payload: unknown): void | Promise<void>;
  onError(error: unknown): void;
}): RunningConsumer {
  let stopped = false;
  const lane = async () => {
    while (!stopped) {
      const { rows } = await options.pool.query<{ id: string; payload: unknown }>(`
        UPDATE plain_job SET state = 'active'
         WHERE id = (SELECT id FROM plain_job WHERE state = 'queued' ORDER BY id
                      LIMIT 1 FOR UPDATE SKIP LOCKED)
        RETURNING id, payload`);
      const job = rows[0];
      if (!job) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        continue;
      }
      await options.handle(job.payload);
      await options.pool.query(`UPDATE plain_job SET state = 'done', done_at = now() WHERE id = $1`, [job.id]);
    }
  };
  const lanes = Array.from({ length: options.concurrency }, () =>
    lane().catch((error: unknown) => {
      stopped = true;
      options.onError(error);
      throw error;
    }));
  return {
    async stop() {
      stopped = true;
      const results = await Promise.allSettled(lanes);
      const failed = results.find((result) => result.status === 'rejected');
      if (failed) throw failed.reason;
    },
  };
}
