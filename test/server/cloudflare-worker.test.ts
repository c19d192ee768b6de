// The same edge app inside workerd (wrangler's unstable_startWorker with
// wrangler.toml), reaching the test PostgreSQL through @neondatabase/serverless
// and the WebSocket-to-TCP proxy of test/support/ws-proxy.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProviderScenario } from '../support/edge-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import {
  countEvents, edgeEnv, freshId, githubSecret, newDeliveryKey, scenario, slackSecret,
} from '../support/edge-fixtures.js';
import { allowedTarget, startWsProxy, type WsProxy } from '../support/ws-proxy.js';
import WebSocket from 'ws';
import { signGitHubBody, signSlackRequest } from '../../edge/adapters/index.js';

// Offline: no update check, no Request.cf fetch, no telemetry.
process.env.WRANGLER_SEND_METRICS = 'false';
process.env.CLOUDFLARE_CF_FETCH_ENABLED = 'false';
process.env.WRANGLER_HIDE_BANNER = 'true';

let db: TestDatabase;
let proxy: WsProxy;
let worker: Awaited<ReturnType<typeof import('wrangler').unstable_startWorker>>;

beforeAll(async () => {
  db = await createTestDatabase();
  proxy = await startWsProxy();
  const { unstable_startWorker } = await import('wrangler');
  const plain = (value: string) => ({ type: 'plain_text' as const, value });
  worker = await unstable_startWorker({
    config: 'wrangler.toml',
    bindings: {
      DATABASE_URL: plain(db.url),
      WS_PROXY: plain(proxy.address),
      ...Object.fromEntries(Object.entries(edgeEnv).map(([name, value]) => [name, plain(value)])),
    },
    build: { nodejsCompatMode: 'v2' },
    // The Worker's own log lines are asserted in the Node suites; keep this run quiet.
    dev: { server: { hostname: '127.0.0.1', port: 0 }, inspector: false, watch: false, logLevel: 'error' },
  });
  await worker.ready;
}, 120_000);

afterAll(async () => {
  await worker?.dispose();
  await proxy?.close();
  await db?.drop();
});

// any: the tests read receipt and error fields of every shape.
type Json = Record<string, any>;

async function post(path: string, body: string, headers: Record<string, string>) {
  const response = await worker.fetch(`http://edge.test${path}`, { method: 'POST', body, headers });
  return { status: response.status, json: (await response.json()) as Json };
}

async function roundTrip(s: ProviderScenario) {
  const key = newDeliveryKey();
  const body = JSON.stringify(s.payload(key));
  return { key, body, ...(await post(s.path, body, await s.sign(body, { deliveryKey: key }))) };
}

describe.each(['github', 'slack', 'generic'] as const)('%s inside workerd', (provider) => {
  let s: ProviderScenario;
  let workspace: number;
  beforeAll(async () => {
    workspace = freshId();
    s = await scenario(db.pool, provider, workspace);
  });

  it('stores a valid delivery and answers its redelivery duplicate', async () => {
    const first = await roundTrip(s);
    expect(first.status).toBe(202);
    expect(first.json).toMatchObject({ status: 'accepted', delivery_id: first.key, dropped: null,
                                       events: [{ workspace_id: workspace, outcome: 'stored' }] });
    const again = await post(s.path, first.body, await s.sign(first.body, { deliveryKey: first.key }));
    expect(again.json.events).toEqual([{ ...first.json.events[0], outcome: 'duplicate' }]);
    expect(await countEvents(db.pool, first.key)).toBe(1);
  });

  it('rejects a wrong signature with 401 and stores nothing', async () => {
    const key = newDeliveryKey();
    const body = JSON.stringify(s.payload(key));
    const secret = provider === 'generic' ? `whsec_${Buffer.from('wrong').toString('base64')}` : 'wrong';
    const { status, json } = await post(s.path, body, await s.sign(body, { deliveryKey: key, secret }));
    expect(status).toBe(401);
    expect(json.error).toBe('bad-signature');
    expect(await countEvents(db.pool, key)).toBe(0);
  });

  it('rejects a NUL and invalid UTF-8 with 400', async () => {
    const nul = '{"a":"\\u0000"}';
    const answer = await post(s.path, nul, await s.sign(nul, { deliveryKey: newDeliveryKey() }));
    expect(answer).toMatchObject({ status: 400, json: { error: 'contains-nul' } });
    const invalid = new Uint8Array([0x7b, 0xff, 0x7d]);
    const headers = await s.sign(invalid, { deliveryKey: newDeliveryKey() });
    const response = await worker.fetch(`http://edge.test${s.path}`, { method: 'POST', body: invalid, headers });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: 'invalid-utf8' });
  });
});

describe('workerd handshakes and routing', () => {
  it('answers Slack url_verification with its challenge', async () => {
    const body = JSON.stringify({ type: 'url_verification', challenge: 'from-workerd' });
    const ts = Math.floor(Date.now() / 1000);
    const { status, json } = await post('/hooks/slack/test', body, {
      'x-slack-request-timestamp': String(ts), 'x-slack-signature': await signSlackRequest(slackSecret, ts, body),
    });
    expect(status).toBe(200);
    expect(json).toEqual({ challenge: 'from-workerd' });
  });

  it('rejects a stale Slack timestamp with 401', async () => {
    const body = JSON.stringify({ type: 'url_verification', challenge: 'x' });
    const ts = Math.floor(Date.now() / 1000) - 600;
    const { status, json } = await post('/hooks/slack/test', body, {
      'x-slack-request-timestamp': String(ts), 'x-slack-signature': await signSlackRequest(slackSecret, ts, body),
    });
    expect(status).toBe(401);
    expect(json.error).toBe('stale-timestamp');
  });

  it('stores a GitHub installation event with no workspace', async () => {
    const key = newDeliveryKey();
    const body = JSON.stringify({ action: 'created', installation: { id: freshId() } });
    const { status, json } = await post('/hooks/github/test', body, {
      'x-github-event': 'installation', 'x-github-delivery': key, 'x-hub-signature-256': await signGitHubBody(githubSecret, body),
    });
    expect(status).toBe(202);
    expect(json.events).toEqual([{ workspace_id: null, event_id: expect.any(Number), outcome: 'stored' }]);
  });

  it('answers 404 to an unknown connection', async () => {
    const { status, json } = await post('/hooks/generic/999999999', '{}', {});
    expect(status).toBe(404);
    expect(json.error).toBe('unknown-connection');
  });
});

describe('the WebSocket proxy', () => {
  it('allows loopback targets only', async () => {
    expect(allowedTarget('127.0.0.1:5432')).toEqual({ host: '127.0.0.1', port: 5432 });
    expect(allowedTarget('[::1]:5432')).toEqual({ host: '::1', port: 5432 });
    for (const target of ['10.0.0.1:5432', 'db.example.com:5432', '127.0.0.1', '127.0.0.1:99999', null]) {
      expect(allowedTarget(target)).toBeUndefined();
    }
    const ws = new WebSocket(`ws://${proxy.address}/v1?address=example.com:5432`);
    const code = await new Promise<number>((resolve) => ws.on('close', (closeCode) => resolve(closeCode)));
    expect(code).toBe(1008);
  });
});
