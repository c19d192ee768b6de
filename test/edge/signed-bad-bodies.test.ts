// A valid signature over a bad body is a 400 that names the body's fault,
// never a signature failure (issue 55): every adapter verifies the signature
// over the raw bytes first, then parses. Each refusal stores nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Hono } from 'hono';
import twilioLibrary from 'twilio';
import { createEdgeApp } from '../../edge/app.js';
import {
  signForgejoBody, signGitHubBody, signHubSignatureBody, signLinearBody, signOutlineBody, signPaddleBody, signShopifyBody,
  signSlackRequest, signStandardWebhook, signStripeBody, signZoomRequest,
} from '../../edge/adapters/index.js';
import { signConfiguredHmac } from '../../edge/adapters/hmac.js';
import { readHmacScheme } from '../../db/hmac-scheme.js';
import type { Provider } from '../../db/providers.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { countEvents, edgeEnv, freshId, githubSecret, newDeliveryKey, recorder, seedConnection, slackSecret } from '../support/edge-fixtures.js';

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

const nowSeconds = () => Math.floor(Date.now() / 1000);
const form = 'application/x-www-form-urlencoded';

type Body = Uint8Array<ArrayBuffer>;
const utf8 = (text: string): Body => new TextEncoder().encode(text);

/** Posts `body` as it is, with the signature headers `sign` makes for it; the answer and how many events the database gained. */
async function postSigned(path: string, body: Body, headers: Record<string, string>, contentType = 'application/json') {
  const before = await countEvents(db.pool);
  const response = await app.request(path, { method: 'POST', body, headers: { 'content-type': contentType, ...headers } });
  // any: the tests read error fields.
  const json = (await response.json()) as Record<string, any>;
  return { status: response.status, error: json.error as string, stored: (await countEvents(db.pool)) - before };
}

/** A connection of `provider` with `secret`, in a workspace of its own: its endpoint. */
async function connect(provider: Provider, secret: string, route: object = {}, subjects = ['account:self']): Promise<string> {
  const workspace = freshId();
  const id = await seedConnection(db.pool, {
    workspace, provider, source: `https://${provider}-${workspace}.example`, kind: provider === 'hmac' ? 'hmac' : 'webhook',
    externalId: provider === 'hmac' ? null : String(workspace), subjects, secret, route,
  });
  return `/hooks/${provider}/${id}`;
}

const genericSecret = `whsec_${Buffer.from('generic-key-bad-bodies').toString('base64')}`;

async function slackHeaders(body: Body | string): Promise<Record<string, string>> {
  const ts = nowSeconds();
  return { 'x-slack-request-timestamp': String(ts), 'x-slack-signature': await signSlackRequest(slackSecret, ts, body) };
}

const hmacScheme = { header: 'x-signature', prefix: 'sha256=', algorithm: 'sha256', encoding: 'hex', signed: '{body}' };

