// The adapters of contract v5 (Stripe, Shopify, Linear, Paddle, Zoom,
// Twilio, Bitbucket Cloud, Jira, and Slack's form posts) through the Hono
// app against a real PostgreSQL. Every delivery is signed by the provider's
// own library where it publishes one (stripe's generateTestHeaderString,
// twilio's getExpectedTwilioSignature) or, where the library only verifies
// (@linear/sdk, @paddle/paddle-node-sdk), signed as the provider documents it
// with node:crypto and checked by that library before it is sent; never by
// Wharf's own signing code. Every refusal stores nothing.
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Hono } from 'hono';
import Stripe from 'stripe';
import twilioLibrary from 'twilio';
import { LinearWebhookClient } from '@linear/sdk/webhooks';
import { Paddle } from '@paddle/paddle-node-sdk';
import { createEdgeApp } from '../../edge/app.js';
import type { Provider } from '../../db/providers.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { parseKeyRing } from '../../db/secret-box.js';
import { rotateConnectionSecret } from '../../operator/sql/connection-secrets.js';
import {
  edgeEnv, freshId, newDeliveryKey, recorder, seedConnection, slackSecret, storedSecret, testSecretKeys,
} from '../support/edge-fixtures.js';

let db: TestDatabase;
let app: Hono;
const recorded = recorder();
const stripeLibrary = new Stripe('sk_test_for_signatures_only');

beforeAll(async () => {
  db = await createTestDatabase();
  app = createEdgeApp({ database: db.pool, env: edgeEnv, logger: recorded.logger, metrics: recorded.metrics });
});
afterAll(async () => {
  await db?.drop();
});

interface Posted {
  status: number;
  // any: the tests read receipt and error fields of every shape.
  json: Record<string, any>;
}

async function post(path: string, body: string, headers: Record<string, string>, contentType = 'application/json'): Promise<Posted> {
  const response = await app.request(path, { method: 'POST', body, headers: { 'content-type': contentType, ...headers } });
  return { status: response.status, json: (await response.json()) as Record<string, any> };
}

/** A connection of `provider` in a workspace of its own, with its secret, subscribed to `subjects`. */
async function connect(provider: Provider, secret: string, subjects: string[], route: object = {}): Promise<{ id: number; workspace: number }> {
  const workspace = freshId();
  const id = await seedConnection(db.pool, {
    workspace, provider, source: `https://${provider}-${workspace}.example`, kind: 'webhook', externalId: String(workspace),
    subjects, secret, route,
  });
  return { id, workspace };
}

async function stored(connectionId: number): Promise<{ delivery_key: string; event_type: string; subject: string; payload: any; headers: any }[]> {
  const { rows } = await db.pool.query(
    'SELECT delivery_key, event_type, subject, payload, headers FROM wharf.provider_event WHERE connection_id = $1 ORDER BY id',
    [connectionId]);
  return rows;
}

