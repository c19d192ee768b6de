// `npm run bench:layouts`: where should a handled row live? Issue 40's item 8
// weighs the inbox's one table at fill factor 30 (every update heap-only, but
// each handled row held in pages kept 70 % empty for the replay window)
// against layouts that keep the queue's moving parts apart from the record.
//
// Each layout is a model: the columns and indexes of wharf.provider_event
// (migrations/schema.snapshot.sql) split or not, driven by the same three
// statements the inbox runs per event: an admission's INSERT, a claim's UPDATE
// of ten leases, a completion's UPDATE of ten. The claim's choice of rows (the
// scope table, `ix_scope_claim`) is the same in every layout and is left out:
// what differs is only where the updated columns live. The sustained phase
// follows bench/workloads/growth.ts's: a backlog loaded set-based (the
// "before" sizes), drained, then admissions claimed and completed as they
// come, so that a page takes new rows while the versions of its earlier ones
// are written beside them. VACUUM runs whenever 5 % of a table's rows have
// been updated since the last one (provider_event's autovacuum scale factor),
// on a connection of its own, so that the figures do not depend on when
// autovacuum wakes.
//
// Per event it reports the backend's CPU, the WAL that EXPLAIN (ANALYZE, WAL)
// counts for the statements (every statement runs under it, in every layout
// alike), VACUUM's CPU, the share of heap-only updates, and the bytes per
// stored row of heap (with TOAST) and of heap plus indexes, before and after.
import { Command, Option } from 'commander';
import type pg from 'pg';
import { createScratchDatabase } from '../cli/scratch-database.js';
import { payloadTemplate } from './payload.js';
import { processCpuMicros } from './process-cpu.js';
import { summarize } from './stats.js';

/** The record's columns as provider_event has them, less those that change after admission. */
const recordColumns = `
  id bigserial PRIMARY KEY,
  workspace_id bigint,
  provider text NOT NULL,
  delivery_key text NOT NULL,
  event_type text NOT NULL,
  subject text,
  scope_key text NOT NULL,
  source text NOT NULL,
  connection_id bigint,
  payload jsonb NOT NULL,
  headers jsonb NOT NULL DEFAULT '{}',
  received_at timestamptz NOT NULL DEFAULT now(),
  body_sha256 bytea`;

/** The columns a claim, a renewal, a completion, a failure or a replay write. */
const movingColumns = `
  state text NOT NULL DEFAULT 'QUEUED',
  attempt integer NOT NULL DEFAULT 0,
  failures integer NOT NULL DEFAULT 0,
  lease_epoch bigint NOT NULL DEFAULT 0,
  leased_until timestamptz,
  leased_by text,
  leased_at timestamptz,
  lease_token uuid,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  error_class text,
  outcome text,
  handled_at timestamptz,
  dead_at timestamptz,
  replayed_by text,
  replayed_at timestamptz,
  transient_since timestamptz`;

const recordIndexes = (table: string) => `
  CREATE UNIQUE INDEX ON ${table} (workspace_id, provider, delivery_key) NULLS NOT DISTINCT;
  CREATE INDEX ON ${table} (source, body_sha256) WHERE body_sha256 IS NOT NULL;
  CREATE INDEX ON ${table} (received_at);
  CREATE INDEX ON ${table} (scope_key, id);
  CREATE INDEX ON ${table} (workspace_id, id);`;

interface Layout {
  name: string;
  /** What it is, for the table. */
  description: string;
  ddl: string;
  /** The tables that hold an event, for sizes and VACUUM. */
  tables: string[];
  /** The table the claim and the completion update. */
  moving: string;
  /** One admission: one statement, $1 delivery key, $2 subject, $3 payload, $4 the id (given, so that admitters side by side need no RETURNING). */
  admit: string;
  /** The set-based load of `$1` queued rows (ids from 1), the payload $2. */
  load: string;
  /** The completion of the leases of ids $1. */
  complete: string;
}

const columnNames = (columns: string) => columns.split(',').map((column) => column.trim().split(/\s+/)[0]!);

/** What a completion writes, by column; the rest stay as they are. */
const completed: Record<string, string> = {
  state: `'DONE'`, outcome: `'handled'`, handled_at: 'now()', leased_until: 'NULL', leased_by: 'NULL', lease_token: 'NULL',
};

const insertRecord = (table: string) =>
  `INSERT INTO ${table} (id, workspace_id, provider, delivery_key, event_type, subject, scope_key, source, connection_id, payload)`;

