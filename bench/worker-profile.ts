// Where the worker's Node CPU goes (issue 44, goal 4), beside graphile-worker:
//   npx tsx bench/worker-profile.ts [events] [concurrency] [scopes] [drains]   (DATABASE_URL = a maintenance database URL)
// Each system drains the same ordered backlog in this process, one no-op
// handler, three times (or `drains`) in turn; the last drain of each runs
// under V8's sampling CPU profiler and its sampling heap profiler, started
// after the backlog is loaded and stopped before the worker stops, so that
// they see the drain alone. Prints markdown for bench/RESULTS.md: Node CPU
// per event (process.cpuUsage, every thread: the GC's helpers included),
// the main thread's time per event by what it was doing, and the bytes
// allocated per event by the function that allocated them. Beside them, from
// the unprofiled drains: the PostgreSQL CPU of the database's backends per
// event, and the transactions the server counted per 1,000 events (its
// statistics read once every session of the consumer has exited), which say
// how many events each claim and completion carried.
//
// Wharf runs twice: with the local queue of 100 that graphile-worker's
// preset has, and with one of 200, whose claims (taken when it has drained
// to half) carry about as many events as graphile-worker's fetches of 100:
// whether fewer, larger statements would cut the CPU per event.
//
// The CPU profile samples the main thread's state, not its CPU: a sample in
// `writev` is mostly time the thread spent preempted inside the write, on a
// machine whose two cores also run the server's backends. It is shown apart.
import type { HeapProfiler } from 'node:inspector';
import { Session } from 'node:inspector/promises';
import { createBenchDatabase, type BenchDatabase } from './databases.js';
import { waitForSessionsToEnd, withApplicationName } from './drains.js';
import { HandlingTracker } from './handling-tracker.js';
import { readMark } from './payload.js';
import { meterDatabaseBackends } from './process-cpu.js';
import { loadGraphileJobs, migrateGraphile, startGraphileWorker } from './systems/graphile.js';
import { startWharfConsumer, type RunningConsumer } from './systems/wharf-consumer.js';
import { loadWharfBacklog, setupWharfInstallation, subjectOf } from './systems/wharf-inbox.js';

const serverUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const [eventsText, concurrencyText, scopesText, drainsText] = process.argv.slice(2);
const events = Number(eventsText ?? 40_000);
const concurrency = Number(concurrencyText ?? 8);
const scopes = Number(scopesText ?? 200);
const drains = Number(drainsText ?? 3);
/** Names the consumer's sessions, so that the harness waits for them alone to exit. */
const consumerApplicationName = 'worker-profile-consumer';

interface CallFrame { functionName: string; url: string; lineNumber: number }
interface CpuProfile {
  nodes: Array<{ id: number; callFrame: CallFrame; children?: number[] }>;
  samples: number[];
  timeDeltas: number[];
}
interface HeapNode { callFrame: CallFrame; selfSize: number; children: HeapNode[] }

interface System {
  label: string;
  /** Its database migrated to Wharf's schema. */
  wharf: boolean;
  prepare(db: BenchDatabase): Promise<void>;
  start(db: BenchDatabase, tracker: HandlingTracker): Promise<RunningConsumer>;
}

const wharfSystem = (localQueue: number): System => ({
  label: `Wharf createWorker, localQueue ${localQueue}`,
  wharf: true,
  async prepare(db) {
    await loadWharfBacklog(db.pool, await setupWharfInstallation(db.pool, 0), events, scopes);
  },
  start: (db, tracker) =>
    startWharfConsumer(db, concurrency, (mark) => tracker.record(mark.key, mark.seq), (error) => tracker.fail(error), localQueue),
});

const systems: System[] = [
  wharfSystem(100),
  wharfSystem(200),
  {
    label: 'graphile-worker 0.18 run(), localQueue 100',
    wharf: false,
    async prepare(db) {
      await migrateGraphile(db.url);
      await loadGraphileJobs(db.pool, Array.from({ length: events }, (_, seq) => ({ key: subjectOf(seq % scopes), seq })), true);
    },
    start: (db, tracker) => startGraphileWorker({
      connectionString: db.url, concurrency, localQueue: true,
      handle: (payload) => {
        const mark = readMark(payload);
        tracker.record(mark.key, mark.seq);
      },
    }),
  },
];

