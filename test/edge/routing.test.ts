// Provider-specific routing, handshakes, endpoints, caching and database
// failures of the edge, through the Hono app against a real PostgreSQL.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Hono } from 'hono';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { createEdgeApp } from '../../edge/app.js';
import { signGitHubBody, signSlackRequest, verifyStandardWebhook } from '../../edge/adapters/index.js';
import type { Database } from '../../db/database.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { raiseRouteChangedFor } from '../support/route-changed.js';
import {
  countEvents, edgeEnv, freshId, githubSecret, newDeliveryKey, recorder, scenario, seedConnection, slackSecret,
} from '../support/edge-fixtures.js';
import { freePort } from '../../cli/postgres-server.js';

let db: TestDatabase;
let app: Hono;
let queries: string[];
const recorded = recorder();

/** The test database, remembering every statement the edge sends. */
function countingDatabase(inner: Database): Database {
  return {
    query(text, params) {
      queries.push(text);
      return inner.query(text, params);
    },
  };
}

beforeAll(async () => {
  db = await createTestDatabase();
  queries = [];
  app = createEdgeApp({ database: countingDatabase(db.pool), env: edgeEnv, logger: recorded.logger, metrics: recorded.metrics });
});
afterAll(async () => {
  await db?.drop();
});

// any: the tests read receipt and error fields of every shape.
type Json = Record<string, any>;

async function postTo(target: Hono, path: string, body: string | Uint8Array | ReadableStream, headers: Record<string, string>) {
  const response = await target.request(path, { method: 'POST', body, headers, duplex: 'half' } as RequestInit);
  return { status: response.status, headers: response.headers, json: (await response.json()) as Json };
}

async function github(event: string, payload: object, key = newDeliveryKey(), target = app) {
  const body = JSON.stringify(payload);
  return postTo(target, '/hooks/github/test', body, {
    'x-github-event': event, 'x-github-delivery': key, 'x-hub-signature-256': await signGitHubBody(githubSecret, body),
  });
}

