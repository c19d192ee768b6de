// Ids past 2^53 keep their digits (issue 55): every routing fact, subject
// and delivery key an adapter reads from a JSON number is the number's text
// as sent, never the double JSON.parse rounds it to, and the payload stored
// keeps the digits too. Two ids that differ only past a double's precision
// are two scopes (two installations, two deliveries), never one.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Hono } from 'hono';
import { createEdgeApp } from '../../edge/app.js';
import {
  signGitHubBody, signHubSignatureBody, signLinearBody, signPaddleBody, signShopifyBody, signSlackRequest,
  signStandardWebhook, signStripeBody, signZoomRequest,
} from '../../edge/adapters/index.js';
import { signConfiguredHmac } from '../../edge/adapters/hmac.js';
import { textAt } from '../../edge/adapters/payload.js';
import { parseFormBody, parseJsonBody } from '../../edge/request-body.js';
import { readHmacScheme } from '../../db/hmac-scheme.js';
import type { Provider } from '../../db/providers.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { edgeEnv, freshId, githubSecret, newDeliveryKey, recorder, seedConnection, slackSecret } from '../support/edge-fixtures.js';

// Shopify's own test order (its ids are 64-bit), and its neighbour: one
// double, 820982911946154500, stands for both.
const order = '820982911946154508';
const neighbour = '820982911946154509';

let db: TestDatabase;
let app: Hono;

beforeAll(async () => {
  db = await createTestDatabase();
  const recorded = recorder();
  app = createEdgeApp({ database: db.pool, env: edgeEnv, logger: recorded.logger, metrics: recorded.metrics });
});
afterAll(async () => {
  await db?.drop();
});

/** `template` as JSON text, each string `"$id"` in it written as the JSON number `id`: JSON.stringify cannot write one past 2^53. */
function withNumber(template: object, id: string): string {
  return JSON.stringify(template).replaceAll('"$id"', id);
}

async function post(path: string, body: string, headers: Record<string, string>, contentType = 'application/json') {
  const response = await app.request(path, { method: 'POST', body, headers: { 'content-type': contentType, ...headers } });
  // any: the tests read receipt and error fields of every shape.
  return { status: response.status, json: (await response.json().catch(() => ({}))) as Record<string, any> };
}

interface StoredRow { workspace_id: string | null; delivery_key: string; subject: string; scope_key: string; payload_text: string }

async function storedBy(column: 'connection_id' | 'delivery_key', value: number | string): Promise<StoredRow[]> {
  const { rows } = await db.pool.query<StoredRow>(
    `SELECT workspace_id, delivery_key, subject, scope_key, payload::text AS payload_text
       FROM wharf.provider_event WHERE ${column} = $1 ORDER BY id`, [value]);
  return rows;
}

