// Destinations through the operator API (contract v6, issue 53): made,
// listed, shown, changed, paused, resumed and deleted; the signing secret
// Wharf draws is answered once (create, rotate-secret), stored sealed under
// the destination's id and never shown again; credentials are stored sealed
// and never answered; a bad URL or filter is a 400 naming the bad part and
// saves nothing; a rule's filter is tried against a stored event; a DEAD
// delivery is replayed alone or in batches after a count; and another
// workspace's token gets 403 on the workspace's paths and 404 for its ids
// on its own, changing nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decryptSecret, parseKeyRing } from '../../db/secret-box.js';
import { createApiToken } from '../../operator/sql/operator.js';
import type { Destination, DestinationRule, DeliveryDetail, DeliveryPage, EventDelivery } from '../../operator/sql/destinations.js';
import { adminToken, apiClient, type ApiCall } from '../support/api-client.js';
import { admitEvent, createConnection, createWorkspace } from '../support/api-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { testSecretKeys } from '../support/edge-fixtures.js';

let db: TestDatabase;
let api: ApiCall;
let tokenA: string;
let tokenB: string;
let connectionA: number;
let connectionB: number;
const A = 881;
const B = 882;
let names = 0;

beforeAll(async () => {
  db = await createTestDatabase();
  api = apiClient({ db: db.pool, adminToken });
  await createWorkspace(db.pool, A);
  await createWorkspace(db.pool, B);
  connectionA = await createConnection(db.pool, A);
  connectionB = await createConnection(db.pool, B);
  tokenA = (await createApiToken(db.pool, String(A), 'ops')).token;
  tokenB = (await createApiToken(db.pool, String(B), 'ops')).token;
}, 120_000);

afterAll(async () => {
  await db?.drop();
});

