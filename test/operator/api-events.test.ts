// Listing, showing and replaying events through the operator API: keyset
// paging under concurrent inserts, what an event shows (and hides), replay's
// 202/404/409 answers, bad parameters, and a database that is gone.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiToken } from '../../operator/sql/operator.js';
import { adminToken, apiClient, type ApiCall } from '../support/api-client.js';
import {
  admitEvent, createConnection, createWorkspace, deadEvent, deadInstallationEvent, finishEvent,
} from '../support/api-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { freePort } from '../../cli/postgres-server.js';

let db: TestDatabase;
let api: ApiCall;
let tokenA: string;
const A = 201;
const B = 202;
let connectionA: number;
let connectionB: number;

beforeAll(async () => {
  db = await createTestDatabase();
  api = apiClient({ db: db.pool, adminToken });
  await createWorkspace(db.pool, A);
  await createWorkspace(db.pool, B);
  connectionA = await createConnection(db.pool, A);
  connectionB = await createConnection(db.pool, B);
  tokenA = (await createApiToken(db.pool, String(A), 'ops')).token;
});

afterAll(async () => {
  await db?.drop();
});

interface Page {
  events: { id: number; state: string; subject: string; workspace_id: number | null }[];
  next_cursor: number | null;
}

async function page(path: string, token = tokenA): Promise<Page> {
  const response = await api('GET', path, { token });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response.body as unknown as Page;
}

describe('listing events', () => {
  it('pages newest first without repeating or skipping a row while others insert concurrently', async () => {
    const ws = 210;
    await createWorkspace(db.pool, ws);
    const connection = await createConnection(db.pool, ws);
    const token = (await createApiToken(db.pool, String(ws), 'pager')).token;
    for (let i = 0; i < 30; i++) await admitEvent(db.pool, connection);

    // Two sessions insert while the pages are read. Their subjects are
    // subscribed beforehand: a subscription change makes a concurrent admit
    // raise WH409 (route changed), by design.
    const subjects = ['repo:acme/live-1', 'repo:acme/live-2'];
    for (const subject of subjects) await db.pool.query('SELECT wharf.subscribe($1, $2)', [connection, subject]);
    let inserting = true;
    const inserters = subjects.map(async (subject) => {
      const client = await db.connect();
      const session = { query: client.query.bind(client) } as unknown as pg.Pool;
      let inserted = 0;
      while (inserting) {
        await admitEvent(session, connection, { subject });
        inserted++;
      }
      return inserted;
    });

    const seen: number[] = [];
    let cursor: number | null = null;
    let firstCursor: number | null = null;
    let pages = 0;
    do {
      const result: Page = await page(`/workspaces/${ws}/events?limit=7${cursor ? `&cursor=${cursor}` : ''}`, token);
      seen.push(...result.events.map((event) => event.id));
      cursor = result.next_cursor;
      firstCursor ??= cursor;
      pages++;
      // Give the inserters a turn between pages.
      await new Promise((resolve) => setTimeout(resolve, 20));
    } while (cursor !== null);
    inserting = false;
    const inserted = (await Promise.all(inserters)).reduce((sum, n) => sum + n, 0);

    expect(inserted).toBeGreaterThan(0);
    expect(pages).toBeGreaterThan(4);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toEqual([...seen].sort((x, y) => y - x));
    // Below the first page, exactly the rows of the workspace: none skipped.
    // (Only the first page can miss a row: one whose id was taken but not yet
    // committed when it was read; everything older was committed long before.)
    const { rows } = await db.pool.query<{ id: string }>(
      'SELECT id FROM wharf.provider_event WHERE workspace_id = $1 AND id < $2 ORDER BY id DESC',
      [ws, firstCursor],
    );
    expect(rows.length).toBeGreaterThanOrEqual(23);
    expect(seen.filter((id) => id < firstCursor!)).toEqual(rows.map((row) => Number(row.id)));
  });

  it('filters by state and subject and lists dead letters', async () => {
    const ws = 211;
    await createWorkspace(db.pool, ws);
    const connection = await createConnection(db.pool, ws);
    const queued = await admitEvent(db.pool, connection, { subject: 'repo:acme/api' });
    const done = await admitEvent(db.pool, connection);
    await finishEvent(db.pool, done, 'DONE');
    const dead = await deadEvent(db.pool, connection);

    const all = await page(`/workspaces/${ws}/events`, adminToken);
    expect(all.events.map((event) => event.id)).toEqual([dead, done, queued]);
    expect(all.next_cursor).toBeNull();
    expect((await page(`/workspaces/${ws}/events?state=done`, adminToken)).events.map((e) => e.id)).toEqual([done]);
    expect((await page(`/workspaces/${ws}/events?subject=repo:acme/api`, adminToken)).events.map((e) => e.id))
      .toEqual([queued]);
    const deadPage = await page(`/workspaces/${ws}/dead`, adminToken);
    expect(deadPage.events.map((event) => [event.id, event.state])).toEqual([[dead, 'DEAD']]);
  });

  it('never lists another workspace or installation rows', async () => {
    const other = await admitEvent(db.pool, connectionB);
    const installation = await deadInstallationEvent(db.pool);
    const ids = (await page(`/workspaces/${A}/events?limit=500`)).events.map((event) => event.id);
    expect(ids).not.toContain(other);
    expect(ids).not.toContain(installation);
    const installationIds = (await page('/installation-events', adminToken)).events;
    expect(installationIds.map((event) => event.id)).toContain(installation);
    expect(installationIds.every((event) => event.workspace_id === null)).toBe(true);
    const installationDead = (await page('/installation-events/dead', adminToken)).events;
    expect(installationDead.map((event) => event.id)).toContain(installation);
  });

  it.each([
    ['limit=0'], ['limit=501'], ['limit=ten'], ['state=FINISHED'], ['cursor=abc'], ['cursor=0'],
    ['cursor=99999999999999999999'],
  ])('answers 400 for %s', async (query) => {
    const response = await api('GET', `/workspaces/${A}/events?${query}`, { token: tokenA });
    expect(response.status).toBe(400);
    expect(response.body.error).toBe('bad_request');
  });

  it('answers 400 for a workspace id that is no id', async () => {
    for (const ws of ['abc', '-1', '0', '1.5']) {
      const response = await api('GET', `/workspaces/${ws}/events`, { token: adminToken });
      expect(response.status, ws).toBe(400);
    }
  });

  it('answers 404 to the admin for a workspace that does not exist', async () => {
    const response = await api('GET', '/workspaces/999999/events', { token: adminToken });
    expect(response.status).toBe(404);
    expect(response.body).toEqual({ error: 'not_found', message: 'unknown workspace 999999' });
  });
});