const loadSelect = `SELECT g, 1, 'github', 'load-' || g, 'push', 'repo:acme/r' || (g % 200), '1:github:repo:acme/r' || (g % 200),
         'https://github.com', 1, jsonb_set($2::jsonb, '{bench}', jsonb_build_object('seq', g))
    FROM generate_series(1, $1::bigint) g ORDER BY g`;

function oneTable(fillFactor: number): Layout {
  const table = `event_ff${fillFactor}`;
  return {
    name: `one table, fill factor ${fillFactor}`,
    description: fillFactor === 30 ? 'Wharf today (provider_event)' : 'the same table packed full',
    ddl: `CREATE TABLE ${table} (${recordColumns}, ${movingColumns})
            WITH (fillfactor = ${fillFactor}, toast_tuple_target = 128, autovacuum_enabled = false);
          ${recordIndexes(table)}
          CREATE INDEX ON ${table} (workspace_id, id) WHERE dead_at IS NOT NULL;`,
    tables: [table],
    moving: table,
    admit: `${insertRecord(table)} VALUES ($4, 1, 'github', $1, 'push', $2, '1:github:' || $2, 'https://github.com', 1, $3)`,
    load: `${insertRecord(table)} ${loadSelect}`,
    complete: complete(table),
  };
}

function split(stateFillFactor: number): Layout {
  const record = 'event_record';
  const state = `event_state_ff${stateFillFactor}`;
  return {
    name: `record apart, its state at fill factor ${stateFillFactor}`,
    description: 'the record insert-only at fill factor 100; the moving columns in a table of their own, keyed by the event',
    ddl: `CREATE TABLE ${record} (${recordColumns}) WITH (fillfactor = 100, toast_tuple_target = 128, autovacuum_enabled = false);
          ${recordIndexes(record)}
          CREATE TABLE ${state} (id bigint PRIMARY KEY, ${movingColumns})
            WITH (fillfactor = ${stateFillFactor}, autovacuum_enabled = false);
          CREATE INDEX ON ${state} (id) WHERE dead_at IS NOT NULL;`,
    tables: [record, state],
    moving: state,
    admit: `WITH stored AS (${insertRecord(record)} VALUES ($4, 1, 'github', $1, 'push', $2, '1:github:' || $2, 'https://github.com', 1, $3)
                            RETURNING id)
            INSERT INTO ${state} (id) SELECT id FROM stored`,
    load: `WITH stored AS (${insertRecord(record)} ${loadSelect} RETURNING id) INSERT INTO ${state} (id) SELECT id FROM stored`,
    complete: complete(state),
  };
}

/**
 * pgmq's archive: a row lives in a queue table while it is QUEUED or LEASED
 * and moves, at its completion, into a table of handled rows packed full
 * (its payload copied out of the queue's TOAST into the other's).
 */
function movedOut(): Layout {
  const queue = 'event_queue';
  const handled = 'event_handled';
  const columns = [...columnNames(recordColumns), ...columnNames(movingColumns)];
  return {
    name: 'moved out at completion',
    description: 'the queue table at fill factor 30 holds the rows not yet handled; a completion moves each into a table at fill factor 100',
    ddl: `CREATE TABLE ${queue} (${recordColumns}, ${movingColumns})
            WITH (fillfactor = 30, toast_tuple_target = 128, autovacuum_enabled = false);
          ${recordIndexes(queue)}
          CREATE TABLE ${handled} (${recordColumns.replace('bigserial', 'bigint')}, ${movingColumns})
            WITH (fillfactor = 100, toast_tuple_target = 128, autovacuum_enabled = false);
          ${recordIndexes(handled)}
          CREATE INDEX ON ${handled} (workspace_id, id) WHERE dead_at IS NOT NULL;`,
    tables: [queue, handled],
    moving: queue,
    admit: `${insertRecord(queue)} VALUES ($4, 1, 'github', $1, 'push', $2, '1:github:' || $2, 'https://github.com', 1, $3)`,
    load: `${insertRecord(queue)} ${loadSelect}`,
    complete: `WITH moved AS (DELETE FROM ${queue} WHERE id = ANY($1::bigint[]) AND state = 'LEASED' RETURNING *)
               INSERT INTO ${handled} (${columns.join(', ')})
               SELECT ${columns.map((column) => completed[column] ?? column).join(', ')} FROM moved`,
  };
}

