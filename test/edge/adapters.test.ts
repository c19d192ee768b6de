// Every adapter through the Hono app against a real PostgreSQL: what is
// stored for a valid delivery, and that nothing is stored for a bad one.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Hono } from 'hono';
import { createEdgeApp } from '../../edge/app.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import {
  countEvents, edgeEnv, freshId, newDeliveryKey, providers, recorder, scenario, storedSecret, type ProviderScenario,
} from '../support/edge-fixtures.js';

const maxBodyBytes = 64 * 1024;
const providerSigned = new Set(['github', 'slack']);

let db: TestDatabase;
let app: Hono;
const recorded = recorder();

beforeAll(async () => {
  db = await createTestDatabase();
  app = createEdgeApp({
    database: db.pool,
    env: { ...edgeEnv, WHARF_MAX_BODY_BYTES: String(maxBodyBytes) },
    logger: recorded.logger,
    metrics: recorded.metrics,
  });
});
afterAll(async () => {
  await db?.drop();
});

async function post(s: ProviderScenario, body: Uint8Array<ArrayBuffer> | string, headers: Record<string, string>) {
  const response = await app.request(s.path, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
  // any: the tests read receipt and error fields of every shape.
  return { status: response.status, json: (await response.json()) as Record<string, any> };
}

describe.each(providers)('%s adapter', (provider) => {
  let s: ProviderScenario;
  let workspace: number;
  beforeAll(async () => {
    workspace = freshId();
    s = await scenario(db.pool, provider, workspace);
  });

  it('stores a valid delivery once and answers 202 with the receipt', async () => {
    const key = newDeliveryKey();
    const body = JSON.stringify(s.payload(key));
    const { status, json } = await post(s, body, await s.sign(body, { deliveryKey: key }));
    expect(status).toBe(202);
    expect(json.status).toBe('accepted');
    expect(json.events).toEqual([{ workspace_id: workspace, event_id: expect.any(Number), outcome: 'stored' }]);
    expect(json.dropped).toBeNull();
    const { rows } = await db.pool.query(
      'SELECT workspace_id, provider, subject, delivery_key, payload, headers FROM wharf.provider_event WHERE id = $1',
      [json.events[0].event_id],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ workspace_id: String(workspace), provider, subject: s.subject, delivery_key: json.delivery_id });
    expect(rows[0].payload).toEqual(JSON.parse(body));
    // No credential reaches the stored headers.
    expect(Object.keys(rows[0].headers).filter((name) => /signature|token/.test(name))).toEqual([]);
  });

  it('answers a redelivery 202 duplicate, naming the stored event', async () => {
    const key = newDeliveryKey();
    const body = JSON.stringify(s.payload(key));
    const first = await post(s, body, await s.sign(body, { deliveryKey: key }));
    const again = await post(s, body, await s.sign(body, { deliveryKey: key }));
    expect(again.status).toBe(202);
    expect(again.json.events).toEqual([{ ...first.json.events[0], outcome: 'duplicate' }]);
    expect(await countEvents(db.pool, first.json.delivery_id)).toBe(1);
  });

  it('rejects a wrong signature with 401 and stores nothing', async () => {
    const key = newDeliveryKey();
    const body = JSON.stringify(s.payload(key));
    const before = await countEvents(db.pool);
    const { status, json } = await post(s, body, await s.sign(body, { deliveryKey: key, secret: wrongSecret(provider) }));
    expect(status).toBe(401);
    expect(json.error).toBe('bad-signature');
    expect(await countEvents(db.pool)).toBe(before);
  });

  it('rejects a missing signature with 401', async () => {
    const key = newDeliveryKey();
    const body = JSON.stringify(s.payload(key));
    const { status, json } = await post(s, body, { 'x-github-delivery': key, 'x-github-event': 'push' });
    expect(status).toBe(401);
    expect(json.error).toBe('missing-signature');
  });

  it.each([
    ['invalid UTF-8', new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0x22, 0x7d]), 400, 'invalid-utf8'],
    ['a NUL escape', '{"type":"x","a":"\\u0000"}', 400, 'contains-nul'],
    ['a raw NUL', '{"a":"b"}\u0000', 400, 'contains-nul'],
    ['a NUL in a key', '{"\\u0000":1}', 400, 'contains-nul'],
    ['an unpaired surrogate', '{"a":"\\ud800"}', 400, 'invalid-json'],
    ['an unpaired low surrogate in capitals', '{"a":"\\uDC00"}', 400, 'invalid-json'],
    ['not JSON', 'action=opened&x=1', 400, 'invalid-json'],
    ['a JSON array', '[1,2]', 400, 'invalid-json'],
  ] as const)('answers a signed body with %s %i and stores nothing', async (_name, body, status, error) => {
    const before = await countEvents(db.pool);
    const response = await post(s, body, await s.sign(body, { deliveryKey: newDeliveryKey() }));
    expect(response.status).toBe(status);
    expect(response.json.error).toBe(error);
    expect(await countEvents(db.pool)).toBe(before);
  });

  it('stores a body whose escapes are all storable', async () => {
    const key = newDeliveryKey();
    // An escaped backslash before u0000, a surrogate pair, a plain escape.
    const body = JSON.stringify(s.payload(key)).replace(/}$/, ',"note":"\\\\u0000 \\ud83d\\ude00 \\u00e9"}');
    const { status } = await post(s, body, await s.sign(body, { deliveryKey: key }));
    expect(status).toBe(202);
    expect(await countEvents(db.pool, key)).toBe(1);
  });

  it('answers 413 to a body over the limit and stores nothing', async () => {
    const key = newDeliveryKey();
    const body = JSON.stringify({ ...s.payload(key), padding: 'x'.repeat(maxBodyBytes) });
    const before = await countEvents(db.pool);
    const { status, json } = await post(s, body, await s.sign(body, { deliveryKey: key }));
    expect(status).toBe(413);
    expect(json.error).toBe('body-too-large');
    expect(await countEvents(db.pool)).toBe(before);
  });
});

