// The history a system's database holds before the pg_dump cell, so that a
// dump of it lasts as a nightly backup of an inbox in use does: `rows`
// handled deliveries of the run's scopes, with the run's payload, loaded
// set-based (INSERT … SELECT over generate_series, in batches) as the
// database's owner, then vacuumed, analysed and checkpointed, so that neither
// an autovacuum woken by the inserts nor the checkpoint of the load's pages
// falls inside the baseline.
import type pg from 'pg';
import { payloadTemplate } from '../payload.js';
import { githubSource } from '../systems/wharf-inbox.js';

const batchRows = 100_000;

/** The run's payload, as the load sends it for the delivery `g` of scope `g mod scopes` (makePayload(subject, g)). */
const payloadOf = (template: string, subject: string, seq: string) =>
  `jsonb_set(jsonb_set(${template}::jsonb, '{bench}', jsonb_build_object('key', ${subject}, 'seq', ${seq})),
             '{repository,full_name}', to_jsonb(substr(${subject}, 6)))`;

async function inBatches(rows: number, load: (first: number, last: number) => Promise<number>): Promise<void> {
  let loaded = 0;
  for (let first = 0; first < rows; first += batchRows) loaded += await load(first, Math.min(first + batchRows, rows) - 1);
  if (loaded !== rows) throw new Error(`history: ${loaded} rows loaded, not ${rows}`);
}

/**
 * Wharf keeps what it handled for the replay window: DONE rows of
 * wharf.provider_event, shaped as the lease path leaves them (one attempt,
 * outcome and handled_at, as bench/workloads/month-two.ts loads them), in the
 * scopes the load sends to, with the headers the receiver keeps. They
 * arrived over the latest half of the replay window, so that the worker's
 * retention loop purges none of them during the cell; DONE rows have no
 * scope head (the scope trigger fires for QUEUED and LEASED rows only).
 */
export async function loadWharfHistory(pool: pg.Pool, rows: number, scopes: number): Promise<void> {
  await inBatches(rows, async (first, last) => (await pool.query(
    `INSERT INTO wharf.provider_event
       (workspace_id, provider, delivery_key, event_type, subject, scope_key, source, connection_id, payload, headers,
        received_at, next_attempt_at, state, attempt, lease_epoch, leased_at, leased_by, outcome, handled_at)
     SELECT 1, 'github', 'history-' || g, 'push', a.subject, '1:github:' || a.subject, $1, c.id,
            ${payloadOf('$2', 'a.subject', 'g')},
            jsonb_build_object('content-type', 'application/json', 'x-github-event', 'push', 'x-github-delivery', 'history-' || g),
            a.received_at, a.received_at, 'DONE', 1, 1, a.received_at + interval '20 ms', 'bench-worker',
            'handled', a.received_at + interval '120 ms'
       FROM generate_series($3::bigint, $4::bigint) AS g
       CROSS JOIN LATERAL (
         SELECT 'repo:acme/r' || g % $5 AS subject,
                now() - interval '10 minutes' - wharf.setting_interval('replay_window') / 2 * (1 - g::float8 / $6) AS received_at
       ) AS a
       JOIN wharf.connection c ON c.workspace_id = 1
      ORDER BY g`,
    [githubSource, payloadTemplate, first, last, scopes, rows])).rowCount ?? 0);
  await pool.query('VACUUM (ANALYZE) wharf.provider_event');
  await pool.query('CHECKPOINT');
}

/**
 * graphile-worker deletes a job once it is done, so its database keeps no
 * history of its own: an application that keeps one keeps it in a table of
 * its own, and that is what this is, beside graphile-worker's schema: one
 * row per completed job, with what the job had (task, queue, key, the same
 * payload as Wharf's rows) and its times. Rows left in graphile-worker's
 * jobs table instead, made unrunnable (permanently failed, or locked), would
 * be another fault: a backlog of failed jobs that get_job reads past, not a
 * backup. With the same payload in the same number of rows the two
 * databases dump about the same bytes (the fault's report gives each
 * database's size); Wharf's history sits in its main table and
 * graphile-worker's does not, which is each system's own shape.
 */
export async function loadGraphileHistory(pool: pg.Pool, rows: number, scopes: number): Promise<void> {
  await pool.query(`
    CREATE TABLE public.scenario_job_history (
      id              bigint PRIMARY KEY,
      task_identifier text NOT NULL,
      queue_name      text,
      key             text,
      payload         jsonb NOT NULL,
      priority        smallint NOT NULL,
      attempts        smallint NOT NULL,
      max_attempts    smallint NOT NULL,
      locked_by       text,
      created_at      timestamptz NOT NULL,
      run_at          timestamptz NOT NULL,
      completed_at    timestamptz NOT NULL
    )`);
  await inBatches(rows, async (first, last) => (await pool.query(
    `INSERT INTO public.scenario_job_history
       (id, task_identifier, queue_name, key, payload, priority, attempts, max_attempts, locked_by, created_at, run_at, completed_at)
     SELECT g, 'bench', a.subject, 'history-' || g, ${payloadOf('$1', 'a.subject', 'g')}, 0, 1, 25,
            'worker-bench', a.created_at, a.created_at, a.created_at + interval '120 ms'
       FROM generate_series($2::bigint, $3::bigint) AS g
       CROSS JOIN LATERAL (
         -- Over the same 36 hours as Wharf's rows with its default replay window (3 days).
         SELECT 'repo:acme/r' || g % $4 AS subject,
                now() - interval '10 minutes' - interval '36 hours' * (1 - g::float8 / $5) AS created_at
       ) AS a
      ORDER BY g`,
    [payloadTemplate, first, last, scopes, rows])).rowCount ?? 0);
  await pool.query('VACUUM (ANALYZE) public.scenario_job_history');
  await pool.query('CHECKPOINT');
}