describe('GitHub', () => {
  it("accepts the App's previous secret while GITHUB_APP_<APP>_WEBHOOK_SECRET_PREVIOUS names it, and only then", async () => {
    const installation = freshId();
    const payload = { action: 'created', installation: { id: installation } };
    const body = JSON.stringify(payload);
    const signedWithOld = async () => ({
      'x-github-event': 'installation', 'x-github-delivery': newDeliveryKey(),
      'x-hub-signature-256': await signGitHubBody('the-old-app-secret-0123456789', body),
    });
    const rotating = createEdgeApp({
      database: db.pool, env: { ...edgeEnv, GITHUB_APP_TEST_WEBHOOK_SECRET_PREVIOUS: 'the-old-app-secret-0123456789' },
      logger: recorded.logger, metrics: recorded.metrics,
    });
    expect((await postTo(rotating, '/hooks/github/test', body, await signedWithOld())).status).toBe(202);
    expect((await github('installation', payload)).status).toBe(202);
    expect((await postTo(app, '/hooks/github/test', body, await signedWithOld())).status).toBe(401);
  });

  it('stores an installation event once with no workspace, in the system scope, with or without a connection', async () => {
    const installation = freshId();
    const key = newDeliveryKey();
    const payload = { action: 'created', installation: { id: installation, account: { login: `org-${installation}` } } };
    const first = await github('installation', payload, key);
    expect(first.status).toBe(202);
    expect(first.json.events).toEqual([{ workspace_id: null, event_id: expect.any(Number), outcome: 'stored' }]);
    const again = await github('installation', payload, key);
    expect(again.json.events[0].outcome).toBe('duplicate');
    const { rows } = await db.pool.query('SELECT workspace_id, scope_key FROM wharf.provider_event WHERE delivery_key = $1', [key]);
    expect(rows).toEqual([{ workspace_id: null, scope_key: 'system:github:https://github.com' }]);
  });

  it('drops a work payload relabelled as an installation event (invalid-event-route)', async () => {
    const installation = freshId();
    await seedConnection(db.pool, { workspace: freshId(), provider: 'github', source: 'https://github.com', kind: 'app_installation', externalId: String(installation), subjects: ['repo:acme/x'] });
    const key = newDeliveryKey();
    const { status, json } = await github('installation', { ref: 'refs/heads/main', installation: { id: installation }, repository: { full_name: 'acme/x' } }, key);
    expect(status).toBe(202);
    expect(json).toMatchObject({ status: 'accepted', delivery_id: key, events: [], dropped: 'invalid-event-route' });
    expect(await countEvents(db.pool, key)).toBe(0);
    expect(recorded.rejected).toContain('invalid-event-route');
  });

  it('drops a work event without an installation (work-event-without-source)', async () => {
    const key = newDeliveryKey();
    const { status, json } = await github('push', { ref: 'refs/heads/main', repository: { full_name: 'acme/x' } }, key);
    expect(status).toBe(202);
    expect(json.dropped).toBe('work-event-without-source');
    expect(await countEvents(db.pool, key)).toBe(0);
  });

  it('takes the installation from the signed body, never from a header', async () => {
    const installation = freshId();
    await seedConnection(db.pool, { workspace: freshId(), provider: 'github', source: 'https://github.com', kind: 'app_installation', externalId: String(installation), subjects: ['repo:acme/y'] });
    const body = JSON.stringify({ action: 'opened', repository: { full_name: 'acme/y' } });
    const { json } = await postTo(app, '/hooks/github/test', body, {
      'x-github-event': 'issues', 'x-github-delivery': newDeliveryKey(),
      'x-github-hook-installation-target-id': String(installation),
      'x-hub-signature-256': await signGitHubBody(githubSecret, body),
    });
    expect(json.dropped).toBe('work-event-without-source');
  });

  it('answers ping 200 and stores nothing', async () => {
    const before = await countEvents(db.pool);
    const { status } = await github('ping', { zen: 'Keep it logically awesome.', hook_id: 1 });
    expect(status).toBe(200);
    expect(await countEvents(db.pool)).toBe(before);
  });

  it('answers 400 without X-GitHub-Delivery', async () => {
    const body = JSON.stringify({ action: 'opened' });
    const { status, json } = await postTo(app, '/hooks/github/test', body, {
      'x-github-event': 'issues', 'x-hub-signature-256': await signGitHubBody(githubSecret, body),
    });
    expect(status).toBe(400);
    expect(json.error).toBe('missing-field');
  });

  it('answers 404 for an app without a configured secret', async () => {
    const { status, json } = await github('push', {}, newDeliveryKey(), createEdgeApp({
      database: db.pool, env: {}, logger: recorded.logger, metrics: recorded.metrics,
    }));
    expect(status).toBe(404);
    expect(json.error).toBe('unknown-app');
  });
});

describe('Slack', () => {
  it('answers url_verification with its challenge, signed, and stores nothing', async () => {
    const before = await countEvents(db.pool);
    const body = JSON.stringify({ type: 'url_verification', token: 'legacy', challenge: 'c-123' });
    const ts = Math.floor(Date.now() / 1000);
    const { status, json } = await postTo(app, '/hooks/slack/test', body, {
      'x-slack-request-timestamp': String(ts), 'x-slack-signature': await signSlackRequest(slackSecret, ts, body),
    });
    expect(status).toBe(200);
    expect(json).toEqual({ challenge: 'c-123' });
    expect(await countEvents(db.pool)).toBe(before);
  });

  it('does not answer an unsigned url_verification', async () => {
    const { status } = await postTo(app, '/hooks/slack/test', JSON.stringify({ type: 'url_verification', challenge: 'c' }), {});
    expect(status).toBe(401);
  });
});

describe('GitLab delivery keys', () => {
  it('prefer Idempotency-Key, then X-Gitlab-Event-UUID, else hash body and event', async () => {
    const s = await scenario(db.pool, 'gitlab', freshId());
    const body = JSON.stringify(s.payload(''));
    const signed = await s.sign(body, { deliveryKey: 'uuid-1' });
    const withIdempotency = await postTo(app, s.path, body, { ...signed, 'idempotency-key': 'idem-1' });
    expect(withIdempotency.json.delivery_id).toBe('idem-1');
    const withUuid = await postTo(app, s.path, body, signed);
    expect(withUuid.json.delivery_id).toBe('uuid-1');
    const { 'x-gitlab-event-uuid': _uuid, ...bare } = signed;
    const hashed = await postTo(app, s.path, body, bare);
    expect(hashed.json.delivery_id).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(hashed.json.events[0].outcome).toBe('stored');
    const rehashed = await postTo(app, s.path, body, bare);
    expect(rehashed.json).toMatchObject({ delivery_id: hashed.json.delivery_id, events: [{ outcome: 'duplicate' }] });
  });
});

