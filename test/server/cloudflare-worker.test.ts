// The edge app inside workerd (wrangler's unstable_startWorker with
// wrangler.toml), on each of the Worker's paths to PostgreSQL:
//   - Neon HTTP: DATABASE_URL, statements sent to the local stand-in of
//     Neon's /sql endpoint (test/support/neon-http-stand-in.ts);
//   - Hyperdrive: a HYPERDRIVE binding with a localConnectionString, which
//     wrangler's local Hyperdrive connects to directly, and `pg`.
// Each path reaches its far end through loopback proxies (test/support/
// delay-proxy.ts) that the tests stop, hang or cut, to prove that an
// unreachable database answers 503 with Retry-After in bounded time.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import Stripe from 'stripe';
import twilioLibrary from 'twilio';
import { signGitHubBody, signSlackRequest } from '../../edge/adapters/index.js';
import { createEdgeApp } from '../../edge/app.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { raiseRouteChangedFor } from '../support/route-changed.js';
import { startDelayProxy, type DelayProxy } from '../support/delay-proxy.js';
import type { ProviderScenario } from '../support/edge-fixtures.js';
import {
  countEvents, edgeEnv, freshId, githubSecret, newDeliveryKey, recorder, scenario, seedConnection, slackSecret,
} from '../support/edge-fixtures.js';
import { hyperdriveBindings, neonHttpBindings, plain, startEdgeWorker, type EdgeWorker } from '../support/edge-worker.js';
import { startNeonHttpStandIn, type NeonHttpStandIn } from '../support/neon-http-stand-in.js';

/**
 * WHARF_DATABASE_TIMEOUT_MS in these Workers. Long enough that "answered
 * before the deadline" (a refusal or a dropped connection answers in
 * milliseconds) holds with seconds to spare on a loaded machine; short
 * enough that the hang tests stay quick.
 */
const deadlineMs = 6_000;
/** How late past the deadline an answer may come on a loaded machine: a bound, generous, on "it answered", not a speed. */
const lateMarginMs = 10_000;

interface Path {
  name: string;
  worker: EdgeWorker;
  /** Between the far end (stand-in or PostgreSQL) and PostgreSQL's port: stopping it is "the database is down". */
  database: DelayProxy;
  /** Between the Worker and its far end: hanging or cutting it is the link failing mid-request. */
  link: DelayProxy;
  /** Whether the link's port may be closed: wrangler's local Hyperdrive throws on a refused connection. */
  linkCanStop: boolean;
}

let db: TestDatabase;
let standIn: NeonHttpStandIn;
const paths: Record<'neon-http' | 'hyperdrive', Path> = {} as Record<'neon-http' | 'hyperdrive', Path>;
const proxies: DelayProxy[] = [];

async function proxyTo(host: string, port: number): Promise<DelayProxy> {
  const proxy = await startDelayProxy({ target: { host, port } });
  proxies.push(proxy);
  return proxy;
}

beforeAll(async () => {
  db = await createTestDatabase();
  standIn = await startNeonHttpStandIn();
  const server = new URL(db.url);
  const postgres = { host: server.hostname, port: Number(server.port || 5432) };
  const through = (proxy: DelayProxy) => {
    const url = new URL(db.url);
    url.host = proxy.address;
    return url.href;
  };
  const common = {
    WHARF_DATABASE_TIMEOUT_MS: plain(String(deadlineMs)),
    ...Object.fromEntries(Object.entries(edgeEnv).map(([name, value]) => [name, plain(value)])),
  };

  const neonDatabase = await proxyTo(postgres.host, postgres.port);
  const neonLink = await proxyTo('127.0.0.1', standIn.port);
  const hyperdriveDatabase = await proxyTo(postgres.host, postgres.port);
  const hyperdriveLink = await proxyTo('127.0.0.1', hyperdriveDatabase.port);
  const [neonWorker, hyperdriveWorker] = await Promise.all([
    startEdgeWorker({ ...common, ...neonHttpBindings(through(neonDatabase), `http://${neonLink.address}/sql`) }),
    startEdgeWorker({ ...common, ...hyperdriveBindings(through(hyperdriveLink)) }),
  ]);
  paths['neon-http'] = { name: 'Neon HTTP', worker: neonWorker, database: neonDatabase, link: neonLink, linkCanStop: true };
  paths.hyperdrive = {
    name: 'Hyperdrive', worker: hyperdriveWorker, database: hyperdriveDatabase, link: hyperdriveLink, linkCanStop: false,
  };
}, 120_000);