/** Each provider's endpoint and how it signs a body (Twilio's is a form: below). */
const signers: { provider: Provider; endpoint: () => Promise<string>; sign: (body: Body) => Promise<Record<string, string>> }[] = [
  { provider: 'github', endpoint: async () => '/hooks/github/test', sign: async (body) => ({
    'x-github-event': 'push', 'x-github-delivery': newDeliveryKey(), 'x-hub-signature-256': await signGitHubBody(githubSecret, body) }) },
  { provider: 'slack', endpoint: async () => '/hooks/slack/test', sign: async (body) => slackHeaders(body) },
  { provider: 'gitlab', endpoint: () => connect('gitlab', 'glpat-token-for-bad-bodies'), sign: async () => ({ 'x-gitlab-token': 'glpat-token-for-bad-bodies' }) },
  { provider: 'outline', endpoint: () => connect('outline', 'ol_whs_secret_for_bad_bodies'), sign: async (body) => ({
    'outline-signature': await signOutlineBody('ol_whs_secret_for_bad_bodies', body, Date.now()) }) },
  { provider: 'forgejo', endpoint: () => connect('forgejo', 'forgejo_secret_for_bad_bodies'), sign: async (body) => ({
    'x-forgejo-event': 'push', 'x-forgejo-delivery': newDeliveryKey(), 'x-forgejo-signature': await signForgejoBody('forgejo_secret_for_bad_bodies', body) }) },
  { provider: 'generic', endpoint: () => connect('generic', genericSecret), async sign(body) {
    const id = newDeliveryKey();
    const ts = nowSeconds();
    return { 'webhook-id': id, 'webhook-timestamp': String(ts), 'webhook-signature': await signStandardWebhook(genericSecret, id, ts, body) };
  } },
  { provider: 'stripe', endpoint: () => connect('stripe', 'whsec_stripe_secret_bad_bodies'), sign: async (body) => ({
    'stripe-signature': await signStripeBody('whsec_stripe_secret_bad_bodies', body, nowSeconds()) }) },
  { provider: 'shopify', endpoint: () => connect('shopify', 'shpss_secret_for_bad_bodies_0'), sign: async (body) => ({
    'x-shopify-hmac-sha256': await signShopifyBody('shpss_secret_for_bad_bodies_0', body), 'x-shopify-topic': 'orders/create',
    'x-shopify-webhook-id': newDeliveryKey() }) },
  { provider: 'linear', endpoint: () => connect('linear', 'lin_wh_secret_for_bad_bodies'), sign: async (body) => ({
    'linear-signature': await signLinearBody('lin_wh_secret_for_bad_bodies', body), 'linear-delivery': newDeliveryKey() }) },
  { provider: 'paddle', endpoint: () => connect('paddle', 'pdl_ntfset_secret_for_bad_bodies'), sign: async (body) => ({
    'paddle-signature': await signPaddleBody('pdl_ntfset_secret_for_bad_bodies', body, nowSeconds()) }) },
  { provider: 'zoom', endpoint: () => connect('zoom', 'zoom_secret_for_bad_bodies'), async sign(body) {
    const ts = nowSeconds();
    return { 'x-zm-request-timestamp': String(ts), 'x-zm-signature': await signZoomRequest('zoom_secret_for_bad_bodies', ts, body) };
  } },
  { provider: 'bitbucket', endpoint: () => connect('bitbucket', 'bitbucket_secret_bad_bodies'), sign: async (body) => ({
    'x-hub-signature': await signHubSignatureBody('bitbucket_secret_bad_bodies', body), 'x-event-key': 'repo:push', 'x-request-uuid': newDeliveryKey() }) },
  { provider: 'jira', endpoint: () => connect('jira', 'jira_secret_for_bad_bodies'), sign: async (body) => ({
    'x-hub-signature': await signHubSignatureBody('jira_secret_for_bad_bodies', body), 'x-atlassian-webhook-identifier': newDeliveryKey() }) },
  { provider: 'hmac', endpoint: () => connect('hmac', 'hmac_secret_for_bad_bodies', { signature: hmacScheme }), async sign(body) {
    const reading = readHmacScheme(hmacScheme);
    if (!reading.ok) throw new Error('the test scheme is invalid');
    return { 'x-signature': signConfiguredHmac(reading.scheme, 'hmac_secret_for_bad_bodies', body) };
  } },
];

const badBodies: { name: string; body: Body; error: string }[] = [
  { name: 'a body that is not JSON', body: utf8('not json'), error: 'invalid-json' },
  { name: 'a JSON array', body: utf8('[{"webhookTimestamp": 1}]'), error: 'invalid-json' },
  { name: 'a JSON string', body: utf8('"text"'), error: 'invalid-json' },
  { name: 'a body that is not UTF-8', body: new Uint8Array([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]), error: 'invalid-utf8' },
];

describe.each(signers)('$provider: a correctly signed bad body', (signer) => {
  it.each(badBodies)('$name is 400 $error, nothing stored', async ({ body, error }) => {
    const endpoint = await signer.endpoint();
    expect(await postSigned(endpoint, body, await signer.sign(body))).toEqual({ status: 400, error, stored: 0 });
  });
});