describe.each(providers.filter((p) => providerSigned.has(p)))('%s adapter, provider-signed', (provider) => {
  let s: ProviderScenario;
  let workspace: number;
  beforeAll(async () => {
    workspace = freshId();
    s = await scenario(db.pool, provider, workspace);
  });

  // Provider-signed (a GitHub App's or a Slack app's secret): the provider
  // vouches for the body, so it reaches every subscribed workspace.
  it('fans out to every subscribed workspace, and refuses a suspended one in the receipt', async () => {
    const second = freshId();
    const third = freshId();
    await s.seedRecipient(db.pool, second);
    await s.seedRecipient(db.pool, third);
    const key = newDeliveryKey();
    const body = JSON.stringify(s.payload(key));
    const fanned = await post(s, body, await s.sign(body, { deliveryKey: key }));
    expect(fanned.status).toBe(202);
    expect(fanned.json.events.map((e: { workspace_id: number }) => e.workspace_id).sort())
      .toEqual([workspace, second, third].sort());
    expect(await countEvents(db.pool, fanned.json.delivery_id)).toBe(3);

    await db.pool.query(`SELECT wharf.set_workspace_state($1, 'SUSPENDED')`, [third]);
    const key2 = newDeliveryKey();
    const body2 = JSON.stringify(s.payload(key2));
    const refused = await post(s, body2, await s.sign(body2, { deliveryKey: key2 }));
    expect(refused.status).toBe(202);
    expect(refused.json.events.map((e: { workspace_id: number }) => e.workspace_id).sort()).toEqual([workspace, second].sort());
    expect(refused.json.refused).toEqual([{ connection_id: expect.any(Number), workspace_id: third, reason: 'workspace-inactive' }]);
    expect(recorded.rejected).toContain('workspace-inactive');
  });
});

