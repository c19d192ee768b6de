// Stuck scopes through the operator API: a scope held behind a failing head
// is listed with what waits behind it; moving its head to the dead letters
// lets its successors be claimed and handled in order; retrying the head
// makes it due now; pausing pauses its connection; every action is recorded
// with who did it, a stale or leased head is a 409, and another workspace's
// token gets a 403 and changes nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiToken } from '../../operator/sql/operator.js';
import type { ScopeAction, StuckScope } from '../../operator/sql/stuck-scopes.js';
import { adminToken, apiClient, type ApiCall } from '../support/api-client.js';
import { admitEvent, ageScope, createConnection, createWorkspace } from '../support/api-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

let db: TestDatabase;
let api: ApiCall;
let tokenA: string;
let tokenB: string;
const A = 501;
const B = 502;
let connectionA: number;

/** A scope of three events whose head failed and waits an hour for its retry, failing for an hour. */
async function stuckScope(subject: string): Promise<{ scopeKey: string; ids: number[] }> {
  const ids = [];
  for (let i = 0; i < 3; i += 1) ids.push(await admitEvent(db.pool, connectionA, { subject }));
  const { rows } = await db.pool.query<{ id: string; lease_epoch: string; scope_key: string }>(
    `SELECT id, lease_epoch, scope_key FROM wharf.claim('fixture', 10000)`);
  for (const row of rows) {
    if (Number(row.id) === ids[0]) await db.pool.query(`SELECT wharf.fail($1, $2, 'transient', 'UpstreamDown')`, [row.id, row.lease_epoch]);
    else await db.pool.query('SELECT wharf.release($1, $2)', [row.id, row.lease_epoch]);
  }
  await db.pool.query(`UPDATE wharf.provider_event SET next_attempt_at = now() + interval '1 hour' WHERE id = $1`, [ids[0]]);
  await ageScope(db.pool, ids[0]!, 3600);
  const scopeKey = (await db.pool.query<{ scope_key: string }>('SELECT scope_key FROM wharf.provider_event WHERE id = $1', [ids[0]])).rows[0]!.scope_key;
  return { scopeKey, ids };
}

async function stuck(token = tokenA): Promise<StuckScope[]> {
  const response = await api('GET', `/workspaces/${A}/stuck-scopes?older_than=600`, { token });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response.body as unknown as StuckScope[];
}

async function act(body: Record<string, unknown>, token = tokenA) {
  return api('POST', `/workspaces/${A}/stuck-scopes/actions`, { token, body });
}

/** Claims what is due in the scope and completes it; the ids handled, in order. */
async function drain(scopeKey: string): Promise<number[]> {
  const handled: number[] = [];
  for (;;) {
    const { rows } = await db.pool.query<{ id: string; lease_epoch: string }>(
      `SELECT id, lease_epoch FROM wharf.claim('fixture', 10000) WHERE scope_key = $1`, [scopeKey]);
    if (rows.length === 0) return handled;
    for (const row of rows) {
      await db.pool.query('SELECT wharf.complete($1, $2)', [row.id, row.lease_epoch]);
      handled.push(Number(row.id));
    }
  }
}

beforeAll(async () => {
  db = await createTestDatabase();
  api = apiClient({ db: db.pool, adminToken });
  await createWorkspace(db.pool, A);
  await createWorkspace(db.pool, B);
  connectionA = await createConnection(db.pool, A);
  await createConnection(db.pool, B);
  tokenA = (await createApiToken(db.pool, String(A), 'oncall')).token;
  tokenB = (await createApiToken(db.pool, String(B), 'oncall')).token;
}, 120_000);

afterAll(async () => {
  await db?.drop();
});