async function admissionLog(connectionId: number): Promise<string[]> {
  const { rows } = await db.pool.query<{ reason: string }>(
    'SELECT reason FROM wharf.admission_log WHERE connection_id = $1 ORDER BY id', [connectionId]);
  return rows.map((row) => row.reason);
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

describe('Stripe (signed by stripe.webhooks.generateTestHeaderString)', () => {
  const secret = 'whsec_test_secret_for_wharf_0123456789';
  const customer = `cus_${freshId()}`;
  let c: { id: number; workspace: number };
  const event = (id = `evt_${newDeliveryKey().replaceAll('-', '')}`) => JSON.stringify({
    id, object: 'event', type: 'invoice.paid', api_version: '2024-06-20', created: nowSeconds(), livemode: false,
    data: { object: { id: `in_${freshId()}`, object: 'invoice', customer } },
  });
  const sign = (payload: string, options: { secret?: string; timestamp?: number } = {}) =>
    stripeLibrary.webhooks.generateTestHeaderString({ payload, secret: options.secret ?? secret, timestamp: options.timestamp ?? nowSeconds() });

  beforeAll(async () => {
    c = await connect('stripe', secret, [`customer:${customer}`]);
  });

  it('stores a valid delivery once, keyed by the event id, in the customer scope; a replay is a duplicate', async () => {
    const body = event();
    const header = sign(body);
    // The library that signed it accepts it too.
    expect(stripeLibrary.webhooks.constructEvent(body, header, secret).type).toBe('invoice.paid');
    const first = await post(`/hooks/stripe/${c.id}`, body, { 'stripe-signature': header });
    expect(first.status).toBe(202);
    expect(first.json.events).toEqual([{ workspace_id: c.workspace, event_id: expect.any(Number), outcome: 'stored' }]);
    const again = await post(`/hooks/stripe/${c.id}`, body, { 'stripe-signature': header });
    expect(again.json.events).toEqual([{ ...first.json.events[0], outcome: 'duplicate' }]);
    const rows = (await stored(c.id)).filter((row) => row.delivery_key === JSON.parse(body).id);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ event_type: 'invoice.paid', subject: `customer:${customer}`, payload: JSON.parse(body) });
    expect(Object.keys(rows[0]!.headers)).not.toContain('stripe-signature');
  });

  it('refuses a forged, a stale and a malformed signature with 401, storing nothing', async () => {
    const before = (await stored(c.id)).length;
    const body = event();
    const forged = await post(`/hooks/stripe/${c.id}`, body, { 'stripe-signature': sign(body, { secret: 'whsec_someone_else' }) });
    expect(forged).toMatchObject({ status: 401, json: { error: 'bad-signature' } });
    const stale = await post(`/hooks/stripe/${c.id}`, body, { 'stripe-signature': sign(body, { timestamp: nowSeconds() - 600 }) });
    expect(stale).toMatchObject({ status: 401, json: { error: 'stale-timestamp' } });
    for (const header of ['', 'v1=abc', `t=${nowSeconds()}`, `t=${nowSeconds()},v1=${'z'.repeat(64)}`]) {
      const malformed = await post(`/hooks/stripe/${c.id}`, body, { 'stripe-signature': header });
      expect(malformed.status).toBe(401);
    }
    // Signed, but the body was changed after signing.
    const tampered = await post(`/hooks/stripe/${c.id}`, body.replace('invoice.paid', 'invoice.voided'), { 'stripe-signature': sign(body) });
    expect(tampered).toMatchObject({ status: 401, json: { error: 'bad-signature' } });
    expect((await stored(c.id)).length).toBe(before);
  });

  it('accepts any of several v1 signatures (Stripe rolling the secret) and the previous secret during the overlap', async () => {
    const body = event();
    const timestamp = nowSeconds();
    const other = sign(body, { secret: 'whsec_the_old_secret', timestamp }).split(',')[1]!;
    const header = `${sign(body, { timestamp })},${other}`;
    expect((await post(`/hooks/stripe/${c.id}`, body, { 'stripe-signature': header })).status).toBe(202);
    // Rotated: the new secret is current and the old one still verifies.
    const rotated = await connect('stripe', secret, [`customer:${customer}`]);
    await db.pool.query('SELECT wharf.set_connection_secret($1, $2)', [rotated.id, await storedSecret('stripe', rotated.id, 'whsec_new_secret_after_rotation_42')]);
    const old = event();
    expect((await post(`/hooks/stripe/${rotated.id}`, old, { 'stripe-signature': sign(old) })).status).toBe(202);
    const fresh = event();
    expect((await post(`/hooks/stripe/${rotated.id}`, fresh, { 'stripe-signature': sign(fresh, { secret: 'whsec_new_secret_after_rotation_42' }) })).status).toBe(202);
    expect(await stored(rotated.id)).toHaveLength(2);
  });

  it('answers a signed body that is no JSON 400, and logs a delivery no subscription wants in admission_log', async () => {
    const notJson = 'not json';
    expect(await post(`/hooks/stripe/${c.id}`, notJson, { 'stripe-signature': sign(notJson) }))
      .toMatchObject({ status: 400, json: { error: 'invalid-json' } });
    const unsubscribed = JSON.stringify({ id: 'evt_nobody', type: 'charge.succeeded', data: { object: { id: 'ch_1', object: 'charge', customer: 'cus_nobody' } } });
    const response = await post(`/hooks/stripe/${c.id}`, unsubscribed, { 'stripe-signature': sign(unsubscribed) });
    expect(response).toMatchObject({ status: 202, json: { events: [], dropped: 'no-subscriber' } });
    expect(await admissionLog(c.id)).toContain('no-subscriber');
  });
});

