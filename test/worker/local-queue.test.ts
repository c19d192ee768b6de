// WorkerOptions.localQueue: claims take a queue's worth at once; the host
// holds at most its running handlers plus the queue; waiting leases are
// renewed while they wait (none expires behind a slow handler) and given
// back when the host stops.
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { createWorker, type Handler, type RunOutcome, type Worker, type WorkerSettings } from '../../worker/index.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { admitEvents, setSettings, waitFor } from '../support/worker-inbox.js';
import { sleep } from '../support/sleep.js';

let db: TestDatabase;
let worker: Worker | undefined;


beforeAll(async () => {
  db = await createTestDatabase();
});
afterEach(async () => {
  await worker?.stop();
  worker = undefined;
  await setSettings(db.pool, { lease: '2 minutes' });
  // Each test counts its own events: what one leaves queued must not feed the next.
  await db.pool.query('DELETE FROM wharf.provider_event');
});
afterAll(async () => {
  await db?.drop();
});

function startWorker(options: {
  concurrency: number; localQueue: number; handler: Handler; settings?: Partial<WorkerSettings>;
}): { settled: RunOutcome[]; started: Promise<void> } {
  const settled: RunOutcome[] = [];
  worker = createWorker({
    connectionString: db.url, handlers: { 'generic:*': options.handler },
    concurrency: options.concurrency, localQueue: options.localQueue, settings: { pollEvery: 100, ...options.settings },
  });
  worker.on('settled', ({ outcome }) => settled.push(outcome));
  return { settled, started: worker.start() };
}

async function leasedCount(ids: string[]): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM wharf.provider_event WHERE id = ANY($1) AND state = 'LEASED'", [ids]);
  return rows[0]!.n;
}

async function rowsOf(ids: string[]) {
  const { rows } = await db.pool.query<{ state: string; attempt: number; failures: number }>(
    'SELECT state, attempt, failures FROM wharf.provider_event WHERE id = ANY($1) ORDER BY id', [ids]);
  return rows;
}

it('holds at most the running handlers plus the queue, and hands the queue out as handlers free', async () => {
  const ids = await admitEvents(db.pool, Array.from({ length: 40 }, (_, n) => ({ scope: `queue-${n}` })));
  let openGate!: () => void;
  const gate = new Promise<void>((resolve) => (openGate = resolve));
  let running = 0;
  let most = 0;
  const { settled, started } = startWorker({
    concurrency: 2, localQueue: 10,
    handler: async () => {
      running += 1;
      most = Math.max(most, running);
      await gate;
      running -= 1;
    },
  });
  await started;
  await waitFor(async () => (await leasedCount(ids)) === 12, 10_000, '2 running and 10 waiting leases');
  await sleep(500);
  expect(await leasedCount(ids)).toBe(12);
  expect(running).toBe(2);
  openGate();
  await waitFor(async () => settled.length === ids.length, 20_000, 'every event settled');
  expect(settled.every((outcome) => outcome === 'handled')).toBe(true);
  expect(most).toBe(2);
  expect((await rowsOf(ids)).every((row) => row.state === 'DONE' && row.attempt === 1)).toBe(true);
});

it('renews waiting leases, so that none expires behind a slow handler', async () => {
  // Each event takes 0.8 s with one handler: the last of five waits about 3 s, past a 1 s lease.
  await setSettings(db.pool, { lease: '1 second' });
  const ids = await admitEvents(db.pool, Array.from({ length: 5 }, (_, n) => ({ scope: `slow-${n}` })));
  const { settled, started } = startWorker({
    concurrency: 1, localQueue: 4, settings: { renewEvery: 200, reapEvery: 300 },
    handler: () => sleep(800),
  });
  await started;
  await waitFor(async () => settled.length === ids.length, 30_000, 'every event settled');
  expect(settled).toEqual(['handled', 'handled', 'handled', 'handled', 'handled']);
  expect(await rowsOf(ids)).toEqual(ids.map(() => ({ state: 'DONE', attempt: 1, failures: 0 })));
});

it('gives the waiting leases back when it stops, as unclaimed', async () => {
  const ids = await admitEvents(db.pool, Array.from({ length: 8 }, (_, n) => ({ scope: `stop-${n}` })));
  const { started } = startWorker({
    concurrency: 1, localQueue: 5, settings: { drainTimeout: 300 },
    // Never ends: the running one is released after the drain, the waiting ones at once.
    handler: () => new Promise<void>(() => {}),
  });
  await started;
  await waitFor(async () => (await leasedCount(ids)) === 6, 10_000, '1 running and 5 waiting leases');
  await worker!.stop();
  worker = undefined;
  const rows = await rowsOf(ids);
  expect(rows.filter((row) => row.state !== 'QUEUED')).toEqual([]);
  expect(rows.every((row) => row.attempt === 0 && row.failures === 0)).toBe(true);
});