afterAll(async () => {
  await Promise.all(Object.values(paths).map((path) => path.worker.dispose()));
  await Promise.all(proxies.map((proxy) => proxy.close()));
  await standIn?.close();
  await db?.drop();
});

// any: the tests read receipt and error fields of every shape.
type Json = Record<string, any>;

interface Answer {
  status: number;
  retryAfter: string | null;
  json: Json;
  ms: number;
}

async function post(worker: EdgeWorker, path: string, body: string | Uint8Array, headers: Record<string, string>): Promise<Answer> {
  const started = performance.now();
  const response = await worker.fetch(`http://edge.test${path}`, { method: 'POST', body, headers });
  const json = (await response.json()) as Json;
  return { status: response.status, retryAfter: response.headers.get('retry-after'), json, ms: performance.now() - started };
}

/** A GitHub App installation subscribed to one repository, and signed pushes about it. */
interface Push {
  key: string;
  body: string;
  headers: Record<string, string>;
}

async function signedPush(key: string, body: string): Promise<Push> {
  return { key, body, headers: { 'x-github-event': 'push', 'x-github-delivery': key, 'x-hub-signature-256': await signGitHubBody(githubSecret, body) } };
}

async function githubRepository(): Promise<{ connectionId: number; workspace: number; installation: number; repository: string; push(): Promise<Push> }> {
  const workspace = freshId();
  const installation = freshId();
  const repository = `acme/push-${installation}`;
  const connectionId = await seedConnection(db.pool, {
    workspace, provider: 'github', source: 'https://github.com', kind: 'app_installation',
    externalId: String(installation), subjects: [`repo:${repository}`],
  });
  return {
    connectionId,
    workspace,
    installation,
    repository,
    push() {
      const key = newDeliveryKey();
      return signedPush(key, JSON.stringify({
        ref: 'refs/heads/main', after: key, installation: { id: installation },
        repository: { full_name: repository, owner: { login: 'acme' } }, commits: [],
      }));
    },
  };
}

/**
 * Holds the lifecycle lock of a connection's source in an open transaction
 * that also changes the connection (a new subscription), so that an admission
 * from that source waits; resolves once PostgreSQL shows an admit waiting for
 * the lock.
 */
