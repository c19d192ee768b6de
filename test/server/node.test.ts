// The edge on the real Node server (startNodeServer): deliveries over HTTP,
// webhook_rejected_total{reason} on the given prom-client registry, close().
import { request as httpRequest } from 'node:http';
import { connect, createServer as createNetServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { signGitHubBody } from '../../edge/adapters/index.js';
import { startNodeServer, type NodeServer } from '../../server/node.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { countEvents, edgeEnv, freshId, githubSecret, newDeliveryKey, recorder, seedConnection } from '../support/edge-fixtures.js';

let db: TestDatabase;
let server: NodeServer;
const registry = new Registry();

beforeAll(async () => {
  db = await createTestDatabase();
  server = await startNodeServer({ databaseUrl: db.url, env: edgeEnv, registry, logger: recorder().logger });
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

describe('startNodeServer', () => {
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
    const second = await startNodeServer({ databaseUrl: db.url, env: edgeEnv, registry, logger: recorder().logger });
    try {
      const before = await rejectedCount('bad-signature');
      const response = await fetch(`${second.url}/hooks/github/test`, { method: 'POST', body: '{}', headers: { 'x-hub-signature-256': `sha256=${'0'.repeat(64)}` } });
      expect(response.status).toBe(401);
      expect(await rejectedCount('bad-signature')).toBe(before + 1);
    } finally {
      await second.close();
    }
  });
});

describe('the public edge and the operator API', () => {
  it('serves /hooks only without an operator token, and /api with one', async () => {
    expect((await fetch(`${server.url}/api/workspaces`)).status).toBe(404);
    const operator = await startNodeServer({
      databaseUrl: db.url, env: { ...edgeEnv, WHARF_ADMIN_TOKEN: 'Ok2rZ8bq4XnV7wLm1cTj9sPd3fGh6yKa' }, registry, logger: recorder().logger,
    });
    try {
      expect((await fetch(`${operator.url}/api/workspaces`)).status).toBe(401);
      expect((await fetch(`${operator.url}/api/workspaces`, { headers: { authorization: 'Bearer Ok2rZ8bq4XnV7wLm1cTj9sPd3fGh6yKa' } })).status).toBe(200);
    } finally {
      await operator.close();
    }
  });
});

describe('operator sign-in on `wharf serve`', () => {
  const admin = 'Ok2rZ8bq4XnV7wLm1cTj9sPd3fGh6yKa';

  /** The console's sign-in form, as a browser gets it: its cookie and CSRF field. */
  async function signInForm(url: string): Promise<{ cookie: string; csrf: string }> {
    const page = await fetch(`${url}/console/login`);
    const csrf = /name="csrf" value="([^"]+)"/.exec(await page.text())?.[1];
    if (!csrf) throw new Error('no CSRF field on the sign-in form');
    return { cookie: (page.headers.get('set-cookie') ?? '').split(';')[0]!, csrf };
  }

  it('counts failures at both doors together, per client as WHARF_TRUSTED_PROXY_HOPS says, and never refuses a valid token', async () => {
    const operator = await startNodeServer({
      databaseUrl: db.url, env: { ...edgeEnv, WHARF_ADMIN_TOKEN: admin, WHARF_TRUSTED_PROXY_HOPS: '1' }, registry, logger: recorder().logger,
    });
    try {
      // One reverse proxy in front: the client is the last X-Forwarded-For entry; the first is the client's own.
      const from = (client: string) => ({ 'x-forwarded-for': `10.1.2.3, ${client}` });
      const form = await signInForm(operator.url);
      const api = (token: string, client: string) =>
        fetch(`${operator.url}/api/workspaces`, { headers: { authorization: `Bearer ${token}`, ...from(client) } });
      const signIn = (token: string, client: string) => fetch(`${operator.url}/console/login`, {
        method: 'POST', redirect: 'manual',
        headers: { cookie: form.cookie, origin: operator.url, 'content-type': 'application/x-www-form-urlencoded', ...from(client) },
        body: new URLSearchParams({ csrf: form.csrf, token }).toString(),
      });
      // Ten failures, five at each door, at once (the slowed ones wait side by side).
      const failures = await Promise.all([
        ...Array.from({ length: 5 }, (_, i) => api(`wrong-token-${i}-${'x'.repeat(24)}`, '203.0.113.50')),
        ...Array.from({ length: 5 }, (_, i) => signIn(`wrong-token-${i}-${'y'.repeat(24)}`, '203.0.113.50')),
      ]);
      expect(failures.map((response) => response.status)).toEqual(Array(10).fill(401));

      const limited = await signIn(`wrong-token-10-${'z'.repeat(24)}`, '203.0.113.50');
      expect(limited.status).toBe(429);
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
      expect((await api(`wrong-token-11-${'z'.repeat(24)}`, '203.0.113.50')).status).toBe(429);
      expect((await api(`wrong-token-12-${'z'.repeat(24)}`, '203.0.113.51')).status).toBe(401);
      expect((await api(admin, '203.0.113.50')).status).toBe(200);
      expect((await signIn(admin, '203.0.113.50')).status).toBe(303);
    } finally {
      await operator.close();
    }
  });

  it('reports a WHARF_TRUSTED_PROXY_HOPS it cannot read, and then trusts no forwarded header', async () => {
    const logs = recorder();
    const operator = await startNodeServer({
      databaseUrl: db.url, env: { ...edgeEnv, WHARF_ADMIN_TOKEN: admin, WHARF_TRUSTED_PROXY_HOPS: 'yes' }, registry, logger: logs.logger,
    });
    try {
      expect(logs.lines).toContainEqual({
        level: 'error', fields: { event: 'trusted_proxy_hops_invalid' },
        message: expect.stringMatching(/WHARF_TRUSTED_PROXY_HOPS must be a whole number from 0 to 10/),
      });
      expect((await fetch(`${operator.url}/api/workspaces`, { headers: { authorization: `Bearer ${admin}` } })).status).toBe(200);
    } finally {
      await operator.close();
    }
  });
});

