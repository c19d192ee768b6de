// Signed GitHub deliveries through the Node receiver (server/node.ts, in a
// child process): loaded by autocannon at the direct-call clients' number of
// connections and at 64, against the minimal receiver (minimal-receiver.ts)
// at the same two and against direct wharf.admit calls in the same database;
// and paced at the latency workload's rate with coalescing on and off, for
// each request's time to its answer.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { Agent, request } from 'node:http';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import type pg from 'pg';
import { adapters, signGitHubBody } from '../../edge/adapters/index.js';
import { withBenchDatabase, type BenchDatabase } from '../databases.js';
import { makePayload } from '../payload.js';
import type { Log } from '../results.js';
import { meterDatabaseBackends, meterProcesses } from '../process-cpu.js';
import type { BenchSettings } from '../settings.js';
import { latencySummary, type LatencySummary } from '../stats.js';
import { createPlainInbox } from './minimal-receiver.js';
import { admitPush, setupWharfInstallation, subjectOf } from './wharf-inbox.js';

/** CPU per delivery in µs, where the machine could read it (bench/process-cpu.ts). */
export interface CpuPerDelivery {
  /** The receiver's process (HTTP, verification, the pg client). */
  receiver?: number;
  /** This process: autocannon for the receiver, the pg client for the direct calls. */
  loadGenerator: number;
  /** The database's backends serving the deliveries. */
  postgres?: number;
}

export interface Throughput {
  perSecond: number;
  cpu: CpuPerDelivery;
}

export type ReceiverKind = 'wharf' | 'minimal';

/** The second number of connections the receivers are loaded with, besides the direct calls' clients (issue 33). */
export const manyConnections = 64;

export interface ReceiverSample {
  /** By receiver, then by autocannon connections. */
  throughput: Record<ReceiverKind, Map<number, Throughput>>;
  direct: Throughput;
  /** The Node receiver at the latency workload's rate, with coalescing on and off. */
  latency: { coalesced: LatencySummary; uncoalesced: LatencySummary };
}

/**
 * Deliveries sent before either side is timed, a tenth of the timed ones: the
 * receiver is a new process, whose first seconds go to compiling its code
 * (about twice its steady CPU per request in a profile), and a server is
 * judged in its steady state; the direct side warms up alike.
 */
const warmupShare = 0.1;

/** Starts metering this process, `receiverPid` and the database's backends; the function it returns gives CPU per delivery. */
async function meterDeliveries(pool: pg.Pool, receiverPid: number | undefined, deliveries: number) {
  const own = process.cpuUsage();
  const receiver = receiverPid === undefined ? undefined : await meterProcesses([receiverPid]);
  const postgres = await meterDatabaseBackends(pool);
  return async (): Promise<CpuPerDelivery> => {
    const used = process.cpuUsage(own);
    const postgresMicros = await postgres();
    return {
      loadGenerator: (used.user + used.system) / deliveries,
      ...(receiver ? { receiver: (await receiver()) / deliveries } : {}),
      ...(postgresMicros !== undefined ? { postgres: postgresMicros / deliveries } : {}),
    };
  };
}

const serverScript = fileURLToPath(new URL('./edge-server-process.ts', import.meta.url));
const tsx = fileURLToPath(new URL('../../node_modules/.bin/tsx', import.meta.url));

export interface SignedDelivery {
  headers: Record<string, string>;
  body: string;
}

export async function signDeliveries(secret: string, count: number, scopes: number): Promise<SignedDelivery[]> {
  return Promise.all(Array.from({ length: count }, async (_, seq) => {
    const body = JSON.stringify(makePayload(subjectOf(seq % scopes), seq));
    return {
      body,
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'push',
        'x-github-delivery': `receiver-${seq}`,
        'x-hub-signature-256': await signGitHubBody(secret, body),
      },
    };
  }));
}

interface RunningReceiver {
  url: string;
  pid: number;
}

