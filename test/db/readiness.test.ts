// /readyz against a standby: a single-host URL that points at a server in
// recovery is answered "standby" (503, Retry-After on the receiver) by both
// the Node receiver and the worker's metrics server: the process answers, but
// it can neither admit nor claim there, so a load balancer must send traffic
// elsewhere. Once that server is promoted, both say ready, without a restart.
// A real primary and its streaming standby (pg_basebackup -R).
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { migrate } from '../../db/migrate.js';
import { startNodeServer, type NodeServer } from '../../server/node.js';
import { createWorker, startMetricsServer, workerRegistry, type MetricsServer, type Worker } from '../../worker/index.js';
import { edgeEnv, recorder } from '../support/edge-fixtures.js';
import { createOwnPostgres, type OwnPostgres } from '../support/own-postgres.js';
import { waitFor } from '../support/worker-inbox.js';

let primary: OwnPostgres;
let standby: OwnPostgres;
let receiver: NodeServer;
let worker: Worker;
let metrics: MetricsServer;

beforeAll(async () => {
  primary = await createOwnPostgres({ binaries: 'system', settings: { wal_level: 'replica' } });
  await primary.start();
  await migrate({ databaseUrl: primary.url });
  standby = await createOwnPostgres({ binaries: 'system', standbyOf: primary });
  await standby.start();
  // Both given the standby's own single-host URL, as a deployment pointed at the wrong node (or at a node that was demoted) is.
  receiver = await startNodeServer({ databaseUrl: standby.url, env: edgeEnv, registry: new Registry(), logger: recorder().logger });
  worker = createWorker({ connectionString: standby.url, handlers: {}, ignoreUnhandled: true });
  metrics = await startMetricsServer(workerRegistry, 0, { readiness: () => worker.readiness() });
}, 120_000);

afterAll(async () => {
  await metrics?.close();
  await worker?.stop().catch(() => {});
  await receiver?.close();
  await standby?.stop();
  await primary?.stop();
}, 60_000);

async function probe(url: string): Promise<{ status: number; body: unknown; retryAfter: string | null }> {
  const response = await fetch(url);
  return { status: response.status, body: await response.json(), retryAfter: response.headers.get('retry-after') };
}

it('says "standby" (503) on a server in recovery, and "ready" once it is promoted, without a restart', async () => {
  const receiverReady = `${receiver.url}/readyz`;
  const workerReady = `http://127.0.0.1:${metrics.port}/readyz`;
  expect(await probe(receiverReady)).toEqual({ status: 503, body: { status: 'standby' }, retryAfter: '5' });
  expect(await probe(workerReady)).toMatchObject({ status: 503, body: { status: 'standby' } });
  expect(await worker.ready()).toBe(false);
  // The process itself is alive: liveness is not readiness.
  expect((await fetch(`${receiver.url}/healthz`)).status).toBe(200);

  await primary.halt();
  await standby.promote();
  // The pooled connections that read "in recovery" are the same ones now on a primary.
  await waitFor(async () => (await probe(receiverReady)).status === 200, 30_000, 'the receiver ready on the promoted server');
  expect(await probe(receiverReady)).toEqual({ status: 200, body: { status: 'ready' }, retryAfter: null });
  expect(await probe(workerReady)).toMatchObject({ status: 200, body: { status: 'ready' } });
  expect(await worker.ready()).toBe(true);
}, 120_000);