const claim = (table: string) =>
  `UPDATE ${table} SET state = 'LEASED', attempt = attempt + 1, lease_epoch = lease_epoch + 1,
          leased_until = now() + interval '30 seconds', leased_by = 'bench', leased_at = now(), lease_token = gen_random_uuid()
    WHERE id = ANY($1::bigint[]) AND state = 'QUEUED'`;
const complete = (table: string) =>
  `UPDATE ${table} SET ${Object.entries(completed).map(([column, value]) => `${column} = ${value}`).join(', ')}
    WHERE id = ANY($1::bigint[]) AND state = 'LEASED'`;

interface Figures {
  layout: Layout;
  events: number;
  cpuMicros: number;
  vacuumCpuMicros: number;
  walBytes: number;
  walRecords: number;
  walFpi: number;
  hotShare: number;
  before: { heap: number; total: number; rows: number };
  after: { heap: number; total: number; rows: number };
}

interface WalUsage {
  'WAL Records'?: number;
  'WAL FPI'?: number;
  'WAL Bytes'?: number;
}

/** Runs `sql` under EXPLAIN (ANALYZE, WAL) and adds the WAL it wrote, triggers and CTEs included, to `wal`. */
async function run(client: pg.Client, sql: string, values: unknown[], wal: { bytes: number; records: number; fpi: number }): Promise<void> {
  const { rows } = await client.query<{ 'QUERY PLAN': [{ Plan: WalUsage }] }>(
    `EXPLAIN (ANALYZE, WAL, TIMING OFF, COSTS OFF, FORMAT JSON) ${sql}`, values);
  const plan = rows[0]!['QUERY PLAN'][0].Plan;
  wal.bytes += plan['WAL Bytes'] ?? 0;
  wal.records += plan['WAL Records'] ?? 0;
  wal.fpi += plan['WAL FPI'] ?? 0;
}

async function sizes(client: pg.Client, layout: Layout): Promise<{ heap: number; total: number; rows: number }> {
  const { rows } = await client.query<{ heap: string; total: string }>(
    `SELECT sum(pg_table_size(t::regclass)) AS heap, sum(pg_total_relation_size(t::regclass)) AS total FROM unnest($1::text[]) t`,
    [layout.tables]);
  // Events stored: a split layout's state rows are the record's; a moved-out one's rows are in one table or the other.
  const counted = layout.moving === layout.tables[0] ? layout.tables : [layout.tables[0]!];
  const { rows: count } = await client.query<{ n: string }>(
    `SELECT ${counted.map((table) => `(SELECT count(*) FROM ${table})`).join(' + ')} AS n`);
  return { heap: Number(rows[0]!.heap), total: Number(rows[0]!.total), rows: Number(count[0]!.n) };
}

interface MeasureOptions {
  backlog: number;
  events: number;
  batch: number;
  /**
   * Vacuum as autovacuum's insert trigger would (1,000 + this × rows inserted
   * since the last) instead of at 5 % of rows updated: on a table whose
   * updates are all heap-only, pruning takes the dead versions away before
   * they count, so the insert trigger is the one that fires.
   */
  vacuumInserts?: number;
  /** Connections admitting side by side; with claimers. */
  admitters: number;
  /** Connections claiming and completing side by side; unset: admissions and claims take turns on one connection. */
  claimers?: number;
}