describe('showing an event', () => {
  it('shows payload, headers without secrets, attempts, error class and steps', async () => {
    const id = await admitEvent(db.pool, connectionA, {
      payload: { action: 'opened', number: 7 },
      headers: { 'x-request-id': 'r-1', authorization: 'Bearer s3cret', 'webhook-signature': 'v1,abc' },
    });
    const epoch = await finishEvent(db.pool, id, 'LEASED');
    const client = await db.connect();
    await client.query('BEGIN');
    await client.query('SELECT wharf.step($1, $2, $3)', [id, epoch, 'commit:1']);
    await client.query('COMMIT');
    await db.pool.query(`SELECT wharf.fail($1, $2, 'transient', 'FetchError')`, [id, epoch]);

    const response = await api('GET', `/workspaces/${A}/events/${id}`, { token: tokenA });
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({
      id, workspace_id: A, provider: 'generic', event_type: 'ping', state: 'QUEUED',
      attempt: 1, failures: 0, error_class: 'FetchError', outcome: null,
      payload: { action: 'opened', number: 7 },
      headers: { 'x-request-id': 'r-1' },
      steps: [{ name: 'commit:1' }],
    });
    expect(Date.parse(response.body.next_attempt_at as string)).not.toBeNaN();
    expect(JSON.stringify(response.body)).not.toMatch(/s3cret|v1,abc/);
  });

  it('answers 404 alike for an id of another workspace and an id that does not exist', async () => {
    const elsewhere = await admitEvent(db.pool, connectionB);
    const installation = await deadInstallationEvent(db.pool);
    for (const token of [tokenA, adminToken]) {
      const answers = await Promise.all([elsewhere, installation, 987654321].map(async (id) => {
        const response = await api('GET', `/workspaces/${A}/events/${id}`, { token });
        return [response.status, response.body.error, (response.body.message as string).replace(String(id), 'N')];
      }));
      expect(answers).toEqual([answers[2], answers[2], [404, 'not_found', 'no event N here']]);
    }
  });

  it('shows installation rows to the admin only through /installation-events', async () => {
    const installation = await deadInstallationEvent(db.pool);
    const shown = await api('GET', `/installation-events/${installation}`, { token: adminToken });
    expect(shown.status).toBe(200);
    expect(shown.body).toMatchObject({ id: installation, workspace_id: null, state: 'DEAD' });
    const workspaceEvent = await admitEvent(db.pool, connectionA);
    expect((await api('GET', `/installation-events/${workspaceEvent}`, { token: adminToken })).status).toBe(404);
  });
});

