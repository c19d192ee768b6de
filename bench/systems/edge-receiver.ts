// Signed GitHub deliveries through the Node receiver (server/node.ts, in
// a child process), loaded by autocannon with as many connections as the
// direct-call clients, against direct wharf.admit calls in the same database.
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { adapters, signGitHubBody } from '../../edge/adapters/index.js';
import { withBenchDatabase } from '../databases.js';
import { makePayload } from '../payload.js';
import type { Log } from '../results.js';
import type { BenchSettings } from '../settings.js';
import { admitPush, setupWharfInstallation, subjectOf } from './wharf-inbox.js';

export interface ReceiverSample {
  requestsPerSecond: number;
  directPerSecond: number;
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
  const secret = randomBytes(16).toString('hex');
  const deliveries = await signDeliveries(secret, requests, scopes);

  const requestsPerSecond = await withBenchDatabase(settings.serverUrl, 'receiver', { wharf: true, poolSize: 2 }, async (db) => {
    await setupWharfInstallation(db.pool, scopes);
    const child = spawn(tsx, [serverScript], {
      env: { ...process.env, DATABASE_URL: db.url, GITHUB_APP_BENCH_WEBHOOK_SECRET: secret },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      const [line] = (await once(createInterface({ input: child.stdout }), 'line')) as [string];
      const { url } = JSON.parse(line) as { url: string };
      let next = 0;
      const result = await autocannon({
        url: `${url}/hooks/github/bench`,
        connections: clients,
        amount: requests,
        requests: [{
          method: 'POST',
          setupRequest: (request) => {
            const delivery = deliveries[next++ % deliveries.length]!;
            return { ...request, headers: delivery.headers, body: delivery.body };
          },
        }],
      });
      const { rows } = await db.pool.query<{ n: string }>('SELECT count(*) AS n FROM wharf.provider_event');
      if (result.non2xx > 0 || result.errors > 0 || Number(rows[0]?.n) !== requests) {
        throw new Error(`receiver: ${result.non2xx} non-2xx, ${result.errors} errors, ${rows[0]?.n} rows stored of ${requests}`);
      }
      return requests / result.duration;
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
  const directPerSecond = await withBenchDatabase(settings.serverUrl, 'receiver_direct', { wharf: true, poolSize: clients + 2 }, async (db) => {
    await setupWharfInstallation(db.pool, scopes);
    let next = 0;
    const began = performance.now();
    await Promise.all(Array.from({ length: clients }, async () => {
      for (let seq = next++; seq < requests; seq = next++) {
        await admitPush(db.pool, `receiver-${seq}`, seq % scopes, seq, keptHeaders[seq]!, bodyDigests[seq]!);
      }
    }));
    return requests / ((performance.now() - began) / 1000);
  });
  log(`  Node receiver: ${requestsPerSecond.toFixed(0)} req/s; direct admit: ${directPerSecond.toFixed(0)}/s`);
  return { requestsPerSecond, directPerSecond };
}