async function measure(serverUrl: string, layout: Layout, options: MeasureOptions): Promise<Figures> {
  const db = await createScratchDatabase(serverUrl, { prefix: 'wharf_bench_layouts', poolSize: 2 });
  const client = await db.connect();
  const vacuumer = await db.connect();
  try {
    await client.query(layout.ddl);
    await client.query(layout.load, [options.backlog, payloadTemplate]);
    await client.query(`VACUUM (ANALYZE) ${layout.tables.join(', ')}`);
    const before = await sizes(client, layout);
    const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    const vacuumPid = (await vacuumer.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    const stats = async () => {
      await client.query('SELECT pg_stat_force_next_flush()');
      await client.query('SELECT 1');
      const { rows } = await vacuumer.query<{ updates: string; hot: string }>(
        `SELECT n_tup_upd AS updates, n_tup_hot_upd AS hot FROM pg_stat_user_tables WHERE relname = $1`, [layout.moving]);
      return { updates: Number(rows[0]!.updates), hot: Number(rows[0]!.hot) };
    };
    const claimSql = claim(layout.moving);
    const completeSql = layout.complete;
    const queued: number[] = Array.from({ length: options.backlog }, (_, i) => i + 1);
    // The backlog first, unmetered: the sustained phase starts on an empty queue, as growth's does.
    const unmetered = { bytes: 0, records: 0, fpi: 0 };
    while (queued.length > 0) {
      const ids = queued.splice(0, options.batch);
      await run(client, claimSql, [ids], unmetered);
      await run(client, completeSql, [ids], unmetered);
    }

    const statsBefore = await stats();
    const wal = { bytes: 0, records: 0, fpi: 0 };
    let nextId = options.backlog + 1;
    const lastId = options.backlog + options.events;
    let updatedSinceVacuum = 0;
    let insertedSinceVacuum = 0;
    let vacuumCpu = 0;
    let vacuuming: Promise<void> | undefined;
    /** Starts a VACUUM on its own connection when one is due, as autovacuum would, beside the workload. */
    const vacuumIfDue = () => {
      const due = options.vacuumInserts === undefined
        ? updatedSinceVacuum > 50 + 0.05 * (nextId - 1)
        : insertedSinceVacuum > 1_000 + options.vacuumInserts * (nextId - 1);
      if (!due || vacuuming) return;
      updatedSinceVacuum = 0;
      insertedSinceVacuum = 0;
      vacuuming = (async () => {
        const vacuumBefore = await processCpuMicros(vacuumPid);
        await vacuumer.query(`VACUUM ${layout.tables.join(', ')}`);
        vacuumCpu += (await processCpuMicros(vacuumPid)) - vacuumBefore;
      })().finally(() => {
        vacuuming = undefined;
      });
    };
    const admit = async (connection: pg.Client) => {
      const seq = nextId;
      nextId += 1;
      await run(connection, layout.admit, [`sustained-${seq}`, `repo:acme/r${seq % 200}`, payloadTemplate, seq], wal);
      queued.push(seq);
      insertedSinceVacuum += 1;
    };
    const handle = async (connection: pg.Client, ids: number[]) => {
      await run(connection, claimSql, [ids], wal);
      await run(connection, completeSql, [ids], wal);
      updatedSinceVacuum += 2 * ids.length;
      vacuumIfDue();
    };
    const others: pg.Client[] = [];
    let meter: () => Promise<number>;
    if (options.claimers === undefined) {
      // Lockstep, on one connection: a batch admitted, then claimed and completed.
      const cpuBefore = await processCpuMicros(pid);
      meter = async () => (await processCpuMicros(pid)) - cpuBefore;
      while (nextId <= lastId) {
        for (let n = 0; n < options.batch && nextId <= lastId; n += 1) await admit(client);
        await handle(client, queued.splice(0, options.batch));
      }
    } else {
      // Side by side, as a deployment runs: admitters inserting as fast as they can while claimers take what committed.
      for (let n = 0; n < options.admitters + options.claimers; n += 1) others.push(await db.connect());
      const pids = await Promise.all(others.map(async (other) =>
        (await other.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid));
      const before = await Promise.all(pids.map(processCpuMicros));
      meter = async () => (await Promise.all(pids.map(processCpuMicros))).reduce((sum, micros, i) => sum + micros - before[i]!, 0);
      let handled = 0;
      const admitters = others.slice(0, options.admitters).map(async (connection) => {
        while (nextId <= lastId) await admit(connection);
      });
      const claimers = others.slice(options.admitters).map(async (connection) => {
        while (handled < options.events) {
          const ids = queued.splice(0, options.batch);
          if (ids.length === 0) {
            await new Promise((resolve) => setTimeout(resolve, 1));
            continue;
          }
          await handle(connection, ids);
          handled += ids.length;
        }
      });
      await Promise.all([...admitters, ...claimers]);
    }
    await vacuuming;
    const cpu = await meter();
    for (const other of others) {
      await other.query('SELECT pg_stat_force_next_flush()');
      await other.query('SELECT 1');
      await other.end();
    }
    const statsAfter = await stats();
    const after = await sizes(client, layout);
    const updates = statsAfter.updates - statsBefore.updates;
    return {
      layout,
      events: options.events,
      // Per event of the sustained phase: its admission, claim and completion.
      cpuMicros: cpu / options.events,
      vacuumCpuMicros: vacuumCpu / options.events,
      walBytes: wal.bytes / options.events,
      walRecords: wal.records / options.events,
      walFpi: wal.fpi / options.events,
      hotShare: updates === 0 ? 0 : (statsAfter.hot - statsBefore.hot) / updates,
      before,
      after,
    };
  } finally {
    await client.end();
    await vacuumer.end();
    await db.drop();
  }
}

const num = (value: number, digits = 0) => value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

function render(figures: Figures[][]): string {
  const lines = [
    '| layout | backend CPU µs/event | VACUUM CPU µs/event | WAL bytes/event (records, FPI) | HOT updates | heap bytes/row before → after | heap+indexes bytes/row before → after |',
    '|---|---:|---:|---:|---:|---:|---:|',
  ];
  for (const runs of figures) {
    const m = (pick: (f: Figures) => number) => summarize(runs.map(pick)).median;
    const heapBefore = m((f) => f.before.heap / f.before.rows);
    const heapAfter = m((f) => f.after.heap / f.after.rows);
    const totalBefore = m((f) => f.before.total / f.before.rows);
    const totalAfter = m((f) => f.after.total / f.after.rows);
    lines.push(`| ${runs[0]!.layout.name} (${runs[0]!.layout.description}) | ${num(m((f) => f.cpuMicros), 1)} | ${num(m((f) => f.vacuumCpuMicros), 1)} | ` +
      `${num(m((f) => f.walBytes))} (${num(m((f) => f.walRecords), 1)}, ${num(m((f) => f.walFpi), 2)}) | ${num(100 * m((f) => f.hotShare), 1)} % | ` +
      `${num(heapBefore)} → ${num(heapAfter)} (${num(heapAfter / heapBefore, 2)}×) | ${num(totalBefore)} → ${num(totalAfter)} (${num(totalAfter / totalBefore, 2)}×) |`);
  }
  return lines.join('\n');
}

const program = new Command('bench:layouts')
  .description("the inbox's layouts weighed: CPU, WAL and bytes per row under the growth workload's sustained phase")
  .addOption(new Option('--backlog <n>', 'queued rows loaded set-based before the sustained phase').default(10_000).argParser(Number))
  .addOption(new Option('--events <n>', 'events admitted, claimed and completed one batch at a time').default(200_000).argParser(Number))
  .addOption(new Option('--batch <n>', 'events per claim and per completion').default(10).argParser(Number))
  .addOption(new Option('--repetitions <n>').default(3).argParser(Number))
  .addOption(new Option('--vacuum-inserts <fraction>', "vacuum at autovacuum's insert trigger, 1,000 + fraction × rows inserted").argParser(Number))
  .addOption(new Option('--admitters <n>', 'connections admitting side by side (with --claimers)').default(4).argParser(Number))
  .addOption(new Option('--claimers <n>', 'connections claiming and completing side by side, as a deployment runs').argParser(Number))
  .option('--layouts <names>', 'a comma-separated subset of ff30,ff100,split50,split100,moved', 'ff30,ff100,split50,split100,moved')
  .option('--smoke', 'a few hundred events, one repetition');
program.parse();
const flags = program.opts<MeasureOptions & { repetitions: number; smoke?: boolean; layouts: string }>();
const options = flags.smoke ? { ...flags, backlog: 200, events: 500, batch: 10, repetitions: 1 } : flags;
const serverUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const known: Record<string, Layout> = { ff30: oneTable(30), ff100: oneTable(100), split50: split(50), split100: split(100), moved: movedOut() };
const layouts = flags.layouts.split(',').map((name) => {
  const layout = known[name.trim()];
  if (!layout) throw new Error(`unknown layout ${name}; choose from ${Object.keys(known).join(', ')}`);
  return layout;
});
const figures: Figures[][] = layouts.map(() => []);
for (let rep = 1; rep <= options.repetitions; rep += 1) {
  // Layouts take turns within a repetition, so a change of the machine's load falls on all of them.
  for (const [i, layout] of layouts.entries()) {
    const result = await measure(serverUrl, layout, options);
    figures[i]!.push(result);
    console.log(`${layout.name}, repetition ${rep}: ${num(result.cpuMicros, 1)} µs CPU/event, ${num(result.walBytes)} WAL bytes/event, ` +
      `heap ${num(result.before.heap / result.before.rows)} → ${num(result.after.heap / result.after.rows)} bytes/row`);
  }
}
const vacuum = options.vacuumInserts === undefined
  ? 'VACUUM at 5 % of rows updated'
  : `VACUUM at 1,000 + ${options.vacuumInserts} × rows inserted`;
console.log(`\n${options.backlog.toLocaleString('en-US')} queued rows loaded, then ${options.events.toLocaleString('en-US')} admitted, ` +
  `claimed and completed ${options.batch} at a time; ${vacuum}; medians of ${options.repetitions} repetition(s)\n`);
console.log(render(figures));
