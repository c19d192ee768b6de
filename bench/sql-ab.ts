// An A/B of the inbox's SQL between two releases: admission (eight clients'
// rate, the server time of one call in a loop, and the backend's CPU per
// call made one statement at a time) and the lease path (claim +
// complete, and claim + fail + claim + complete), against two databases
// migrated to different commits, alternated round by round on one server so
// that the load of the machine falls on both alike. It answers "what does
// this SQL change cost?" (e.g. the attempt history: at most 10 % of
// claim+complete) without the rest of the harness.
//
//   npx tsx bench/sql-ab.ts <base database url> <head database url> [rounds]
//
// Both databases must be migrated and empty; each round admits its events
// through wharf.admit and drains them with 8 clients claiming 8 at a time.
// admit_many is measured as issue 44 batches it: 32 pushes a call from 8
// clients, subjects at random among the scopes (batches share them), and the
// backend's CPU per delivery of calls of 64 from one client.
//
//   npx tsx bench/sql-ab.ts <base url> <head url> [rounds] [workload,…]   a subset, by name
// The backend CPU figure reads /proc, so it needs the server on this machine.
import pg from 'pg';
import { processCpuMicros } from './process-cpu.js';
import { summarize } from './stats.js';
import { makePayload } from './payload.js';
import { pushDeliveries, timeCalls } from './workloads/admission.js';
import { admitPush, githubSource, installationRoute, loadWharfBacklog, setupWharfInstallation, subjectOf } from './systems/wharf-inbox.js';

const events = 4_000;
const scopes = 400;
const clients = 8;
const batch = 8;

const admissions = 2_000;
const timedAdmissions = 1_000;
const probedTransactions = 300;
const admitsPerTransaction = 10;

type Ending = 'complete' | 'fail-then-complete';
const manyBatch = 32;
const manyProbeSize = 64;
const manyProbeCalls = 60;

type Workload = 'admit' | 'admit server µs' | 'admit backend CPU µs' | 'admit_many' | 'admit_many backend CPU µs' | Ending;
const allWorkloads: Workload[] = [
  'admit', 'admit server µs', 'admit backend CPU µs', 'admit_many', 'admit_many backend CPU µs', 'complete', 'fail-then-complete',
];

/** `count` pushes from `first`, each about a subject drawn at random among the scopes. */
function randomPushes(first: number, count: number, label: string): string {
  return pushDeliveries(first, count, scopes, { label, subjectFor: () => subjectOf(Math.floor(Math.random() * scopes)) });
}

/** Deliveries per second admitted by admit_many of manyBatch from `clients` clients whose batches share scopes. */
async function admitManyRate(pool: pg.Pool, round: number): Promise<number> {
  const calls = admissions / manyBatch;
  const rate = await timeCalls(pool, clients, calls, (client, seq) =>
    client.query('SELECT wharf.admit_many($1::jsonb)', [randomPushes(seq * manyBatch, manyBatch, `ab-many-${round}`)]));
  await pool.query('DELETE FROM wharf.provider_event');
  return rate * manyBatch;
}

/** The backend's CPU per delivery of admit_many calls of manyProbeSize, each in a rolled-back transaction. */
async function admitManyBackendMicros(pool: pg.Pool, round: number): Promise<number> {
  return backendMicrosPer(pool, manyProbeCalls * manyProbeSize, async (db) => {
    for (let call = 0; call < manyProbeCalls; call += 1) {
      await db.query('BEGIN');
      await db.query('SELECT wharf.admit_many($1::jsonb)', [randomPushes(call * manyProbeSize, manyProbeSize, `ab-many-cpu-${round}`)]);
      await db.query('ROLLBACK');
    }
  });
}

/** Admissions per second from `clients` clients, each awaiting one wharf.admit at a time. */
async function admitRate(pool: pg.Pool, round: number): Promise<number> {
  const rate = await timeCalls(pool, clients, admissions, (client, seq) =>
    admitPush(client, `ab-${round}-${seq}`, seq % scopes, seq, { 'x-github-event': 'push' }));
  await pool.query('DELETE FROM wharf.provider_event');
  return rate;
}

/**
 * Server time of one admission, in µs: wharf.admit called once per row of
 * one statement, rolled back, so that neither round trips nor commits count.
 */
async function admitServerMicros(pool: pg.Pool): Promise<number> {
  const subjects = Array.from({ length: scopes }, (_, scope) => subjectOf(scope));
  const db = await pool.connect();
  try {
    await db.query('BEGIN');
    const began = performance.now();
    await db.query(
      `SELECT count(wharf.admit('github', $1, 'ab-timed-' || i, 'push', $2, ARRAY[($3::text[])[1 + i % $4]], $5,
                                '{"x-github-event": "push"}'))
         FROM generate_series(1, $6::int) i`,
      [githubSource, installationRoute, subjects, scopes, makePayload(subjectOf(0), 0), timedAdmissions]);
    const micros = ((performance.now() - began) * 1000) / timedAdmissions;
    await db.query('ROLLBACK');
    return micros;
  } finally {
    db.release();
  }
}

/**
 * The backend's CPU per admission, each its own statement as the edge sends
 * it (parse, bind, the function, the result), ten to a rolled-back
 * transaction. A loop inside one statement (admitServerMicros) does not pay
 * a statement's start-up, so it misses what a change to that costs.
 */
