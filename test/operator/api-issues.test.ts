// Issues through the operator API: failures open an issue per workspace,
// provider, event type and error class; an operator acknowledges and
// resolves it and it reopens when the failure returns; its events are
// listed; another workspace's token neither sees nor changes it; concurrent
// failures on many connections count into one issue exactly.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Issue } from '../../operator/sql/issues.js';
import { createApiToken } from '../../operator/sql/operator.js';
import { adminToken, apiClient, type ApiCall } from '../support/api-client.js';
import { admitEvent, createConnection, createWorkspace } from '../support/api-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

let db: TestDatabase;
let api: ApiCall;
let tokenA: string;
let tokenB: string;
const A = 401;
const B = 402;
let connectionA: number;
let connectionB: number;

/** Claims event `id` and fails it as `kind` with `errorClass`; every other lease goes back. */
async function failEvent(id: number, kind: string, errorClass: string): Promise<void> {
  const { rows } = await db.pool.query<{ id: string; lease_epoch: string }>(`SELECT id, lease_epoch FROM wharf.claim('fixture', 10000)`);
  for (const row of rows) {
    if (Number(row.id) === id) await db.pool.query('SELECT wharf.fail($1, $2, $3, $4)', [row.id, row.lease_epoch, kind, errorClass]);
    else await db.pool.query('SELECT wharf.release($1, $2)', [row.id, row.lease_epoch]);
  }
}

async function issuesOf(ws: number, token: string): Promise<Issue[]> {
  const response = await api('GET', `/workspaces/${ws}/issues`, { token });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response.body as unknown as Issue[];
}

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