/** A destination of workspace `ws` made through the API; its answer (secret included). */
async function newDestination(ws: number, token: string, body: Record<string, unknown> = {}): Promise<Destination & { secret: string }> {
  const created = await api('POST', `/workspaces/${ws}/destinations`, {
    token, body: { name: `app-${++names}`, url: 'https://app.example.test/hooks', ...body },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body as unknown as Destination & { secret: string };
}

async function storedRow(id: number) {
  const { rows } = await db.pool.query<{ signing_secret: string | null; previous_signing_secret: string | null; credentials: string | null }>(
    'SELECT signing_secret, previous_signing_secret, credentials FROM wharf.destination WHERE id = $1', [id]);
  return rows[0];
}

async function destinationCount(ws: number): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM wharf.destination WHERE workspace_id = $1', [ws]);
  return rows[0]!.n;
}

/**
 * Claims the destination's deliveries due now and fails each permanently
 * (as an HTTP 400 would): DEAD. Every other delivery the claim hands out
 * goes straight back. The ids made DEAD.
 */
async function killDeliveries(destinationId: number): Promise<number[]> {
  const { rows } = await db.pool.query<{ delivery_id: string; epoch: string; destination_id: string }>(
    `SELECT delivery_id, epoch, destination_id FROM wharf.claim_deliveries('fixture', 1000)`);
  const dead: number[] = [];
  for (const row of rows) {
    if (Number(row.destination_id) !== destinationId) {
      await db.pool.query('SELECT wharf.release_delivery($1, $2)', [row.delivery_id, row.epoch]);
      continue;
    }
    await db.pool.query(`SELECT wharf.fail_delivery($1, $2, 'permanent', 'HttpStatus400', 400, 12, 'bad request')`, [row.delivery_id, row.epoch]);
    dead.push(Number(row.delivery_id));
  }
  return dead;
}

/** A destination of A with a rule taking every event of A: each event admitted after gets a delivery to it. */
async function routedDestination(body: Record<string, unknown> = {}): Promise<Destination> {
  const destination = await newDestination(A, tokenA, { ordered: false, ...body });
  const rule = await api('POST', `/workspaces/${A}/destinations/${destination.id}/rules`, { token: tokenA, body: { event_types: ['*'] } });
  expect(rule.status, JSON.stringify(rule.body)).toBe(201);
  return destination;
}

describe('destinations', () => {
  it('are made with a signing secret answered once, sealed under their id, and listed, shown and changed without it', async () => {
    const created = await newDestination(A, tokenA, { timeout_ms: 5000, rate_limit: 20, rate_period: 'second', headers: { 'X-Team': 'payments' } });
    expect(created).toMatchObject({ workspace_id: A, url: 'https://app.example.test/hooks', timeout_ms: 5000, rate_limit: 20,
      rate_period: 'second', max_in_flight: 10, ordered: true, headers: { 'X-Team': 'payments' }, state: 'ACTIVE',
      has_secret: true, has_credentials: false, credentials_type: null });
    // 24 random bytes in base64: 32 characters, no padding.
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);

    const stored = await storedRow(created.id);
    expect(stored?.signing_secret).toMatch(/^aes256gcm:/);
    const ring = await parseKeyRing(testSecretKeys);
    expect(await decryptSecret(ring, { destinationId: created.id }, stored!.signing_secret!)).toBe(created.secret);
    // Sealed for this destination: it opens for no other owner.
    await expect(decryptSecret(ring, { destinationId: created.id + 1 }, stored!.signing_secret!)).rejects.toThrow(/does not decrypt/);

    const shown = await api('GET', `/workspaces/${A}/destinations/${created.id}`, { token: tokenA });
    expect(shown.status).toBe(200);
    expect(shown.body).not.toHaveProperty('secret');
    expect(shown.body.stats).toMatchObject({ queued: 0, leased: 0, dead: 0, per_minute: 0, success_rate: null });
    const listed = await api('GET', `/workspaces/${A}/destinations`, { token: tokenA });
    expect((listed.body as unknown as Destination[]).map((d) => d.id)).toContain(created.id);
    for (const answer of [shown, listed]) {
      expect(JSON.stringify(answer.body)).not.toContain(created.secret.slice('whsec_'.length));
      expect(JSON.stringify(answer.body)).not.toContain('aes256gcm');
    }

    const edited = await api('PATCH', `/workspaces/${A}/destinations/${created.id}`, { token: tokenA, body: { timeout_ms: 2500, rate_limit: null } });
    expect(edited.status, JSON.stringify(edited.body)).toBe(200);
    expect(edited.body).toMatchObject({ timeout_ms: 2500, rate_limit: null, url: 'https://app.example.test/hooks', name: created.name });
    expect(edited.body).not.toHaveProperty('secret');
  });

  it('are paused and resumed as the caller, and deleted', async () => {
    const { id } = await newDestination(A, tokenA);
    const paused = await api('POST', `/workspaces/${A}/destinations/${id}/pause`, { token: tokenA });
    expect(paused.status).toBe(200);
    expect(paused.body).toMatchObject({ state: 'PAUSED', paused_reason: 'operator', paused_by: 'token:ops' });
    const resumed = await api('POST', `/workspaces/${A}/destinations/${id}/resume`, { token: tokenA });
    expect(resumed.body).toMatchObject({ state: 'ACTIVE', paused_reason: null });

    const deleted = await api('DELETE', `/workspaces/${A}/destinations/${id}`, { token: tokenA });
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ id, deleted: true });
    expect((await api('GET', `/workspaces/${A}/destinations/${id}`, { token: tokenA })).status).toBe(404);
    expect((await api('DELETE', `/workspaces/${A}/destinations/${id}`, { token: tokenA })).status).toBe(404);
  });

  it('show an open circuit breaker, and resume closes it at once', async () => {
    const destination = await routedDestination({ breaker_failures: 1 });
    await admitEvent(db.pool, connectionA);
    const { rows } = await db.pool.query<{ delivery_id: string; epoch: string; destination_id: string }>(
      `SELECT delivery_id, epoch, destination_id FROM wharf.claim_deliveries('fixture', 1000)`);
    for (const row of rows) {
      if (Number(row.destination_id) === destination.id) {
        await db.pool.query(`SELECT wharf.fail_delivery($1, $2, 'transient', 'HttpStatus503', 503, 5, 'busy')`, [row.delivery_id, row.epoch]);
      } else {
        await db.pool.query('SELECT wharf.release_delivery($1, $2)', [row.delivery_id, row.epoch]);
      }
    }
    const open = await api('GET', `/workspaces/${A}/destinations/${destination.id}`, { token: tokenA });
    expect(open.body).toMatchObject({ state: 'BREAKER_OPEN', paused_reason: 'breaker', consecutive_failures: 1 });
    expect(open.body.failing_since).not.toBeNull();
    const listed = (await api('GET', `/workspaces/${A}/destinations`, { token: tokenA })).body as unknown as Destination[];
    expect(listed.find((d) => d.id === destination.id)?.stats).toMatchObject({ failed_last_hour: 1, success_rate: 0, queued: 1 });
    const resumed = await api('POST', `/workspaces/${A}/destinations/${destination.id}/resume`, { token: tokenA });
    expect(resumed.body).toMatchObject({ state: 'ACTIVE', paused_reason: null, consecutive_failures: 0, failing_since: null });
  });

  it('rotate the secret: a new one answered once, the previous one kept for the overlap unless cut off', async () => {
    const created = await newDestination(A, tokenA);
    const before = await storedRow(created.id);
    const rotated = await api('POST', `/workspaces/${A}/destinations/${created.id}/rotate-secret`, { token: tokenA });
    expect(rotated.status, JSON.stringify(rotated.body)).toBe(200);
    const secret = rotated.body.secret as string;
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    expect(secret).not.toBe(created.secret);
    expect(rotated.body.secret_rotating_until).not.toBeNull();
    const after = await storedRow(created.id);
    expect(after?.previous_signing_secret).toBe(before?.signing_secret);
    const ring = await parseKeyRing(testSecretKeys);
    expect(await decryptSecret(ring, { destinationId: created.id }, after!.signing_secret!)).toBe(secret);

    const shown = await api('GET', `/workspaces/${A}/destinations/${created.id}`, { token: tokenA });
    expect(shown.body).not.toHaveProperty('secret');
    expect(JSON.stringify(shown.body)).not.toContain(secret.slice('whsec_'.length));

    const cut = await api('POST', `/workspaces/${A}/destinations/${created.id}/rotate-secret`, { token: tokenA, body: { overlap: false } });
    expect(cut.status).toBe(200);
    expect(cut.body.secret_rotating_until).toBeNull();
    expect((await storedRow(created.id))?.previous_signing_secret).toBeNull();
  });

  it('keep credentials sealed and never answer them: only whether there are some, and their type', async () => {
    const { id } = await newDestination(A, tokenA);
    const kinds = [
      [{ type: 'bearer', token: 'tok-SEKRIT-1' }, 'tok-SEKRIT-1'],
      [{ type: 'basic', username: 'svc', password: 'pw-SEKRIT-2' }, 'pw-SEKRIT-2'],
      [{ type: 'header', name: 'X-Api-Key', value: 'key-SEKRIT-3' }, 'key-SEKRIT-3'],
    ] as const;
    for (const [credentials, secret] of kinds) {
      const set = await api('PUT', `/workspaces/${A}/destinations/${id}/credentials`, { token: tokenA, body: credentials });
      expect(set.status, JSON.stringify(set.body)).toBe(200);
      expect(set.body).toMatchObject({ has_credentials: true, credentials_type: credentials.type });
      const shown = await api('GET', `/workspaces/${A}/destinations/${id}`, { token: tokenA });
      const listed = await api('GET', `/workspaces/${A}/destinations`, { token: tokenA });
      for (const answer of [set, shown, listed]) expect(JSON.stringify(answer.body)).not.toContain(secret);
      const stored = (await storedRow(id))!.credentials!;
      expect(stored).toMatch(/^aes256gcm:/);
      expect(JSON.parse(await decryptSecret(await parseKeyRing(testSecretKeys), { destinationId: id }, stored))).toEqual(credentials);
    }
    const incomplete = await api('PUT', `/workspaces/${A}/destinations/${id}/credentials`, { token: tokenA, body: { type: 'basic', username: 'svc' } });
    expect(incomplete.status).toBe(400);
    expect(incomplete.body.message).toMatch(/password/);

    const cleared = await api('DELETE', `/workspaces/${A}/destinations/${id}/credentials`, { token: tokenA });
    expect(cleared.status).toBe(200);
    expect(cleared.body).toMatchObject({ has_credentials: false, credentials_type: null });
    expect((await storedRow(id))?.credentials).toBeNull();
  });

  it('refuse a bad URL, setting or name with a 400 that names it, saving nothing', async () => {
    await newDestination(A, tokenA, { name: 'taken' });
    const count = await destinationCount(A);
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ name: 'x1', url: 'ftp://app.example.test/hooks' }, /^destination url: /],
      [{ name: 'x2', url: 'https://user:pw@app.example.test/' }, /^destination url: /],
      [{ name: 'x3', url: 'https://app.example.test/', timeout_ms: 5 }, /timeout_ms/],
      [{ name: 'x4', url: 'https://app.example.test/', headers: { Authorization: 'Bearer x' } }, /headers\.Authorization/],
      [{ name: 'taken', url: 'https://app.example.test/' }, /^destination name: 'taken' is already used/],
      [{ name: 'x5' }, /url/],
      [{ name: 'x6', url: 'https://app.example.test/', colour: 'blue' }, /colour/],
    ];
    for (const [body, message] of bad) {
      const refused = await api('POST', `/workspaces/${A}/destinations`, { token: tokenA, body });
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect(refused.body.error).toBe('bad_request');
      expect(refused.body.message, JSON.stringify(body)).toMatch(message);
    }
    expect(await destinationCount(A)).toBe(count);

    const { id, url } = await newDestination(A, tokenA);
    const badEdit = await api('PATCH', `/workspaces/${A}/destinations/${id}`, { token: tokenA, body: { url: 'not a url' } });
    expect(badEdit.status).toBe(400);
    expect(badEdit.body.message).toMatch(/^destination url: /);
    expect((await api('GET', `/workspaces/${A}/destinations/${id}`, { token: tokenA })).body.url).toBe(url);
  });

  it('answer 503 naming WHARF_SECRET_KEYS when the server has no key ring, making nothing', async () => {
    const noKeys = apiClient({ db: db.pool, adminToken, keyRing: Promise.resolve(undefined) });
    const count = await destinationCount(A);
    const refused = await noKeys('POST', `/workspaces/${A}/destinations`, { token: tokenA, body: { name: 'nokeys', url: 'https://app.example.test/' } });
    expect(refused.status).toBe(503);
    expect(refused.body).toMatchObject({ error: 'no_secret_keys' });
    expect(refused.body.message).toMatch(/WHARF_SECRET_KEYS/);
    expect(await destinationCount(A)).toBe(count);
  });
});

