// A rolling deploy: two `wharf worker` hosts whose handler maps differ share
// one inbox. Each event is handled by the host that has its handler, in its
// scope's order; none is completed as ignored by the host that lacks it.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { admitEvents, waitFor } from '../support/worker-inbox.js';
import { fixtureHandlers, killSpawnedWorkers, spawnWorker } from '../support/worker-process.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
  await db.pool.query('CREATE TABLE handled_by (event_id bigint PRIMARY KEY, event_type text, host text, at timestamptz DEFAULT clock_timestamp())');
});
afterAll(async () => {
  await killSpawnedWorkers();
  await db?.drop();
});

it('hands each event to the host that handles it, none ignored, each scope in order', async () => {
  const args = ['--handlers', fixtureHandlers('by-type.ts'), '--concurrency', '4'];
  const old = spawnWorker({ databaseUrl: db.url, args, env: { HOST: 'old', HANDLES: 'push' } });
  const next = spawnWorker({ databaseUrl: db.url, args, env: { HOST: 'new', HANDLES: 'push,comment' } });
  // Scopes mixing both types: a comment blocks its scope until `new` takes it.
  const events = Array.from({ length: 60 }, (_, n) => ({ scope: `repo:r${n % 6}`, eventType: n % 3 === 0 ? 'comment' : 'push' }));
  const ids = await admitEvents(db.pool, events);

  await waitFor(async () => {
    const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM wharf.provider_event WHERE state = 'DONE'`);
    return rows[0]!.n === ids.length;
  }, 30_000, 'every event to be handled');
  const { rows: outcomes } = await db.pool.query(`SELECT outcome, count(*)::int AS n FROM wharf.provider_event GROUP BY outcome`);
  expect(outcomes).toEqual([{ outcome: 'handled', n: ids.length }]);
  const { rows: comments } = await db.pool.query(`SELECT DISTINCT host FROM handled_by WHERE event_type = 'comment'`);
  expect(comments).toEqual([{ host: 'new' }]);
  const { rows: order } = await db.pool.query<{ ok: boolean }>(`
    SELECT bool_and(ordered) AS ok FROM (
      SELECT e.scope_key, array_agg(e.id ORDER BY h.at) = array_agg(e.id ORDER BY e.id) AS ordered
        FROM handled_by h JOIN wharf.provider_event e ON e.id = h.event_id GROUP BY e.scope_key) per_scope`);
  expect(order[0]!.ok).toBe(true);
  expect(old.output()).not.toMatch(/"outcome":"ignored"|"msg":"dead letter"/);
  expect(next.output()).not.toMatch(/"msg":"dead letter"/);
}, 60_000);
