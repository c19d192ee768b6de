// What the operator API refuses before PostgreSQL can (NUL characters, bodies
// nested too deeply), what it makes of values PostgreSQL cannot store (400,
// never 500), and that no answer of it may be cached.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { operatorApi } from '../../operator/api/app.js';
import { databaseError } from '../../operator/api/errors.js';
import { createApiToken } from '../../operator/sql/operator.js';
import { adminToken, apiClient, type ApiCall, type ApiResponse } from '../support/api-client.js';
import { admitEvent, createConnection, createWorkspace, deadEvent } from '../support/api-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { fileSeed, Rng } from '../support/random.js';

let db: TestDatabase;
let api: ApiCall;
const unexpected: unknown[] = [];
let workspaceToken: string;
let connection: number;
const A = 601;
const admin = (method: string, path: string, body?: unknown) => api(method, path, { token: adminToken, body });

beforeEach(() => {
  unexpected.length = 0;
});

beforeAll(async () => {
  db = await createTestDatabase();
  api = apiClient({ db: db.pool, adminToken, onUnexpectedError: (error) => unexpected.push(error) });
  await createWorkspace(db.pool, A);
  connection = await createConnection(db.pool, A);
  workspaceToken = (await createApiToken(db.pool, String(A), 'hardening')).token;
});

afterAll(async () => {
  await db?.drop();
});

/** The random text's seed: printed on failure, WHARF_TEST_SEED replays it. */
const random = Rng.seeded(fileSeed(import.meta.url));

/** Text PostgreSQL does not compress: `n` random CJK characters (3 bytes each in UTF-8). */
function incompressible(n: number): string {
  let text = '';
  for (let i = 0; i < n; i++) text += String.fromCharCode(0x4e00 + random.int(0, 19_999));
  return text;
}

function expectBadRequest(response: ApiResponse, message: RegExp | string): void {
  expect(response.status, JSON.stringify(response.body)).toBe(400);
  expect(Object.keys(response.body).sort()).toEqual(['error', 'message']);
  expect(response.body.error).toBe('bad_request');
  expect(response.body.message).toMatch(message);
}

describe('NUL characters', () => {
  it.each([
    ['subject=%00'], ['subject=repo%3Aacme%2Fa%00b'], ['state=DEAD%00'], ['limit=5%00'], ['cursor=1%00'],
    ['unused=%00'], ['na%00me=x'],
  ])('in the query (%s) answer 400, not 500', async (query) => {
    for (const path of [`/workspaces/${A}/events?${query}`, `/workspaces/${A}/dead?${query}`, `/installation-events?${query}`]) {
      expectBadRequest(await admin('GET', path), /NUL|must be|one of/);
    }
    expect(unexpected).toEqual([]);
  });

  it('in the subject filter says so', async () => {
    const response = await api('GET', `/workspaces/${A}/events?subject=%00`, { token: workspaceToken });
    expectBadRequest(response, 'subject must not contain NUL (\\u0000) characters');
  });

  const bodies: [name: string, path: () => string, body: unknown, method: string][] = [
    ['a subscription subject', () => `/connections/${connection}/subscriptions`, { subject: 'repo:a\u0000' }, 'POST'],
    ['an unsubscription subject', () => `/connections/${connection}/subscriptions`, { subject: '\u0000' }, 'DELETE'],
    ['a connection provider', () => `/workspaces/${A}/connections`, { provider: 'git\u0000lab', source: 'https://g.example.test', kind: 'webhook' }, 'POST'],
    ['a connection external id', () => `/workspaces/${A}/connections`, { provider: 'gitlab', source: 'https://g.example.test', kind: 'webhook', external_id: 'a\u0000' }, 'POST'],
    ['a connection route value', () => `/workspaces/${A}/connections`, { provider: 'gitlab', source: 'https://g.example.test', kind: 'webhook', route: { subject_prefixes: ['\u0000'] } }, 'POST'],
    ['a connection route key', () => `/workspaces/${A}/connections`, { provider: 'gitlab', source: 'https://g.example.test', kind: 'webhook', route: { 'a\u0000': 1 } }, 'POST'],
    ['a secret', () => `/connections/${connection}/rotate-secret`, { secret: `${'s'.repeat(40)}\u0000` }, 'POST'],
    ['a token name', () => `/workspaces/${A}/tokens`, { name: 'ci\u0000' }, 'POST'],
    ['an ignored field', () => `/workspaces/${A}/tokens`, { name: 'ci-nul', comment: '\u0000' }, 'POST'],
  ];
  it.each(bodies)('in %s of a JSON body answer 400, not 500', async (_name, path, body, method) => {
    expectBadRequest(await admin(method, path(), body), /NUL \(\\u0000\)/);
    expect(unexpected).toEqual([]);
  });

  it('in a replay body answer 400, and the event stays DEAD', async () => {
    const id = await deadEvent(db.pool, connection);
    const response = await api('POST', `/workspaces/${A}/events/${id}/replay`, { token: workspaceToken, body: { force: false, note: '\u0000' } });
    expectBadRequest(response, 'the body holds a NUL (\\u0000) character in "note", which cannot be stored');
    const { rows } = await db.pool.query('SELECT state FROM wharf.provider_event WHERE id = $1', [id]);
    expect(rows).toEqual([{ state: 'DEAD' }]);
  });

  it('a backslash followed by "u0000" is text like any other', async () => {
    const subject = 'repo:acme/\\u0000';
    const response = await admin('POST', `/connections/${connection}/subscriptions`, { subject });
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ subject, changed: true });
  });
});

