// docs/providers.md gives, for every provider of the registry, the lines that
// connect it: `connections add` (source, kind, external id, route), where its
// secret comes from, a subscription. This test runs every `npx wharf-inbox`
// line of the page, in order, against a new database, through the CLI's own
// code in this process (a process per line would cost seconds of CPU each),
// then posts, for each provider, one delivery signed as the provider signs to
// the endpoint the page's lines made: it must be stored. A source, kind or
// connection id the page gets wrong stores nothing, and fails here.
import { randomBytes, randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appVariable } from '../../db/environment.js';
import { readHmacScheme } from '../../db/hmac-scheme.js';
import { providerNames, providers, type Provider } from '../../db/providers.js';
import {
  adapters, signConfiguredHmac, signForgejoBody, signGitHubBody, signHubSignatureBody, signLinearBody, signOutlineBody,
  signPaddleBody, signShopifyBody, signSlackRequest, signStandardWebhook, signStripeBody, signTwilioRequest, signZoomRequest,
} from '../../edge/adapters/index.js';
import { pointerTokens } from '../../edge/adapters/payload.js';
import { createEdgeApp } from '../../edge/app.js';
import { appVariables } from '../../edge/settings.js';
import type { Connection } from '../../operator/sql/operator.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { shellWords, wharfCommands } from '../support/doc-commands.js';
import { recorder, testSecretKeys } from '../support/edge-fixtures.js';
import { runWharfInProcess } from '../support/wharf-cli.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const page = 'docs/providers.md';

/** The app name the edge is given a GitHub App's and a Slack app's secrets under (`/hooks/github/<app>`). */
const app = 'acme';
const appSecrets: Record<keyof typeof appVariables, string> = {
  github: 'docs-github-app-webhook-secret-0000',
  slack: 'docs-slack-app-signing-secret-00000',
};

/** A `"<…>"` word of the page: a secret the provider shows, which the reader pastes. */
const placeholder = /^<[^<>]+>$/;

/** A secret any provider accepts: at least 20 characters, and Standard Webhooks' whsec_ with 16 bytes or more. */
function newSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

/** What the page's lines made of one provider's connection, and where to post to it. */
interface Connected {
  provider: Provider;
  connection: Connection;
  subject: string;
  secret: string;
  path: string;
}