describe('Shopify (its documented example: base64 HMAC-SHA256 of the raw body)', () => {
  const secret = 'shpss_app_client_secret_0123456789abcdef';
  const sign = (body: string, key = secret) => createHmac('sha256', key).update(body, 'utf8').digest('base64');

  it('stores an order event in the order scope, deduplicated by its webhook id and its body', async () => {
    const order = freshId();
    const c = await connect('shopify', secret, ['shop:acme.myshopify.com']);
    const body = JSON.stringify({ id: order, admin_graphql_api_id: `gid://shopify/Order/${order}`, total_price: '10.00' });
    const headers = {
      'x-shopify-hmac-sha256': sign(body), 'x-shopify-topic': 'orders/create', 'x-shopify-webhook-id': newDeliveryKey(),
      'x-shopify-shop-domain': 'acme.myshopify.com',
    };
    expect((await post(`/hooks/shopify/${c.id}`, body, headers)).status).toBe(202);
    // Shopify retried with a new webhook id: the same body is the same delivery.
    const retried = await post(`/hooks/shopify/${c.id}`, body, { ...headers, 'x-shopify-webhook-id': newDeliveryKey() });
    expect(retried.json.events[0].outcome).toBe('duplicate');
    expect(await stored(c.id)).toEqual([expect.objectContaining({ event_type: 'orders/create', subject: `order:${order}` })]);
    expect((await post(`/hooks/shopify/${c.id}`, body, { ...headers, 'x-shopify-hmac-sha256': sign(body, 'forged') })).status).toBe(401);
    expect((await post(`/hooks/shopify/${c.id}`, body, { ...headers, 'x-shopify-hmac-sha256': 'not base64!' })).status).toBe(401);
    expect(await stored(c.id)).toHaveLength(1);
  });
});

describe('Linear (checked by @linear/sdk LinearWebhookClient)', () => {
  const secret = 'lin_wh_signing_secret_0123456789';
  const sign = (body: string, key = secret) => createHmac('sha256', key).update(body).digest('hex');

  it('stores an issue event in the issue scope; refuses a forged signature and a stale webhookTimestamp', async () => {
    const c = await connect('linear', secret, ['team:team-1']);
    const issue = `issue-${freshId()}`;
    const payload = (timestamp: number) => JSON.stringify({
      action: 'update', type: 'Issue', organizationId: 'org-1', webhookTimestamp: timestamp, webhookId: 'wh-1',
      data: { id: issue, teamId: 'team-1', title: 'Bug' },
    });
    const body = payload(Date.now());
    expect(new LinearWebhookClient(secret).verify(Buffer.from(body), sign(body))).toBe(true);
    const headers = { 'linear-signature': sign(body), 'linear-delivery': newDeliveryKey(), 'linear-event': 'Issue' };
    expect((await post(`/hooks/linear/${c.id}`, body, headers)).status).toBe(202);
    expect(await stored(c.id)).toEqual([expect.objectContaining({ event_type: 'Issue.update', subject: `issue:${issue}` })]);

    const stale = payload(Date.now() - 120_000);
    expect(() => new LinearWebhookClient(secret).verify(Buffer.from(stale), sign(stale))).toThrow();
    expect(await post(`/hooks/linear/${c.id}`, stale, { ...headers, 'linear-signature': sign(stale) }))
      .toMatchObject({ status: 401, json: { error: 'stale-timestamp' } });
    const forged = payload(Date.now());
    expect(await post(`/hooks/linear/${c.id}`, forged, { ...headers, 'linear-signature': sign(forged, 'other') }))
      .toMatchObject({ status: 401, json: { error: 'bad-signature' } });
    expect(await stored(c.id)).toHaveLength(1);
  });
});