describe('rules', () => {
  it('are made, listed, changed and deleted; a bad filter or pattern is a 400 naming it and saves nothing', async () => {
    const { id } = await newDestination(A, tokenA);
    const made = await api('POST', `/workspaces/${A}/destinations/${id}/rules`, {
      token: tokenA, body: { connection_id: connectionA, event_types: ['pull_request.*', 'issue*'], filter: { payload: { action: { $in: ['opened', 'closed'] } } } },
    });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const rule = made.body as unknown as DestinationRule;
    expect(rule).toMatchObject({ destination_id: id, connection_id: connectionA, event_types: ['pull_request.*', 'issue*'], forward_only: false });

    for (const [body, message] of [
      [{ filter: { payload: { action: { $regex: '^o' } } } }, /^rule filter\.payload\.action: unknown operator \$regex/],
      [{ filter: { body: { a: 1 } } }, /filter\.body: unknown field/],
      [{ connection_id: connectionB }, /connection_id: no such connection in this workspace/],
      [{ event_types: [] }, /event_types/],
    ] as const) {
      const refused = await api('POST', `/workspaces/${A}/destinations/${id}/rules`, { token: tokenA, body });
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect(refused.body.message, JSON.stringify(body)).toMatch(message);
    }
    const listed = await api('GET', `/workspaces/${A}/destinations/${id}/rules`, { token: tokenA });
    expect((listed.body as unknown as DestinationRule[]).map((r) => r.id)).toEqual([rule.id]);

    const edited = await api('PATCH', `/workspaces/${A}/destination-rules/${rule.id}`, { token: tokenA, body: { filter: null, forward_only: true } });
    expect(edited.status, JSON.stringify(edited.body)).toBe(200);
    expect(edited.body).toMatchObject({ id: rule.id, filter: null, forward_only: true, event_types: ['pull_request.*', 'issue*'] });
    const badEdit = await api('PATCH', `/workspaces/${A}/destination-rules/${rule.id}`, { token: tokenA, body: { filter: { payload: { n: { $gt: [1] } } } } });
    expect(badEdit.status).toBe(400);
    expect(badEdit.body.message).toMatch(/filter\.payload\.n\.\$gt: must be a number or a string/);

    const all = await api('GET', `/workspaces/${A}/destination-rules`, { token: tokenA });
    expect((all.body as unknown as DestinationRule[]).find((r) => r.id === rule.id)).toMatchObject({ filter: null, forward_only: true });
    expect((await api('DELETE', `/workspaces/${A}/destination-rules/${rule.id}`, { token: tokenA })).status).toBe(200);
    expect((await api('DELETE', `/workspaces/${A}/destination-rules/${rule.id}`, { token: tokenA })).status).toBe(404);
  });

  it('a filter is tested against a stored event, saving nothing', async () => {
    const event = await admitEvent(db.pool, connectionA, { payload: { action: 'opened', pull_request: { number: 7 } } });
    const test = (filter: unknown, eventId: number = event) =>
      api('POST', `/workspaces/${A}/destinations/filter-test`, { token: tokenA, body: { filter, event_id: eventId } });
    expect((await test({ payload: { action: 'opened' } })).body).toEqual({ matched: true });
    expect((await test({ payload: { action: { $in: ['closed', 'merged'] } } })).body).toEqual({ matched: false });
    expect((await test({ $or: [{ payload: { pull_request: { number: { $gt: 5 } } } }, { payload: { action: 'x' } }] })).body).toEqual({ matched: true });
    const bad = await test({ payload: { action: { $regex: 'o' } } });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toMatch(/filter\.payload\.action: unknown operator \$regex/);
    const elsewhere = await admitEvent(db.pool, connectionB);
    const foreign = await test({ payload: { hello: 'world' } }, elsewhere);
    expect(foreign.status).toBe(404);
  });
});