async function admitBackendMicros(pool: pg.Pool, round: number): Promise<number> {
  return backendMicrosPer(pool, probedTransactions * admitsPerTransaction, async (db) => {
    for (let transaction = 0; transaction < probedTransactions; transaction += 1) {
      await db.query('BEGIN');
      for (let call = 0; call < admitsPerTransaction; call += 1) {
        const seq = transaction * admitsPerTransaction + call;
        await admitPush(db, `ab-cpu-${round}-${seq}`, seq % scopes, seq, { 'x-github-event': 'push' });
      }
      await db.query('ROLLBACK');
    }
  });
}

/** The CPU of one backend over `work`, per `units` (read from /proc). */
async function backendMicrosPer(pool: pg.Pool, units: number, work: (db: pg.PoolClient) => Promise<void>): Promise<number> {
  const db = await pool.connect();
  try {
    const { rows } = await db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const pid = rows[0]!.pid;
    const before = await processCpuMicros(pid);
    await work(db);
    return ((await processCpuMicros(pid)) - before) / units;
  } finally {
    db.release();
  }
}

/** Events per second drained by `clients` claimers, each lease ended as `ending` says. */
async function drain(pool: pg.Pool, connectionId: number, round: number, ending: Ending): Promise<number> {
  await loadWharfBacklog(pool, connectionId, events, scopes, round * events);
  const began = performance.now();
  let handled = 0;
  await Promise.all(Array.from({ length: clients }, async (_, client) => {
    const db = await pool.connect();
    try {
      for (;;) {
        const { rows } = await db.query<{ id: string; lease_epoch: string; attempt: number }>(
          'SELECT id, lease_epoch, attempt FROM wharf.claim($1, $2)', [`ab-${client}`, batch]);
        if (rows.length === 0) {
          // Work left is in the scope rows, in either release: a count of the
          // inbox by state would scan it in a release with no index on state.
          const { rows: left } = await db.query<{ n: number }>(
            'SELECT count(*)::int AS n FROM wharf.scope WHERE head_id IS NOT NULL OR leased_id IS NOT NULL');
          if (left[0]!.n === 0) return;
          continue;
        }
        for (const row of rows) {
          if (ending === 'fail-then-complete' && row.attempt === 1) {
            await db.query("SELECT wharf.fail($1, $2, 'transient', 'ECONNRESET')", [row.id, row.lease_epoch]);
          } else {
            await db.query('SELECT wharf.complete($1, $2)', [row.id, row.lease_epoch]);
            handled += 1;
          }
        }
      }
    } finally {
      db.release();
    }
  }));
  const seconds = (performance.now() - began) / 1000;
  await pool.query("DELETE FROM wharf.provider_event WHERE state = 'DONE'");
  return handled / seconds;
}

async function main(): Promise<void> {
  const [baseUrl, headUrl, roundsText, only] = process.argv.slice(2);
  const workloads = only ? allWorkloads.filter((workload) => only.split(',').includes(workload)) : allWorkloads;
  if (workloads.length === 0) throw new Error(`no such workload among ${allWorkloads.join(', ')}`);
  if (!baseUrl || !headUrl) throw new Error('usage: tsx bench/sql-ab.ts <base database url> <head database url> [rounds] [workload,…]');
  const rounds = Number(roundsText ?? 5);
  const sides = await Promise.all([baseUrl, headUrl].map(async (url) => {
    const pool = new pg.Pool({ connectionString: url, max: clients + 1 });
    // Retries due at once, so that the fail path measures its writes, not its delay.
    await pool.query("SELECT wharf.set_setting('base_delay', '1 microsecond'), wharf.set_setting('max_delay', '1 microsecond')");
    return { url, pool, connectionId: await setupWharfInstallation(pool, scopes) };
  }));
  const figures = new Map<Workload, [number[], number[]]>(workloads.map((workload) => [workload, [[], []]]));
  for (let round = 0; round < rounds; round += 1) {
    for (const workload of workloads) {
      if (workload === 'admit backend CPU µs' || workload === 'admit_many backend CPU µs') {
        // Both sides at once, one client each: the machine's drift, which
        // moves CPU per call as much as a change does, falls on both alike.
        const probe = workload === 'admit backend CPU µs' ? admitBackendMicros : admitManyBackendMicros;
        const probed = await Promise.all(sides.map(({ pool }) => probe(pool, round)));
        probed.forEach((micros, side) => figures.get(workload)![side]!.push(micros));
        continue;
      }
      // Alternate which side goes first, so that neither always runs on a warmer server.
      const order = round % 2 === 0 ? [0, 1] : [1, 0];
      for (const side of order) {
        const { pool, connectionId } = sides[side]!;
        figures.get(workload)![side]!.push(
          workload === 'admit' ? await admitRate(pool, round)
            : workload === 'admit_many' ? await admitManyRate(pool, round)
            : workload === 'admit server µs' ? await admitServerMicros(pool)
              : await drain(pool, connectionId, round, workload));
      }
    }
  }
  for (const workload of workloads) {
    const unit = workload.endsWith('µs') ? ' µs' : '/s';
    const [base, head] = figures.get(workload)!.map((samples) => summarize(samples));
    process.stdout.write(`${workload.padEnd(26)} base ${base!.median.toFixed(0)}${unit} (±${(base!.relativeSpread * 50).toFixed(0)} %)`
      + `  head ${head!.median.toFixed(0)}${unit} (±${(head!.relativeSpread * 50).toFixed(0)} %)`
      + `  head/base ${(head!.median / base!.median).toFixed(3)}\n`);
  }
  await Promise.all(sides.map((side) => side.pool.end()));
}

await main();
