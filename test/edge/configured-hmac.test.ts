// A signed source configured without code (provider `hmac`): its scheme is
// data in the connection's route, validated when saved through the API (a
// bad one is a 400 that says why, nothing saved), and it reproduces
// providers from settings alone: Shopify, Bitbucket, Zoom and Linear, with
// deliveries signed as in test/edge/provider-adapters.test.ts (by node:crypto
// as each provider documents, checked by Linear's own SDK), never by Wharf.
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Hono } from 'hono';
import { LinearWebhookClient } from '@linear/sdk/webhooks';
import { Paddle } from '@paddle/paddle-node-sdk';
import Stripe from 'stripe';
import { readHmacScheme } from '../../db/hmac-scheme.js';
import { createEdgeApp } from '../../edge/app.js';
import { adminToken, apiClient, type ApiCall } from '../support/api-client.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { edgeEnv, freshId, newDeliveryKey, recorder } from '../support/edge-fixtures.js';

let db: TestDatabase;
let app: Hono;
let api: ApiCall;
const admin = (method: string, path: string, body?: unknown) => api(method, path, { token: adminToken, body });

beforeAll(async () => {
  db = await createTestDatabase();
  const recorded = recorder();
  app = createEdgeApp({ database: db.pool, env: edgeEnv, logger: recorded.logger, metrics: recorded.metrics });
  api = apiClient({ db: db.pool, adminToken });
});
afterAll(async () => {
  await db?.drop();
});

/** A configured source made through the API, with `secret`, subscribed to `subject`; its id. */
async function configure(route: Record<string, unknown>, secret: string, subject: string): Promise<number> {
  const workspace = freshId();
  await admin('POST', '/workspaces', { id: workspace });
  const created = await admin('POST', `/workspaces/${workspace}/connections`, {
    provider: 'hmac', source: `https://sender-${workspace}.example`, kind: 'hmac', external_id: null, route,
  });
  expect(created.status).toBe(201);
  const id = created.body.id as number;
  expect((await admin('POST', `/connections/${id}/subscriptions`, { subject })).status).toBe(200);
  expect((await admin('POST', `/connections/${id}/rotate-secret`, { secret })).status).toBe(200);
  return id;
}

