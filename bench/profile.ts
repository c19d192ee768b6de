// Where Wharf's time goes, measured without pg_stat_statements (this server
// does not preload it, and the benchmark does not reconfigure a shared server):
//   npx tsx bench/profile.ts            (DATABASE_URL = a maintenance database URL)
// prints markdown for the "what limits it" part of bench/RESULTS.md.
//
// 1. Admission, one client, so the figures are per call and not contention:
//    wall time per call (round trip and commit included) of wharf.admit, a
//    plain INSERT, graphile_worker.add_job and pg-boss send; the server time
//    of each PL/pgSQL function (track_functions = all, pg_stat_user_functions).
// 2. The statements inside wharf.admit: auto_explain (LOADed in the session,
//    log_nested_statements, log_min_duration 0, no ANALYZE) reports each
//    statement's duration as a notice; summed per statement over the calls.
// 3. A drain of each shape by the Wharf worker with track_functions = all:
//    claim / complete / trigger time per event against the wall time, the
//    calls per event, and how many of the table updates were HOT.
import pg from 'pg';
import { createScratchDatabase, type ScratchDatabase } from '../cli/scratch-database.js';
import { HandlingTracker } from './handling-tracker.js';
import { makePayload } from './payload.js';
import { addGraphileJob, migrateGraphile } from './systems/graphile.js';
import { sendPgBossJob, startPgBoss } from './systems/pgboss.js';
import { startWharfConsumer } from './systems/wharf-consumer.js';
import { admitPush, loadWharfBacklog, setupWharfInstallation, subjectOf } from './systems/wharf-inbox.js';

const serverUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const calls = Number(process.env.PROFILE_CALLS ?? 2_000);
const warm = 200;
const scopes = 200;
const out: string[] = [];
const print = (line = '') => {
  out.push(line);
  console.error(line);
};
const ms = (value: number) => value.toFixed(3);

async function withDatabase<T>(label: string, wharf: boolean, work: (db: ScratchDatabase) => Promise<T>): Promise<T> {
  const db = await createScratchDatabase(serverUrl, { prefix: `wharf_profile_${label}`, migrate: wharf, poolSize: 12 });
  try {
    // Sessions opened from here on time every PL/pgSQL function call.
    await db.pool.query(`ALTER DATABASE ${db.name} SET track_functions = 'all'`);
    await db.pool.query('CHECKPOINT');
    return await work(db);
  } finally {
    await db.drop();
  }
}

/**
 * One client's mean wall time per call, after `warm` unmeasured calls; the
 * function counters are reset after the warm-up, so they cover the measured calls.
 */
async function timeOneClient(client: pg.ClientBase, call: (seq: number) => Promise<unknown>): Promise<number> {
  await client.query(`SET track_functions = 'all'`);
  for (let seq = 0; seq < warm; seq += 1) await call(1_000_000 + seq);
  await client.query('SELECT pg_stat_reset()');
  const began = performance.now();
  for (let seq = 0; seq < calls; seq += 1) await call(seq);
  return (performance.now() - began) / calls;
}

interface FunctionTime { name: string; calls: number; total: number; self: number }

async function functionTimes(client: pg.ClientBase, schema: string): Promise<FunctionTime[]> {
  await client.query('SELECT pg_stat_force_next_flush()');
  // A new statement in a new transaction sees the flushed counters.
  const { rows } = await client.query<{ name: string; calls: string; total: number; self: number }>(
    `SELECT funcname AS name, calls, total_time AS total, self_time AS self
       FROM pg_stat_user_functions WHERE schemaname = $1 ORDER BY total_time DESC`, [schema]);
  return rows.map((r) => ({ name: r.name, calls: Number(r.calls), total: r.total, self: r.self }));
}