describe('replaying an event', () => {
  it('answers 202 with the row back in the queue, recording who replayed it', async () => {
    const id = await deadEvent(db.pool, connectionA);
    const response = await api('POST', `/workspaces/${A}/events/${id}/replay`, { token: tokenA });
    expect(response.status).toBe(202);
    expect(response.body).toMatchObject({
      id, state: 'QUEUED', attempt: 0, failures: 0, error_class: 'SyntaxError', replayed_by: 'token:ops',
    });
    const again = await api('POST', `/workspaces/${A}/events/${id}/replay`, { token: tokenA });
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ error: 'not_replayable', state: 'QUEUED' });
  });

  it.each([['LEASED'], ['DONE']] as const)('answers 409 naming the state of a %s row', async (ending) => {
    const id = await admitEvent(db.pool, connectionA);
    await finishEvent(db.pool, id, ending);
    const response = await api('POST', `/workspaces/${A}/events/${id}/replay`, { token: tokenA });
    expect(response.status).toBe(409);
    expect(response.body).toMatchObject({ error: 'not_replayable', state: ending });
  });

  it('answers 409 uncertain_outcome unless forced', async () => {
    const id = await deadEvent(db.pool, connectionA, 'uncertain');
    const refused = await api('POST', `/workspaces/${A}/events/${id}/replay`, { token: tokenA, body: { force: false } });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toBe('uncertain_outcome');
    const forced = await api('POST', `/workspaces/${A}/events/${id}/replay`, { token: tokenA, body: { force: true } });
    expect(forced.status).toBe(202);
    expect(forced.body).toMatchObject({ id, state: 'QUEUED', outcome: null });
  });

  it('answers 404 for a dead letter of another workspace and leaves it DEAD', async () => {
    const id = await deadEvent(db.pool, connectionB);
    const response = await api('POST', `/workspaces/${A}/events/${id}/replay`, { token: adminToken });
    expect(response.status).toBe(404);
    const { rows } = await db.pool.query('SELECT state FROM wharf.provider_event WHERE id = $1', [id]);
    expect(rows[0]).toEqual({ state: 'DEAD' });
  });

  it('replays an installation row as the admin and audits it', async () => {
    const id = await deadInstallationEvent(db.pool);
    const response = await api('POST', `/installation-events/${id}/replay`, { token: adminToken });
    expect(response.status).toBe(202);
    expect(response.body).toMatchObject({ id, workspace_id: null, state: 'QUEUED', replayed_by: 'admin' });
    const { rows } = await db.pool.query('SELECT account FROM wharf.replay_audit WHERE event_id = $1', [id]);
    expect(rows).toEqual([{ account: 'admin' }]);
  });

  it.each([['not json'], ['[1]'], ['{"force":"yes"}']])('answers 400 for the body %s', async (body) => {
    const id = await deadEvent(db.pool, connectionA);
    const response = await api('POST', `/workspaces/${A}/events/${id}/replay`, { token: tokenA, body });
    expect(response.status).toBe(400);
    expect(response.body.error).toBe('bad_request');
  });
});

describe('a database that is unreachable', () => {
  it('answers 503 without internals, for the admin and for a workspace token', async () => {
    const port = await freePort();
    const pool = new pg.Pool({ connectionString: `postgres://postgres@127.0.0.1:${port}/wharf`, connectionTimeoutMillis: 2000 });
    pool.on('error', () => {});
    const closed = apiClient({ db: pool, adminToken });
    try {
      for (const token of [adminToken, tokenA]) {
        const response = await closed('GET', `/workspaces/${A}/events`, { token });
        expect(response.status).toBe(503);
        expect(response.body).toEqual({ error: 'database_unavailable', message: 'the database is unavailable; retry later' });
        expect(response.headers.get('retry-after')).toBe('5');
      }
      const replay = await closed('POST', `/workspaces/${A}/events/1/replay`, { token: adminToken });
      expect(replay.status).toBe(503);
    } finally {
      await pool.end();
    }
  });
});