/** A connection of `provider` with `secret`, subscribed to `subjects`, in a workspace of its own. */
async function connect(provider: Provider, secret: string, subjects: string[], route: object = {}): Promise<number> {
  const workspace = freshId();
  return seedConnection(db.pool, {
    workspace, provider, source: `https://${provider}-${workspace}.example`, kind: provider === 'hmac' ? 'hmac' : 'webhook',
    externalId: provider === 'hmac' ? null : String(workspace), subjects, secret, route,
  });
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

interface NumberCase {
  provider: Provider;
  /** The subject the delivery of `id` is stored under. */
  subject: (id: string) => string;
  /** What the connection subscribes to, whatever the id. */
  subscribed: string;
  route?: object;
  secret: string;
  /** The signed delivery whose subject (or delivery key) is the JSON number `id`. */
  delivery: (id: string, secret: string) => Promise<{ body: string; headers: Record<string, string> }>;
}

const hmacScheme = {
  header: 'x-signature', prefix: 'sha256=', algorithm: 'sha256', encoding: 'hex', signed: '{body}',
  event_type: { pointer: '/type' }, delivery_id: { pointer: '/id' },
};

const cases: NumberCase[] = [
  {
    provider: 'shopify', subject: (id) => `order:${id}`, subscribed: 'shop:acme.myshopify.com', secret: 'shpss_client_secret_0123456789',
    async delivery(id, secret) {
      const body = withNumber({ id: '$id', email: 'jon@example.com', total_price: '10.00' }, id);
      return { body, headers: {
        'x-shopify-hmac-sha256': await signShopifyBody(secret, body), 'x-shopify-topic': 'orders/create',
        'x-shopify-webhook-id': newDeliveryKey(), 'x-shopify-shop-domain': 'acme.myshopify.com',
      } };
    },
  },
  {
    provider: 'zoom', subject: (id) => `meeting:${id}`, subscribed: 'account:acct-1', secret: 'zoom_secret_token_abcdefghij',
    async delivery(id, secret) {
      const body = withNumber({ event: 'meeting.started', event_ts: Date.now(), payload: { account_id: 'acct-1', object: { id: '$id' } } }, id);
      const ts = nowSeconds();
      return { body, headers: { 'x-zm-request-timestamp': String(ts), 'x-zm-signature': await signZoomRequest(secret, ts, body) } };
    },
  },
  {
    provider: 'stripe', subject: (id) => `customer:${id}`, subscribed: 'account:self', secret: 'whsec_stripe_secret_0123456789',
    async delivery(id, secret) {
      const body = withNumber({ id: `evt_${freshId()}`, type: 'invoice.paid', data: { object: { id: 'in_1', object: 'invoice', customer: '$id' } } }, id);
      return { body, headers: { 'stripe-signature': await signStripeBody(secret, body, nowSeconds()) } };
    },
  },
  {
    provider: 'paddle', subject: (id) => `customer:${id}`, subscribed: 'account:self', secret: 'pdl_ntfset_paddle_secret_0123456789',
    async delivery(id, secret) {
      const body = withNumber({ event_id: `evt_${freshId()}`, event_type: 'transaction.paid', data: { id: 'txn_1', customer_id: '$id' } }, id);
      return { body, headers: { 'paddle-signature': await signPaddleBody(secret, body, nowSeconds()) } };
    },
  },
  {
    provider: 'linear', subject: (id) => `issue:${id}`, subscribed: 'team:team-1', secret: 'lin_wh_signing_secret_0123456789',
    async delivery(id, secret) {
      const body = withNumber({ action: 'create', type: 'Issue', webhookTimestamp: Date.now(), data: { id: '$id', teamId: 'team-1' } }, id);
      return { body, headers: { 'linear-signature': await signLinearBody(secret, body), 'linear-delivery': newDeliveryKey() } };
    },
  },
  {
    provider: 'bitbucket', subject: (id) => `repo:${id}`, subscribed: 'workspace:acme', secret: 'bitbucket_secret_0123456789',
    async delivery(id, secret) {
      const body = withNumber({ repository: { full_name: '$id', workspace: { slug: 'acme' } } }, id);
      return { body, headers: { 'x-hub-signature': await signHubSignatureBody(secret, body), 'x-event-key': 'repo:push', 'x-request-uuid': newDeliveryKey() } };
    },
  },
  {
    provider: 'generic', subject: (id) => `customer_id:${id}`, subscribed: 'customer_id:cus_none', route: { subject_pointers: ['/data/customer_id'] },
    secret: `whsec_${Buffer.from('generic-key-for-exact-ids').toString('base64')}`,
    async delivery(id, secret) {
      const body = withNumber({ type: 'invoice.paid', data: { customer_id: '$id' } }, id);
      const key = newDeliveryKey();
      const ts = nowSeconds();
      return { body, headers: { 'webhook-id': key, 'webhook-timestamp': String(ts), 'webhook-signature': await signStandardWebhook(secret, key, ts, body) } };
    },
  },
  {
    provider: 'hmac', subject: (id) => `customer_id:${id}`, subscribed: 'customer_id:cus_none',
    route: { signature: hmacScheme, subject_pointers: ['/data/customer_id'] }, secret: 'configured_hmac_secret_0123456789',
    async delivery(id, secret) {
      // The delivery id is a number too: two of them, one double, must not be one delivery.
      const body = withNumber({ id: '$id', type: 'invoice.paid', data: { customer_id: '$id' } }, id);
      const reading = readHmacScheme(hmacScheme);
      if (!reading.ok) throw new Error('the test scheme is invalid');
      return { body, headers: { 'x-signature': signConfiguredHmac(reading.scheme, secret, body) } };
    },
  },
];

describe.each(cases)('$provider: a subject from a JSON number past 2^53', (c) => {
  it('is the number as sent, and two ids one double apart are two scopes', async () => {
    // Subscribed to both exact subjects: a rounded one matches neither.
    const connection = await connect(c.provider, c.secret, [c.subject(order), c.subject(neighbour)], c.route);
    for (const id of [order, neighbour]) {
      const { body, headers } = await c.delivery(id, c.secret);
      const answer = await post(`/hooks/${c.provider}/${connection}`, body, headers);
      expect(answer.status, JSON.stringify(answer.json)).toBe(c.provider === 'zoom' ? 200 : 202);
      expect(answer.json.events).toEqual([expect.objectContaining({ outcome: 'stored' })]);
    }
    const rows = await storedBy('connection_id', connection);
    expect(rows.map((row) => row.subject)).toEqual([c.subject(order), c.subject(neighbour)]);
    expect(new Set(rows.map((row) => row.scope_key)).size).toBe(2);
    // The payload stored keeps the digits (jsonb's numeric is exact).
    expect(rows[0]!.payload_text).toContain(order);
    expect(rows[1]!.payload_text).toContain(neighbour);
  });
});

describe('hmac: a delivery id from a JSON number past 2^53', () => {
  it('is the number as sent: the neighbour id is another delivery, not a duplicate', async () => {
    const c = cases.find((each) => each.provider === 'hmac')!;
    const connection = await connect('hmac', c.secret, [c.subject(order), c.subject(neighbour)], c.route);
    for (const id of [order, neighbour]) {
      const { body, headers } = await c.delivery(id, c.secret);
      expect((await post(`/hooks/hmac/${connection}`, body, headers)).status).toBe(202);
    }
    expect((await storedBy('connection_id', connection)).map((row) => row.delivery_key)).toEqual([order, neighbour]);
  });
});

describe('GitHub: an installation id past 2^53', () => {
  async function deliver(event: string, payload: object, installation: string) {
    const body = withNumber(payload, installation);
    const key = newDeliveryKey();
    const answer = await post('/hooks/github/test', body, {
      'x-github-event': event, 'x-github-delivery': key, 'x-hub-signature-256': await signGitHubBody(githubSecret, body),
    });
    return { ...answer, key };
  }

  it('finds the installation of its exact id, not the one whose id rounds to the same double', async () => {
    const subject = `repo:acme/api-${freshId()}`;
    const workspace = freshId();
    await seedConnection(db.pool, {
      workspace, provider: 'github', source: 'https://github.com', kind: 'app_installation', externalId: order, subjects: [subject],
    });
    const payload = { action: 'opened', installation: { id: '$id' }, repository: { full_name: subject.slice('repo:'.length) } };
    const installed = await deliver('pull_request', payload, order);
    expect(installed.status).toBe(202);
    expect((await storedBy('delivery_key', installed.key)).map((row) => row.workspace_id)).toEqual([String(workspace)]);
    // Its neighbour has no connection.
    const other = await deliver('pull_request', payload, neighbour);
    expect(other.json).toMatchObject({ events: [], dropped: 'unknown-source' });
  });

  it('stores an installation event whose payload names it (wharf.is_control_event compares the stored digits)', async () => {
    const { status, json, key } = await deliver('installation', { action: 'created', installation: { id: '$id', account: { login: 'acme' } } }, order);
    expect(status).toBe(202);
    expect(json.dropped).toBeNull();
    expect(await storedBy('delivery_key', key)).toHaveLength(1);
  });
});

describe("Slack: an interaction's numbers in the stored payload", () => {
  it('keep their digits: the form is stored with the JSON of its payload field as sent', async () => {
    const team = `T${freshId()}`;
    const channel = `C${freshId()}`;
    const connection = await seedConnection(db.pool, {
      workspace: freshId(), provider: 'slack', source: 'https://slack.com', kind: 'slack_team', externalId: team, subjects: [`channel:${channel}`],
    });
    const interaction = withNumber({ type: 'block_actions', trigger_id: `7.${freshId()}`, team: { id: team }, channel: { id: channel },
      actions: [{ action_id: 'approve', value: '$id' }] }, order);
    const body = new URLSearchParams({ payload: interaction }).toString();
    const ts = nowSeconds();
    const answer = await app.request('/hooks/slack/test', { method: 'POST', body, headers: {
      'content-type': 'application/x-www-form-urlencoded', 'x-slack-request-timestamp': String(ts),
      'x-slack-signature': await signSlackRequest(slackSecret, ts, body),
    } });
    expect(answer.status).toBe(200);
    const rows = await storedBy('connection_id', connection);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.payload_text).toContain(order);
  });
});

