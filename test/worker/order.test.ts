// Per-scope order across hosts: two worker processes of concurrency 8 drain
// 100 scopes, some events arriving while they run; in every scope the events
// were handled in id order, each exactly once.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { admitEvents, setSettings, waitFor, type NewEvent } from '../support/worker-inbox.js';
import { fixtureHandlers, killSpawnedWorkers, spawnWorker } from '../support/worker-process.js';

let db: TestDatabase;
const scopes = 100;

beforeAll(async () => {
  db = await createTestDatabase();
  await db.pool.query('CREATE TABLE handled_log (seq bigint GENERATED ALWAYS AS IDENTITY, event_id bigint, scope_key text, pid int)');
  await setSettings(db.pool, { poll_every: '200 milliseconds' });
});

afterAll(async () => {
  await killSpawnedWorkers();
  await db?.drop();
});

/** One event in every scope, scopes shuffled so that ids interleave across them. */
function round(): NewEvent[] {
  const order = Array.from({ length: scopes }, (_, n) => n).sort(() => Math.random() - 0.5);
  return order.map((n) => ({ scope: `order-${n}` }));
}

it('handles every scope in id order across two processes', async () => {
  const ids: string[] = [];
  for (let n = 0; n < 3; n += 1) ids.push(...(await admitEvents(db.pool, round())));
  const args = ['--handlers', fixtureHandlers('record-order.ts'), '--concurrency', '8'];
  const workers = [spawnWorker({ databaseUrl: db.url, args }), spawnWorker({ databaseUrl: db.url, args })];
  // More arrive while both are draining.
  await waitFor(async () => {
    const { rows } = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM handled_log');
    return rows[0]!.n > 50;
  }, 30_000, 'the workers to get going');
  for (let n = 0; n < 2; n += 1) ids.push(...(await admitEvents(db.pool, round())));

  await waitFor(async () => {
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM wharf.provider_event WHERE state <> 'DONE'`,
    );
    return rows[0]!.n === 0;
  }, 60_000, 'every event to be DONE');
  for (const worker of workers) worker.child.kill('SIGTERM');
  expect((await Promise.all(workers.map((worker) => worker.exited))).map((exit) => exit.code)).toEqual([0, 0]);

  const { rows } = await db.pool.query<{ scope_key: string; handled: string[]; by_id: string[] }>(`
    SELECT scope_key,
           array_agg(event_id::text ORDER BY seq) AS handled,
           array_agg(event_id::text ORDER BY event_id) AS by_id
      FROM handled_log GROUP BY scope_key`);
  expect(rows).toHaveLength(scopes);
  for (const row of rows) expect(row.handled, row.scope_key).toEqual(row.by_id);
  const handledIds = rows.flatMap((row) => row.handled);
  expect(handledIds).toHaveLength(ids.length);
  expect(new Set(handledIds)).toEqual(new Set(ids));
  // Both processes took part.
  const { rows: byPid } = await db.pool.query('SELECT DISTINCT pid FROM handled_log');
  expect(byPid).toHaveLength(2);
}, 90_000);