interface Delivery {
  body: string;
  headers: Record<string, string>;
  contentType?: string;
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

/** The subject the connection is subscribed to, which the delivery must be about, split at its prefix. */
function subjectIn(connected: Connected, prefixes: readonly string[]): { prefix: string; value: string } {
  const at = connected.subject.indexOf(':');
  const prefix = connected.subject.slice(0, Math.max(at, 0));
  if (!prefixes.includes(prefix)) {
    throw new Error(`${connected.provider}: this test builds deliveries about ${prefixes.map((each) => `${each}:…`).join(' or ')}, `
      + `not ${connected.subject}: subscribe to one of those in ${page}, or teach the test`);
  }
  return { prefix, value: connected.subject.slice(at + 1) };
}

/** Puts `value` where the JSON pointer `pointer` names in `body`, making the objects on the way. */
function setAt(body: Record<string, unknown>, pointer: string, value: string): void {
  const tokens = pointerTokens(pointer);
  let object = body;
  for (const token of tokens.slice(0, -1)) {
    const next = object[token];
    object = typeof next === 'object' && next !== null ? (next as Record<string, unknown>) : (object[token] = {});
  }
  object[tokens.at(-1)!] = value;
}

/** `body` with the subject's value at the route's subject pointer of its name (`/data/customer_id` for customer_id:…). */
function atSubjectPointer(connected: Connected, body: Record<string, unknown>): Record<string, unknown> {
  const listed = connected.connection.route.subject_pointers;
  const pointers = Array.isArray(listed) ? listed.filter((each): each is string => typeof each === 'string') : [];
  const nameOf = (pointer: string) => pointerTokens(pointer).at(-1) ?? '';
  const { prefix, value } = subjectIn(connected, pointers.map(nameOf));
  setAt(body, pointers.find((pointer) => nameOf(pointer) === prefix)!, value);
  return body;
}

/** For each provider, a delivery about the connection's subject, signed as the provider signs it. */
const deliveries: Record<Provider, (connected: Connected) => Promise<Delivery>> = {
  async github(c) {
    const { prefix, value } = subjectIn(c, ['repo', 'org']);
    const body = JSON.stringify({
      ref: 'refs/heads/main', after: randomUUID(), installation: { id: Number(c.connection.external_id) },
      ...(prefix === 'repo' ? { repository: { full_name: value, owner: { login: value.split('/')[0] } } } : { organization: { login: value } }),
    });
    return { body, headers: { 'x-github-event': 'push', 'x-github-delivery': randomUUID(), 'x-hub-signature-256': await signGitHubBody(c.secret, body) } };
  },
  async slack(c) {
    const { prefix, value } = subjectIn(c, ['channel', 'team']);
    const body = JSON.stringify({
      type: 'event_callback', team_id: c.connection.external_id, event_id: `Ev${randomUUID()}`,
      event: { type: 'message', text: 'hello', ...(prefix === 'channel' ? { channel: value } : {}) },
    });
    const timestamp = nowSeconds();
    return { body, headers: { 'x-slack-request-timestamp': String(timestamp), 'x-slack-signature': await signSlackRequest(c.secret, timestamp, body) } };
  },
  async gitlab(c) {
    const { prefix, value } = subjectIn(c, ['project', 'group']);
    const body = JSON.stringify({ object_kind: 'push', ...(prefix === 'project' ? { project: { path_with_namespace: value } } : { group: { full_path: value } }) });
    return { body, headers: { 'x-gitlab-event': 'Push Hook', 'x-gitlab-event-uuid': randomUUID(), 'x-gitlab-token': c.secret } };
  },
  async outline(c) {
    const { prefix, value } = subjectIn(c, ['document', 'collection']);
    const model = prefix === 'document' ? { id: value } : { id: randomUUID(), collectionId: value };
    const body = JSON.stringify({ id: randomUUID(), event: 'documents.update', actorId: 'user-1', payload: { id: model.id, model } });
    return { body, headers: { 'outline-signature': await signOutlineBody(c.secret, body, Date.now()) } };
  },
  async forgejo(c) {
    const { prefix, value } = subjectIn(c, ['repo', 'org']);
    const body = JSON.stringify({
      ref: 'refs/heads/main', after: randomUUID(),
      ...(prefix === 'repo' ? { repository: { full_name: value, owner: { login: value.split('/')[0] } } } : { organization: { login: value } }),
    });
    return { body, headers: { 'x-forgejo-event': 'push', 'x-forgejo-delivery': randomUUID(), 'x-forgejo-signature': await signForgejoBody(c.secret, body) } };
  },
  async generic(c) {
    const body = JSON.stringify(atSubjectPointer(c, { type: 'invoice.paid' }));
    const id = `msg_${randomUUID()}`;
    const timestamp = nowSeconds();
    return { body, headers: { 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': await signStandardWebhook(c.secret, id, timestamp, body) } };
  },
  async stripe(c) {
    const { prefix, value } = subjectIn(c, ['account', 'customer']);
    const body = JSON.stringify({
      id: `evt_${randomUUID()}`, object: 'event', type: 'invoice.paid',
      data: { object: { id: `in_${randomUUID()}`, object: 'invoice', ...(prefix === 'customer' ? { customer: value } : {}) } },
      ...(prefix === 'account' && value !== 'self' ? { account: value } : {}),
    });
    return { body, headers: { 'stripe-signature': await signStripeBody(c.secret, body, nowSeconds()) } };
  },
  async shopify(c) {
    const { prefix, value } = subjectIn(c, ['shop', 'order']);
    const body = JSON.stringify({ id: prefix === 'order' ? Number(value) : 450789469, note: randomUUID() });
    return {
      body,
      headers: {
        'x-shopify-topic': 'orders/create', 'x-shopify-webhook-id': randomUUID(), 'x-shopify-hmac-sha256': await signShopifyBody(c.secret, body),
        'x-shopify-shop-domain': prefix === 'shop' ? value : 'acme.myshopify.com',
      },
    };
  },
  async linear(c) {
    const { prefix, value } = subjectIn(c, ['issue', 'team', 'organization']);
    const body = JSON.stringify({
      action: 'create', type: 'Issue', webhookTimestamp: Date.now(),
      data: { id: prefix === 'issue' ? value : randomUUID(), ...(prefix === 'team' ? { teamId: value } : {}) },
      ...(prefix === 'organization' ? { organizationId: value } : {}),
    });
    return { body, headers: { 'linear-delivery': randomUUID(), 'linear-signature': await signLinearBody(c.secret, body) } };
  },
  async paddle(c) {
    const { prefix, value } = subjectIn(c, ['account', 'customer', 'subscription']);
    const body = JSON.stringify({
      event_id: `evt_${randomUUID()}`, event_type: 'transaction.completed',
      data: { id: `txn_${randomUUID()}`, ...(prefix === 'customer' ? { customer_id: value } : {}), ...(prefix === 'subscription' ? { subscription_id: value } : {}) },
    });
    return { body, headers: { 'paddle-signature': await signPaddleBody(c.secret, body, nowSeconds()) } };
  },
  async zoom(c) {
    const { prefix, value } = subjectIn(c, ['account', 'meeting']);
    const body = JSON.stringify({
      event: 'meeting.started', event_ts: Date.now(),
      payload: { account_id: prefix === 'account' ? value : 'AbCdEf', object: { id: prefix === 'meeting' ? value : randomUUID() } },
    });
    const timestamp = nowSeconds();
    return { body, headers: { 'x-zm-request-timestamp': String(timestamp), 'x-zm-signature': await signZoomRequest(c.secret, timestamp, body) } };
  },
  async twilio(c) {
    const { prefix, value } = subjectIn(c, ['account', 'message']);
    const fields = {
      MessageSid: prefix === 'message' ? value : `SM${randomBytes(16).toString('hex')}`, MessageStatus: 'delivered',
      AccountSid: prefix === 'account' ? value : `AC${randomBytes(16).toString('hex')}`,
    };
    // Twilio signs the URL it posts to: the route's signed_url when the page sets one.
    const signedUrl = c.connection.route.signed_url;
    const url = typeof signedUrl === 'string' ? signedUrl : `http://localhost${c.path}`;
    return {
      body: new URLSearchParams(fields).toString(), contentType: 'application/x-www-form-urlencoded',
      headers: { 'i-twilio-idempotency-token': randomUUID(), 'x-twilio-signature': signTwilioRequest(c.secret, url, fields) },
    };
  },
  async bitbucket(c) {
    const { prefix, value } = subjectIn(c, ['repo', 'workspace']);
    const body = JSON.stringify({
      push: { changes: [] }, actor: { uuid: randomUUID() },
      repository: prefix === 'repo' ? { full_name: value } : { full_name: `${value}/api`, workspace: { slug: value } },
    });
    return { body, headers: { 'x-event-key': 'repo:push', 'x-request-uuid': randomUUID(), 'x-hub-signature': await signHubSignatureBody(c.secret, body) } };
  },
  async jira(c) {
    const { prefix, value } = subjectIn(c, ['issue', 'project']);
    const project = prefix === 'project' ? value : value.split('-')[0];
    const body = JSON.stringify({
      webhookEvent: 'jira:issue_updated', timestamp: Date.now(),
      issue: { key: prefix === 'issue' ? value : `${project}-1`, fields: { project: { key: project } } },
    });
    return {
      body,
      headers: { 'x-atlassian-webhook-identifier': randomUUID(), 'x-hub-signature': await signHubSignatureBody(c.secret, body) },
    };
  },
  async hmac(c) {
    const reading = readHmacScheme(c.connection.route.signature);
    if (!reading.ok) throw new Error(`hmac: ${page}'s --signature is no scheme: ${reading.reason}`);
    const { scheme } = reading;
    const headers: Record<string, string> = {};
    const body = atSubjectPointer(c, {});
    for (const [field, value] of [[scheme.eventType, 'order.created'], [scheme.deliveryId, randomUUID()]] as const) {
      if (field && 'header' in field) headers[field.header] = value;
      else if (field) setAt(body, field.pointer, value);
    }
    const text = JSON.stringify(body);
    const timestamp = scheme.timestamp ? String(scheme.timestamp.unit === 'seconds' ? nowSeconds() : Date.now()) : undefined;
    if (scheme.timestamp?.header !== undefined && timestamp !== undefined) headers[scheme.timestamp.header] = timestamp;
    headers[scheme.header] = signConfiguredHmac(scheme, c.secret, text, { url: `http://localhost${c.path}`, ...(timestamp === undefined ? {} : { timestamp }) });
    return { body: text, headers };
  },
};

let db: TestDatabase;
let edge: Hono;
let connections: Connection[] = [];
/** `connections rotate-secret <id>`: the secret it printed (or was given), and the path of the endpoint it printed. */
const rotated = new Map<number, { secret: string; path: string }>();

beforeAll(async () => {
  db = await createTestDatabase();
  // The page's reader: DATABASE_URL and the key ring, as "Before you start" says; not --api.
  const env = { DATABASE_URL: db.url, WHARF_SECRET_KEYS: testSecretKeys, WHARF_API_URL: undefined, WHARF_TOKEN: undefined };
  for (const command of wharfCommands(page, await readFile(join(root, page), 'utf8'))) {
    const args = command.args.map((word) => (placeholder.test(word) ? newSecret() : word));
    const result = await runWharfInProcess(args, env);
    if (result.code !== 0) throw new Error(`${page}:${command.line}: \`${command.text}\` exited ${result.code}: ${result.stderr}`);
    if (args[0] === 'connections' && args[1] === 'rotate-secret') {
      const endpoint = /^ {2}endpoint: (\S+)$/m.exec(result.stderr)?.[1];
      if (!endpoint) throw new Error(`${page}:${command.line}: \`${command.text}\` printed no endpoint: ${result.stderr}`);
      rotated.set(Number(args[2]), { secret: result.stdout.trim(), path: new URL(endpoint).pathname });
    }
  }
  const listed = await runWharfInProcess(['connections', 'list', '--json'], env);
  expect(listed.code, listed.stderr).toBe(0);
  connections = JSON.parse(listed.stdout) as Connection[];
  const appEnv = Object.entries(appVariables).map(([provider, names]) => [appVariable(names.secret, app), appSecrets[provider as keyof typeof appVariables]]);
  const recorded = recorder();
  edge = createEdgeApp({
    database: db.pool, env: { WHARF_SECRET_KEYS: testSecretKeys, ...Object.fromEntries(appEnv) },
    logger: recorded.logger, metrics: recorded.metrics,
  });
});

afterAll(async () => {
  await db?.drop();
});

/** Where the provider posts to the connection, and the secret it signs with. */
function endpointOf(provider: Provider, connection: Connection): { path: string; secret: string } {
  if (provider in appVariables) return { path: `/hooks/${provider}/${app}`, secret: appSecrets[provider as keyof typeof appVariables] };
  const rotation = rotated.get(connection.id);
  if (!rotation) throw new Error(`${page}: no \`connections rotate-secret ${connection.id}\` line gives ${provider}'s connection its secret`);
  return rotation;
}

describe.each(providerNames)('%s', (provider) => {
  it(`its lines in ${page} connect it, and a delivery signed as it signs is stored`, async () => {
    const mine = connections.filter((connection) => connection.provider === provider);
    expect(mine.map((connection) => connection.id), `${page}: the connections of \`connections add --provider ${provider}\``).toHaveLength(1);
    const connection = mine[0]!;
    expect(connection.kind, 'the kind its deliveries arrive through (db/providers.ts)').toBe(providers[provider].kinds[0]);
    expect(connection.subscriptions, `${page}: no \`subscribe ${connection.id} …\` line`).not.toEqual([]);
    const { path, secret } = endpointOf(provider, connection);
    const delivery = await deliveries[provider]({ provider, connection, subject: connection.subscriptions[0]!, secret, path });
    const response = await edge.request(path, {
      method: 'POST', body: delivery.body, headers: { 'content-type': delivery.contentType ?? 'application/json', ...delivery.headers },
    });
    const answer = (await response.json()) as { events?: unknown };
    expect({ status: response.status, events: answer.events }, `POST ${path}: ${JSON.stringify(answer)}`).toEqual({
      status: adapters.get(provider)!.acceptedStatus ?? 202,
      events: [{ workspace_id: connection.workspace_id, event_id: expect.any(Number), outcome: 'stored' }],
    });
  });
});

describe('the lines of a page, as a shell passes them', () => {
  it('reads quotes, escapes, continuations and comments as bash does', () => {
    const markdown = [
      '```sh',
      '# a comment line',
      `npx wharf-inbox connections add --route '{"a":["b"]}' \\`,
      '  --secret "<the app\'s \\"secret\\">"   # the id it printed',
      '```',
      '```sh',
      'export NOT_OURS="$(cat key.pem)"',
      '```',
    ].join('\n');
    expect(wharfCommands('page.md', markdown)).toEqual([{
      line: 3,
      text: `npx wharf-inbox connections add --route '{"a":["b"]}'  --secret "<the app's \\"secret\\">"   # the id it printed`,
      args: ['connections', 'add', '--route', '{"a":["b"]}', '--secret', '<the app\'s "secret">'],
    }]);
  });

  it('refuses what only a shell would do, and a block that mixes in another command', () => {
    expect(() => shellWords('npx wharf-inbox subscribe 1 "$SUBJECT"', 'page.md:1')).toThrow(/an expansion/);
    expect(() => shellWords('npx wharf-inbox rotate-secret 1 --secret <secret>', 'page.md:1')).toThrow(/"<", which a shell would read/);
    expect(() => shellWords("npx wharf-inbox subscribe 1 'open", 'page.md:1')).toThrow(/unclosed quote/);
    expect(() => wharfCommands('page.md', '```sh\nnpx wharf-inbox workspaces add 1\nexport A=1\n```')).toThrow(/page\.md:3: a block/);
  });
});