async function post(id: number, body: string, headers: Record<string, string>) {
  const response = await app.request(`/hooks/hmac/${id}`, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
  return { status: response.status, json: (await response.json()) as Record<string, any> };
}

async function stored(id: number) {
  const { rows } = await db.pool.query(
    'SELECT delivery_key, event_type, subject, headers FROM wharf.provider_event WHERE connection_id = $1 ORDER BY id', [id]);
  return rows;
}

describe('validated when saved', () => {
  const good = { header: 'x-signature', algorithm: 'sha256', encoding: 'hex', signed: '{body}' };

  it.each([
    [{ ...good, signed: '{timestamp}.{body}' }, 'timestamp.header'],
    [{ ...good, signed: '{nope}.{body}' }, '{nope}'],
    [{ ...good, signed: '{timestamp' }, 'without its "}"'],
    [{ ...good, signed: '{url}' }, '{body} exactly once'],
    [{ ...good, signed: '{body}{body}' }, '{body} exactly once'],
    [{ ...good, algorithm: 'md5' }, 'sha1, sha256 or sha512'],
    [{ ...good, encoding: 'base32' }, 'hex or base64'],
    [{ ...good, header: 'x signature' }, 'header must be a header name'],
    [{ ...good, delivery_id: { header: 'X-Signature' } }, 'signature header cannot also be'],
    [{ ...good, delivery_id: { pointer: 'id' } }, 'JSON pointer'],
    [{ ...good, timestamp: { header: 'x-ts', tolerance_seconds: 0 } }, 'tolerance_seconds'],
    [{ ...good, script: 'return true' }, 'unknown settings: script'],
    [{ ...good, pairs: { separator: '&', signature: 'v1' } }, 'pairs must be'],
    [{ ...good, pairs: { separator: ',', signature: 'v1', timestamp: 'v1' } }, 'pairs must be'],
    [{ ...good, signed: '{timestamp}.{body}', pairs: { separator: ',', signature: 'v1', timestamp: 't' }, timestamp: { header: 'x-ts' } },
     'not both'],
    ['{body}', 'must be an object'],
  ])('refuses %j with a 400 that says why, saving nothing', async (signature, reason) => {
    const workspace = freshId();
    await admin('POST', '/workspaces', { id: workspace });
    const response = await admin('POST', `/workspaces/${workspace}/connections`, {
      provider: 'hmac', source: 'https://sender.example', kind: 'hmac', external_id: null, route: { signature },
    });
    expect(response).toMatchObject({ status: 400, body: { error: 'invalid_signature_scheme' } });
    expect(response.body.message).toContain(reason);
    const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM wharf.connection WHERE workspace_id = $1', [workspace]);
    expect(rows).toEqual([{ n: 0 }]);
  });

  it('reads a template as literal text and placeholders, and nothing else', () => {
    expect(readHmacScheme({ ...good, signed: 'v0:{timestamp}:{body}', timestamp: { header: 'X-Ts' } })).toEqual({
      ok: true,
      scheme: {
        header: 'x-signature', prefix: '', algorithm: 'sha256', encoding: 'hex',
        signed: [{ literal: 'v0:' }, { placeholder: 'timestamp' }, { literal: ':' }, { placeholder: 'body' }],
        timestamp: { header: 'x-ts', unit: 'seconds', toleranceSeconds: 300 },
      },
    });
  });
});

describe('reproduces providers from settings alone', () => {
  it('Shopify: base64 HMAC-SHA256 of the body, topic and webhook id from headers', async () => {
    const secret = 'shopify_client_secret_for_hmac_source';
    const id = await configure({
      signature: { header: 'X-Shopify-Hmac-SHA256', algorithm: 'sha256', encoding: 'base64', signed: '{body}',
                   event_type: { header: 'X-Shopify-Topic' }, delivery_id: { header: 'X-Shopify-Webhook-Id' } },
      subject_pointers: ['/id'],
    }, secret, 'id:820982911');
    const body = JSON.stringify({ id: 820982911, email: 'jon@example.com' });
    const headers = { 'x-shopify-hmac-sha256': createHmac('sha256', secret).update(body, 'utf8').digest('base64'),
                      'x-shopify-topic': 'orders/create', 'x-shopify-webhook-id': newDeliveryKey() };
    expect((await post(id, body, headers)).status).toBe(202);
    // A retry under a new webhook id: the same body, a duplicate.
    expect((await post(id, body, { ...headers, 'x-shopify-webhook-id': newDeliveryKey() })).json.events[0].outcome).toBe('duplicate');
    const forged = createHmac('sha256', 'forged').update(body).digest('base64');
    expect(await post(id, body, { ...headers, 'x-shopify-hmac-sha256': forged })).toMatchObject({ status: 401, json: { error: 'bad-signature' } });
    expect(await post(id, body, { 'x-shopify-topic': 'orders/create' })).toMatchObject({ status: 401, json: { error: 'missing-signature' } });
    const rows = await stored(id);
    expect(rows).toEqual([expect.objectContaining({ event_type: 'orders/create', subject: 'id:820982911' })]);
    expect(Object.keys(rows[0].headers).sort()).toEqual(['content-type', 'x-shopify-topic', 'x-shopify-webhook-id']);
  });

  it('Bitbucket Cloud: sha256= hex of the body, event key and request id from headers', async () => {
    const secret = 'bitbucket_secret_for_hmac_source';
    const id = await configure({
      signature: { header: 'X-Hub-Signature', prefix: 'sha256=', algorithm: 'sha256', encoding: 'hex',
                   event_type: { header: 'X-Event-Key' }, delivery_id: { header: 'X-Request-UUID' } },
      subject_pointers: ['/repository/full_name'],
    }, secret, 'full_name:acme/api');
    const body = JSON.stringify({ repository: { full_name: 'acme/api' }, push: {} });
    const sign = (key: string) => `sha256=${createHmac('sha256', key).update(body).digest('hex')}`;
    const headers = { 'x-hub-signature': sign(secret), 'x-event-key': 'repo:push', 'x-request-uuid': newDeliveryKey() };
    expect((await post(id, body, headers)).status).toBe(202);
    expect((await post(id, body, { ...headers, 'x-hub-signature': sign('forged') })).status).toBe(401);
    expect((await post(id, body, { ...headers, 'x-hub-signature': sign(secret).replace('sha256=', 'sha1=') })).status).toBe(401);
    expect(await stored(id)).toEqual([expect.objectContaining({ delivery_key: headers['x-request-uuid'], event_type: 'repo:push' })]);
  });

  it('Zoom: v0= hex of "v0:{timestamp}:{body}", the timestamp header within its tolerance', async () => {
    const secret = 'zoom_secret_token_for_hmac_source';
    const id = await configure({
      signature: { header: 'x-zm-signature', prefix: 'v0=', algorithm: 'sha256', encoding: 'hex', signed: 'v0:{timestamp}:{body}',
                   timestamp: { header: 'x-zm-request-timestamp', unit: 'seconds', tolerance_seconds: 300 },
                   event_type: { pointer: '/event' } },
      subject_pointers: ['/payload/object/id'],
    }, secret, 'id:8123');
    const body = JSON.stringify({ event: 'meeting.started', event_ts: Date.now(), payload: { object: { id: '8123' } } });
    const sign = (ts: number) => ({ 'x-zm-request-timestamp': String(ts),
                                    'x-zm-signature': `v0=${createHmac('sha256', secret).update(`v0:${ts}:${body}`).digest('hex')}` });
    const now = Math.floor(Date.now() / 1000);
    expect((await post(id, body, sign(now))).status).toBe(202);
    expect(await post(id, body, sign(now - 900))).toMatchObject({ status: 401, json: { error: 'stale-timestamp' } });
    // The same signature under another timestamp header: the timestamp is signed.
    expect((await post(id, body, { ...sign(now), 'x-zm-request-timestamp': String(now - 1) })).status).toBe(401);
    expect(await stored(id)).toEqual([expect.objectContaining({ event_type: 'meeting.started', subject: 'id:8123' })]);
  });

  it('Linear: hex HMAC-SHA256 of the body (checked by @linear/sdk), type from the body, delivery from a header', async () => {
    const secret = 'linear_secret_for_hmac_source';
    const id = await configure({
      signature: { header: 'Linear-Signature', algorithm: 'sha256', encoding: 'hex',
                   event_type: { pointer: '/type' }, delivery_id: { header: 'Linear-Delivery' } },
      subject_pointers: ['/data/id'],
    }, secret, 'id:issue-1');
    const body = JSON.stringify({ type: 'Issue', action: 'create', webhookTimestamp: Date.now(), data: { id: 'issue-1' } });
    const signature = createHmac('sha256', secret).update(body).digest('hex');
    expect(new LinearWebhookClient(secret).verify(Buffer.from(body), signature)).toBe(true);
    expect((await post(id, body, { 'linear-signature': signature, 'linear-delivery': newDeliveryKey() })).status).toBe(202);
    expect(await stored(id)).toEqual([expect.objectContaining({ event_type: 'Issue', subject: 'id:issue-1' })]);
  });
});

describe('reproduces signature headers of key=value pairs from settings alone', () => {
  it('Stripe: t=…,v1=… over "{timestamp}.{body}", any v1 of several, signed by stripe.webhooks.generateTestHeaderString', async () => {
    const secret = 'whsec_stripe_secret_for_hmac_source';
    const stripe = new Stripe('sk_test_for_signatures_only');
    const id = await configure({
      signature: { header: 'Stripe-Signature', algorithm: 'sha256', encoding: 'hex', signed: '{timestamp}.{body}',
                   pairs: { separator: ',', signature: 'v1', timestamp: 't' }, timestamp: { unit: 'seconds', tolerance_seconds: 300 },
                   event_type: { pointer: '/type' }, delivery_id: { pointer: '/id' } },
      subject_pointers: ['/data/object/customer'],
    }, secret, 'customer:cus_9');
    const event = (eventId: string) => JSON.stringify({ id: eventId, type: 'invoice.paid', data: { object: { customer: 'cus_9' } } });
    const now = Math.floor(Date.now() / 1000);
    const body = event('evt_a');
    expect((await post(id, body, { 'stripe-signature': stripe.webhooks.generateTestHeaderString({ payload: body, secret }) })).status).toBe(202);
    // Rolling the secret: the old secret's v1 first, the current one's second.
    const rolled = event('evt_b');
    const old = stripe.webhooks.generateTestHeaderString({ payload: rolled, secret: 'whsec_old', timestamp: now });
    const current = stripe.webhooks.generateTestHeaderString({ payload: rolled, secret, timestamp: now });
    expect((await post(id, rolled, { 'stripe-signature': `${old},${current.split(',')[1]}` })).status).toBe(202);
    const stale = event('evt_c');
    expect(await post(id, stale, { 'stripe-signature': stripe.webhooks.generateTestHeaderString({ payload: stale, secret, timestamp: now - 600 }) }))
      .toMatchObject({ status: 401, json: { error: 'stale-timestamp' } });
    expect((await post(id, stale, { 'stripe-signature': stripe.webhooks.generateTestHeaderString({ payload: stale, secret: 'whsec_forged' }) })).status).toBe(401);
    expect((await stored(id)).map((row: { delivery_key: string }) => row.delivery_key)).toEqual(['evt_a', 'evt_b']);
  });

  it('Paddle: ts=…;h1=… over "{timestamp}:{body}" within 5 seconds, checked by @paddle/paddle-node-sdk', async () => {
    const secret = 'pdl_ntfset_secret_for_hmac_source';
    const id = await configure({
      signature: { header: 'Paddle-Signature', algorithm: 'sha256', encoding: 'hex', signed: '{timestamp}:{body}',
                   pairs: { separator: ';', signature: 'h1', timestamp: 'ts' }, timestamp: { tolerance_seconds: 5 },
                   event_type: { pointer: '/event_type' }, delivery_id: { pointer: '/event_id' } },
      subject_pointers: ['/data/customer_id'],
    }, secret, 'customer_id:ctm_9');
    const body = JSON.stringify({ event_id: 'evt_p1', event_type: 'transaction.completed', data: { customer_id: 'ctm_9' } });
    const sign = (ts: number) => `ts=${ts};h1=${createHmac('sha256', secret).update(`${ts}:${body}`).digest('hex')}`;
    const now = Math.floor(Date.now() / 1000);
    expect(await new Paddle('pdl_sdbx_apikey_for_signatures_only').webhooks.isSignatureValid(body, secret, sign(now))).toBe(true);
    expect((await post(id, body, { 'paddle-signature': sign(now) })).status).toBe(202);
    expect(await post(id, body, { 'paddle-signature': sign(now - 60) })).toMatchObject({ status: 401, json: { error: 'stale-timestamp' } });
    expect(await stored(id)).toEqual([expect.objectContaining({ delivery_key: 'evt_p1', event_type: 'transaction.completed', subject: 'customer_id:ctm_9' })]);
  });
});
