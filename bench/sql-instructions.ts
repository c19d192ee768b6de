// What a change to the inbox's SQL costs, in instructions rather than
// seconds: the CPU instructions one PostgreSQL backend executes per admission
// and per drained event (claim + complete_many), counted by valgrind's
// callgrind. On a shared machine the timings of bench/sql-ab.ts spread by
// 10–30 % between identical databases; instruction counts repeat to within
// about 1 %, so a 3 % change is visible.
//
// The server runs under callgrind (about fifty times slower), each backend
// writing its counts to <dir>/cg.<pid> when it exits:
//   initdb -D /tmp/vg/data -A trust -U postgres     (as the postgres user)
//   valgrind --tool=callgrind --trace-children=yes --callgrind-out-file=/tmp/vg/cg.%p \
//     postgres -D /tmp/vg/data -p 5499 -c listen_addresses=127.0.0.1 -c autovacuum=off
// then, with databases on it migrated to the two commits to compare:
//   CALLGRIND_DIR=/tmp/vg npx tsx bench/sql-instructions.ts <base url> <head url> [events] [operation,…]
// (operations: admit, admit_many of 1, admit_many of 32, plain insert, drain, ordered drain; all by
// default). `plain insert` is the reference of the admission goals: the admission-cost workload's
// single-row INSERT of the same payload into a table of its own (created when missing).
//
// Each figure is marginal: a backend that does `events` operations and one
// that does three times as many are counted, and the difference is divided
// by the extra operations, so that a new backend's one-time costs (catalog
// caches, PL/pgSQL compilation) fall out. The admission figure is for a
// provider-signed GitHub push into a workspace whose installation subscribes
// to `scopes` repositories; the drain's backlog has one event per scope, the
// ordered drain's five per scope (each completion then leads its scope on
// to the next).
import { existsSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { claimEvents, completeEvents } from '../worker/sql/claim-lease.js';
import { admitPush, loadWharfBacklog, setupWharfInstallation, subjectOf } from './systems/wharf-inbox.js';
import { makePayload } from './payload.js';
import { createPlainInbox } from './systems/minimal-receiver.js';
import { plainInsert, pushDeliveries } from './workloads/admission.js';

const callgrindDir = process.env.CALLGRIND_DIR ?? '/tmp/vg';
const scopes = 1_000;
const claimBatch = 50;

const operations = ['admit', 'admit_many of 1', 'admit_many of 32', 'plain insert', 'drain', 'ordered drain'] as const;
type Operation = (typeof operations)[number];
/** Deliveries per admit_many call of each admit_many operation. */
const batchSizes: Partial<Record<Operation, number>> = { 'admit_many of 1': 1, 'admit_many of 32': 32 };
/** Events per scope in the ordered drain's backlog. */
const perScope = 5;

/** Instructions a backend executed, read from its callgrind file once it has exited. */
async function backendInstructions(pid: number): Promise<number> {
  const file = `${callgrindDir}/cg.${pid}`;
  for (let waited = 0; waited < 60_000; waited += 100) {
    if (existsSync(file)) {
      const totals = /\ntotals: (\d+)/.exec(readFileSync(file, 'utf8'));
      if (totals) return Number(totals[1]);
    }
    await sleep(100);
  }
  throw new Error(`no callgrind counts in ${file}: is the server running under callgrind, writing to ${callgrindDir}?`);
}

/** Runs `work` on a backend of its own and returns the instructions that backend executed. */
async function countBackend(url: string, work: (client: pg.Client) => Promise<void>): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  await work(client);
  await client.end();
  return backendInstructions(rows[0]!.pid);
}

/** Admissions as the edge sends them: each its own unnamed statement (admitPush). */
async function admit(client: pg.Client, count: number, label: string): Promise<void> {
  for (let seq = 0; seq < count; seq += 1) {
    await admitPush(client, `${label}-${seq}`, seq % scopes, seq, { 'x-github-event': 'push' });
  }
}