describe('Linear: the signed webhookTimestamp is in the body', () => {
  const secret = 'lin_wh_secret_for_timestamps';
  const post = async (endpoint: string, text: string) =>
    postSigned(endpoint, utf8(text), { 'linear-signature': await signLinearBody(secret, text), 'linear-delivery': newDeliveryKey() });
  const issue = { action: 'create', type: 'Issue', data: { id: 'issue-1', teamId: 'team-1' } };

  it('a signed object without a numeric webhookTimestamp is 400 missing-field, nothing stored', async () => {
    const endpoint = await connect('linear', secret);
    expect(await post(endpoint, JSON.stringify(issue))).toEqual({ status: 400, error: 'missing-field', stored: 0 });
    expect(await post(endpoint, JSON.stringify({ ...issue, webhookTimestamp: String(Date.now()) })))
      .toEqual({ status: 400, error: 'missing-field', stored: 0 });
  });

  it('a stale one is still 401 stale-timestamp, a fresh one stored', async () => {
    const endpoint = await connect('linear', secret, {}, ['team:team-1']);
    expect(await post(endpoint, JSON.stringify({ ...issue, webhookTimestamp: Date.now() - 120_000 })))
      .toEqual({ status: 401, error: 'stale-timestamp', stored: 0 });
    expect(await post(endpoint, JSON.stringify({ ...issue, webhookTimestamp: Date.now() }))).toMatchObject({ status: 202, stored: 1 });
  });
});

describe('Twilio: a correctly signed body that is no form in UTF-8', () => {
  const authToken = 'twilio_auth_token_for_bad_bodies';
  // Signed as Twilio's library signs the fields a form parser reads from the body (URLSearchParams).
  async function post(text: string, contentType = form) {
    const endpoint = await connect('twilio', authToken);
    const fields = Object.fromEntries(new URLSearchParams(text));
    const signature = twilioLibrary.getExpectedTwilioSignature(authToken, `http://localhost${endpoint}`, fields);
    return postSigned(endpoint, utf8(text), { 'x-twilio-signature': signature }, contentType);
  }

  it('a percent-escape that is not UTF-8 is 400 invalid-form, nothing stored', async () => {
    expect(await post('MessageSid=SM1&AccountSid=AC1&Body=caf%E9')).toEqual({ status: 400, error: 'invalid-form', stored: 0 });
  });

  it('JSON sent as a form is 400 invalid-form, nothing stored', async () => {
    expect(await post('{"MessageSid": "SM1", "AccountSid": "AC1"}')).toEqual({ status: 400, error: 'invalid-form', stored: 0 });
    expect(await post('{"MessageSid":"SM1","AccountSid":"AC1"}')).toEqual({ status: 400, error: 'invalid-form', stored: 0 });
    expect(await post('{"MessageSid":"SM1"}', 'application/json')).toEqual({ status: 400, error: 'invalid-form', stored: 0 });
  });

  it('a form signed otherwise is still 401 bad-signature', async () => {
    const endpoint = await connect('twilio', authToken);
    const signature = twilioLibrary.getExpectedTwilioSignature('another_token_0000000000000000', `http://localhost${endpoint}`, {});
    expect(await postSigned(endpoint, utf8('Body=caf%E9'), { 'x-twilio-signature': signature }, form))
      .toEqual({ status: 401, error: 'bad-signature', stored: 0 });
  });
});

describe('Slack: a correctly signed form that is no form in UTF-8', () => {
  it('is 400 invalid-form, nothing stored', async () => {
    const text = 'command=%2Fdeploy&trigger_id=1.2&team_id=T1&text=caf%E9';
    expect(await postSigned('/hooks/slack/test', utf8(text), await slackHeaders(text), form)).toEqual({ status: 400, error: 'invalid-form', stored: 0 });
  });
});