describe('Paddle (checked by @paddle/paddle-node-sdk webhooks.isSignatureValid)', () => {
  // The constructor sets up the SDK's crypto for Node; no request is made.
  const paddleLibrary = new Paddle('pdl_sdbx_apikey_for_signatures_only');
  const secret = 'pdl_ntfset_01h0000000000000000000000_secretkey';
  const sign = (body: string, ts = nowSeconds(), key = secret) => `ts=${ts};h1=${createHmac('sha256', key).update(`${ts}:${body}`).digest('hex')}`;

  it('stores a subscription event in the customer scope, once; refuses a stale and a forged signature', async () => {
    const c = await connect('paddle', secret, ['account:self']);
    const body = JSON.stringify({
      event_id: `evt_${freshId()}`, event_type: 'subscription.created', occurred_at: new Date().toISOString(), notification_id: 'ntf_1',
      data: { id: 'sub_1', customer_id: 'ctm_1', status: 'active' },
    });
    const header = sign(body);
    expect(await paddleLibrary.webhooks.isSignatureValid(body, secret, header)).toBe(true);
    const first = await post(`/hooks/paddle/${c.id}`, body, { 'paddle-signature': header });
    expect(first.status).toBe(202);
    expect((await post(`/hooks/paddle/${c.id}`, body, { 'paddle-signature': sign(body) })).json.events[0].outcome).toBe('duplicate');
    expect(await stored(c.id)).toEqual([expect.objectContaining({ event_type: 'subscription.created', subject: 'customer:ctm_1' })]);
    const stale = sign(body, nowSeconds() - 30);
    expect(await paddleLibrary.webhooks.isSignatureValid(body, secret, stale)).toBe(false);
    expect(await post(`/hooks/paddle/${c.id}`, body, { 'paddle-signature': stale })).toMatchObject({ status: 401, json: { error: 'stale-timestamp' } });
    expect((await post(`/hooks/paddle/${c.id}`, body, { 'paddle-signature': sign(body, nowSeconds(), 'forged') })).status).toBe(401);
    // Rotation: two h1, one of them current.
    const ts = nowSeconds();
    const rotating = `${sign(body, ts, 'pdl_old_key')};h1=${sign(body, ts).split('h1=')[1]}`;
    expect((await post(`/hooks/paddle/${c.id}`, body, { 'paddle-signature': rotating })).status).toBe(202);
    expect(await stored(c.id)).toHaveLength(1);
  });
});

describe('Zoom (signed as its documentation says: v0 HMAC-SHA256 of "v0:<timestamp>:<body>")', () => {
  const secret = 'zoom_secret_token_abcdefghij';
  const sign = (body: string, ts = nowSeconds(), key = secret) => ({
    'x-zm-request-timestamp': String(ts), 'x-zm-signature': `v0=${createHmac('sha256', key).update(`v0:${ts}:${body}`).digest('hex')}`,
  });

  it('answers endpoint.url_validation with the encrypted token and stores nothing', async () => {
    const c = await connect('zoom', secret, ['account:acct-1']);
    const body = JSON.stringify({ event: 'endpoint.url_validation', event_ts: Date.now(), payload: { plainToken: 'qgg8vlvZRS6UYooatFL8Aw' } });
    const response = await post(`/hooks/zoom/${c.id}`, body, sign(body));
    expect(response).toEqual({
      status: 200,
      json: { plainToken: 'qgg8vlvZRS6UYooatFL8Aw', encryptedToken: createHmac('sha256', secret).update('qgg8vlvZRS6UYooatFL8Aw').digest('hex') },
    });
    // A validation that is not signed by the secret gets no answer.
    expect((await post(`/hooks/zoom/${c.id}`, body, sign(body, nowSeconds(), 'forged'))).status).toBe(401);
    expect(await stored(c.id)).toEqual([]);
  });

  it('stores a meeting event in the meeting scope, a retry of the same body as a duplicate; refuses a stale one', async () => {
    const c = await connect('zoom', secret, ['account:acct-1']);
    const body = JSON.stringify({ event: 'meeting.started', event_ts: Date.now(), payload: { account_id: 'acct-1', object: { id: '8123', uuid: 'u1' } } });
    // 200, not 202: Zoom retries anything else.
    expect(await post(`/hooks/zoom/${c.id}`, body, sign(body))).toMatchObject({ status: 200, json: { status: 'accepted' } });
    expect((await post(`/hooks/zoom/${c.id}`, body, sign(body))).json.events[0].outcome).toBe('duplicate');
    expect(await post(`/hooks/zoom/${c.id}`, body, sign(body, nowSeconds() - 900))).toMatchObject({ status: 401, json: { error: 'stale-timestamp' } });
    expect(await stored(c.id)).toEqual([expect.objectContaining({ event_type: 'meeting.started', subject: 'meeting:8123' })]);
  });
});

