// What one claim and one admission cost while a snapshot is held open (a
// nightly pg_dump, a long report), against the events served since the
// snapshot was taken (issue 54, item 4: 0, 10,000 and 100,000 served, about
// an hour of a quiet inbox):
//   npx tsx bench/claim-under-snapshot.ts [events served, e.g. 10000,100000]
// (DATABASE_URL = a maintenance database URL.)
//
// A backlog over 200 scopes, then, while another session holds a REPEATABLE
// READ snapshot, rounds that serve one event per scope through Wharf's own
// statements, set-based: 200 events admitted at the scopes' tails in one
// INSERT (the scope trigger keeps the heads, as admit does), one
// `wharf.claim` of 200 and one `wharf.complete_many` of what it leased. So
// every served event leaves what a drain leaves behind it: the versions of
// its event row and of its scope row, and the claim line's entries, all kept
// by the snapshot. Beside it a plain SQL queue (one table, an index on
// run_at, rows taken with FOR UPDATE SKIP LOCKED and deleted when done, as
// graphile-worker does with its jobs), 200 rows taken and 200 added per
// round. Each measured call is EXPLAIN (ANALYZE, BUFFERS) in a transaction
// rolled back, so that every call sees the same state; the buffers count
// every page the call touched, the functions it calls included. A Wharf
// session's claims start where its last one saw the oldest due head
// (sql/30-claim-lease.sql, "The claim line's floor"), and read the line from
// its start every ten seconds: both are shown. The admission is a GitHub
// push into one of the 200 scopes, beside a plain INSERT of the same payload
// into a table no one updates.
import pg from 'pg';
import { withBenchDatabase, type BenchDatabase } from './databases.js';
import { explained, medianCost, type Cost } from './explained.js';
import { makePayload } from './payload.js';
import { githubSource, installationRoute, loadWharfBacklog, setupWharfInstallation, subjectOf } from './systems/wharf-inbox.js';

const serverUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const steps = (process.argv[2] ?? '10000,100000').split(',').map(Number);
const scopes = 200;
const backlog = 20_000;
const calls = 15;
const claimSize = 8;

/**
 * Medians over `calls` transactions, each rolled back, of `sql` run twice in
 * a row on one session: Wharf's first claim reads its line from the start
 * (a session's first claim, and every claim ten seconds after the last such
 * read), the second from the floor the first left.
 */
async function measure(db: BenchDatabase, sql: string): Promise<{ first: Cost; second: Cost }> {
  const client = await db.pool.connect();
  try {
    const first: Cost[] = [];
    const second: Cost[] = [];
    for (let call = 0; call < calls; call += 1) {
      await client.query('BEGIN');
      first.push(await explained(client, sql));
      second.push(await explained(client, sql));
      await client.query('ROLLBACK');
    }
    return { first: medianCost(first), second: medianCost(second) };
  } finally {
    // Its claim line must not outlive the measurement (the next starts afresh).
    client.release(true);
  }
}

const wharfClaim = `SELECT * FROM wharf.claim('bench', ${claimSize})`;
const plainClaim = `SELECT id FROM plain_queue ORDER BY run_at, id LIMIT ${claimSize} FOR UPDATE SKIP LOCKED`;

/** A push into scope 7 as the edge would admit it (rolled back each time, so one delivery key serves). */
const pushPayload = pg.escapeLiteral(JSON.stringify(makePayload(subjectOf(7), 1)));
const wharfAdmit = `SELECT wharf.admit('github', ${pg.escapeLiteral(githubSource)}, 'snapshot-push', 'push', `
  + `${pg.escapeLiteral(JSON.stringify(installationRoute))}::jsonb, ARRAY[${pg.escapeLiteral(subjectOf(7))}], `
  + `${pushPayload}::jsonb, '{}'::jsonb, NULL)`;
const plainInsert = `INSERT INTO plain_queue (run_at, payload) VALUES (now(), ${pushPayload}::jsonb)`;

/** The plain queue: as many rows as Wharf's backlog, due an hour ago. */
async function createPlainQueue(db: BenchDatabase): Promise<void> {
  await db.pool.query(`CREATE TABLE plain_queue (id bigserial PRIMARY KEY, run_at timestamptz NOT NULL, payload jsonb NOT NULL)`);
  await db.pool.query('CREATE INDEX plain_queue_run_at ON plain_queue (run_at, id)');
  await db.pool.query(`INSERT INTO plain_queue (run_at, payload)
                       SELECT now() - interval '1 hour' + g * interval '1 microsecond', '{}' FROM generate_series(1, $1) g`, [backlog]);
}

