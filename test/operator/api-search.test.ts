// Search and bulk replay from any filter through the operator API: a JSON
// containment search on payload or headers finds exactly the matching events
// of the workspace and none of another's, combined with the other filters;
// a bulk replay by the same search shows its count first, then replays
// exactly those.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EventPage } from '../../operator/sql/operator.js';
import { createApiToken } from '../../operator/sql/operator.js';
import { adminToken, apiClient, type ApiCall } from '../support/api-client.js';
import { admitEvent, createConnection, createWorkspace, finishEvent } from '../support/api-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { waitFor } from '../support/worker-inbox.js';

let db: TestDatabase;
let api: ApiCall;
let tokenA: string;
let tokenB: string;
const A = 901;
const B = 902;
const ids: Record<string, number> = {};

const query = (value: unknown) => encodeURIComponent(JSON.stringify(value));

beforeAll(async () => {
  db = await createTestDatabase();
  api = apiClient({ db: db.pool, adminToken });
  await createWorkspace(db.pool, A);
  await createWorkspace(db.pool, B);
  const connectionA = await createConnection(db.pool, A);
  const connectionB = await createConnection(db.pool, B);
  tokenA = (await createApiToken(db.pool, String(A), 'ops')).token;
  tokenB = (await createApiToken(db.pool, String(B), 'ops')).token;
  ids.api1 = await admitEvent(db.pool, connectionA, { payload: { repository: { full_name: 'acme/api' }, n: 1 }, headers: { 'x-github-event': 'push' } });
  ids.web = await admitEvent(db.pool, connectionA, { payload: { repository: { full_name: 'acme/web' } }, headers: { 'x-github-event': 'push' } });
  ids.api2 = await admitEvent(db.pool, connectionA, { payload: { repository: { full_name: 'acme/api' } }, headers: { 'x-github-event': 'issues' } });
  ids.other = await admitEvent(db.pool, connectionB, { payload: { repository: { full_name: 'acme/api' } } });
  for (const key of ['api1', 'web', 'api2', 'other']) await finishEvent(db.pool, ids[key]!, 'DEAD');
}, 120_000);

afterAll(async () => {
  await db?.drop();
});

describe('search', () => {
  it('finds exactly the workspace\'s events whose payload contains the value, combined with the filters', async () => {
    const found = await api('GET', `/workspaces/${A}/events?payload=${query({ repository: { full_name: 'acme/api' } })}`, { token: tokenA });
    expect(found.status, JSON.stringify(found.body)).toBe(200);
    expect((found.body as unknown as EventPage).events.map((e) => e.id)).toEqual([ids.api2, ids.api1]);

    const withHeaders = await api('GET', `/workspaces/${A}/events?payload=${query({ repository: { full_name: 'acme/api' } })}&headers=${query({ 'x-github-event': 'push' })}`, { token: tokenA });
    expect((withHeaders.body as unknown as EventPage).events.map((e) => e.id)).toEqual([ids.api1]);
    const withState = await api('GET', `/workspaces/${A}/events?state=DONE&payload=${query({ repository: { full_name: 'acme/api' } })}`, { token: tokenA });
    expect((withState.body as unknown as EventPage).events).toEqual([]);
    const paged = await api('GET', `/workspaces/${A}/events?limit=1&payload=${query({ repository: { full_name: 'acme/api' } })}`, { token: tokenA });
    expect(paged.body.next_cursor).toBe(ids.api2);

    const ofB = await api('GET', `/workspaces/${B}/events?payload=${query({ repository: { full_name: 'acme/api' } })}`, { token: tokenB });
    expect((ofB.body as unknown as EventPage).events.map((e) => e.id)).toEqual([ids.other]);
    expect((await api('GET', `/workspaces/${A}/events?payload=${query({ n: 1 })}`, { token: tokenB })).status).toBe(403);
  });

  it('refuses a search that is not a JSON object with a clear 400', async () => {
    for (const bad of ['acme', encodeURIComponent('["acme"]'), encodeURIComponent('{"a":')]) {
      const response = await api('GET', `/workspaces/${A}/events?payload=${bad}`, { token: tokenA });
      expect(response.status).toBe(400);
      expect(response.body.message).toMatch(/payload must be a JSON object/);
    }
  });
});

describe('bulk replay from any filter', () => {
  it('shows the count first, replays nothing then, and replays exactly those when started', async () => {
    const body = { payload: { repository: { full_name: 'acme/api' } }, headers: { 'x-github-event': 'push' } };
    const count = await api('POST', `/workspaces/${A}/replays/count`, { token: tokenA, body });
    expect(count.status, JSON.stringify(count.body)).toBe(200);
    expect(count.body).toEqual({ matched: 1 });
    expect((await api('POST', `/workspaces/${A}/replays/count`, { token: tokenA, body: { payload: { repository: { full_name: 'acme/api' } } } })).body)
      .toEqual({ matched: 2 });
    expect((await api('POST', `/workspaces/${A}/replays/count`, { token: tokenA, body: { payload: 'acme' } })).status).toBe(400);
    expect((await api('POST', `/workspaces/${A}/replays/count`, { token: tokenB, body })).status).toBe(403);
    const { rows: before } = await db.pool.query('SELECT count(*)::int AS n FROM wharf.provider_event WHERE state = $1', ['DEAD']);
    expect(before[0]!.n).toBe(4);

    const started = await api('POST', `/workspaces/${A}/replays`, { token: tokenA, body });
    expect(started.status).toBe(202);
    expect(started.body).toMatchObject({ matched: 1, filter: body });
    await waitFor(async () => {
      const status = await api('GET', `/workspaces/${A}/replays/${started.body.id}`, { token: tokenA });
      return status.body.state === 'finished' ? status.body : undefined;
    }, 30_000, 'the bulk replay to finish');
    const { rows } = await db.pool.query<{ id: string; state: string }>('SELECT id, state FROM wharf.provider_event ORDER BY id');
    expect(Object.fromEntries(rows.map((row) => [Number(row.id), row.state]))).toEqual({
      [ids.api1!]: 'QUEUED', [ids.web!]: 'DEAD', [ids.api2!]: 'DEAD', [ids.other!]: 'DEAD',
    });
  });
});