describe('deliveries', () => {
  it('an event routed to a destination shows its delivery; a DEAD one is listed, shown with its attempts and replayed once', async () => {
    const destination = await routedDestination();
    const event = await admitEvent(db.pool, connectionA, { payload: { action: 'opened' } });
    const ofEvent = await api('GET', `/workspaces/${A}/events/${event}/deliveries`, { token: tokenA });
    expect(ofEvent.status).toBe(200);
    const deliveries = ofEvent.body as unknown as EventDelivery[];
    const delivery = deliveries.find((d) => d.destination_id === destination.id)!;
    expect(delivery).toMatchObject({ event_id: event, state: 'QUEUED', destination_name: destination.name });

    expect(await killDeliveries(destination.id)).toEqual([delivery.id]);
    const dead = await api('GET', `/workspaces/${A}/destinations/${destination.id}/dead`, { token: tokenA });
    expect((dead.body as unknown as DeliveryPage).deliveries.map((d) => d.id)).toEqual([delivery.id]);
    const queued = await api('GET', `/workspaces/${A}/destinations/${destination.id}/deliveries?state=queued`, { token: tokenA });
    expect((queued.body as unknown as DeliveryPage).deliveries).toEqual([]);
    const shown = await api('GET', `/workspaces/${A}/deliveries/${delivery.id}`, { token: tokenA });
    const detail = shown.body as unknown as DeliveryDetail;
    expect(detail).toMatchObject({ id: delivery.id, state: 'DEAD', webhook_id: `wd_${delivery.id}`, error_class: 'HttpStatus400', last_status: 400 });
    expect(detail.attempts).toHaveLength(1);
    expect(detail.attempts[0]).toMatchObject({ status: 400, duration_ms: 12, response: 'bad request' });
    expect((await api('GET', `/workspaces/${A}/destinations/${destination.id}`, { token: tokenA })).body.stats).toMatchObject({ dead: 1 });

    const replayed = await api('POST', `/workspaces/${A}/deliveries/${delivery.id}/replay`, { token: tokenA });
    expect(replayed.status, JSON.stringify(replayed.body)).toBe(202);
    expect(replayed.body).toMatchObject({ id: delivery.id, state: 'QUEUED', attempt: 0, replayed_by: 'token:ops', webhook_id: `wd_${delivery.id}` });
    const again = await api('POST', `/workspaces/${A}/deliveries/${delivery.id}/replay`, { token: tokenA });
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ error: 'not_replayable', state: 'QUEUED' });
    expect((await api('POST', `/workspaces/${A}/deliveries/999999/replay`, { token: tokenA })).status).toBe(404);
  });

  it('an ordered delivery behind the head of its scope says it waits, with no time of its own', async () => {
    const destination = await newDestination(A, tokenA, { ordered: true });
    const subject = 'repo:acme/ordered-scope';
    expect((await api('POST', `/workspaces/${A}/destinations/${destination.id}/rules`, { token: tokenA, body: { subject_prefix: subject } })).status).toBe(201);
    await admitEvent(db.pool, connectionA, { subject });
    await admitEvent(db.pool, connectionA, { subject });
    const page = (await api('GET', `/workspaces/${A}/destinations/${destination.id}/deliveries`, { token: tokenA })).body as unknown as DeliveryPage;
    const [behind, head] = page.deliveries;
    expect(head).toMatchObject({ state: 'QUEUED', waiting_behind_head: false });
    expect(head!.next_attempt_at).not.toBeNull();
    expect(behind).toMatchObject({ state: 'QUEUED', waiting_behind_head: true, next_attempt_at: null });
  });

  it("a destination's dead letters are counted, then replayed in batches until none is left", async () => {
    const destination = await routedDestination();
    for (let i = 0; i < 3; i += 1) await admitEvent(db.pool, connectionA);
    expect(await killDeliveries(destination.id)).toHaveLength(3);
    const path = `/workspaces/${A}/destinations/${destination.id}/replays`;
    expect((await api('POST', `${path}/count`, { token: tokenA, body: { error_class: 'Nope' } })).body).toEqual({ matched: 0 });
    expect((await api('POST', `${path}/count`, { token: tokenA, body: { error_class: 'HttpStatus400', event_type: 'ping' } })).body).toEqual({ matched: 3 });
    const misspelt = await api('POST', `${path}/count`, { token: tokenA, body: { error_klass: 'HttpStatus400' } });
    expect(misspelt.status).toBe(400);

    expect((await api('POST', path, { token: tokenA, body: { one_batch: true, batch_size: 2 } })).body).toEqual({ replayed: 2 });
    expect((await api('POST', `${path}/count`, { token: tokenA, body: {} })).body).toEqual({ matched: 1 });
    expect((await api('POST', path, { token: tokenA, body: {} })).body).toEqual({ replayed: 1 });
    expect((await api('POST', path, { token: tokenA, body: {} })).body).toEqual({ replayed: 0 });
    const { rows } = await db.pool.query<{ state: string; replayed_by: string }>(
      'SELECT state, replayed_by FROM wharf.destination_delivery WHERE destination_id = $1', [destination.id]);
    expect(rows).toEqual(Array(3).fill({ state: 'QUEUED', replayed_by: 'token:ops' }));
  });
});

