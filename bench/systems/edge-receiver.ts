// Signed GitHub deliveries through the Node receiver (server/node.ts, in
// a child process), loaded by autocannon with as many connections as the
// direct-call clients, against direct wharf.admit calls in the same database.
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import type pg from 'pg';
import { adapters, signGitHubBody } from '../../edge/adapters/index.js';
import { withBenchDatabase } from '../databases.js';
import { makePayload } from '../payload.js';
import type { Log } from '../results.js';
import { meterDatabaseBackends, meterProcesses } from '../process-cpu.js';
import type { BenchSettings } from '../settings.js';
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

export interface ReceiverSample {
  requestsPerSecond: number;
  directPerSecond: number;
  receiverCpu: CpuPerDelivery;
  directCpu: CpuPerDelivery;
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

interface SignedDelivery {
  headers: Record<string, string>;
  body: string;
}

async function signDeliveries(secret: string, count: number, scopes: number): Promise<SignedDelivery[]> {
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

export async function runReceiverLoad(settings: BenchSettings, log: Log): Promise<ReceiverSample> {
  const { admissionClients: clients, receiverRequests: requests, orderedScopes: scopes } = settings;
  const warmup = Math.ceil(requests * warmupShare);
  const secret = randomBytes(16).toString('hex');
  const deliveries = await signDeliveries(secret, warmup + requests, scopes);

  const throughReceiver = await withBenchDatabase(settings.serverUrl, 'receiver', { wharf: true, poolSize: 2 }, async (db) => {
    await setupWharfInstallation(db.pool, scopes);
    const child = spawn(tsx, [serverScript], {
      env: { ...process.env, DATABASE_URL: db.url, GITHUB_APP_BENCH_WEBHOOK_SECRET: secret },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      const [line] = (await once(createInterface({ input: child.stdout }), 'line')) as [string];
      const { url, pid } = JSON.parse(line) as { url: string; pid: number };
      let next = 0;
      const post = async (amount: number) => {
        const result = await autocannon({
          url: `${url}/hooks/github/bench`,
          connections: clients,
          amount,
          requests: [{
            method: 'POST',
            setupRequest: (request) => {
              const delivery = deliveries[next++ % deliveries.length]!;
              return { ...request, headers: delivery.headers, body: delivery.body };
            },
          }],
        });
        if (result.non2xx > 0 || result.errors > 0) throw new Error(`receiver: ${result.non2xx} non-2xx, ${result.errors} errors`);
        return result;
      };
      await post(warmup);
      const cpu = await meterDeliveries(db.pool, pid, requests);
      const result = await post(requests);
      const cpuPerDelivery = await cpu();
      const { rows } = await db.pool.query<{ n: string }>('SELECT count(*) AS n FROM wharf.provider_event');
      if (Number(rows[0]?.n) !== warmup + requests) {
        throw new Error(`receiver: ${rows[0]?.n} rows stored of ${warmup + requests}`);
      }
      return { perSecond: requests / result.duration, cpuPerDelivery };
    } finally {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
  });

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
    return { perSecond, cpuPerDelivery: await cpu() };
  });
  log(`  Node receiver: ${throughReceiver.perSecond.toFixed(0)} req/s; direct admit: ${direct.perSecond.toFixed(0)}/s`);
  return {
    requestsPerSecond: throughReceiver.perSecond,
    directPerSecond: direct.perSecond,
    receiverCpu: throughReceiver.cpuPerDelivery,
    directCpu: direct.cpuPerDelivery,
  };
}