/** A receiver in a process of its own (edge-server-process.ts) on `db`, for the length of `work`. */
async function withReceiver<T>(
  kind: ReceiverKind, db: BenchDatabase, secret: string, env: Record<string, string>, work: (receiver: RunningReceiver) => Promise<T>,
): Promise<T> {
  const child: ChildProcess = spawn(tsx, [serverScript, kind], {
    env: { ...process.env, ...env, DATABASE_URL: db.url, GITHUB_APP_BENCH_WEBHOOK_SECRET: secret },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
    return await work(JSON.parse(line) as RunningReceiver);
  } finally {
    child.kill('SIGTERM');
    await once(child, 'exit');
  }
}

/** A fresh database set up for `kind`: Wharf's installation, or the minimal receiver's plain_inbox. */
function withReceiverDatabase<T>(settings: BenchSettings, kind: ReceiverKind, work: (db: BenchDatabase) => Promise<T>): Promise<T> {
  return withBenchDatabase(settings.serverUrl, `receiver_${kind}`, { wharf: kind === 'wharf', poolSize: 2 }, async (db) => {
    if (kind === 'wharf') await setupWharfInstallation(db.pool, settings.orderedScopes);
    else await createPlainInbox(db.pool);
    return work(db);
  });
}

async function storedRows(db: BenchDatabase, kind: ReceiverKind): Promise<number> {
  const { rows } = await db.pool.query<{ n: string }>(
    `SELECT count(*) AS n FROM ${kind === 'wharf' ? 'wharf.provider_event' : 'plain_inbox'}`);
  return Number(rows[0]?.n);
}

/**
 * Sends deliveries[from … from+amount-1] to `url` with autocannon at
 * `connections`; throws unless every one was answered 2xx.
 */
async function sendAll(url: string, connections: number, deliveries: SignedDelivery[], from: number, amount: number) {
  let next = from;
  const result = await autocannon({
    url: `${url}/hooks/github/bench`,
    // autocannon refuses more connections than requests (a smoke run's warm-up).
    connections: Math.min(connections, amount),
    amount,
    // A run of `amount` requests ends at autocannon's first sample after
    // them, once a second by default: its duration, and the rate, would
    // be whole seconds.
    sampleInt: 10,
    requests: [{
      method: 'POST',
      setupRequest: (request) => {
        const delivery = deliveries[next++]!;
        return { ...request, headers: delivery.headers, body: delivery.body };
      },
    }],
  });
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return result;
}

/** Requests per second through `kind` at `connections`, after a warm-up, with the CPU each delivery took. */
async function measureThroughput(
  settings: BenchSettings, kind: ReceiverKind, connections: number, secret: string, deliveries: SignedDelivery[],
): Promise<Throughput> {
  const requests = settings.receiverRequests;
  const warmup = Math.ceil(requests * warmupShare);
  return withReceiverDatabase(settings, kind, async (db) => withReceiver(kind, db, secret, {}, async ({ url, pid }) => {
    await sendAll(url, connections, deliveries, 0, warmup);
    const cpu = await meterDeliveries(db.pool, pid, requests);
    const result = await sendAll(url, connections, deliveries, warmup, requests);
    const cpuPerDelivery = await cpu();
    const stored = await storedRows(db, kind);
    if (stored !== warmup + requests) throw new Error(`${kind} receiver: ${stored} rows stored of ${warmup + requests}`);
    return { perSecond: requests / result.duration, cpu: cpuPerDelivery };
  }));
}

/**
 * Each request's time from its start to its answer's end, for requests sent
 * on a fixed schedule at `rate` per second (not waiting for each other, over
 * kept-alive connections), from deliveries[from]: one second unmeasured,
 * then `seconds`.
 */
async function paceRequests(url: string, rate: number, seconds: number, deliveries: SignedDelivery[], from: number): Promise<LatencySummary> {
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const post = (delivery: SignedDelivery) => new Promise<number>((resolve, reject) => {
    const began = performance.now();
    const sent = request(`${url}/hooks/github/bench`, { method: 'POST', agent, headers: delivery.headers }, (response) => {
      response.resume();
      response.on('end', () => (response.statusCode === 202 ? resolve(performance.now() - began) : reject(new Error(`answered ${response.statusCode}`))));
    });
    sent.on('error', reject);
    sent.end(delivery.body);
  });
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  let next = from;
  const trickle = async (count: number) => {
    const began = performance.now();
    const answers: Promise<number>[] = [];
    for (let n = 0; n < count; n += 1) {
      const wait = began + (n * 1000) / rate - performance.now();
      if (wait > 0) await sleep(wait);
      answers.push(post(deliveries[next++]!));
    }
    return Promise.all(answers);
  };
  try {
    await trickle(Math.round(rate));
    return latencySummary(await trickle(Math.round(rate * seconds)));
  } finally {
    agent.destroy();
  }
}

export async function runReceiverLoad(settings: BenchSettings, log: Log): Promise<ReceiverSample> {
  const { admissionClients: clients, receiverRequests: requests, orderedScopes: scopes, latencyRate, latencySeconds } = settings;
  const warmup = Math.ceil(requests * warmupShare);
  const secret = randomBytes(16).toString('hex');
  // Every run is in a database of its own, so each uses these from the start.
  const deliveries = await signDeliveries(secret, Math.max(warmup + requests, warmup + Math.round(latencyRate * (latencySeconds + 1))), scopes);

  const throughput: ReceiverSample['throughput'] = { wharf: new Map(), minimal: new Map() };
  for (const connections of [clients, manyConnections]) {
    for (const kind of ['wharf', 'minimal'] as const) {
      const measured = await measureThroughput(settings, kind, connections, secret, deliveries);
      throughput[kind].set(connections, measured);
      log(`  ${kind === 'wharf' ? 'Node receiver' : 'minimal receiver'}, ${connections} connections: ${measured.perSecond.toFixed(0)} req/s` +
          (measured.cpu.receiver === undefined ? '' : `, its CPU ${measured.cpu.receiver.toFixed(0)} µs per delivery`));
    }
  }

  const latencyWith = async (coalescing: boolean) => {
    const summary = await withReceiverDatabase(settings, 'wharf', (db) =>
      withReceiver('wharf', db, secret, coalescing ? {} : { WHARF_ADMIT_BATCH: 'off' }, async ({ url }) => {
        // Warm as the throughput runs are (the process is new), then paced.
        await sendAll(url, clients, deliveries, 0, warmup);
        return paceRequests(url, latencyRate, latencySeconds, deliveries, warmup);
      }));
    log(`  Node receiver at ${latencyRate} requests/s, coalescing ${coalescing ? 'on' : 'off'}: ` +
        `p50 ${summary.p50.toFixed(2)} ms, p99 ${summary.p99.toFixed(2)} ms`);
    return summary;
  };
  const latency = { coalesced: await latencyWith(true), uncoalesced: await latencyWith(false) };

  // The same deliveries, called directly with as many clients, with the
  // headers the receiver keeps and the body digest it sends, so that both
  // sides ask admit for the same work.
  const kept = adapters.get('github')!.keptHeaders;
  const keptHeaders = deliveries.map((delivery) =>
    Object.fromEntries(Object.entries(delivery.headers).filter(([name]) => kept.includes(name))));
  const bodyDigests = deliveries.map((delivery) => createHash('sha256').update(delivery.body).digest('hex'));
  const direct = await withBenchDatabase(settings.serverUrl, 'receiver_direct', { wharf: true, poolSize: clients + 2 }, async (db) => {
    await setupWharfInstallation(db.pool, scopes);
    let next = 0;
    const admitUntil = (end: number) => Promise.all(Array.from({ length: clients }, async () => {
      for (let seq = next++; seq < end; seq = next++) {
        await admitPush(db.pool, `receiver-${seq}`, seq % scopes, seq, keptHeaders[seq]!, bodyDigests[seq]!);
      }
    }));
    await admitUntil(warmup);
    // Each lane drew one number past the warm-up before it stopped: start the timed part at its end.
    next = warmup;
    const cpu = await meterDeliveries(db.pool, undefined, requests);
    const began = performance.now();
    await admitUntil(warmup + requests);
    const perSecond = requests / ((performance.now() - began) / 1000);
    return { perSecond, cpu: await cpu() };
  });
  log(`  direct admit: ${direct.perSecond.toFixed(0)}/s`);
  return { throughput, direct, latency };
}
