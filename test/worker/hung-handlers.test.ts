// Hung handlers cannot starve the worker (issue 40): handlers run on a pool
// of their own, a handler past its timeout has its business transaction cut
// (its backend stops), one that never returns is counted and makes the host
// not ready, and the worker's own statements go on meanwhile. Before, the
// handlers shared the worker's pool of concurrency + 3 connections: six
// handlers asleep in the database for a minute held all five, and the event
// admitted after them waited for a connection.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createWorker, type HandlerMap, type Worker } from '../../worker/index.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { admitEvents, setSettings, waitFor, waitForState } from '../support/worker-inbox.js';
import { metricValue } from '../support/worker-metrics.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
  await setSettings(db.pool, { max_attempts: '1' });
});

afterAll(async () => {
  await db?.drop();
});

async function sleepingBackends(): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND query LIKE '%pg_sleep(60)%' AND pid <> pg_backend_pid()`);
  return rows[0]!.n;
}

function hostWith(handlers: HandlerMap): Worker {
  return createWorker({
    pool: db.pool, handlers, concurrency: 2,
    settings: { handlerTimeout: 1_000, renewEvery: 200, reapEvery: 200, pollEvery: 100 },
  });
}

it('handlers asleep in the database past their timeout are cut off, and the next event is handled', async () => {
  const worker = hostWith({
    'generic:sleeps': async (ctx) => {
      await ctx.step('sleep', (tx) => tx.query('SELECT pg_sleep(60)'));
    },
    'generic:quick': async () => {},
  });
  await worker.start();
  try {
    const sleepers = await admitEvents(db.pool, Array.from({ length: 6 }, (_, n) => ({ scope: `sleeper-${n}`, eventType: 'sleeps' })));
    const [quick] = await admitEvents(db.pool, [{ scope: 'quick', eventType: 'quick' }]);
    await waitForState(db.pool, quick!, 'DONE', 30_000);
    for (const id of sleepers) await waitForState(db.pool, id, 'DEAD', 30_000);
    // Every backend that slept for a handler stopped, long before its minute.
    await waitFor(async () => (await sleepingBackends()) === 0, 15_000, 'the sleeping backends to stop');
  } finally {
    await worker.stop();
  }
});

it('handlers that never return are counted, the host says it is not ready, and it keeps handling', async () => {
  const before = await metricValue('integration_consumer_abandoned_handlers');
  const worker = hostWith({
    'generic:forever': () => new Promise(() => {}),
    'generic:quick': async () => {},
  });
  await worker.start();
  try {
    expect(await worker.ready()).toBe(true);
    const hung = await admitEvents(db.pool, [{ scope: 'forever-1', eventType: 'forever' }, { scope: 'forever-2', eventType: 'forever' }]);
    for (const id of hung) await waitForState(db.pool, id, 'DEAD', 30_000);
    await waitFor(async () => (await metricValue('integration_consumer_abandoned_handlers')) === before + 2, 10_000,
      'two abandoned handlers counted');
    expect(await worker.ready()).toBe(false);
    const [quick] = await admitEvents(db.pool, [{ scope: 'after-forever', eventType: 'quick' }]);
    await waitForState(db.pool, quick!, 'DONE', 30_000);
  } finally {
    await worker.stop();
  }
});