describe('values PostgreSQL cannot store', () => {
  it('a subscription subject too large for its index answers 400, not 500', async () => {
    const response = await admin('POST', `/connections/${connection}/subscriptions`, { subject: incompressible(1000) });
    expectBadRequest(response, 'a value is too large to be stored');
    expect(unexpected).toEqual([]);
  });

  it('an external id too large for its index answers 400, not 500', async () => {
    const response = await admin('POST', `/workspaces/${A}/connections`, {
      provider: 'gitlab', source: 'https://g.example.test', kind: 'webhook', external_id: incompressible(3000),
    });
    expectBadRequest(response, 'a value is too large to be stored');
    expect(unexpected).toEqual([]);
  });

  it('a body nested 100,000 levels deep answers 400, not 500', async () => {
    const route = `${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`;
    const body = `{"provider":"gitlab","source":"https://g.example.test","kind":"webhook","route":${route}}`;
    expectBadRequest(await admin('POST', `/workspaces/${A}/connections`, body), 'the body is nested too deeply (more than 64 levels)');
    expect(unexpected).toEqual([]);
  });

  it('a route nested 60 levels deep is still fine', async () => {
    const route = JSON.parse(`${'{"a":'.repeat(60)}1${'}'.repeat(60)}`) as Record<string, unknown>;
    const response = await admin('POST', `/workspaces/${A}/connections`, {
      provider: 'gitlab', source: 'https://g.example.test', kind: 'webhook', external_id: 'deep-60', route,
    });
    expect(response.status, JSON.stringify(response.body)).toBe(201);
  });

  it.each([
    ['22021', 'invalid byte sequence for encoding "UTF8": 0x00', /NUL/],
    ['22P05', 'unsupported Unicode escape sequence', /NUL/],
    ['54000', 'index row size 3024 exceeds btree version 4 maximum 2704 for index "subscription_pkey"', /too large/],
  ])('databaseError maps SQLSTATE %s to 400 without the server\'s message', (code, message, expected) => {
    const error = databaseError(Object.assign(new Error(message), { code }));
    expect(error.status).toBe(400);
    expect(error.body()).toEqual({ error: 'bad_request', message: expect.stringMatching(expected) });
    expect(JSON.stringify(error.body())).not.toMatch(/UTF8|btree|subscription_pkey|Unicode escape/);
  });
});

describe('Cache-Control', () => {
  it('is no-store on a new token, a rotated secret and every other answer', async () => {
    const answers: [string, ApiResponse][] = [
      ['token creation', await admin('POST', `/workspaces/${A}/tokens`, { name: 'cache-test' })],
      ['secret rotation', await admin('POST', `/connections/${connection}/rotate-secret`)],
      ['a list', await admin('GET', `/workspaces/${A}/events`)],
      ['an event', await admin('GET', `/workspaces/${A}/events/${await admitEvent(db.pool, connection)}`)],
      ['a 400', await admin('GET', `/workspaces/${A}/events?limit=0`)],
      ['a 401', await api('GET', '/workspaces', { token: 'wrong-token' })],
      ['a 401 without a token', await api('GET', '/workspaces')],
      ['a 403', await api('GET', '/workspaces', { token: workspaceToken })],
      ['a 404 of a row', await admin('GET', `/workspaces/${A}/events/987654321`)],
    ];
    expect(answers.find(([, response]) => response.status === 201)).toBeDefined();
    for (const [name, response] of answers) expect(response.headers.get('cache-control'), name).toBe('no-store');
  });

  it('is no-store on the API\'s own 404 for an unknown route', async () => {
    const response = await operatorApi({ db: db.pool, adminToken }).request('/no-such-route', {
      headers: { authorization: `Bearer ${adminToken}` },
    });
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({ error: 'not_found', message: 'no such route' });
    expect(response.headers.get('cache-control')).toBe('no-store');
  });
});