describe('stuck scopes', () => {
  it('are listed with their failing head and what waits behind it; moving the head to the dead letters lets the rest run', async () => {
    const { scopeKey, ids } = await stuckScope('repo:acme/stuck');
    const listed = (await stuck()).find((scope) => scope.scope_key === scopeKey);
    expect(listed).toMatchObject({
      subject: 'repo:acme/stuck', reason: 'failing', behind: 2, behind_capped: false,
      head: { id: ids[0], error_class: 'UpstreamDown', state: 'QUEUED' }, connection: { id: connectionA, state: 'ACTIVE' },
    });
    expect(listed!.waiting_seconds).toBeGreaterThanOrEqual(3600);
    expect(await drain(scopeKey), 'nothing runs behind the head').toEqual([]);

    const moved = await act({ action: 'dead_letter_head', scope_key: scopeKey, event_id: ids[0] });
    expect(moved.status, JSON.stringify(moved.body)).toBe(200);
    expect(moved.body).toMatchObject({ action: 'dead_letter_head', done: true, event: { id: ids[0], state: 'DEAD' } });
    expect(await drain(scopeKey), 'its successors are handled, in order').toEqual([ids[1], ids[2]]);
    expect((await stuck()).map((scope) => scope.scope_key)).not.toContain(scopeKey);

    // Stale now: the event no longer heads the scope.
    const again = await act({ action: 'dead_letter_head', scope_key: scopeKey, event_id: ids[0] });
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ error: 'not_head', state: 'DEAD' });
  });

  it('retries a head now, moves a leased one when its lease fails, and pauses its connection', async () => {
    const { scopeKey, ids } = await stuckScope('repo:acme/retry');
    const retried = await act({ action: 'retry_head', scope_key: scopeKey, event_id: String(ids[0]) });
    expect(retried.status, JSON.stringify(retried.body)).toBe(200);
    expect(Date.parse((retried.body.event as { next_attempt_at: string }).next_attempt_at)).toBeLessThanOrEqual(Date.now() + 1000);

    const { rows } = await db.pool.query<{ id: string }>(`SELECT id FROM wharf.claim('fixture', 10000) WHERE scope_key = $1`, [scopeKey]);
    expect(rows.map((row) => Number(row.id))).toEqual([ids[0]]);
    // While the retry runs, the move waits for its lease: a failure then is a dead letter.
    const leased = await act({ action: 'dead_letter_head', scope_key: scopeKey, event_id: ids[0] });
    expect(leased.status, JSON.stringify(leased.body)).toBe(200);
    expect(leased.body).toMatchObject({ done: true, after_lease: true, event: { state: 'LEASED' } });
    const listed = (await stuck()).find((scope) => scope.scope_key === scopeKey);
    expect(listed?.reason).toBe('leased');
    expect(listed?.head.dead_letter_pending).toBe(true);
    const { rows: [failed] } = await db.pool.query<{ state: string }>(
      `SELECT wharf.fail(id, lease_epoch, 'transient', 'TimeoutError') AS state FROM wharf.provider_event WHERE id = $1`, [ids[0]]);
    expect(failed?.state).toBe('DEAD');

    const paused = await act({ action: 'pause_connection', scope_key: scopeKey, event_id: ids[0] });
    expect(paused.status).toBe(200);
    expect(paused.body).toMatchObject({ connection: { id: connectionA, state: 'PAUSED' } });
    await db.pool.query(`SELECT wharf.set_connection_state($1, 'ACTIVE')`, [connectionA]);

    const actions = await api('GET', `/workspaces/${A}/scope-actions`, { token: tokenA });
    expect((actions.body as unknown as ScopeAction[]).slice(0, 3).map((a) => [a.action, a.account, a.event_id])).toEqual([
      ['pause_connection', 'token:oncall', ids[0]], ['dead_letter_head', 'token:oncall', ids[0]],
      ['retry_head', 'token:oncall', ids[0]],
    ]);
  });

  it('refuse another workspace (403, nothing changed) and bad input (400, 404)', async () => {
    const { scopeKey, ids } = await stuckScope('repo:acme/isolated');
    expect((await api('GET', `/workspaces/${A}/stuck-scopes`, { token: tokenB })).status).toBe(403);
    expect((await act({ action: 'dead_letter_head', scope_key: scopeKey, event_id: ids[0] }, tokenB)).status).toBe(403);
    expect((await api('GET', `/workspaces/${A}/scope-actions`, { token: tokenB })).status).toBe(403);
    // Through its own workspace's path, A's scope is not there.
    const viaB = await api('POST', `/workspaces/${B}/stuck-scopes/actions`, {
      token: tokenB, body: { action: 'dead_letter_head', scope_key: scopeKey, event_id: ids[0] },
    });
    expect(viaB.status).toBe(404);
    const { rows } = await db.pool.query('SELECT state FROM wharf.provider_event WHERE id = $1', [ids[0]]);
    expect(rows[0]!.state).toBe('QUEUED');
    const stuckOfB = await api('GET', `/workspaces/${B}/stuck-scopes?older_than=0`, { token: tokenB });
    expect(JSON.stringify(stuckOfB.body)).not.toContain(scopeKey);

    expect((await act({ action: 'unblock', scope_key: scopeKey, event_id: ids[0] })).status).toBe(400);
    expect((await act({ action: 'retry_head', scope_key: scopeKey })).status).toBe(400);
    expect((await api('GET', `/workspaces/${A}/stuck-scopes?older_than=-5`, { token: tokenA })).status).toBe(400);
    expect((await act({ action: 'retry_head', scope_key: 'nope', event_id: ids[0] })).status).toBe(404);
  });
});