describe("another workspace's token", () => {
  it('gets 403 on every destination route of the workspace, and 404 for its ids on its own; nothing changes', async () => {
    const destination = await routedDestination();
    const event = await admitEvent(db.pool, connectionA, { payload: { action: 'opened' } });
    const [delivery] = await killDeliveries(destination.id);
    const { body: rules } = await api('GET', `/workspaces/${A}/destinations/${destination.id}/rules`, { token: tokenA });
    const rule = (rules as unknown as DestinationRule[])[0]!.id;
    await api('PUT', `/workspaces/${A}/destinations/${destination.id}/credentials`, { token: tokenA, body: { type: 'bearer', token: 'tok-A' } });
    const before = await db.pool.query('SELECT * FROM wharf.destination WHERE id = $1', [destination.id]);
    const rulesBefore = await db.pool.query('SELECT * FROM wharf.destination_rule WHERE destination_id = $1', [destination.id]);

    const d = destination.id;
    // Every route: method, path under a workspace, body. `{ws}` is A's (403) or B's own (404 for A's ids).
    const routes: [string, (ws: number) => string, unknown?][] = [
      ['GET', (ws) => `/workspaces/${ws}/destinations/${d}`],
      ['PATCH', (ws) => `/workspaces/${ws}/destinations/${d}`, { url: 'https://evil.example.test/' }],
      ['DELETE', (ws) => `/workspaces/${ws}/destinations/${d}`],
      ['POST', (ws) => `/workspaces/${ws}/destinations/${d}/pause`],
      ['POST', (ws) => `/workspaces/${ws}/destinations/${d}/resume`],
      ['POST', (ws) => `/workspaces/${ws}/destinations/${d}/rotate-secret`, {}],
      ['PUT', (ws) => `/workspaces/${ws}/destinations/${d}/credentials`, { type: 'bearer', token: 'evil' }],
      ['DELETE', (ws) => `/workspaces/${ws}/destinations/${d}/credentials`],
      ['GET', (ws) => `/workspaces/${ws}/destinations/${d}/rules`],
      ['POST', (ws) => `/workspaces/${ws}/destinations/${d}/rules`, {}],
      ['PATCH', (ws) => `/workspaces/${ws}/destination-rules/${rule}`, { forward_only: true }],
      ['DELETE', (ws) => `/workspaces/${ws}/destination-rules/${rule}`],
      ['GET', (ws) => `/workspaces/${ws}/destinations/${d}/deliveries`],
      ['GET', (ws) => `/workspaces/${ws}/destinations/${d}/dead`],
      ['POST', (ws) => `/workspaces/${ws}/destinations/${d}/replays/count`, {}],
      ['POST', (ws) => `/workspaces/${ws}/destinations/${d}/replays`, {}],
      ['GET', (ws) => `/workspaces/${ws}/deliveries/${delivery}`],
      ['POST', (ws) => `/workspaces/${ws}/deliveries/${delivery}/replay`],
      ['GET', (ws) => `/workspaces/${ws}/events/${event}/deliveries`],
      ['POST', (ws) => `/workspaces/${ws}/destinations/filter-test`, { filter: { payload: { action: 'opened' } }, event_id: event }],
    ];
    for (const [method, path, body] of routes) {
      const refused = await api(method, path(A), { token: tokenB, body });
      expect(refused.status, `${method} ${path(A)}`).toBe(403);
      expect(refused.body.error).toBe('forbidden');
      const unknown = await api(method, path(B), { token: tokenB, body });
      expect(unknown.status, `${method} ${path(B)}: ${JSON.stringify(unknown.body)}`).toBe(404);
      expect(JSON.stringify(unknown.body)).not.toMatch(/app\.example\.test|opened/);
    }
    // Listing its own shows nothing of A's.
    const own = await api('GET', `/workspaces/${B}/destinations`, { token: tokenB });
    expect(own.status).toBe(200);
    expect((own.body as unknown as Destination[]).map((x) => x.id)).not.toContain(d);

    expect((await db.pool.query('SELECT * FROM wharf.destination WHERE id = $1', [d])).rows).toEqual(before.rows);
    expect((await db.pool.query('SELECT * FROM wharf.destination_rule WHERE destination_id = $1', [d])).rows).toEqual(rulesBefore.rows);
    const { rows } = await db.pool.query('SELECT state FROM wharf.destination_delivery WHERE id = $1', [delivery]);
    expect(rows).toEqual([{ state: 'DEAD' }]);
  });
});
