// The admission log through the operator API: a workspace token sees the
// refusals and drops of its own workspace, the admin every one; and a replay
// wakes idle claimers at once.
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createApiToken } from '../../operator/sql/operator.js';
import { markListenerIdle } from '../../worker/sql/claim-lease.js';
import { adminToken, apiClient, type ApiCall } from '../support/api-client.js';
import { createConnection, createWorkspace, deadEvent, fixtureSource } from '../support/api-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

let db: TestDatabase;
let api: ApiCall;
beforeAll(async () => {
  db = await createTestDatabase();
  api = apiClient({ db: db.pool, adminToken });
});
afterAll(async () => {
  await db?.drop();
});

async function drop(connectionId: number, deliveryKey: string): Promise<void> {
  await db.pool.query(`SELECT wharf.admit('generic', $1, $2, 'x', $3, ARRAY['never:subscribed'], '{}', '{}')`,
    [fixtureSource, deliveryKey, { connection_id: connectionId }]);
}

it('lists the refusals and drops of a workspace for its token, and every one for the admin', async () => {
  await createWorkspace(db.pool, 401);
  await createWorkspace(db.pool, 402);
  const [own, other] = [await createConnection(db.pool, 401), await createConnection(db.pool, 402)];
  await drop(own, 'mine-1');
  await drop(other, 'theirs-1');
  const token = (await createApiToken(db.pool, '401', 'ops')).token;

  const mine = await api('GET', '/workspaces/401/admissions', { token });
  expect(mine.status).toBe(200);
  expect((mine.body.entries as { delivery_key: string; reason: string }[]).map((entry) => [entry.delivery_key, entry.reason]))
    .toEqual([['mine-1', 'no-subscriber']]);
  expect((await api('GET', '/workspaces/402/admissions', { token })).status).toBe(403);
  expect((await api('GET', '/admissions', { token })).status).toBe(403);
  const all = await api('GET', '/admissions', { token: adminToken });
  expect((all.body.entries as { delivery_key: string }[]).map((entry) => entry.delivery_key)).toEqual(['theirs-1', 'mine-1']);
});

it('a replay wakes an idle claimer at commit, not at its next poll', async () => {
  await createWorkspace(db.pool, 403);
  const dead = await deadEvent(db.pool, await createConnection(db.pool, 403));
  const listener = new pg.Client({ connectionString: db.url });
  await listener.connect();
  try {
    await listener.query('LISTEN wharf_event');
    const woken = new Promise<void>((resolve) => listener.once('notification', () => resolve()));
    expect(await markListenerIdle(listener, 'replay-test')).toBe(true);
    const token = (await createApiToken(db.pool, '403', 'ops')).token;
    expect((await api('POST', `/workspaces/403/events/${dead}/replay`, { token, body: {} })).status).toBe(202);
    await Promise.race([woken, new Promise((_, reject) => setTimeout(() => reject(new Error('no wake-up within 5 s')), 5_000))]);
  } finally {
    await listener.end();
  }
});