/** Which part of the program a stack belongs to: the innermost frame that names one. */
const parts: Array<[string, (frame: string) => boolean]> = [
  ['garbage collection (main thread)', (f) => f.startsWith('(garbage collector)')],
  ['writev (mostly preempted: see above)', (f) => f.startsWith('writev ')],
  ['the bench handler and its tracker', (f) => /handling-tracker|payload\.ts/.test(f)],
  ['metrics (prom-client)', (f) => /prom-client|histogram\.js|counter\.js|gauge\.js/.test(f)],
  ['pg: rows parsed (JSON, dates, numbers)', (f) => /parseRow|parseDataRowMessage|handleDataRow|textParsers|pg-types/.test(f)],
  ['pg: protocol and sockets', (f) => /pg-protocol|pg\/lib\/connection|buffer-reader|stream_base|node:net|readable|writable/.test(f)],
  ['pg: queries sent', (f) => /pg\/lib\/(client|query|utils)|pg-pool/.test(f)],
  ['Wharf worker modules', (f) => /\/worker\//.test(f)],
  ['graphile-worker modules', (f) => /graphile-worker|@graphile|grafast|pg-sql2/.test(f)],
  ['timers', (f) => /node:internal\/timers| timers /.test(f)],
  ['promises and microtasks', (f) => /runMicrotasks|processTicksAndRejections/.test(f)],
];

function frameName(frame: CallFrame): string {
  return `${frame.functionName || '(anonymous)'} ${frame.url}:${frame.lineNumber + 1}`;
}

/** Microseconds per event of the main thread, by part; idle left out. */
function cpuByPart(profile: CpuProfile): Map<string, number> {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const spent = new Map<number, number>();
  profile.samples.forEach((id, i) => spent.set(id, (spent.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
  const byPart = new Map<string, number>();
  for (const [id, micros] of spent) {
    if (byId.get(id)!.callFrame.functionName === '(idle)' || byId.get(id)!.callFrame.functionName === '(program)') continue;
    let part = 'other';
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const found = parts.find(([, matches]) => matches(frameName(byId.get(at!)!.callFrame)));
      if (found) {
        part = found[0];
        break;
      }
    }
    byPart.set(part, (byPart.get(part) ?? 0) + micros / events);
  }
  return byPart;
}

/** Bytes allocated per event, by the function that allocated them (sampled). */
function bytesBySite(head: HeapNode): Map<string, number> {
  const bySite = new Map<string, number>();
  const walk = (node: HeapNode): void => {
    const site = frameName(node.callFrame).replace(/^.*\/node_modules\//, '').replace(/file:\/\/.*\/(bench|worker)\//, '$1/');
    bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize / events);
    node.children.forEach(walk);
  };
  walk(head);
  return bySite;
}

/** Commits and rollbacks the server has counted in this database. */
async function readTransactions(db: BenchDatabase): Promise<number> {
  const { rows } = await db.pool.query<{ transactions: string }>(
    'SELECT xact_commit + xact_rollback AS transactions FROM pg_stat_database WHERE datname = current_database()');
  return Number(rows[0]!.transactions);
}

async function drain(system: System, profiled: boolean) {
  const db = await createBenchDatabase(serverUrl, 'worker_profile', { wharf: system.wharf, poolSize: concurrency + 2 });
  try {
    await system.prepare(db);
    const session = new Session();
    if (profiled) {
      session.connect();
      await session.post('Profiler.enable');
      await session.post('Profiler.setSamplingInterval', { interval: 100 });
      await session.post('HeapProfiler.enable');
      await session.post('Profiler.start');
      // Objects the GC has already taken count too: what is allocated, not what stays
      // (V8's flags, which @types/node of Node 20 does not list yet).
      const sampling: HeapProfiler.StartSamplingParameterType & Record<string, unknown> = {
        samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true,
      };
      await session.post('HeapProfiler.startSampling', sampling);
    }
    const tracker = new HandlingTracker();
    const transactionsBefore = await readTransactions(db);
    const postgres = await meterDatabaseBackends(db.pool);
    const own = process.cpuUsage();
    const began = performance.now();
    const consumer = await system.start(withApplicationName(db, consumerApplicationName), tracker);
    await tracker.waitFor(events, 600_000);
    const used = process.cpuUsage(own);
    const seconds = (performance.now() - began) / 1000;
    const postgresMicros = await postgres();
    let cpu: Map<string, number> | undefined;
    let bytes: Map<string, number> | undefined;
    if (profiled) {
      const { profile } = (await session.post('Profiler.stop')) as unknown as { profile: CpuProfile };
      const heap = (await session.post('HeapProfiler.stopSampling')) as unknown as { profile: { head: HeapNode } };
      session.disconnect();
      cpu = cpuByPart(profile);
      bytes = bytesBySite(heap.profile.head);
    }
    await consumer.stop();
    // A backend adds its counts to the server's statistics as it exits (bench/drains.ts).
    await waitForSessionsToEnd(db.pool, consumerApplicationName);
    const transactions = (await readTransactions(db)) - transactionsBefore;
    const counts = tracker.counts();
    return {
      rate: events / seconds,
      nodeMicros: (used.user + used.system) / events,
      postgresMicros: postgresMicros === undefined ? Number.NaN : postgresMicros / events,
      transactionsPerThousand: (1000 * transactions) / events,
      cpu, bytes, counts,
    };
  } finally {
    await db.drop();
  }
}

const out: string[] = [];
const print = (line = '') => {
  out.push(line);
  console.error(line);
};
print(`Ordered backlog of ${events.toLocaleString('en-US')} events over ${scopes} scopes, concurrency ${concurrency}; ${drains} drains each, in turn, the last profiled.`);
print();
const results = new Map<string, Awaited<ReturnType<typeof drain>>[]>();
for (let round = 0; round < drains; round += 1) {
  for (const system of systems) {
    const result = await drain(system, round === drains - 1);
    if (result.counts.orderViolations > 0 || result.counts.duplicates > 0) throw new Error(`${system.label}: ${JSON.stringify(result.counts)}`);
    results.set(system.label, [...(results.get(system.label) ?? []), result]);
  }
}
print('| system (unprofiled drains) | events/s | Node CPU per event, every thread | PostgreSQL CPU per event | Node + PostgreSQL | transactions per 1,000 events |');
print('|---|---:|---:|---:|---:|---:|');
for (const [label, runs] of results) {
  const plain = runs.slice(0, -1);
  const each = (figure: (run: (typeof plain)[number]) => string) => plain.map(figure).join(', ');
  print(`| ${label} | ${each((run) => run.rate.toFixed(0))} | ${each((run) => `${run.nodeMicros.toFixed(0)} µs`)} | `
    + `${each((run) => `${run.postgresMicros.toFixed(0)} µs`)} | ${each((run) => `${(run.nodeMicros + run.postgresMicros).toFixed(0)} µs`)} | `
    + `${each((run) => run.transactionsPerThousand.toFixed(1))} |`);
}
print();
const allParts = [...new Set([...results.values()].flatMap((runs) => [...(runs.at(-1)!.cpu ?? new Map()).keys()]))];
print(`| main thread, µs per event (profiled drain) | ${[...results.keys()].join(' | ')} |`);
print(`|---|${[...results.keys()].map(() => '---:').join('|')}|`);
for (const part of allParts) {
  print(`| ${part} | ${[...results.values()].map((runs) => (runs.at(-1)!.cpu?.get(part) ?? 0).toFixed(1)).join(' | ')} |`);
}
print();
for (const [label, runs] of results) {
  const bytes = runs.at(-1)!.bytes!;
  const total = [...bytes.values()].reduce((sum, n) => sum + n, 0);
  print(`${label}: ${total.toFixed(0)} bytes allocated per event; the largest sites:`);
  for (const [site, n] of [...bytes].sort((a, b) => b[1] - a[1]).slice(0, 12)) print(`- ${n.toFixed(0)} B ${site}`);
  print();
}
process.stdout.write(`${out.join('\n')}\n`);
