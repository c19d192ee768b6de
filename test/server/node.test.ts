// The edge on the real Node server (startEdgeServer): deliveries over HTTP,
// webhook_rejected_total{reason} on the given prom-client registry, close().
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { signGitHubBody } from '../../edge/adapters/index.js';
import { startEdgeServer, type EdgeServer } from '../../server/node.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { countEvents, edgeEnv, freshId, githubSecret, newDeliveryKey, recorder, seedConnection } from '../support/edge-fixtures.js';

let db: TestDatabase;
let server: EdgeServer;
const registry = new Registry();

beforeAll(async () => {
  db = await createTestDatabase();
  server = await startEdgeServer({ databaseUrl: db.url, env: edgeEnv, registry, logger: recorder().logger });
});
afterAll(async () => {
  await server?.close();
  await db?.drop();
});

async function deliver(body: string, secret: string, key = newDeliveryKey()) {
  return fetch(`${server.url}/hooks/github/test`, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json', 'x-github-event': 'issues', 'x-github-delivery': key,
               'x-hub-signature-256': await signGitHubBody(secret, body) },
  });
}

async function rejectedCount(reason: string): Promise<number> {
  const metric = await registry.getSingleMetric('webhook_rejected_total')?.get();
  return metric?.values.find((value) => value.labels.reason === reason)?.value ?? 0;
}

describe('startEdgeServer', () => {
  it('stores a signed delivery over HTTP and answers 202 after the commit', async () => {
    const installation = freshId();
    const workspace = freshId();
    await seedConnection(db.pool, { workspace, provider: 'github', source: 'https://github.com', kind: 'app_installation',
                                    externalId: String(installation), subjects: ['repo:acme/node'] });
    const key = newDeliveryKey();
    const response = await deliver(JSON.stringify({ action: 'opened', installation: { id: installation }, repository: { full_name: 'acme/node' } }), githubSecret, key);
    expect(response.status).toBe(202);
    expect(await response.json()).toMatchObject({ status: 'accepted', delivery_key: key, delivery_id: key, events: [{ workspace_id: workspace, outcome: 'stored' }] });
    expect(await countEvents(db.pool, key)).toBe(1);
  });

  it('counts rejections and drops by reason in webhook_rejected_total', async () => {
    const before = await rejectedCount('bad-signature');
    const response = await deliver('{"action":"opened"}', 'not-the-secret');
    expect(response.status).toBe(401);
    expect(await rejectedCount('bad-signature')).toBe(before + 1);

    const dropsBefore = await rejectedCount('work-event-without-source');
    expect((await deliver('{"action":"opened"}', githubSecret)).status).toBe(202);
    expect(await rejectedCount('work-event-without-source')).toBe(dropsBefore + 1);
  });

  it('shares one counter between two servers of a process', async () => {
    const second = await startEdgeServer({ databaseUrl: db.url, env: edgeEnv, registry, logger: recorder().logger });
    try {
      const before = await rejectedCount('bad-signature');
      const response = await fetch(`${second.url}/hooks/github/test`, { method: 'POST', body: '{}', headers: { 'x-hub-signature-256': 'sha256=00' } });
      expect(response.status).toBe(401);
      expect(await rejectedCount('bad-signature')).toBe(before + 1);
    } finally {
      await second.close();
    }
  });
});