describe.each(providers.filter((p) => !providerSigned.has(p)))('%s adapter, connection-signed', (provider) => {
  let s: ProviderScenario;
  let workspace: number;
  beforeAll(async () => {
    workspace = freshId();
    s = await scenario(db.pool, provider, workspace);
  });

  // Connection-signed: the secret is shared with one workspace only, so the
  // body is only as trusted as that workspace (the injection and pre-emption
  // attacks of issue 14, reproduced).
  it('reaches its own workspace only, whatever the body names; the victim keeps its own delivery of the key', async () => {
    const victim = freshId();
    const victimConnection = await s.seedRecipient(db.pool, victim);
    const key = newDeliveryKey();
    const body = JSON.stringify(s.payload(key));
    const planted = await post(s, body, await s.sign(body, { deliveryKey: key }));
    expect(planted.status).toBe(202);
    expect(planted.json.events).toEqual([{ workspace_id: workspace, event_id: expect.any(Number), outcome: 'stored' }]);
    const inVictim = async () => (await db.pool.query(
      'SELECT payload FROM wharf.provider_event WHERE workspace_id = $1', [victim])).rows;
    expect(await inVictim()).toEqual([]);

    // The victim's genuine delivery of the same key, signed with its own secret, is stored in its workspace.
    const victimSecret = provider === 'generic' ? `whsec_${Buffer.alloc(24, victim % 251).toString('base64')}` : `victim-secret-${victim}-0123456789`;
    await db.pool.query('SELECT wharf.set_connection_secret($1, $2)',
      [victimConnection, await storedSecret(provider, victimConnection, victimSecret)]);
    const genuineBody = JSON.stringify({ ...s.payload(key), genuine: true });
    const response = await app.request(`/hooks/${provider}/${victimConnection}`, {
      method: 'POST', body: genuineBody,
      headers: { 'content-type': 'application/json', ...(await s.sign(genuineBody, { deliveryKey: key, secret: victimSecret })) },
    });
    expect(response.status).toBe(202);
    expect(((await response.json()) as { events: unknown[] }).events)
      .toEqual([{ workspace_id: victim, event_id: expect.any(Number), outcome: 'stored' }]);
    expect(await inVictim()).toEqual([{ payload: JSON.parse(genuineBody) }]);

    // Its own workspace suspended: refused in the receipt, stored nowhere.
    await db.pool.query(`SELECT wharf.set_workspace_state($1, 'SUSPENDED')`, [workspace]);
    const key2 = newDeliveryKey();
    const body2 = JSON.stringify(s.payload(key2));
    const refused = await post(s, body2, await s.sign(body2, { deliveryKey: key2 }));
    await db.pool.query(`SELECT wharf.set_workspace_state($1, 'ACTIVE')`, [workspace]);
    expect(refused.status).toBe(202);
    expect(refused.json.events).toEqual([]);
    expect(refused.json.refused).toEqual([{ connection_id: expect.any(Number), workspace_id: workspace, reason: 'workspace-inactive' }]);
  });
});

function wrongSecret(provider: string): string {
  return provider === 'generic' ? `whsec_${Buffer.from('not-the-key').toString('base64')}` : 'not-the-secret';
}


// A GitLab token does not sign the body; every other scheme does.
describe.each(providers.filter((p) => p !== 'gitlab'))('%s signature', (provider) => {
  let s: ProviderScenario;
  beforeAll(async () => {
    s = await scenario(db.pool, provider, freshId());
  });

  it('rejects a body changed after signing with 401', async () => {
    const key = newDeliveryKey();
    const body = JSON.stringify(s.payload(key));
    const headers = await s.sign(body, { deliveryKey: key });
    const { status, json } = await post(s, body.replace('}', ',"x":1}'), headers);
    expect(status).toBe(401);
    expect(json.error).toBe('bad-signature');
  });
});

describe.each(['slack', 'outline', 'generic'] as const)('%s timestamp', (provider) => {
  let s: ProviderScenario;
  beforeAll(async () => {
    s = await scenario(db.pool, provider, freshId());
  });

  it.each([['stale', -6], ['future', 6]] as const)('is rejected %s (%i minutes) with 401, however well signed', async (_name, minutes) => {
    const key = newDeliveryKey();
    const body = JSON.stringify(s.payload(key));
    const before = await countEvents(db.pool);
    const { status, json } = await post(s, body, await s.sign(body, { deliveryKey: key, timestampMs: Date.now() + minutes * 60_000 }));
    expect(status).toBe(401);
    expect(json.error).toBe('stale-timestamp');
    expect(await countEvents(db.pool)).toBe(before);
  });

  it('is accepted four minutes old', async () => {
    const key = newDeliveryKey();
    const body = JSON.stringify(s.payload(key));
    const { status } = await post(s, body, await s.sign(body, { deliveryKey: key, timestampMs: Date.now() - 4 * 60_000 }));
    expect(status).toBe(202);
  });
});

describe('logs', () => {
  it('never hold a secret or a body', () => {
    const text = JSON.stringify(recorded.lines);
    expect(recorded.lines.some((line) => line.fields.reason === 'bad-signature')).toBe(true);
    for (const forbidden of [edgeEnv.GITHUB_APP_TEST_WEBHOOK_SECRET, edgeEnv.SLACK_APP_TEST_SIGNING_SECRET, 'glpat-token', 'acme/api-', '"padding"']) {
      expect(text).not.toContain(forbidden);
    }
  });
});