/**
 * Serves `rounds` events per scope on `client`, one per scope per round, as
 * the header says; the plain queue takes and adds as many. Returns the seq
 * of the next event to admit.
 */
async function serveRounds(db: BenchDatabase, client: pg.PoolClient, connectionId: number,
  rounds: number, firstSeq: number): Promise<number> {
  let seq = firstSeq;
  for (let round = 0; round < rounds; round += 1) {
    await loadWharfBacklog(client, connectionId, scopes, scopes, seq, false);
    seq += scopes;
    const { rows } = await client.query<{ id: string; lease_epoch: string }>(
      `SELECT id, lease_epoch FROM wharf.claim('bench-drain', ${scopes})`);
    await client.query(`SELECT wharf.complete_many($1::bigint[], $2::bigint[], array_fill('handled'::text, ARRAY[$3::int]))`,
      [rows.map((r) => r.id), rows.map((r) => r.lease_epoch), rows.length]);
    await db.pool.query(`WITH taken AS (DELETE FROM plain_queue WHERE id IN (SELECT id FROM plain_queue ORDER BY run_at, id LIMIT ${scopes}) RETURNING 1)
                         INSERT INTO plain_queue (run_at, payload)
                         SELECT now() - interval '30 minutes' + g * interval '1 microsecond', '{}' FROM generate_series(1, (SELECT count(*) FROM taken)) g`);
  }
  return seq;
}

const format = (cost: Cost) => `${cost.ms.toFixed(2)} ms, ${Math.round(cost.buffers).toLocaleString('en-US')} buffers`;

await withBenchDatabase(serverUrl, 'claim_snapshot', { wharf: true, poolSize: 3 }, async (db) => {
  // The installation subscribes to the scopes' subjects, so that an admission into one stores its row.
  const connectionId = await setupWharfInstallation(db.pool, scopes);
  await loadWharfBacklog(db.pool, connectionId, backlog, scopes);
  await createPlainQueue(db);
  await db.pool.query('VACUUM ANALYZE wharf.scope, wharf.provider_event');
  await db.pool.query('VACUUM ANALYZE plain_queue');

  let base: { claim: Cost; admit: Cost } | undefined;
  const ratio = (cost: Cost, at: Cost | undefined) => (at ? ` (${(cost.buffers / at.buffers).toFixed(2)}× buffers, ${(cost.ms / at.ms).toFixed(2)}× time)` : '');
  const row = async (label: string, baseline = false) => {
    const wharf = await measure(db, wharfClaim);
    const plain = await measure(db, plainClaim);
    const admit = await measure(db, wharfAdmit);
    const insert = await measure(db, plainInsert);
    if (baseline) base = { claim: wharf.second, admit: admit.first };
    console.log(`| ${label} | ${format(wharf.second)}${ratio(wharf.second, base?.claim)} | ${format(wharf.first)} | ${format(plain.second)} `
      + `| ${format(admit.first)}${ratio(admit.first, base?.admit)} | ${format(insert.first)} |`);
  };
  console.log(`A backlog of ${backlog.toLocaleString('en-US')} events over ${scopes} scopes; claim of ${claimSize}, median of ${calls} calls each; `
    + `ratios against the snapshot's first moment.\n`);
  console.log('| state | wharf.claim, a session\'s next claim | wharf.claim, reading its line from the start | plain SKIP LOCKED queue '
    + '| wharf.admit, one push into a scope | plain INSERT of its payload |');
  console.log('|---|---:|---:|---:|---:|---:|');
  await row('no snapshot held');

  const holder = await db.pool.connect();
  const server = await db.pool.connect();
  try {
    await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await holder.query('SELECT count(*) FROM wharf.scope');
    await row('snapshot held, 0 events served since', true);
    let served = 0;
    let seq = backlog;
    for (const target of steps) {
      const rounds = Math.ceil((target - served) / scopes);
      const started = performance.now();
      seq = await serveRounds(db, server, connectionId, rounds, seq);
      served += rounds * scopes;
      console.error(`served ${served} events in ${((performance.now() - started) / 1000).toFixed(1)} s`);
      await row(`snapshot held, ${served.toLocaleString('en-US')} events served since`);
    }
    await holder.query('COMMIT');
  } finally {
    // Its claim line is a session setting: the session goes, not back to the pool.
    server.release(true);
    holder.release();
  }
  await db.pool.query('VACUUM wharf.scope, wharf.provider_event');
  await db.pool.query('VACUUM plain_queue');
  await row('snapshot released, then VACUUM');
});