async function holdConnection(connectionId: number): Promise<{ admitWaiting(): Promise<void>; rollback(): Promise<void>; client: pg.Client }> {
  const client = await db.connect();
  await client.query('BEGIN');
  await client.query('SELECT wharf.subscribe($1, $2)', [connectionId, `repo:acme/other-${freshId()}`]);
  return {
    client,
    async admitWaiting() {
      for (let tries = 0; tries < 200; tries += 1) {
        const { rows } = await db.pool.query<{ n: string }>(
          `SELECT count(*) AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%wharf.admit%'`);
        if (Number(rows[0]!.n) > 0) return;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      throw new Error('no admission waited for the lock');
    },
    async rollback() {
      await client.query('ROLLBACK');
    },
  };
}

/** Runs `work` with the path's proxies changed, then puts them back as they were. */
async function degraded<T>(path: Path, change: () => Promise<void> | void, work: () => Promise<T>): Promise<T> {
  await change();
  try {
    return await work();
  } finally {
    for (const proxy of [path.database, path.link]) {
      proxy.mode = 'pass';
      proxy.cut();
      await proxy.start();
    }
  }
}

function expectUnavailable(answer: Answer): void {
  expect(answer.status).toBe(503);
  expect(answer.json.error).toBe('database-unavailable');
  expect(Number(answer.retryAfter)).toBeGreaterThan(0);
}

describe.each(['neon-http', 'hyperdrive'] as const)('%s inside workerd', (pathName) => {
  const path = () => paths[pathName];

  describe.each(['github', 'slack', 'generic'] as const)('%s', (provider) => {
    let s: ProviderScenario;
    let workspace: number;
    beforeAll(async () => {
      workspace = freshId();
      s = await scenario(db.pool, provider, workspace);
    });

    async function roundTrip() {
      const key = newDeliveryKey();
      const body = JSON.stringify(s.payload(key));
      return { key, body, ...(await post(path().worker, s.path, body, await s.sign(body, { deliveryKey: key }))) };
    }

    it('stores a valid delivery and answers its redelivery duplicate', async () => {
      const first = await roundTrip();
      expect(first.status).toBe(202);
      expect(first.json).toMatchObject({ status: 'accepted', delivery_id: first.key, dropped: null,
                                         events: [{ workspace_id: workspace, outcome: 'stored' }] });
      const again = await post(path().worker, s.path, first.body, await s.sign(first.body, { deliveryKey: first.key }));
      expect(again.json.events).toEqual([{ ...first.json.events[0], outcome: 'duplicate' }]);
      expect(await countEvents(db.pool, first.key)).toBe(1);
    });

    it('rejects a wrong signature with 401 and stores nothing', async () => {
      const key = newDeliveryKey();
      const body = JSON.stringify(s.payload(key));
      const secret = provider === 'generic' ? `whsec_${Buffer.from('wrong-but-long-enough').toString('base64')}` : 'wrong';
      const { status, json } = await post(path().worker, s.path, body, await s.sign(body, { deliveryKey: key, secret }));
      expect(status).toBe(401);
      expect(json.error).toBe('bad-signature');
      expect(await countEvents(db.pool, key)).toBe(0);
    });

    it('rejects a NUL and invalid UTF-8 with 400', async () => {
      const nul = '{"a":"\\u0000"}';
      const answer = await post(path().worker, s.path, nul, await s.sign(nul, { deliveryKey: newDeliveryKey() }));
      expect(answer).toMatchObject({ status: 400, json: { error: 'contains-nul' } });
      const invalid = new Uint8Array([0x7b, 0xff, 0x7d]);
      const headers = await s.sign(invalid, { deliveryKey: newDeliveryKey() });
      const response = await path().worker.fetch(`http://edge.test${s.path}`, { method: 'POST', body: invalid, headers });
      expect(response.status).toBe(400);
      expect(await response.json()).toMatchObject({ error: 'invalid-utf8' });
    });
  });

  it('admits a signed GitHub push: 202 and the row stored', async () => {
    const repo = await githubRepository();
    const { key, body, headers } = await repo.push();
    const answer = await post(path().worker, '/hooks/github/test', body, headers);
    expect(answer.status).toBe(202);
    expect(answer.json.events).toEqual([{ workspace_id: repo.workspace, event_id: expect.any(Number), outcome: 'stored' }]);
    const { rows } = await db.pool.query('SELECT event_type, payload FROM wharf.provider_event WHERE delivery_key = $1', [key]);
    expect(rows).toEqual([{ event_type: 'push', payload: JSON.parse(body) }]);
  });

  it('admits a Stripe event signed by the stripe package and a Twilio form (HMAC-SHA1), as the Node edge does', async () => {
    const secret = 'whsec_workerd_secret_0123456789';
    const customer = `cus_${freshId()}`;
    const stripeId = await seedConnection(db.pool, {
      workspace: freshId(), provider: 'stripe', source: 'https://stripe.example', kind: 'webhook', externalId: null,
      subjects: [`customer:${customer}`], secret,
    });
    const event = JSON.stringify({ id: `evt_${freshId()}`, type: 'customer.updated', data: { object: { id: customer, object: 'customer' } } });
    const header = new Stripe('sk_test_for_signatures_only').webhooks.generateTestHeaderString({ payload: event, secret });
    expect((await post(path().worker, `/hooks/stripe/${stripeId}`, event, { 'stripe-signature': header })).status).toBe(202);
    const forged = new Stripe('sk_test_for_signatures_only').webhooks.generateTestHeaderString({ payload: event, secret: 'whsec_other' });
    expect((await post(path().worker, `/hooks/stripe/${stripeId}`, event, { 'stripe-signature': forged })).status).toBe(401);

    const authToken = 'twilio_auth_token_workerd_0123';
    // The URL Twilio signed, fixed in the route: the Worker sees the request under the dev server's own host.
    const signedUrl = 'https://hooks.example.com/hooks/twilio/1';
    const twilioId = await seedConnection(db.pool, {
      workspace: freshId(), provider: 'twilio', source: 'https://api.twilio.com', kind: 'webhook', externalId: null,
      subjects: ['account:AC1'], secret: authToken, route: { signed_url: signedUrl },
    });
    const fields = { MessageSid: `SM${freshId()}`, AccountSid: 'AC1', MessageStatus: 'sent' };
    const answer = await post(path().worker, `/hooks/twilio/${twilioId}`, new URLSearchParams(fields).toString(), {
      'content-type': 'application/x-www-form-urlencoded',
      'x-twilio-signature': twilioLibrary.getExpectedTwilioSignature(authToken, signedUrl, fields),
    });
    expect(answer.status).toBe(202);
    const { rows } = await db.pool.query('SELECT payload FROM wharf.provider_event WHERE connection_id = $1', [twilioId]);
    expect(rows).toEqual([{ payload: fields }]);
  });

  it('stores a GitHub installation event with no workspace, and answers 404 to an unknown connection', async () => {
    const key = newDeliveryKey();
    const body = JSON.stringify({ action: 'created', installation: { id: freshId() } });
    const installation = await post(path().worker, '/hooks/github/test', body, {
      'x-github-event': 'installation', 'x-github-delivery': key, 'x-hub-signature-256': await signGitHubBody(githubSecret, body),
    });
    expect(installation.status).toBe(202);
    expect(installation.json.events).toEqual([{ workspace_id: null, event_id: expect.any(Number), outcome: 'stored' }]);
    const unknown = await post(path().worker, '/hooks/generic/999999999', '{}', {
      'webhook-id': 'msg_1', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
      'webhook-signature': `v1,${Buffer.alloc(32).toString('base64')}`,
    });
    expect(unknown.status).toBe(404);
    expect(unknown.json.error).toBe('unknown-connection');
  });

  it('answers WH409 (a route changed during admission, from a database before migration 0062) with 503 and Retry-After', async () => {
    const repo = await githubRepository();
    const { key, body, headers } = await repo.push();
    const stop = await raiseRouteChangedFor(db.pool, key);
    try {
      const answer = await post(path().worker, '/hooks/github/test', body, headers);
      expect(answer).toMatchObject({ status: 503, retryAfter: '1', json: { error: 'route-changed' } });
    } finally {
      await stop();
    }
    expect(await countEvents(db.pool, key)).toBe(0);
  });

  it('answers a body PostgreSQL cannot store exactly as the Node edge does, never 503', async () => {
    const repo = await githubRepository();
    const key = newDeliveryKey();
    // 1e999999 parses in JavaScript (as Infinity) but is out of numeric's range in PostgreSQL (22003).
    const { body, headers } = await signedPush(key, `{"ref":"refs/heads/main","after":"${key}","size":1e999999,` +
      `"installation":{"id":${repo.installation}},"repository":{"full_name":"${repo.repository}","owner":{"login":"acme"}}}`);
    const { logger, metrics } = recorder();
    const onNode = await createEdgeApp({ database: db.pool, env: edgeEnv, logger, metrics })
      .request('/hooks/github/test', { method: 'POST', body, headers });
    const onWorker = await post(path().worker, '/hooks/github/test', body, headers);
    expect(onWorker.status).not.toBe(503);
    expect(onWorker.status).toBe(onNode.status);
    expect(onWorker.json.error).toBe(((await onNode.json()) as Json).error);
    expect(await countEvents(db.pool, key)).toBe(0);
  });

  it('answers 503 with Retry-After when the database is down, and admits again once it is back', async () => {
    const repo = await githubRepository();
    await degraded(path(), () => path().database.stop(), async () => {
      const answer = await post(path().worker, '/hooks/github/test', ...bodyAndHeaders(await repo.push()));
      expectUnavailable(answer);
      expect(answer.ms).toBeLessThan(deadlineMs);
    });
    const { key, body, headers } = await repo.push();
    expect((await post(path().worker, '/hooks/github/test', body, headers)).status).toBe(202);
    expect(await countEvents(db.pool, key)).toBe(1);
  });

  it('answers 503 with Retry-After when its link to the database is down', async () => {
    const repo = await githubRepository();
    // wrangler's local Hyperdrive cannot take a refused connection (it throws
    // in Node); there the link black-holes instead, and the deadline answers.
    const breakLink = path().linkCanStop ? () => path().link.stop() : () => { path().link.mode = 'hang'; };
    await degraded(path(), breakLink, async () => {
      const answer = await post(path().worker, '/hooks/github/test', ...bodyAndHeaders(await repo.push()));
      expectUnavailable(answer);
      expect(answer.ms).toBeLessThan(deadlineMs + lateMarginMs);
    });
  });

  it('answers 503 at the deadline when the database does not answer', async () => {
    const repo = await githubRepository();
    await degraded(path(), () => { path().link.mode = 'hang'; }, async () => {
      const answer = await post(path().worker, '/hooks/github/test', ...bodyAndHeaders(await repo.push()));
      expectUnavailable(answer);
      // workerd's clock stands still while the Worker computes, so its timer
      // may fire a little before the deadline as measured from here.
      expect(answer.ms).toBeGreaterThanOrEqual(deadlineMs - 500);
      expect(answer.ms).toBeLessThan(deadlineMs + lateMarginMs);
    });
  });

  it('answers 503 at once when the connection drops mid-request', async () => {
    const repo = await githubRepository();
    const change = await holdConnection(repo.connectionId);
    try {
      const answer = await degraded(path(), () => {}, async () => {
        const answering = post(path().worker, '/hooks/github/test', ...bodyAndHeaders(await repo.push()));
        await change.admitWaiting();
        path().link.cut();
        return answering;
      });
      expectUnavailable(answer);
      expect(answer.ms).toBeLessThan(deadlineMs);
    } finally {
      await change.rollback();
      await change.client.end();
    }
  });
});

function bodyAndHeaders(push: Push): [string, Record<string, string>] {
  return [push.body, push.headers];
}

describe('workerd handshakes (no database)', () => {
  it('answers Slack url_verification with its challenge', async () => {
    const body = JSON.stringify({ type: 'url_verification', challenge: 'from-workerd' });
    const ts = Math.floor(Date.now() / 1000);
    const { status, json } = await post(paths['neon-http'].worker, '/hooks/slack/test', body, {
      'x-slack-request-timestamp': String(ts), 'x-slack-signature': await signSlackRequest(slackSecret, ts, body),
    });
    expect(status).toBe(200);
    expect(json).toEqual({ challenge: 'from-workerd' });
  });

  it('rejects a stale Slack timestamp with 401', async () => {
    const body = JSON.stringify({ type: 'url_verification', challenge: 'x' });
    const ts = Math.floor(Date.now() / 1000) - 600;
    const { status, json } = await post(paths['neon-http'].worker, '/hooks/slack/test', body, {
      'x-slack-request-timestamp': String(ts), 'x-slack-signature': await signSlackRequest(slackSecret, ts, body),
    });
    expect(status).toBe(401);
    expect(json.error).toBe('stale-timestamp');
  });
});
