// The edge under provider quirks and attackers (issue 15): a Standard
// Webhooks payload without `type`, bodies PostgreSQL cannot store, headers
// checked before any body byte is read, a captured GitHub or Forgejo body
// replayed under new headers, and a client that hangs up mid-body. Each answer is a 4xx or a documented 503, never a
// 500, and nothing refused is stored.
import type { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEdgeApp } from '../../edge/app.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import {
  countEvents, edgeEnv, freshId, newDeliveryKey, recorder, scenario, type ProviderScenario,
} from '../support/edge-fixtures.js';

let db: TestDatabase;
let app: Hono;
const recorded = recorder();

beforeAll(async () => {
  db = await createTestDatabase();
  app = createEdgeApp({ database: db.pool, env: edgeEnv, logger: recorded.logger, metrics: recorded.metrics });
});
afterAll(async () => {
  await db?.drop();
});

async function post(target: Hono, path: string, body: BodyInit, headers: Record<string, string>) {
  const response = await target.request(path, {
    method: 'POST', body, headers: { 'content-type': 'application/json', ...headers },
    // Node's fetch needs it to send a stream.
    ...(body instanceof ReadableStream ? { duplex: 'half' } : {}),
  } as RequestInit);
  const text = await response.text();
  // any: the tests read receipt and error fields of every shape.
  return { status: response.status, headers: response.headers, json: (text ? JSON.parse(text) : {}) as Record<string, any> };
}

async function deliver(s: ProviderScenario, body: string, deliveryKey = newDeliveryKey()) {
  return post(app, s.path, body, await s.sign(body, { deliveryKey }));
}

describe('Standard Webhooks as specified', () => {
  it('stores a signed payload without `type` as event type `event`', async () => {
    const s = await scenario(db.pool, 'generic', freshId());
    const payload = s.payload('') as { data: unknown };
    const { status, json } = await deliver(s, JSON.stringify({ data: payload.data }));
    expect(status).toBe(202);
    const { rows } = await db.pool.query('SELECT event_type FROM wharf.provider_event WHERE id = $1', [json.events[0].event_id]);
    expect(rows).toEqual([{ event_type: 'event' }]);
  });
});

describe('bodies PostgreSQL cannot store', () => {
  let s: ProviderScenario;
  beforeAll(async () => {
    s = await scenario(db.pool, 'generic', freshId());
  });

  const withData = (extra: string) => {
    const payload = s.payload('') as { data: { customer_id: string } };
    return `{"type":"x","data":{"customer_id":"${payload.data.customer_id}"},"extra":${extra}}`;
  };

  it.each([
    ['a number out of range', '1e999999'],
    ['a number of 200,000 digits', '9'.repeat(200_000)],
    ['nesting 100,000 levels deep', `${'['.repeat(100_000)}${']'.repeat(100_000)}`],
  ])('answers 400 unstorable-body to %s, storing nothing', async (_what, extra) => {
    const before = await countEvents(db.pool);
    const { status, json } = await deliver(s, withData(extra));
    expect(status).toBe(400);
    expect(json.error).toBe('unstorable-body');
    expect(await countEvents(db.pool)).toBe(before);
  });

  it('answers 400 to a delivery id over 255 characters, storing nothing', async () => {
    const github = await scenario(db.pool, 'github', freshId());
    const before = await countEvents(db.pool);
    const body = JSON.stringify(github.payload('long'));
    const { status, json } = await post(app, github.path, body, await github.sign(body, { deliveryKey: 'd'.repeat(6000) }));
    expect(status).toBe(400);
    expect(json.error).toBe('field-too-long');
    expect(await countEvents(db.pool)).toBe(before);
  });
});

describe('reading bodies', () => {
  /** A body that sends `first` and then never ends, until the test lets it. */
  function endless(first: Uint8Array) {
    let close: () => void = () => {};
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(first);
        close = () => controller.close();
      },
    });
    return { stream, close: () => close() };
  }

  it('checks the signature headers before reading a byte of the body', async () => {
    const s = await scenario(db.pool, 'github', freshId());
    const body = endless(new Uint8Array(1024));
    const answered = await Promise.race([
      post(app, s.path, body.stream, {}).then((response) => response.status),
      new Promise((resolve) => setTimeout(() => resolve('still reading'), 2000)),
    ]);
    body.close();
    expect(answered).toBe(401);
    const malformed = await post(app, s.path, '{}', { 'x-hub-signature-256': 'sha256=zz' });
    expect(malformed.status).toBe(401);
    expect(malformed.json.error).toBe('bad-signature');
  });

  // The bound on bodies read at once is proven over real sockets, where
  // bodies trickle in: test/server/node.test.ts.

  it('logs a client that hangs up mid-body at debug level and answers nothing else', async () => {
    const s = await scenario(db.pool, 'github', freshId());
    const lines = recorded.lines.length;
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new Uint8Array(10));
        setTimeout(() => controller.error(new Error('socket hang up')), 10);
      },
    });
    const response = await app.request(s.path, {
      method: 'POST', body: stream, headers: { 'x-hub-signature-256': `sha256=${'0'.repeat(64)}` }, duplex: 'half',
    } as RequestInit);
    expect(response.status).toBeLessThan(500);
    const logged = recorded.lines.slice(lines);
    expect(logged.map((line) => line.level)).toEqual(['debug']);
    expect(logged[0]!.fields.event).toBe('client_gone');
  });
});

describe.each(['github', 'forgejo'] as const)('%s signs the body alone', (provider) => {
  it('a captured body under a new delivery id, or relabelled by its event header, is a duplicate', async () => {
    const s = await scenario(db.pool, provider, freshId());
    const key = newDeliveryKey();
    const body = JSON.stringify(s.payload(key));
    const first = await deliver(s, body, key);
    expect(first.json.events).toEqual([expect.objectContaining({ outcome: 'stored' })]);
    const stored = first.json.events[0].event_id;

    const replayed = await deliver(s, body, newDeliveryKey());
    expect(replayed.status).toBe(202);
    expect(replayed.json.events).toEqual([{ workspace_id: expect.any(Number), event_id: stored, outcome: 'duplicate' }]);

    const eventHeader = provider === 'github' ? 'x-github-event' : 'x-forgejo-event';
    const relabelled = await post(app, s.path, body, { ...(await s.sign(body, { deliveryKey: newDeliveryKey() })), [eventHeader]: 'installation' });
    expect(relabelled.status).toBe(202);
    expect(relabelled.json.events).toEqual([{ workspace_id: expect.any(Number), event_id: stored, outcome: 'duplicate' }]);
    const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM wharf.provider_event WHERE payload = $1::jsonb`, [body]);
    expect(rows[0].n).toBe(1);
  });
});
