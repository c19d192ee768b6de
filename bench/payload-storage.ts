// What storing the payload as `jsonb` (today's column) costs against `json`
// (the text received, kept as it came) at each place Wharf touches it
// (issue 54, item 2):
//   1. admission: one INSERT of one ~2 KB GitHub push passed as a text
//      parameter (round trip and the backend's CPU per call), and the input
//      function alone (jsonb_in against json_in) server-side;
//   2. the drain: claimed rows' payloads read out to the client, batches of 8
//      and 100 (round trip and backend CPU per row), and server-side alone
//      (EXPLAIN ANALYZE of `payload::text`, which runs the output function);
//   3. search: `@>` on 100,000 rows, jsonb with gin (payload jsonb_path_ops)
//      against json with gin ((payload::jsonb) jsonb_path_ops) and the query
//      written `payload::jsonb @> …`, each also unindexed; the index sizes;
//   4. storage: heap and TOAST bytes per row after VACUUM;
//   5. reading one field per row (`payload->'repository'->>'full_name'`, as
//      destination filters do) and a jsonpath walk (as erasure does) over
//      100,000 rows.
//
//   npx tsx bench/payload-storage.ts
// (DATABASE_URL = a maintenance database URL; the backend CPU figures read
// /proc, so they need the server on this machine, else they print n/a.)
//
// Two tables alike but for the payload's type (id bigint identity,
// workspace_id bigint, payload), loaded set-based with the same texts. Every
// figure is taken call by call with the two tables alternated (and which one
// goes first alternated too), so that the load of a shared machine falls on
// both alike; the ratios are json over jsonb, with the spread of the paired
// per-call ratios beside the ratio of the medians.
import pg from 'pg';
import { withBenchDatabase } from './databases.js';
import { makePayload, payloadTemplate } from './payload.js';
import { processCpuMicros } from './process-cpu.js';
import { percentile, summarize } from './stats.js';

const serverUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const rows = 100_000;
const repositories = 1_000;
const workspaces = 10;
const admissionCalls = 1_500;
const parseRows = 20_000;
const parseCalls = 7;
const drainCalls: Record<number, number> = { 8: 400, 100: 150 };
const searchCalls = 40;
const scanCalls = 5;
const warmupCalls = 20;

type Kind = 'jsonb' | 'json';
const kinds: readonly Kind[] = ['jsonb', 'json'];

/** One measured call; a figure the call has no way to give is undefined. */
interface Call {
  ms: number;
  cpuUs: number | undefined;
  buffers?: number;
  rows?: number;
  scan?: string;
}

interface Storage {
  heap: number;
  toast: number;
  toastIndex: number;
  /** Average pg_column_size: the payload as stored, compressed or not. */
  column: number;
  /** Average bytes of payload::text: what the client receives. */
  text: number;
  compressed: number;
  outOfLine: number;
}

interface PlanNode {
  'Node Type': string;
  'Actual Rows': number;
  'Shared Hit Blocks': number;
  'Shared Read Blocks': number;
  Plans?: PlanNode[];
}

/**
 * Row g's payload as SQL text: the benchmark's push with its key, seq and
 * repository spliced in, the same text makePayload gives (checked below), so
 * that both tables hold what a receiver would have received.
 */
const spliced = (g: string) => `replace(replace(${pg.escapeLiteral(payloadTemplate)}::text,
    '"key":"","seq":0', '"key":"repo:acme/r' || (${g} % ${repositories}) || '","seq":' || ${g}),
    '"full_name":""', '"full_name":"acme/r' || (${g} % ${repositories}) || '"')`;

const textOf = (seq: number) => JSON.stringify(makePayload(`repo:acme/r${seq % repositories}`, seq));

/** A search for one repository's pushes, as the console sends it. */
const containment = (repository: number) =>
  pg.escapeLiteral(JSON.stringify({ repository: { full_name: `acme/r${repository % repositories}` } }));

/** Deterministic ids, so that two runs read the same rows. */
function randomIds(seed: number): (count: number) => number[] {
  let state = seed >>> 0;
  const next = () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
  return (count) => {
    const ids = new Set<number>();
    while (ids.size < count) ids.add(1 + Math.floor(next() * rows));
    return [...ids];
  };
}

