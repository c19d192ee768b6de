// The least an HTTP forwarder on PostgreSQL does, as the reference Wharf's
// forwarder is measured against (issue 53): a plain table, and per lane the
// textbook loop: claim one row with FOR UPDATE SKIP LOCKED, POST its payload
// with Node's fetch, mark it done with an UPDATE. No signature, no order, no
// rate limit, no lease, no fence, no attempt record, no retry: what any
// forwarder on PostgreSQL pays at least. Lanes = the in-flight bound.
import type pg from 'pg';
import { payloadTemplate } from '../payload.js';
import type { RunningConsumer } from './wharf-consumer.js';

export async function createForwardQueue(pool: pg.Pool): Promise<void> {
  await pool.query(`
    CREATE TABLE plain_forward (
      id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      delivery_key  text NOT NULL,
      subject       text NOT NULL,
      payload       text NOT NULL,
      state         text NOT NULL DEFAULT 'queued',
      status        int,
      done_at       timestamptz
    );
    CREATE INDEX plain_forward_queued ON plain_forward (id) WHERE state = 'queued';`);
}

/** `events` rows, event g in subject `repo:acme/r<g mod scopes>` (as subjectOf names them), its delivery key ending in g as Wharf's do here. */
export async function loadForwardQueue(pool: pg.Pool, events: number, scopes: number): Promise<void> {
  await pool.query(
    `INSERT INTO plain_forward (delivery_key, subject, payload)
     SELECT 'fwd-' || g, s.subject,
            jsonb_set($1::jsonb, '{bench}', jsonb_build_object('key', s.subject, 'seq', g))::text
       FROM generate_series(0, $2::int - 1) g,
            LATERAL (SELECT 'repo:acme/r' || (g % $3) AS subject) s
      ORDER BY g`,
    [payloadTemplate, events, scopes],
  );
  await pool.query('ANALYZE plain_forward');
}

export function startMinimalForwarder(options: {
  pool: pg.Pool;
  url: string;
  concurrency: number;
  onError(error: unknown): void;
}): RunningConsumer {
  let stopped = false;
  const lane = async () => {
    while (!stopped) {
      const { rows } = await options.pool.query<{ id: string; delivery_key: string; subject: string; payload: string }>(`
        UPDATE plain_forward SET state = 'active'
         WHERE id = (SELECT id FROM plain_forward WHERE state = 'queued' ORDER BY id
                      LIMIT 1 FOR UPDATE SKIP LOCKED)
        RETURNING id, delivery_key, subject, payload`);
      const job = rows[0];
      if (!job) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        continue;
      }
      const response = await fetch(options.url, {
        method: 'POST',
        body: job.payload,
        headers: {
          'content-type': 'application/json',
          'webhook-id': `plain_${job.id}`,
          'wharf-delivery-key': job.delivery_key,
          'wharf-subject': job.subject,
        },
        signal: AbortSignal.timeout(10_000),
        redirect: 'manual',
      });
      await response.body?.cancel();
      await options.pool.query(`UPDATE plain_forward SET state = 'done', status = $2, done_at = now() WHERE id = $1`,
        [job.id, response.status]);
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