describe('issues', () => {
  it('open as events fail, are acknowledged and resolved, and reopen when the failure returns', async () => {
    const first = await admitEvent(db.pool, connectionA);
    const second = await admitEvent(db.pool, connectionA);
    await failEvent(first, 'transient', 'ECONNRESET');
    await failEvent(second, 'permanent', 'ECONNRESET');

    const [opened] = await issuesOf(A, tokenA);
    expect(opened).toMatchObject({
      workspace_id: A, provider: 'generic', event_type: 'ping', error_class: 'ECONNRESET', status: 'open',
      status_by: null, failures: 2, dead: 1, sample_event_id: second, reopened: 0,
    });
    const events = await api('GET', `/workspaces/${A}/issues/${opened!.id}/events`, { token: tokenA });
    expect((events.body.events as { id: number }[]).map((event) => event.id)).toEqual([second, first]);

    const acknowledged = await api('POST', `/workspaces/${A}/issues/${opened!.id}/status`, { token: tokenA, body: { status: 'acknowledged' } });
    expect(acknowledged.status).toBe(200);
    expect(acknowledged.body).toMatchObject({ status: 'acknowledged', status_by: 'token:ops' });
    const resolved = await api('POST', `/workspaces/${A}/issues/${opened!.id}/status`, { token: adminToken, body: { status: 'resolved' } });
    expect(resolved.body).toMatchObject({ status: 'resolved', status_by: 'admin' });

    await failEvent(await admitEvent(db.pool, connectionA), 'transient', 'ECONNRESET');
    const reopened = await api('GET', `/workspaces/${A}/issues/${opened!.id}`, { token: tokenA });
    expect(reopened.body).toMatchObject({ status: 'open', status_by: null, failures: 3, reopened: 1 });
    expect(reopened.body.reopened_at).toBeTypeOf('string');
  });

  it('are out of reach of another workspace', async () => {
    await failEvent(await admitEvent(db.pool, connectionB), 'permanent', 'TypeError');
    const [ofA] = await issuesOf(A, tokenA);
    const [ofB] = await issuesOf(B, tokenB);
    expect(ofB).toMatchObject({ workspace_id: B, error_class: 'TypeError' });
    expect((await issuesOf(A, tokenA)).map((issue) => issue.workspace_id)).not.toContain(B);

    // B's token on A's routes: 403, whatever the issue.
    for (const [method, path, body] of [
      ['GET', `/workspaces/${A}/issues`, undefined],
      ['GET', `/workspaces/${A}/issues/${ofA!.id}`, undefined],
      ['GET', `/workspaces/${A}/issues/${ofA!.id}/events`, undefined],
      ['POST', `/workspaces/${A}/issues/${ofA!.id}/status`, { status: 'ignored' }],
    ] as const) {
      const response = await api(method, path, { token: tokenB, ...(body ? { body } : {}) });
      expect(response.status, `${method} ${path}`).toBe(403);
      expect(JSON.stringify(response.body)).not.toContain('ECONNRESET');
    }
    // A's issue through B's own path: not there.
    expect((await api('GET', `/workspaces/${B}/issues/${ofA!.id}`, { token: tokenB })).status).toBe(404);
    expect((await api('POST', `/workspaces/${B}/issues/${ofA!.id}/status`, { token: tokenB, body: { status: 'ignored' } })).status).toBe(404);
    const { rows } = await db.pool.query('SELECT status FROM wharf.issue WHERE id = $1', [ofA!.id]);
    expect(rows[0]!.status).not.toBe('ignored');
  });

  it('refuses a bad status or filter with a clear 400', async () => {
    const [ofA] = await issuesOf(A, tokenA);
    const bad = await api('POST', `/workspaces/${A}/issues/${ofA!.id}/status`, { token: tokenA, body: { status: 'closed' } });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toMatch(/status must be one of open, acknowledged, resolved, ignored/);
    expect((await api('POST', `/workspaces/${A}/issues/${ofA!.id}/status`, { token: tokenA, body: { status: 'resolved', extra: 1 } })).status).toBe(400);
    expect((await api('GET', `/workspaces/${A}/issues?status=closed`, { token: tokenA })).status).toBe(400);
    expect((await api('GET', `/workspaces/${A}/issues?limit=0`, { token: tokenA })).status).toBe(400);
    const filtered = await api('GET', `/workspaces/${A}/issues?status=open`, { token: tokenA });
    expect((filtered.body as unknown as Issue[]).every((issue) => issue.status === 'open')).toBe(true);
  });

  it('count every one of many concurrent failures into one issue, on connections of their own', async () => {
    const workers = 8;
    const perWorker = 5;
    const ids: number[] = [];
    for (let i = 0; i < workers * perWorker; i += 1) ids.push(await admitEvent(db.pool, connectionA));
    const { rows: leases } = await db.pool.query<{ id: string; lease_epoch: string }>(
      `SELECT id, lease_epoch FROM wharf.claim('fixture', 10000) WHERE id = ANY($1)`, [ids]);
    expect(leases).toHaveLength(ids.length);
    // Each "worker" fails its share on its own connection, all at once.
    await Promise.all(Array.from({ length: workers }, async (_, w) => {
      const client = await db.pool.connect();
      try {
        for (const lease of leases.slice(w * perWorker, (w + 1) * perWorker)) {
          await client.query(`SELECT wharf.fail($1, $2, 'unknown', 'RaceError')`, [lease.id, lease.lease_epoch]);
        }
      } finally {
        client.release();
      }
    }));
    const raced = (await issuesOf(A, tokenA)).filter((issue) => issue.error_class === 'RaceError');
    expect(raced).toHaveLength(1);
    expect(raced[0]!.failures).toBe(workers * perWorker);
    // Its chart counted every one too (in the last two hours: the test may cross an hour's end).
    const history = await api('GET', `/workspaces/${A}/issues/${raced[0]!.id}/history?hours=2`, { token: tokenA });
    expect(history.status).toBe(200);
    const hours = history.body as unknown as { at: string; failures: number; dead: number }[];
    expect(hours).toHaveLength(2);
    expect(hours.reduce((sum, hour) => sum + hour.failures, 0)).toBe(workers * perWorker);
    expect(hours.reduce((sum, hour) => sum + hour.dead, 0)).toBe(0);
  });

  it("charts an issue's failures per hour, for its workspace only", async () => {
    const [ofA] = await issuesOf(A, tokenA);
    const week = await api('GET', `/workspaces/${A}/issues/${ofA!.id}/history`, { token: tokenA });
    expect(week.status).toBe(200);
    expect(week.body).toHaveLength(48);
    const bad = await api('GET', `/workspaces/${A}/issues/${ofA!.id}/history?hours=169`, { token: tokenA });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toMatch(/hours must be an integer from 1 to 168/);
    expect((await api('GET', `/workspaces/${A}/issues/${ofA!.id}/history`, { token: tokenB })).status).toBe(403);
    expect((await api('GET', `/workspaces/${B}/issues/${ofA!.id}/history`, { token: tokenB })).status).toBe(404);
  });

  it('counts failures and dead letters, and deliveries accepted, per minute for the workspace', async () => {
    const history = await api('GET', `/workspaces/${A}/failure-history?hours=1`, { token: tokenA });
    expect(history.status).toBe(200);
    const minutes = history.body as unknown as { failed: number; dead: number }[];
    expect(minutes).toHaveLength(60);
    expect(minutes.reduce((sum, m) => sum + m.failed, 0)).toBe(3 + 40);
    expect(minutes.reduce((sum, m) => sum + m.dead, 0)).toBe(1);
    expect((await api('GET', `/workspaces/${A}/failure-history`, { token: tokenB })).status).toBe(403);

    const deliveries = await api('GET', `/workspaces/${A}/delivery-history?hours=1`, { token: tokenA });
    const accepted = (deliveries.body as unknown as { connection_id: number; accepted: number }[])
      .filter((m) => m.connection_id === connectionA).reduce((sum, m) => sum + m.accepted, 0);
    expect(accepted).toBe(3 + 40);
    expect((await api('GET', `/workspaces/${A}/delivery-history`, { token: tokenB })).status).toBe(403);
  });

  it('gives the admin the issues of installation rows, and a workspace token a 403 there', async () => {
    expect((await api('GET', '/installation-issues', { token: adminToken })).status).toBe(200);
    expect((await api('GET', '/installation-issues', { token: tokenA })).status).toBe(403);
  });
});