describe('Standard Webhooks', () => {
  it('verifies what the standardwebhooks reference library signs', async () => {
    const secret = `whsec_${Buffer.from('interop-key').toString('base64')}`;
    const body = '{"type":"invoice.paid","data":{}}';
    const timestamp = new Date();
    const signature = new Webhook(secret).sign('msg_1', timestamp, body);
    const headers = new Headers({ 'webhook-id': 'msg_1', 'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)), 'webhook-signature': `v1,bogus ${signature}` });
    expect(await verifyStandardWebhook(secret, new TextEncoder().encode(body), headers, Date.now())).toEqual({ ok: true });
    headers.set('webhook-id', 'msg_2');
    expect(await verifyStandardWebhook(secret, new TextEncoder().encode(body), headers, Date.now())).toEqual({ ok: false, reason: 'bad-signature' });
  });
});

describe('Outline', () => {
  it('routes a document event to document then collection subjects', async () => {
    const workspace = freshId();
    const s = await scenario(db.pool, 'outline', workspace);
    const key = newDeliveryKey();
    const body = JSON.stringify(s.payload(key));
    const { json } = await postTo(app, s.path, body, await s.sign(body, { deliveryKey: key }));
    const { rows } = await db.pool.query('SELECT subject FROM wharf.provider_event WHERE id = $1', [json.events[0].event_id]);
    expect(rows[0].subject).toMatch(/^document:doc-/);
  });
});

describe('connection endpoints', () => {
  it('answer 404 for an unknown connection, another provider\'s connection, or a malformed id, writing nothing', async () => {
    const gitlab = await scenario(db.pool, 'gitlab', freshId());
    const gitlabId = gitlab.path.split('/').at(-1);
    const before = await countEvents(db.pool);
    const log = await db.pool.query('SELECT count(*) FROM wharf.admission_log');
    for (const path of ['/hooks/forgejo/999999999', `/hooks/forgejo/${gitlabId}`, '/hooks/forgejo/abc', '/hooks/forgejo/01']) {
      // Well-formed signature headers: without them the answer is a 401 before any lookup.
      const { status, json } = await postTo(app, path, '{}', { 'x-forgejo-signature': 'a'.repeat(64) });
      expect(status).toBe(404);
      expect(json.error).toBe('unknown-connection');
    }
    expect(await countEvents(db.pool)).toBe(before);
    expect((await db.pool.query('SELECT count(*) FROM wharf.admission_log')).rows).toEqual(log.rows);
  });

  it('cost one cached lookup for a flood of unauthenticated requests, and never reach admit', async () => {
    const s = await scenario(db.pool, 'forgejo', freshId());
    queries.length = 0;
    const answers = await Promise.all(Array.from({ length: 20 }, async () => {
      const body = JSON.stringify(s.payload(''));
      return (await postTo(app, s.path, body, await s.sign(body, { deliveryKey: newDeliveryKey(), secret: 'guess' }))).status;
    }));
    expect(new Set(answers)).toEqual(new Set([401]));
    expect(queries).toHaveLength(1);
    expect(queries[0]).toMatch(/FROM wharf\.connection_endpoint\(\$1\)$/);
  });

  it('drop a delivery to a suspended source connection (source-inactive)', async () => {
    const s = await scenario(db.pool, 'generic', freshId());
    const connection = Number(s.path.split('/').at(-1));
    await db.pool.query(`SELECT wharf.set_connection_state($1, 'SUSPENDED')`, [connection]);
    const key = newDeliveryKey();
    const body = JSON.stringify(s.payload(key));
    const { status, json } = await postTo(app, s.path, body, await s.sign(body, { deliveryKey: key }));
    expect(status).toBe(202);
    expect(json).toMatchObject({ events: [], dropped: 'source-inactive' });
  });
});

describe('HTTP surface', () => {
  it('answers 405 with Allow: POST to another method on a hook route', async () => {
    const response = await app.request('/hooks/github/test', { method: 'GET' });
    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toBe('POST');
    expect(await response.json()).toMatchObject({ error: 'method-not-allowed' });
  });

  it('answers 404 to an unknown provider or path', async () => {
    expect((await postTo(app, '/hooks/nosuch/1', '{}', {})).status).toBe(404);
    expect((await app.request('/nowhere')).status).toBe(404);
  });

  it('answers 413 to a streamed body over the limit without Content-Length', async () => {
    const small = createEdgeApp({ database: db.pool, env: { ...edgeEnv, WHARF_MAX_BODY_BYTES: '1000' }, logger: recorded.logger, metrics: recorded.metrics });
    const chunk = new TextEncoder().encode('x'.repeat(600));
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(chunk);
        controller.enqueue(chunk);
        controller.close();
      },
    });
    const { status, json } = await postTo(small, '/hooks/github/test', stream, { 'x-hub-signature-256': `sha256=${'0'.repeat(64)}` });
    expect(status).toBe(413);
    expect(json.error).toBe('body-too-large');
  });
});

