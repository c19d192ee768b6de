// `concurrency` bounds the handlers running at once, not the closing writes:
// a slot frees when its handler ends, so the next claim overlaps completions
// still being written, while a host holds at most 2 × concurrency leases.
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { createWorker, type Handler, type Worker } from '../../worker/index.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { eventState, admitEvents, testWorkspace, waitFor } from '../support/worker-inbox.js';
import { sleep } from '../support/sleep.js';

let db: TestDatabase;
let worker: Worker | undefined;


beforeAll(async () => {
  db = await createTestDatabase();
});
afterEach(async () => {
  await worker?.stop();
  worker = undefined;
});
afterAll(async () => {
  await db?.drop();
});

function startWorker(concurrency: number, handler: Handler): Promise<void> {
  worker = createWorker({ connectionString: db.url, handlers: { 'generic:*': handler }, concurrency, settings: { pollEvery: 100 } });
  return worker.start();
}

it('never runs more handlers at once than concurrency, and does reach it', async () => {
  const ids = await admitEvents(db.pool, Array.from({ length: 60 }, (_, n) => ({ scope: `bound-${n}` })));
  let running = 0;
  let most = 0;
  let handled = 0;
  await startWorker(4, async () => {
    running += 1;
    most = Math.max(most, running);
    await sleep(5 + Math.random() * 20);
    running -= 1;
    handled += 1;
  });
  await waitFor(async () => handled === ids.length, 20_000, 'every event handled');
  expect(most).toBe(4);
  for (const id of ids) await waitFor(async () => (await eventState(db.pool, id))?.state === 'DONE', 5_000, `event ${id} DONE`);
});

it('starts the next handler while a completion waits, and stops claiming at 2 × concurrency leases', async () => {
  const [first, held, third, fourth, fifth] = await admitEvents(db.pool, [
    { scope: 'pipe-1', eventType: 'quick' },
    { scope: 'pipe-2', eventType: 'held' },
    { scope: 'pipe-3', eventType: 'quick' },
    { scope: 'pipe-4', eventType: 'quick' },
    { scope: 'pipe-5', eventType: 'quick' },
  ]);
  // Once the first event is leased, another session locks its scope row: the
  // completion (whose trigger updates that row) then waits for the lock, and
  // the completions after it wait for that write.
  const blocker: pg.PoolClient = await db.pool.connect();
  await blocker.query('BEGIN');
  const started: string[] = [];
  let openGate!: () => void;
  const gate = new Promise<void>((resolve) => {
    openGate = resolve;
  });
  await startWorker(2, async (ctx) => {
    started.push(ctx.event.id);
    if (ctx.event.id === first) {
      await blocker.query(`SELECT FROM wharf.scope WHERE scope_key = $1 FOR UPDATE`, [ctx.event.scopeKey]);
    }
    if (ctx.event.eventType === 'held') await gate;
  });
  try {
    // `held` keeps one handler slot; the other goes on to the third and the
    // fourth while the first's completion waits.
    await waitFor(async () => started.includes(fourth!), 5_000, 'the fourth handler to start');
    expect(await eventState(db.pool, first!)).toMatchObject({ state: 'LEASED' });
    // Four leases now (one handler, three closing writes): the fifth waits.
    await sleep(500);
    expect(started).not.toContain(fifth);
    expect(await eventState(db.pool, fifth!)).toMatchObject({ state: 'QUEUED' });
    expect(started).toEqual([first, held, third, fourth]);
  } finally {
    await blocker.query('ROLLBACK');
    blocker.release();
    openGate();
  }
  for (const id of [first, held, third, fourth, fifth]) {
    await waitFor(async () => (await eventState(db.pool, id!))?.state === 'DONE', 10_000, `event ${id} DONE`);
  }
});
