// What the instance-admin endpoints do: workspaces, connections, secrets,
// subscriptions and tokens, and their 400/404/409 answers.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decryptSecret, parseKeyRing } from '../../db/secret-box.js';
import { testSecretKeys } from '../support/edge-fixtures.js';
import { adminToken, apiClient, type ApiCall } from '../support/api-client.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

let db: TestDatabase;
let api: ApiCall;
const admin = (method: string, path: string, body?: unknown) => api(method, path, { token: adminToken, body });

beforeAll(async () => {
  db = await createTestDatabase();
  api = apiClient({ db: db.pool, adminToken });
});

afterAll(async () => {
  await db?.drop();
});

describe('workspaces', () => {
  it('creates, lists, suspends and activates a workspace', async () => {
    expect(await admin('POST', '/workspaces', { id: 301 })).toMatchObject({ status: 201, body: { id: 301, state: 'ACTIVE' } });
    expect((await admin('POST', '/workspaces/301/suspend')).body).toMatchObject({ id: 301, state: 'SUSPENDED' });
    const listed = await admin('GET', '/workspaces');
    expect(listed.body).toEqual([expect.objectContaining({ id: 301, state: 'SUSPENDED', connections: 0 })]);
    expect((await admin('POST', '/workspaces/301/pause')).body).toMatchObject({ id: 301, state: 'PAUSED' });
    expect((await admin('POST', '/workspaces/301/resume')).body).toMatchObject({ id: 301, state: 'ACTIVE' });
    expect((await admin('POST', '/workspaces/301/activate')).body).toMatchObject({ state: 'ACTIVE' });
    const { rows } = await db.pool.query('SELECT state FROM wharf.workspace WHERE id = 301');
    expect(rows).toEqual([{ state: 'ACTIVE' }]);
  });

  it('answers 400 for a bad id and 404 for an unknown workspace', async () => {
    expect((await admin('POST', '/workspaces', { id: 'x' })).status).toBe(400);
    expect((await admin('POST', '/workspaces', {})).status).toBe(400);
    expect(await admin('POST', '/workspaces/9999/suspend'))
      .toMatchObject({ status: 404, body: { error: 'not_found', message: 'unknown workspace 9999' } });
  });
});

describe('connections and subscriptions', () => {
  it('creates a connection, subscribes, suspends and unsubscribes', async () => {
    await admin('POST', '/workspaces', { id: 310 });
    const created = await admin('POST', '/workspaces/310/connections', {
      provider: 'gitlab', source: 'https://gitlab.example.test', kind: 'webhook', external_id: '42',
      route: { subject_prefixes: ['project:'] },
    });
    expect(created).toMatchObject({ status: 201, body: { workspace_id: 310, provider: 'gitlab', state: 'ACTIVE' } });
    const id = created.body.id as number;

    expect((await admin('POST', `/connections/${id}/subscriptions`, { subject: 'project:7' })).body.changed).toBe(true);
    expect((await admin('POST', `/connections/${id}/subscriptions`, { subject: 'project:7' })).body.changed).toBe(false);
    expect((await admin('POST', `/connections/${id}/suspend`)).body).toMatchObject({ id, state: 'SUSPENDED' });
    const listed = await admin('GET', '/workspaces/310/connections');
    expect(listed.body).toEqual([expect.objectContaining({ id, state: 'SUSPENDED', subscriptions: ['project:7'] })]);
    expect((await admin('DELETE', `/connections/${id}/subscriptions`, { subject: 'project:7' })).body.changed).toBe(true);
    expect((await admin('POST', `/connections/${id}/pause`)).body).toMatchObject({ id, state: 'PAUSED' });
    expect((await admin('POST', `/connections/${id}/resume`)).body).toMatchObject({ id, state: 'ACTIVE' });
    expect((await admin('POST', `/connections/${id}/activate`)).body).toMatchObject({ state: 'ACTIVE', subscriptions: [] });
  });

  it('rotates a webhook secret, shows it once and stores what the edge reads', async () => {
    await admin('POST', '/workspaces', { id: 311 });
    const generic = await admin('POST', '/workspaces/311/connections', {
      provider: 'generic', source: 'https://sender.example.test', kind: 'webhook',
    });
    const rotated = await admin('POST', `/connections/${generic.body.id}/rotate-secret`);
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(rotated.headers.get('cache-control')).toBe('no-store');
    const { rows } = await db.pool.query<{ signing_key: string }>('SELECT signing_key FROM wharf.connection_endpoint($1)', [generic.body.id]);
    expect(rows[0]!.signing_key).toMatch(/^aes256gcm:test1:/);
    expect(await decryptSecret(await parseKeyRing(testSecretKeys), String(generic.body.id), rows[0]!.signing_key)).toBe(rotated.body.secret);
    const again = await admin('POST', `/connections/${generic.body.id}/rotate-secret`);
    expect(again.body.secret).not.toBe(rotated.body.secret);
    expect(JSON.stringify((await admin('GET', '/workspaces/311/connections')).body)).not.toContain('whsec_');
  });

  it('refuses to rotate an app-level secret and an unknown connection', async () => {
    await admin('POST', '/workspaces', { id: 312 });
    const github = await admin('POST', '/workspaces/312/connections', {
      provider: 'github', source: 'https://github.com', kind: 'app_installation', external_id: '77',
    });
    expect((await admin('POST', `/connections/${github.body.id}/rotate-secret`)).status).toBe(400);
    expect((await admin('POST', '/connections/987654/rotate-secret')).status).toBe(404);
  });

  it('answers 400 for a bad connection and 404 for an unknown one', async () => {
    await admin('POST', '/workspaces', { id: 313 });
    const bad = await admin('POST', '/workspaces/313/connections', { provider: 'nosuch', source: 'https://x', kind: 'webhook' });
    expect(bad).toMatchObject({ status: 400, body: { error: 'bad_request', message: "unknown provider 'nosuch'" } });
    expect((await admin('POST', '/workspaces/313/connections', { provider: 'gitlab', kind: 'webhook' })).status).toBe(400);
    expect((await admin('POST', '/workspaces/313/connections', { provider: 'gitlab', source: 'https://x', kind: 'w', route: [] })).status).toBe(400);
    expect((await admin('POST', '/connections/987654/suspend')).status).toBe(404);
    expect((await admin('POST', '/connections/987654/subscriptions', { subject: 'x' })).status).toBe(404);
    expect((await admin('POST', '/connections/1/subscriptions', {})).status).toBe(400);
  });
});