describe('textAt', () => {
  const parsed = (text: string) => {
    const body = parseJsonBody(new TextEncoder().encode(text));
    if (!body.ok) throw new Error(body.message);
    return body.value;
  };

  it('reads a number past 2^53 with its digits, wherever it is and however the JSON around it is written', () => {
    const payload = parsed(`{ "a" : [ 1, {"x": "}\\"]"}, { "id" :${order} } ], "id": 5, "f": -0.1000000000000000055511, "\\u0069d": ${neighbour} }`);
    expect(textAt(payload, 'a', 2, 'id')).toBe(order);
    // A key written with an escape is the key it decodes to: the last "id".
    expect(textAt(payload, 'id')).toBe(neighbour);
    expect(textAt(payload, 'f')).toBe('-0.1000000000000000055511');
  });

  it('reads the last of duplicate keys, as JSON.parse and jsonb keep it', () => {
    expect(textAt(parsed(`{"id": ${neighbour}, "id": ${order}}`), 'id')).toBe(order);
    expect(textAt(parsed(`{"id": ${order}, "id": 7}`), 'id')).toBe('7');
    expect(textAt(parsed(`{"v": 1e400}`), 'v')).toBe('1e400');
  });

  it("reads a form's JSON field with its digits", () => {
    const form = parseFormBody(new TextEncoder().encode(`payload=${encodeURIComponent(`{"team":{"id":${order}}}`)}`), ['payload']);
    if (!form.ok) throw new Error(form.message);
    expect(textAt(form.value.payload, 'team', 'id')).toBe(order);
    expect(form.text).toContain(order);
  });
});