describe('bounded reading on Node', () => {
  /** A POST whose body of `size` bytes trickles in over about `ms`; resolves with the status. */
  function slowPost(url: string, size: number, ms: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const request = httpRequest(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': String(size), 'x-hub-signature-256': `sha256=${'0'.repeat(64)}` },
      }, (response) => {
        response.resume();
        resolve(response.statusCode ?? 0);
      });
      request.on('error', reject);
      const parts = 10;
      let sent = 0;
      const timer = setInterval(() => {
        const part = sent === parts - 1 ? size - Math.floor(size / parts) * (parts - 1) : Math.floor(size / parts);
        request.write(Buffer.alloc(part, 32));
        sent += 1;
        if (sent === parts) {
          clearInterval(timer);
          request.end();
        }
      }, ms / parts);
    });
  }

  it('answers 503 with Retry-After past WHARF_MAX_INFLIGHT_BYTES while unauthenticated bodies are read', async () => {
    const tight = await startNodeServer({
      databaseUrl: db.url, env: { ...edgeEnv, WHARF_MAX_INFLIGHT_BYTES: String(1024 * 1024) }, registry, logger: recorder().logger,
    });
    try {
      const statuses = await Promise.all(Array.from({ length: 4 }, () => slowPost(`${tight.url}/hooks/github/test`, 600 * 1024, 400)));
      // One body fits the budget (and fails its signature); the others are turned away at once.
      expect(statuses.filter((status) => status === 503).length).toBeGreaterThanOrEqual(2);
      expect(statuses.filter((status) => status === 401).length).toBeGreaterThanOrEqual(1);
      expect(statuses.every((status) => status === 503 || status === 401)).toBe(true);
    } finally {
      await tight.close();
    }
  });

  it('cuts off a request head that never ends within seconds, not Node\'s minute', async () => {
    const closedAfter = await new Promise<number>((resolve) => {
      const started = Date.now();
      const socket = connect(Number(new URL(server.url).port), '127.0.0.1', () => socket.write('POST /hooks/github/test HTTP/1.1\r\nHost: x\r\n'));
      socket.resume();
      socket.on('close', () => resolve(Date.now() - started));
      socket.on('error', () => {});
    });
    expect(closedAfter).toBeLessThan(15_000);
  }, 30_000);
});

describe('health', () => {
  it('answers /healthz while the process runs and /readyz by whether the database answers', async () => {
    expect(await (await fetch(`${server.url}/healthz`)).json()).toEqual({ status: 'ok' });
    expect(await (await fetch(`${server.url}/readyz`)).json()).toEqual({ status: 'ready' });
    const orphan = await startNodeServer({
      databaseUrl: `postgres://postgres@127.0.0.1:${await closedPort()}/postgres`, env: edgeEnv, registry, logger: recorder().logger,
    });
    try {
      expect((await fetch(`${orphan.url}/healthz`)).status).toBe(200);
      const ready = await fetch(`${orphan.url}/readyz`);
      expect(ready.status).toBe(503);
      expect(ready.headers.get('retry-after')).not.toBeNull();
    } finally {
      await orphan.close();
    }
  });
});

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const probe = createNetServer().listen(0, '127.0.0.1');
  await new Promise((resolve) => probe.once('listening', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}