const scanOf = (node: PlanNode): PlanNode => (node['Node Type'].endsWith('Scan') || !node.Plans?.[0] ? node : scanOf(node.Plans[0]));

/** Calls `run` for both tables `calls` times, alternating which goes first. */
async function interleave(calls: number, run: (kind: Kind, call: number) => Promise<Call>): Promise<Record<Kind, Call[]>> {
  const measured: Record<Kind, Call[]> = { jsonb: [], json: [] };
  for (let call = 0; call < calls; call += 1) {
    for (const kind of call % 2 === 0 ? kinds : [...kinds].reverse()) measured[kind].push(await run(kind, call));
  }
  return measured;
}

interface Row {
  figure: string;
  jsonb: number[];
  json: number[];
  digits: number;
  /** False where a ratio would mislead (a share of next to nothing on both sides). */
  ratio?: boolean;
}

const format = (value: number | undefined, digits: number) =>
  value === undefined || Number.isNaN(value) ? 'n/a'
    : value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

/**
 * Prints a table of medians and their ratio json/jsonb. Where both sides hold
 * one sample per call, the p25–p75 of the per-call ratios says how far the
 * pairs disagree (the machine's noise, not a confidence interval).
 */
function printTable(title: string, tableRows: Row[]): void {
  console.log(`\n### ${title}\n`);
  console.log('| figure | jsonb | json | json/jsonb | per-call ratios, p25–p75 |');
  console.log('|---|---:|---:|---:|---:|');
  for (const row of tableRows) {
    const jsonb = row.jsonb.length > 0 ? summarize(row.jsonb).median : undefined;
    const json = row.json.length > 0 ? summarize(row.json).median : undefined;
    const ratio = row.ratio === false ? '–'
      : jsonb !== undefined && json !== undefined && jsonb !== 0 ? `${(json / jsonb).toFixed(2)}×` : 'n/a';
    let spread = '–';
    if (row.jsonb.length > 1 && row.jsonb.length === row.json.length) {
      const ratios = row.json.map((value, i) => value / (row.jsonb[i] ?? Number.NaN)).filter(Number.isFinite).sort((a, b) => a - b);
      if (ratios.length > 0) spread = `${percentile(ratios, 25).toFixed(2)}–${percentile(ratios, 75).toFixed(2)}×`;
    }
    console.log(`| ${row.figure} | ${format(jsonb, row.digits)} | ${format(json, row.digits)} | ${ratio} | ${spread} |`);
  }
}

/** A per-call figure scaled (e.g. to µs per row); calls without it are left out. */
const pick = (calls: Call[], figure: (call: Call) => number | undefined, scale = 1): number[] =>
  calls.map(figure).filter((value): value is number => value !== undefined).map((value) => value * scale);

const rowOf = (figure: string, measured: Record<Kind, Call[]>, value: (call: Call) => number | undefined, scale: number, digits: number): Row =>
  ({ figure, jsonb: pick(measured.jsonb, value, scale), json: pick(measured.json, value, scale), digits });

const single = (figure: string, values: Record<Kind, number>, digits: number): Row =>
  ({ figure, jsonb: [values.jsonb], json: [values.json], digits });

const started = new Date();
console.log(`payload-storage: started ${started.toISOString()}`);