/** Admissions as the Node receiver sends them: `count` deliveries in admit_many calls of `size`, each counted per delivery. */
async function admitMany(client: pg.Client, count: number, size: number, label: string): Promise<void> {
  for (let first = 0; first < count; first += size) {
    await client.query('SELECT wharf.admit_many($1::jsonb)', [pushDeliveries(first, size, scopes, { label })]);
  }
}

/** The admission goals' reference: the same push payload, one single-row INSERT each. */
async function insertPlain(client: pg.Client, count: number, label: string): Promise<void> {
  for (let seq = 0; seq < count; seq += 1) {
    const subject = subjectOf(seq % scopes);
    await client.query(plainInsert, [`${label}-${seq}`, subject, makePayload(subject, seq)]);
  }
}

/** Claims and completions as the worker makes them (worker/sql/claim-lease.ts). */
async function drain(client: pg.Client): Promise<void> {
  for (;;) {
    const rows = await claimEvents(client, 'instructions', claimBatch);
    if (rows.length === 0) return;
    // Admission's lock order, as the worker's completion batcher passes them (one workspace here).
    rows.sort((a, b) => (a.scope_key < b.scope_key ? -1 : a.scope_key > b.scope_key ? 1 : 0));
    await completeEvents(client, rows.map((row) => ({ id: row.id, epoch: row.lease_epoch, outcome: 'handled' as const })));
  }
}

/** Instructions per operation, between `count` and 3 × `count` of them on fresh backends. */
async function marginalInstructions(url: string, operation: Operation, count: number): Promise<number> {
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  try {
    const connectionId = await setupWharfInstallation(pool, scopes);
    const measure = async (n: number): Promise<number> => {
      await pool.query('DELETE FROM wharf.provider_event');
      await pool.query('VACUUM wharf.provider_event, wharf.scope');
      const size = batchSizes[operation];
      if (operation === 'admit') return countBackend(url, (client) => admit(client, n, `${Date.now()}-${n}`));
      if (operation === 'plain insert') {
        if ((await pool.query(`SELECT to_regclass('plain_inbox') AS t`)).rows[0].t === null) await createPlainInbox(pool);
        return countBackend(url, (client) => insertPlain(client, n, `${Date.now()}-${n}`));
      }
      if (size !== undefined) return countBackend(url, (client) => admitMany(client, n, size, `${Date.now()}-${n}`));
      await loadWharfBacklog(pool, connectionId, n, operation === 'drain' ? n : n / perScope);
      return countBackend(url, drain);
    };
    const few = await measure(count);
    const many = await measure(3 * count);
    return (many - few) / (2 * count);
  } finally {
    await pool.end();
  }
}

async function main(): Promise<void> {
  const [baseUrl, headUrl, eventsText, only] = process.argv.slice(2);
  if (!baseUrl || !headUrl) {
    throw new Error('usage: CALLGRIND_DIR=<dir> tsx bench/sql-instructions.ts <base database url> <head database url> [events] [operation,…]');
  }
  const events = Number(eventsText ?? 300);
  const chosen = only ? only.split(',') : operations;
  for (const operation of operations.filter((name) => chosen.includes(name))) {
    const admits = operation === 'admit' || operation === 'plain insert' || batchSizes[operation] !== undefined;
    // admit_many of 32: whole calls, and the figure per delivery.
    const count = !admits ? 3 * events : Math.ceil(events / (batchSizes[operation] ?? 1)) * (batchSizes[operation] ?? 1);
    const [base, head] = [await marginalInstructions(baseUrl, operation, count), await marginalInstructions(headUrl, operation, count)];
    const unit = operation === 'admit_many of 1' ? 'per call' : admits ? 'per admission' : 'per drained event';
    process.stdout.write(`${operation.padEnd(13)} base ${(base / 1000).toFixed(0)}k, head ${(head / 1000).toFixed(0)}k instructions ${unit}`
      + ` (head/base ${(head / base).toFixed(3)})\n`);
  }
}

await main();