async function admissionPerCall(): Promise<void> {
  print('### Admission, one client, per call');
  print();
  print(`${calls} calls each after ${warm} unmeasured ones; the same ~2 KB payload; wall = client round trip with commit.`);
  print();
  const rows: string[] = [];
  await withDatabase('admit', true, async (db) => {
    await setupWharfInstallation(db.pool, scopes);
    const client = await db.pool.connect();
    try {
      const wall = await timeOneClient(client, (seq) => admitPush(client, `d-${seq}`, seq % scopes, seq));
      const times = await functionTimes(client, 'wharf');
      const admit = times.find((t) => t.name === 'admit');
      rows.push(`| wharf.admit | ${ms(wall)} | ${admit ? ms(admit.total / admit.calls) : '—'} |`);
      print('| function (schema wharf) | calls per admit | total ms per admit | self ms per admit |');
      print('|---|---:|---:|---:|');
      const admits = admit?.calls ?? 1;
      for (const t of times) {
        print(`| ${t.name} | ${(t.calls / admits).toFixed(2)} | ${ms(t.total / admits)} | ${ms(t.self / admits)} |`);
      }
      print();
    } finally {
      client.release();
    }
  });
  await withDatabase('insert', false, async (db) => {
    await db.pool.query(`CREATE TABLE plain_inbox (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, provider text NOT NULL, delivery_key text NOT NULL,
      event_type text NOT NULL, subject text, payload jsonb NOT NULL, headers jsonb NOT NULL DEFAULT '{}',
      received_at timestamptz NOT NULL DEFAULT now(), UNIQUE (provider, delivery_key))`);
    const client = await db.pool.connect();
    try {
      const wall = await timeOneClient(client, (seq) => client.query(
        `INSERT INTO plain_inbox (provider, delivery_key, event_type, subject, payload, headers)
         VALUES ('github', $1, 'push', $2, $3, '{}')`, [`d-${seq}`, subjectOf(seq % scopes), makePayload(subjectOf(seq % scopes), seq)]));
      rows.push(`| plain single-row INSERT | ${ms(wall)} | — |`);
    } finally {
      client.release();
    }
  });
  for (const perKeyQueue of [false, true]) {
    await withDatabase('add_job', false, async (db) => {
      await migrateGraphile(db.url);
      const client = await db.pool.connect();
      try {
        const wall = await timeOneClient(client, (seq) => addGraphileJob(client, { key: subjectOf(seq % scopes), seq }, perKeyQueue));
        const addJob = (await functionTimes(client, 'graphile_worker')).find((t) => t.name === 'add_job');
        rows.push(`| graphile_worker.add_job${perKeyQueue ? ', queue_name per key' : ''} | ${ms(wall)} | ` +
          `${addJob ? ms(addJob.total / addJob.calls) : '—'} |`);
      } finally {
        client.release();
      }
    });
  }
  for (const mode of ['unordered', 'ordered'] as const) {
    await withDatabase('send', false, async (db) => {
      const queue = await startPgBoss({ connectionString: db.url, poolSize: 2, mode });
      const client = await db.pool.connect();
      try {
        // pg-boss sends on its own pool: this client only resets the counters.
        const wall = await timeOneClient(client, (seq) => sendPgBossJob(queue, { key: subjectOf(seq % scopes), seq }));
        rows.push(`| pg-boss send (${mode === 'ordered' ? 'key_strict_fifo, singletonKey' : 'standard queue'}) | ${ms(wall)} | — |`);
      } finally {
        client.release();
        await queue.stop();
      }
    });
  }
  print('| call | wall ms per call | server ms per call (function time) |');
  print('|---|---:|---:|');
  for (const row of rows) print(row);
  print();
}

async function statementsInsideAdmit(): Promise<void> {
  const sample = Math.min(calls, 500);
  print(`### The statements inside wharf.admit (auto_explain, ${sample} calls, one client)`);
  print();
  await withDatabase('admit_statements', true, async (db) => {
    await setupWharfInstallation(db.pool, scopes);
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    const notices: string[] = [];
    client.on('notice', (notice) => notices.push(notice.message ?? ''));
    try {
      for (let seq = 0; seq < warm; seq += 1) await admitPush(client, `w-${seq}`, seq % scopes, 1_000_000 + seq);
      await client.query(`LOAD 'auto_explain'`);
      await client.query(`SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on;
                          SET auto_explain.log_level = notice; SET auto_explain.log_format = 'text'`);
      notices.length = 0;
      let wall = 0;
      for (let seq = 0; seq < sample; seq += 1) {
        const began = performance.now();
        await admitPush(client, `d-${seq}`, seq % scopes, seq);
        wall += performance.now() - began;
      }
      const byStatement = new Map<string, { count: number; ms: number }>();
      for (const notice of notices) {
        const duration = /duration: ([\d.]+) ms/.exec(notice);
        const text = /Query Text: ([\s\S]*?)(?:\n[A-Z][a-z]+ |\n[A-Z][a-zA-Z ]+ on |\n\s*->|$)/.exec(notice);
        if (!duration) continue;
        const key = (text?.[1] ?? '?').replace(/\s+/g, ' ').trim().slice(0, 110);
        const entry = byStatement.get(key) ?? { count: 0, ms: 0 };
        entry.count += 1;
        entry.ms += Number(duration[1]);
        byStatement.set(key, entry);
      }
      print(`Wall time per admit in this loop: ${ms(wall / sample)} ms (auto_explain's own cost included).`);
      print();
      print('| statement (first 110 characters) | per admit | ms per admit |');
      print('|---|---:|---:|');
      for (const [key, entry] of [...byStatement].sort((a, b) => b[1].ms - a[1].ms).slice(0, 25)) {
        print(`| \`${key.replace(/\|/g, '\\|')}\` | ${(entry.count / sample).toFixed(2)} | ${ms(entry.ms / sample)} |`);
      }
      print();
    } finally {
      await client.end();
    }
  });
}