await withBenchDatabase(serverUrl, 'payload_storage', { wharf: false, poolSize: 2 }, async (db) => {
  const session = await db.connect();
  // Per-row costs, not parallelism: parallel workers' CPU is not this
  // backend's, and on a shared two-core machine they measure its load. JIT
  // compiles the costlier json scans only, which would time the compiler.
  await session.query('SET max_parallel_workers_per_gather = 0');
  await session.query('SET jit = off');
  const pid = (await session.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  const cpu = () => processCpuMicros(pid).catch(() => undefined);

  /** The client's round trip of `query` and the backend's CPU over it. */
  const timed = async (query: () => Promise<unknown>): Promise<Call> => {
    const cpuBefore = await cpu();
    const began = performance.now();
    await query();
    const ms = performance.now() - began;
    const cpuAfter = await cpu();
    return { ms, cpuUs: cpuBefore === undefined || cpuAfter === undefined ? undefined : cpuAfter - cpuBefore };
  };

  /** The server's execution time and buffers of `sql` (EXPLAIN ANALYZE), with the backend's CPU over the call. */
  const explained = async (sql: string): Promise<Call> => {
    const cpuBefore = await cpu();
    const { rows: plan } = await session.query<{ 'QUERY PLAN': [{ Plan: PlanNode; 'Execution Time': number }] }>(
      `EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, COSTS OFF, FORMAT JSON) ${sql}`);
    const cpuAfter = await cpu();
    const [top] = plan[0]!['QUERY PLAN'];
    const scan = scanOf(top.Plan);
    return {
      ms: top['Execution Time'],
      cpuUs: cpuBefore === undefined || cpuAfter === undefined ? undefined : cpuAfter - cpuBefore,
      buffers: top.Plan['Shared Hit Blocks'] + top.Plan['Shared Read Blocks'],
      rows: scan['Actual Rows'],
      scan: scan['Node Type'],
    };
  };

  const table = (kind: Kind, prefix = 'payload') => `${prefix}_${kind}`;
  for (const prefix of ['payload', 'admit']) {
    for (const kind of kinds) {
      await session.query(`CREATE TABLE ${table(kind, prefix)} (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                             workspace_id bigint NOT NULL, payload ${kind} NOT NULL)`);
    }
  }

  console.log(`Two tables (id bigint identity, workspace_id bigint, payload jsonb | json), ${rows.toLocaleString('en-US')} rows each `
    + `of the benchmark's GitHub push (${textOf(7).length.toLocaleString('en-US')} bytes of JSON text, ${repositories} repositories); `
    + 'one session, max_parallel_workers_per_gather = 0, jit = off.');

  // ---------------------------------------------------------------- fixtures
  const load: Record<Kind, number> = { jsonb: 0, json: 0 };
  for (const kind of kinds) {
    const began = performance.now();
    await session.query(`INSERT INTO ${table(kind)} (workspace_id, payload)
                         SELECT g % ${workspaces}, (${spliced('g')})::${kind} FROM generate_series(1, ${rows}) g ORDER BY g`);
    load[kind] = ((performance.now() - began) * 1000) / rows;
  }
  // The splice must give the texts the receiver would store, else the json
  // table would measure some other document.
  const { rows: [check] } = await session.query<{ json: string; same: boolean; jsonbText: string }>(
    `SELECT j.payload::text AS json, j.payload::jsonb = b.payload AS same, b.payload::text AS "jsonbText"
       FROM ${table('json')} j JOIN ${table('jsonb')} b USING (id) WHERE id = 7`);
  if (check?.json !== textOf(7) || !check.same) throw new Error('the spliced payload is not makePayload\'s text');
  for (const kind of kinds) await session.query(`VACUUM ANALYZE ${table(kind)}`);

  // ---------------------------------------------------------------- 4. storage
  // Taken here, on the freshly vacuumed tables before any index exists;
  // printed with the others below.
  const storage = {} as Record<Kind, Storage>;
  for (const kind of kinds) {
    const { rows: [sizes] } = await session.query<{ heap: string; toast: string; toast_index: string; toast_name: string }>(
      `SELECT pg_relation_size(c.oid) AS heap, pg_relation_size(c.reltoastrelid) AS toast,
              pg_indexes_size(c.reltoastrelid) AS toast_index, c.reltoastrelid::regclass::text AS toast_name
         FROM pg_class c WHERE c.oid = '${table(kind)}'::regclass`);
    const { rows: [values] } = await session.query<{ column: string; text: string; compressed: string }>(
      `SELECT avg(pg_column_size(payload)) AS column, avg(octet_length(payload::text)) AS text,
              count(*) FILTER (WHERE pg_column_compression(payload) IS NOT NULL) AS compressed
         FROM ${table(kind)}`);
    const { rows: [toasted] } = await session.query<{ values: string }>(
      `SELECT count(DISTINCT chunk_id) AS values FROM ${sizes!.toast_name}`);
    storage[kind] = {
      heap: Number(sizes!.heap), toast: Number(sizes!.toast), toastIndex: Number(sizes!.toast_index),
      column: Number(values!.column), text: Number(values!.text), compressed: Number(values!.compressed), outOfLine: Number(toasted!.values),
    };
  }
  const perRow = (figure: (kind: Kind) => number) => ({ jsonb: figure('jsonb') / rows, json: figure('json') / rows });
  const storageRows: Row[] = [
    single('heap bytes per row (pg_relation_size / rows, after VACUUM)', perRow((kind) => storage[kind].heap), 0),
    single('TOAST relation, bytes (its heap and index, whole table)',
      { jsonb: storage.jsonb.toast + storage.jsonb.toastIndex, json: storage.json.toast + storage.json.toastIndex }, 0),
    {
      ...single('TOAST share of heap + TOAST, %', {
        jsonb: (100 * (storage.jsonb.toast + storage.jsonb.toastIndex)) / (storage.jsonb.heap + storage.jsonb.toast + storage.jsonb.toastIndex),
        json: (100 * (storage.json.toast + storage.json.toastIndex)) / (storage.json.heap + storage.json.toast + storage.json.toastIndex),
      }, 2),
      ratio: false,
    },
    single('payloads stored out of line (in TOAST), %', perRow((kind) => 100 * storage[kind].outOfLine), 1),
    single('payloads stored compressed (pglz), %', perRow((kind) => 100 * storage[kind].compressed), 1),
    single('payload as stored, bytes (avg pg_column_size)', { jsonb: storage.jsonb.column, json: storage.json.column }, 0),
    single('payload as text to the client, bytes (avg octet_length(payload::text))', { jsonb: storage.jsonb.text, json: storage.json.text }, 0),
    single('bulk load, µs per row (one INSERT … SELECT each, run once, not interleaved)', load, 2),
  ];

  // ---------------------------------------------------------------- 1. admission
  const insert = (kind: Kind, call: number) => timed(() => session.query(
    `INSERT INTO ${table(kind, 'admit')} (workspace_id, payload) VALUES ($1, $2::${kind})`,
    [call % workspaces, textOf(rows + call)]));
  const admissionRound = async () => {
    await interleave(warmupCalls, insert);
    return interleave(admissionCalls, insert);
  };
  const admitted = await admissionRound();
  // The input functions alone: each row's text parsed into the type and
  // counted, less the same text counted as text, on the same calls.
  const parsed = await interleave(parseCalls, async (kind) => {
    const typed = await explained(`SELECT count((${spliced('g')})::${kind}) FROM generate_series(1, ${parseRows}) g`);
    const asText = await explained(`SELECT count(${spliced('g')}) FROM generate_series(1, ${parseRows}) g`);
    return { ms: typed.ms - asText.ms, cpuUs: typed.cpuUs === undefined || asText.cpuUs === undefined ? undefined : typed.cpuUs - asText.cpuUs };
  });
  // The search index a deployment may add makes a json admission parse the
  // text into jsonb as well, for the expression's entries.
  await session.query(`CREATE INDEX ON ${table('jsonb', 'admit')} USING gin (payload jsonb_path_ops)`);
  await session.query(`CREATE INDEX ON ${table('json', 'admit')} USING gin ((payload::jsonb) jsonb_path_ops)`);
  const admittedIndexed = await admissionRound();
  printTable(`1. Admission: one INSERT of one ${textOf(rows).length.toLocaleString('en-US')}-byte push as a text parameter `
    + `(medians of ${admissionCalls.toLocaleString('en-US')} interleaved calls)`, [
    rowOf('round trip, µs', admitted, (call) => call.ms, 1000, 0),
    rowOf('backend CPU, µs', admitted, (call) => call.cpuUs, 1, 0),
    rowOf('with the search index (GIN jsonb_path_ops; json: on payload::jsonb): round trip, µs', admittedIndexed, (call) => call.ms, 1000, 0),
    rowOf('with the search index: backend CPU, µs', admittedIndexed, (call) => call.cpuUs, 1, 0),
    rowOf(`input function alone (jsonb_in / json_in), server time per payload, µs (${parseRows.toLocaleString('en-US')} rows a call, ${parseCalls} calls)`,
      parsed, (call) => call.ms, 1000 / parseRows, 2),
    rowOf('input function alone, backend CPU per payload, µs', parsed, (call) => call.cpuUs, 1 / parseRows, 2),
  ]);

  // ---------------------------------------------------------------- 2. the drain
  const drainRows: Row[] = [];
  const nextIds = randomIds(54);
  for (const batch of [8, 100]) {
    const calls = drainCalls[batch]!;
    const idSets = Array.from({ length: calls + warmupCalls }, () => nextIds(batch));
    const select = (kind: Kind, call: number) => timed(async () => {
      const result = await session.query(`SELECT payload FROM ${table(kind)} WHERE id = ANY($1::bigint[])`, [idSets[call]]);
      if (result.rowCount !== batch) throw new Error(`read ${result.rowCount} rows of ${batch}`);
    });
    await interleave(warmupCalls, (kind, call) => select(kind, calls + call));
    const client = await interleave(calls, select);
    // EXPLAIN ANALYZE sends no rows, so `payload::text` makes it run the
    // output function (jsonb_out, or json_out's copy) that sending them runs.
    const server = await interleave(calls, (kind, call) =>
      explained(`SELECT payload::text FROM ${table(kind)} WHERE id = ANY('{${idSets[call]!.join(',')}}'::bigint[])`));
    drainRows.push(
      rowOf(`batch of ${batch}: round trip per row, µs (pg parses both with JSON.parse)`, client, (call) => call.ms, 1000 / batch, 1),
      rowOf(`batch of ${batch}: backend CPU per row, µs`, client, (call) => call.cpuUs, 1 / batch, 1),
      rowOf(`batch of ${batch}: server only, EXPLAIN ANALYZE of payload::text, execution per row, µs`, server, (call) => call.ms, 1000 / batch, 1),
      rowOf(`batch of ${batch}: server only, buffers per row`, server, (call) => call.buffers, 1 / batch, 2),
    );
  }

  // The whole table read out server-side: per-row figures that per-call
  // overheads do not blur.
  const scan = (sqlOf: (kind: Kind) => string) => interleave(scanCalls, (kind) => explained(sqlOf(kind)));
  const output = await scan((kind) => `SELECT count(payload::text) FROM ${table(kind)}`);
  drainRows.push(
    rowOf(`every row's payload::text over ${rows.toLocaleString('en-US')} rows (seq scan), execution per row, µs`, output, (call) => call.ms, 1000 / rows, 2),
    rowOf('the same, backend CPU per row, µs', output, (call) => call.cpuUs, 1 / rows, 2),
  );
  printTable(`2. The drain: claimed rows' payloads out as text (medians of ${drainCalls[8]} calls of 8, `
    + `${drainCalls[100]} of 100, ${scanCalls} whole-table scans; random ids)`, drainRows);

  // ---------------------------------------------------------------- 3. search
  const search = (kind: Kind, repository: number) =>
    `SELECT id FROM ${table(kind)} WHERE payload${kind === 'json' ? '::jsonb' : ''} @> ${containment(repository)}::jsonb`;
  const unindexed = await interleave(scanCalls, (kind, call) => explained(search(kind, 37 * call + 11)));
  const build: Record<Kind, number> = { jsonb: 0, json: 0 };
  const indexBytes: Record<Kind, number> = { jsonb: 0, json: 0 };
  for (const kind of kinds) {
    const began = performance.now();
    await session.query(`CREATE INDEX ${table(kind)}_search ON ${table(kind)} USING gin ((payload${kind === 'json' ? '::jsonb' : ''}) jsonb_path_ops)`);
    build[kind] = (performance.now() - began) / 1000;
    // The expression index's statistics come from ANALYZE; without them the
    // json side would be planned blind.
    await session.query(`ANALYZE ${table(kind)}`);
    const { rows: [size] } = await session.query<{ bytes: string }>(`SELECT pg_relation_size('${table(kind)}_search') AS bytes`);
    indexBytes[kind] = Number(size!.bytes);
  }
  await interleave(warmupCalls, (kind, call) => explained(search(kind, 13 * call + 5)));
  const indexed = await interleave(searchCalls, (kind, call) => explained(search(kind, 37 * call + 11)));
  const plans = (measured: Record<Kind, Call[]>) =>
    kinds.map((kind) => `${kind}: ${[...new Set(measured[kind].map((call) => call.scan))].join(', ')}`).join('; ');
  printTable(`3. Search: payload @> '{"repository":{"full_name":"acme/r…"}}' over ${rows.toLocaleString('en-US')} rows `
    + `(medians of ${searchCalls} interleaved searches indexed, ${scanCalls} unindexed)`, [
    rowOf('indexed: execution, ms', indexed, (call) => call.ms, 1, 3),
    rowOf('indexed: backend CPU per search, µs', indexed, (call) => call.cpuUs, 1, 0),
    rowOf('indexed: buffers', indexed, (call) => call.buffers, 1, 0),
    rowOf('rows matched', indexed, (call) => call.rows, 1, 0),
    rowOf('unindexed (seq scan): execution, ms', unindexed, (call) => call.ms, 1, 1),
    rowOf('unindexed: backend CPU per search, ms', unindexed, (call) => call.cpuUs, 1 / 1000, 1),
    rowOf('unindexed: buffers', unindexed, (call) => call.buffers, 1, 0),
    single('index size, MB', { jsonb: indexBytes.jsonb / 2 ** 20, json: indexBytes.json / 2 ** 20 }, 2),
    single('index bytes per row', { jsonb: indexBytes.jsonb / rows, json: indexBytes.json / rows }, 0),
    single('CREATE INDEX, s (run once each, not interleaved)', build, 2),
  ]);
  console.log(`\nPlans: indexed ${plans(indexed)}; unindexed ${plans(unindexed)}.`);

  printTable(`4. Storage: ${rows.toLocaleString('en-US')} rows after VACUUM (one measurement each)`, storageRows);
  console.log(`\nRow 7's payload::text is the text received: json ${check.json === textOf(7) ? 'yes' : 'no'}, `
    + `jsonb ${check.jsonbText === textOf(7) ? 'yes' : 'no'} (jsonb gives ${check.jsonbText.length.toLocaleString('en-US')} bytes `
    + `for ${textOf(7).length.toLocaleString('en-US')}: its own key order and spacing).`);

  const field = await scan((kind) => `SELECT count(payload->'repository'->>'full_name') FROM ${table(kind)}`);
  // One of erasure's GitHub paths (sql/90-erasure.sql): json has no jsonpath,
  // so a json column pays a cast to jsonb first.
  const erasurePath = `'lax $.**.sender.login ? (@ == "octocat")'`;
  const walk = await scan((kind) =>
    `SELECT count(*) FROM ${table(kind)} WHERE jsonb_path_exists(payload${kind === 'json' ? '::jsonb' : ''}, ${erasurePath})`);
  printTable(`5. Reading the payload in SQL over ${rows.toLocaleString('en-US')} rows (seq scan, medians of ${scanCalls} interleaved scans)`, [
    rowOf("payload->'repository'->>'full_name' (each type's own operators): execution per row, µs", field, (call) => call.ms, 1000 / rows, 2),
    rowOf('the same, backend CPU per row, µs', field, (call) => call.cpuUs, 1 / rows, 2),
    rowOf(`jsonb_path_exists(payload, ${erasurePath}) (json: payload::jsonb): execution per row, µs`, walk, (call) => call.ms, 1000 / rows, 2),
    rowOf('the same, backend CPU per row, µs', walk, (call) => call.cpuUs, 1 / rows, 2),
  ]);
});

const ended = new Date();
console.log(`\npayload-storage: ${started.toISOString()} → ${ended.toISOString()} (${((ended.getTime() - started.getTime()) / 1000).toFixed(0)} s)`);