describe('tokens', () => {
  it('shows a new token once, stores only its hash, and the token reaches its workspace', async () => {
    await admin('POST', '/workspaces', { id: 320 });
    const created = await admin('POST', '/workspaces/320/tokens', { name: 'deploy-bot' });
    expect(created).toMatchObject({ status: 201, body: { workspace_id: 320, name: 'deploy-bot' } });
    const token = created.body.token as string;
    expect(token).toMatch(/^wharf_ws_[0-9a-f]{64}$/);

    const { rows } = await db.pool.query<{ token_hash: Buffer }>('SELECT token_hash FROM wharf.api_token WHERE id = $1', [created.body.id]);
    expect(rows[0]!.token_hash.toString('hex')).toBe(createHash('sha256').update(token).digest('hex'));
    const listed = await admin('GET', '/workspaces/320/tokens');
    expect(JSON.stringify(listed.body)).not.toContain(token.slice(9));

    expect((await api('GET', '/workspaces/320/events', { token })).status).toBe(200);
    const used = await admin('GET', '/workspaces/320/tokens');
    expect((used.body as unknown as { last_used_at: string | null }[])[0]!.last_used_at).not.toBeNull();

    expect((await admin('DELETE', `/workspaces/320/tokens/${created.body.id}`)).status).toBe(200);
    expect((await api('GET', '/workspaces/320/events', { token })).status).toBe(401);
    expect((await admin('DELETE', `/workspaces/320/tokens/${created.body.id}`)).status).toBe(404);
  });

  it('answers 409 for a live name taken and 400 for a bad name', async () => {
    await admin('POST', '/workspaces', { id: 321 });
    expect((await admin('POST', '/workspaces/321/tokens', { name: 'ci' })).status).toBe(201);
    expect(await admin('POST', '/workspaces/321/tokens', { name: 'ci' })).toMatchObject({ status: 409, body: { error: 'conflict' } });
    expect((await admin('POST', '/workspaces/321/tokens', { name: 'has space' })).status).toBe(400);
    expect((await admin('POST', '/workspaces/9999/tokens', { name: 'x' })).status).toBe(404);
  });
});

describe('an unexpected database error', () => {
  it('answers 500 without internals and hands the cause to onUnexpectedError', async () => {
    const seen: unknown[] = [];
    const reporting = apiClient({ db: db.pool, adminToken, onUnexpectedError: (error) => seen.push(error) });
    await db.pool.query('ALTER FUNCTION wharf.list_workspaces() RENAME TO list_workspaces_away');
    try {
      const response = await reporting('GET', '/workspaces', { token: adminToken });
      expect(response).toMatchObject({ status: 500, body: { error: 'internal', message: 'internal error' } });
      expect(JSON.stringify(response.body)).not.toMatch(/list_workspaces|function/);
      expect(seen).toEqual([expect.objectContaining({ code: '42883' })]);
    } finally {
      await db.pool.query('ALTER FUNCTION wharf.list_workspaces_away() RENAME TO list_workspaces');
    }
  });
});