async function drainProfile(label: string, events: number, drainScopes: number, concurrency: number): Promise<void> {
  await withDatabase('drain', true, async (db) => {
    const connectionId = await setupWharfInstallation(db.pool, 0);
    await loadWharfBacklog(db.pool, connectionId, events, drainScopes);
    await db.pool.query('VACUUM ANALYZE');
    const before = await db.pool.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
    await db.pool.query('SELECT pg_stat_reset()');
    const tracker = new HandlingTracker();
    const began = performance.now();
    const consumer = await startWharfConsumer(db, concurrency, (mark) => tracker.record(mark.key, mark.seq), (error) => tracker.fail(error));
    try {
      await tracker.waitFor(events, 600_000);
    } finally {
      await consumer.stop();
    }
    const wallMs = performance.now() - began;
    const client = await db.pool.connect();
    try {
      const times = await functionTimes(client, 'wharf');
      const { rows: wal } = await client.query<{ bytes: string }>(
        'SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint AS bytes', [before.rows[0]?.lsn]);
      const { rows: tables } = await client.query<{ relname: string; ins: string; upd: string; hot: string; del: string }>(
        `SELECT relname, n_tup_ins AS ins, n_tup_upd AS upd, n_tup_hot_upd AS hot, n_tup_del AS del
           FROM pg_stat_user_tables WHERE schemaname = 'wharf' AND (n_tup_ins + n_tup_upd + n_tup_del) > 0 ORDER BY relname`);
      print(`### ${label}: ${events.toLocaleString('en-US')} events over ${drainScopes.toLocaleString('en-US')} scopes, concurrency ${concurrency}`);
      print();
      print(`Wall ${(wallMs / 1000).toFixed(2)} s = ${(events / (wallMs / 1000)).toFixed(0)} events/s, ` +
        `${ms(wallMs / events)} ms of wall time per event; WAL ${(Number(wal[0]?.bytes) / events).toFixed(0)} bytes per event ` +
        '(server-wide, so other sessions on this server are included).');
      print();
      print('| function | calls per event | total ms per event | self ms per event | mean ms per call |');
      print('|---|---:|---:|---:|---:|');
      for (const t of times.filter((t) => t.calls > 0).slice(0, 12)) {
        print(`| ${t.name} | ${(t.calls / events).toFixed(3)} | ${ms(t.total / events)} | ${ms(t.self / events)} | ${ms(t.total / t.calls)} |`);
      }
      print();
      print('| table | inserts per event | updates per event | of which HOT | deletes per event |');
      print('|---|---:|---:|---:|---:|');
      for (const t of tables) {
        const upd = Number(t.upd);
        print(`| ${t.relname} | ${(Number(t.ins) / events).toFixed(2)} | ${(upd / events).toFixed(2)} | ` +
          `${upd ? `${((Number(t.hot) / upd) * 100).toFixed(0)} %` : '—'} | ${(Number(t.del) / events).toFixed(2)} |`);
      }
      print();
    } finally {
      client.release();
    }
  });
}

const only = (process.env.PROFILE_ONLY ?? 'admission,statements,drains').split(',');
if (only.includes('admission')) await admissionPerCall();
if (only.includes('statements')) await statementsInsideAdmit();
if (only.includes('drains')) {
  const events = Number(process.env.PROFILE_DRAIN_EVENTS ?? 10_000);
  await drainProfile('Unordered drain', events, events, 8);
  await drainProfile('Ordered drain', events, scopes, 8);
}
console.log(out.join('\n'));
process.exit(0);