describe('Twilio (signed by twilio.getExpectedTwilioSignature; a form body)', () => {
  const authToken = 'twilio_auth_token_0123456789abcdef';

  it('verifies the URL and sorted parameters, stores the form as a JSON object, and refuses a forgery', async () => {
    const c = await connect('twilio', authToken, ['account:AC123']);
    const url = `http://localhost/hooks/twilio/${c.id}`;
    const fields = { MessageSid: `SM${freshId()}`, AccountSid: 'AC123', MessageStatus: 'delivered', To: '+15005550006', Body: 'héllo & bye' };
    const body = new URLSearchParams(fields).toString();
    const signature = twilioLibrary.getExpectedTwilioSignature(authToken, url, fields);
    expect(twilioLibrary.validateRequest(authToken, signature, url, fields)).toBe(true);
    const form = 'application/x-www-form-urlencoded';
    const headers = { 'x-twilio-signature': signature, 'i-twilio-idempotency-token': newDeliveryKey() };
    expect((await post(`/hooks/twilio/${c.id}`, body, headers, form)).status).toBe(202);
    expect(await stored(c.id)).toEqual([expect.objectContaining({
      event_type: 'message.delivered', subject: `message:${fields.MessageSid}`, payload: fields,
    })]);
    const forged = twilioLibrary.getExpectedTwilioSignature('another_token_0000000000000000', url, fields);
    expect((await post(`/hooks/twilio/${c.id}`, body, { ...headers, 'x-twilio-signature': forged }, form)).status).toBe(401);
    // Twilio requested https; a TLS proxy handed the request on as http.
    const https = { ...fields, MessageSid: `SM${freshId()}` };
    const httpsSignature = twilioLibrary.getExpectedTwilioSignature(authToken, url.replace('http:', 'https:'), https);
    expect((await post(`/hooks/twilio/${c.id}`, new URLSearchParams(https).toString(), { 'x-twilio-signature': httpsSignature }, form)).status).toBe(202);
    // Signed for another URL (another connection's endpoint): refused.
    const elsewhere = twilioLibrary.getExpectedTwilioSignature(authToken, 'http://localhost/hooks/twilio/1', fields);
    expect((await post(`/hooks/twilio/${c.id}`, body, { ...headers, 'x-twilio-signature': elsewhere }, form)).status).toBe(401);
    // A NUL in a field: verified, but not storable.
    const nul = { ...fields, Body: 'a\u0000b' };
    const nulBody = new URLSearchParams(nul).toString();
    expect(await post(`/hooks/twilio/${c.id}`, nulBody, { ...headers, 'x-twilio-signature': twilioLibrary.getExpectedTwilioSignature(authToken, url, nul) }, form))
      .toMatchObject({ status: 400, json: { error: 'contains-nul' } });
    expect(await stored(c.id)).toHaveLength(2);
  });

  it("verifies against the connection's route.signed_url when Twilio posts to a URL the edge does not see", async () => {
    const signedUrl = 'https://hooks.example.com/public/twilio';
    const c = await connect('twilio', authToken, ['account:AC9'], { signed_url: signedUrl });
    const fields = { CallSid: `CA${freshId()}`, AccountSid: 'AC9', CallStatus: 'completed' };
    const response = await post(`/hooks/twilio/${c.id}`, new URLSearchParams(fields).toString(),
      { 'x-twilio-signature': twilioLibrary.getExpectedTwilioSignature(authToken, signedUrl, fields) }, 'application/x-www-form-urlencoded');
    expect(response.status).toBe(202);
    expect(await stored(c.id)).toEqual([expect.objectContaining({ event_type: 'call.completed', subject: `call:${fields.CallSid}` })]);
  });
});

