// What one claim costs while a snapshot is held open (issue 44's finding in
// bench/SCENARIOS.md: under a 10-minute held snapshot Wharf's claim p99 went
// from 12 to 456 ms), against the dead index entries that the snapshot keeps,
// and what one admission into one of those scopes costs (the same run showed
// the receiver answering slower first):
//   npx tsx bench/claim-under-snapshot.ts [dead entries, e.g. 10000,100000,400000]
// (DATABASE_URL = a maintenance database URL.)
//
// The state is built set-based, not by a drain, so that the count of dead
// entries is the one asked for: a backlog over 200 scopes, then, while
// another session holds a REPEATABLE READ snapshot, rounds that move every
// scope's ready_at half a second later (about what a drain of a few
// hundred events a second over 200 scopes does), each round leaving one
// dead entry per scope in ix_scope_claim ahead of the live ones, where a
// drain's served heads leave theirs. Beside it a plain SQL queue (one
// table, an index on run_at, rows taken with FOR UPDATE SKIP LOCKED and
// deleted when done, as graphile-worker does with its jobs), whose deleted
// rows leave their dead entries at the front of its index the same way. Each call is EXPLAIN (ANALYZE, BUFFERS)
// in a transaction rolled back, so that every call sees the same state; the
// buffers count every page the call touched, the functions it calls included.
// A Wharf session's claims start where its last one saw the oldest due head
// (sql/30-claim-lease.sql, "The claim line's floor"), and read the line from
// its start every ten seconds: both are shown. The admission is a GitHub
// push into one of the 200 scopes, whose row the rounds above have updated
// once each (every version of it kept by the snapshot), beside a plain
// INSERT of the same payload into a table no one updates.
import pg from 'pg';
import { withBenchDatabase, type BenchDatabase } from './databases.js';
import { makePayload } from './payload.js';
import { githubSource, installationRoute, loadWharfBacklog, setupWharfInstallation, subjectOf } from './systems/wharf-inbox.js';
import { summarize } from './stats.js';

const serverUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const steps = (process.argv[2] ?? '10000,100000,400000').split(',').map(Number);
const scopes = 200;
const backlog = 20_000;
const calls = 15;
const claimSize = 8;

interface Cost {
  ms: number;
  buffers: number;
}

interface ExplainNode {
  'Shared Hit Blocks': number;
  'Shared Read Blocks': number;
}

/** One statement's execution time and the buffers it touched, from EXPLAIN (ANALYZE, BUFFERS). */
async function explained(client: pg.PoolClient, sql: string): Promise<Cost> {
  const { rows } = await client.query<{ 'QUERY PLAN': [{ Plan: ExplainNode; 'Execution Time': number }] }>(
    `EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, COSTS OFF, FORMAT JSON) ${sql}`);
  const [plan] = rows[0]!['QUERY PLAN'];
  return { ms: plan['Execution Time'], buffers: plan.Plan['Shared Hit Blocks'] + plan.Plan['Shared Read Blocks'] };
}

const median = (costs: Cost[]): Cost => ({
  ms: summarize(costs.map((cost) => cost.ms)).median,
  buffers: summarize(costs.map((cost) => cost.buffers)).median,
});

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
    return { first: median(first), second: median(second) };
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

/** One dead entry per scope (Wharf) and per taken row (plain) for each round, ahead of the live ones. */
async function makeDeadEntries(db: BenchDatabase, rounds: number): Promise<void> {
  for (let round = 0; round < rounds; round += 1) {
    await db.pool.query(`UPDATE wharf.scope SET ready_at = ready_at + interval '500 milliseconds'`);
    await db.pool.query(`WITH taken AS (DELETE FROM plain_queue WHERE id IN (SELECT id FROM plain_queue ORDER BY run_at, id LIMIT ${scopes}) RETURNING 1)
                         INSERT INTO plain_queue (run_at, payload)
                         SELECT now() - interval '30 minutes' + g * interval '1 microsecond', '{}' FROM generate_series(1, (SELECT count(*) FROM taken)) g`);
  }
}

const format = (cost: Cost) => `${cost.ms.toFixed(2)} ms, ${Math.round(cost.buffers).toLocaleString('en-US')} buffers`;

await withBenchDatabase(serverUrl, 'claim_snapshot', { wharf: true, poolSize: 3 }, async (db) => {
  // The installation subscribes to the scopes' subjects, so that an admission into one stores its row.
  await loadWharfBacklog(db.pool, await setupWharfInstallation(db.pool, scopes), backlog, scopes);
  // Every head due an hour ago, so that the rounds below keep them due.
  await db.pool.query(`UPDATE wharf.scope SET ready_at = ready_at - interval '1 hour', head_due_at = head_due_at - interval '1 hour'`);
  await createPlainQueue(db);
  await db.pool.query('VACUUM ANALYZE wharf.scope');
  await db.pool.query('VACUUM ANALYZE plain_queue');

  const row = async (label: string) => {
    const wharf = await measure(db, wharfClaim);
    const plain = await measure(db, plainClaim);
    const admit = await measure(db, wharfAdmit);
    const insert = await measure(db, plainInsert);
    console.log(`| ${label} | ${format(wharf.second)} | ${format(wharf.first)} | ${format(plain.second)} | ${format(admit.first)} | ${format(insert.first)} |`);
  };
  console.log(`A backlog of ${backlog.toLocaleString('en-US')} events over ${scopes} scopes; claim of ${claimSize}, median of ${calls} calls each.\n`);
  console.log('| state | wharf.claim, a session\'s next claim | wharf.claim, reading its line from the start | plain SKIP LOCKED queue '
    + '| wharf.admit, one push into a scope | plain INSERT of its payload |');
  console.log('|---|---:|---:|---:|---:|---:|');
  await row('no snapshot held, no dead entries');

  const holder = await db.pool.connect();
  try {
    await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await holder.query('SELECT count(*) FROM wharf.scope');
    let made = 0;
    for (const dead of steps) {
      await makeDeadEntries(db, Math.ceil((dead - made) / scopes));
      made = Math.max(made, dead);
      await row(`snapshot held, ${made.toLocaleString('en-US')} dead entries ahead of the live ones`);
    }
    await holder.query('COMMIT');
  } finally {
    holder.release();
  }
  await db.pool.query('VACUUM wharf.scope');
  await db.pool.query('VACUUM plain_queue');
  await row('snapshot released, then VACUUM');
});