describe('database failures', () => {
  it('answer 503 with Retry-After when PostgreSQL is unreachable, for admit and for a secret lookup', async () => {
    const port = await freePort();
    const pool = new pg.Pool({ connectionString: `postgres://postgres@127.0.0.1:${port}/wharf`, connectionTimeoutMillis: 2000 });
    const down = createEdgeApp({ database: pool, env: edgeEnv, logger: recorded.logger, metrics: recorded.metrics });
    try {
      const viaAdmit = await github('push', { installation: { id: 1 }, repository: { full_name: 'a/b' } }, newDeliveryKey(), down);
      expect(viaAdmit.status).toBe(503);
      expect(viaAdmit.json).toEqual({ error: 'database-unavailable', message: expect.any(String) });
      expect(Number(viaAdmit.headers.get('retry-after'))).toBeGreaterThan(0);
      const viaLookup = await postTo(down, '/hooks/gitlab/1', '{}', { 'x-gitlab-token': 't' });
      expect(viaLookup.status).toBe(503);
    } finally {
      await pool.end();
    }
  });

  it('answer 503 with Retry-After when admit answers WH409 (the route changed: a database before migration 0062), and store nothing', async () => {
    const s = await scenario(db.pool, 'forgejo', freshId());
    const key = newDeliveryKey();
    const body = JSON.stringify(s.payload(key));
    const stop = await raiseRouteChangedFor(db.pool, key);
    try {
      const { status, headers: answer, json } = await postTo(app, s.path, body, await s.sign(body, { deliveryKey: key }));
      expect(status).toBe(503);
      expect(json.error).toBe('route-changed');
      expect(answer.get('retry-after')).not.toBeNull();
    } finally {
      await stop();
    }
    expect(await countEvents(db.pool, key)).toBe(0);
  });

  it('decide a delivery under a connection change that committed while admit waited for its source: 202, dropped, nothing stored', async () => {
    const s = await scenario(db.pool, 'forgejo', freshId());
    const connection = Number(s.path.split('/').at(-1));
    const key = newDeliveryKey();
    const body = JSON.stringify(s.payload(key));
    const headers = await s.sign(body, { deliveryKey: key });
    // Warm the secret cache so that the request's only statement is admit
    // (with another body: a body admitted once is a duplicate at once).
    const warmKey = newDeliveryKey();
    const warmBody = JSON.stringify(s.payload(warmKey));
    await postTo(app, s.path, warmBody, await s.sign(warmBody, { deliveryKey: warmKey }));

    const changer = await db.connect();
    await changer.query('BEGIN');
    await changer.query(`SELECT wharf.set_connection_state($1, 'SUSPENDED')`, [connection]);
    const pending = postTo(app, s.path, body, headers);
    // Commit the change only once admit is waiting for the source's lock.
    for (let waiting = false; !waiting;) {
      const { rows } = await db.pool.query(
        `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`);
      waiting = rows[0].n > 0;
      if (!waiting) await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await changer.query('COMMIT');
    await changer.end();
    const { status, json } = await pending;
    expect(status).toBe(202);
    expect(json).toMatchObject({ events: [], dropped: 'source-inactive' });
    expect(await countEvents(db.pool, key)).toBe(0);
  });
});