describe('Bitbucket Cloud and Jira (X-Hub-Signature: sha256=<hex HMAC-SHA256 of the body>)', () => {
  const secret = 'atlassian_webhook_secret_0123';
  const sign = (body: string, key = secret) => `sha256=${createHmac('sha256', key).update(body).digest('hex')}`;

  it('Bitbucket: stores a push in the repository scope, keyed by X-Request-UUID; refuses a forgery', async () => {
    const c = await connect('bitbucket', secret, ['workspace:acme']);
    const body = JSON.stringify({ push: { changes: [] }, repository: { full_name: 'acme/api', workspace: { slug: 'acme' } } });
    const headers = { 'x-hub-signature': sign(body), 'x-event-key': 'repo:push', 'x-request-uuid': newDeliveryKey() };
    expect((await post(`/hooks/bitbucket/${c.id}`, body, headers)).status).toBe(202);
    expect((await post(`/hooks/bitbucket/${c.id}`, body, { ...headers, 'x-hub-signature': sign(body, 'forged') })).status).toBe(401);
    expect(await stored(c.id)).toEqual([expect.objectContaining({ event_type: 'repo:push', subject: 'repo:acme/api' })]);
  });

  it('Jira: stores an issue event in the issue scope, keyed by X-Atlassian-Webhook-Identifier', async () => {
    const c = await connect('jira', secret, ['project:ACME']);
    const body = JSON.stringify({ webhookEvent: 'jira:issue_updated', issue: { key: 'ACME-7', fields: { project: { key: 'ACME' } } } });
    const key = newDeliveryKey();
    expect((await post(`/hooks/jira/${c.id}`, body, { 'x-hub-signature': sign(body), 'x-atlassian-webhook-identifier': key })).status).toBe(202);
    expect(await stored(c.id)).toEqual([expect.objectContaining({ delivery_key: key, event_type: 'jira:issue_updated', subject: 'issue:ACME-7' })]);
    expect((await post(`/hooks/jira/${c.id}`, body, { 'x-hub-signature': 'sha256=zz', 'x-atlassian-webhook-identifier': key })).status).toBe(401);
  });
});

describe("Slack's form posts (slash commands, interactivity), signed as Slack documents", () => {
  const sign = (body: string, ts = nowSeconds()) => ({
    'x-slack-request-timestamp': String(ts),
    'x-slack-signature': `v0=${createHmac('sha256', slackSecret).update(`v0:${ts}:${body}`).digest('hex')}`,
  });
  const form = 'application/x-www-form-urlencoded';

  it('stores a slash command and an interaction as JSON objects, verified over the exact bytes', async () => {
    const team = `T${freshId()}`;
    const channel = `C${freshId()}`;
    const workspace = freshId();
    const id = await seedConnection(db.pool, { workspace, provider: 'slack', source: 'https://slack.com', kind: 'slack_team', externalId: team, subjects: [`channel:${channel}`] });
    const command = { team_id: team, channel_id: channel, user_id: 'U1', command: '/deploy', text: 'api now', trigger_id: `13345224609.${freshId()}` };
    const commandBody = new URLSearchParams(command).toString();
    // 200 and no body once stored: Slack would show a body to the user.
    const answered = await app.request('/hooks/slack/test', { method: 'POST', body: commandBody, headers: { 'content-type': form, ...sign(commandBody) } });
    expect(answered.status).toBe(200);
    expect(await answered.text()).toBe('');
    const interaction = { type: 'block_actions', trigger_id: `7.${freshId()}`, team: { id: team }, channel: { id: channel }, actions: [{ action_id: 'approve' }] };
    const interactionBody = new URLSearchParams({ payload: JSON.stringify(interaction) }).toString();
    const interacted = await app.request('/hooks/slack/test', { method: 'POST', body: interactionBody, headers: { 'content-type': form, ...sign(interactionBody) } });
    expect(interacted.status).toBe(200);
    expect(await stored(id)).toEqual([
      expect.objectContaining({ event_type: 'slash_command', subject: `channel:${channel}`, delivery_key: command.trigger_id, payload: command }),
      expect.objectContaining({ event_type: 'block_actions', delivery_key: interaction.trigger_id, payload: { payload: interaction } }),
    ]);
    // The same form with one byte changed after signing.
    expect((await post('/hooks/slack/test', commandBody.replace('now', 'new'), sign(commandBody), form)).status).toBe(401);
    expect(await stored(id)).toHaveLength(2);
  });
});

describe('secrets the provider draws', () => {
  it('are stored as given, never made up: rotate-secret without one is refused for Stripe, allowed for Bitbucket', async () => {
    const ring = await parseKeyRing(testSecretKeys);
    const stripe = await connect('stripe', 'whsec_drawn_by_stripe_0123456789', []);
    await expect(rotateConnectionSecret(db.pool, ring, String(stripe.id))).rejects.toMatchObject({ status: 400, code: 'secret_required' });
    const bitbucket = await connect('bitbucket', 'bitbucket_secret_0123456789', []);
    expect(await rotateConnectionSecret(db.pool, ring, String(bitbucket.id))).toMatch(/^[0-9a-f]{64}$/);
  });
});
