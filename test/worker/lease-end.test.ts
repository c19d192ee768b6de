// A lease ends only when no write of it can still commit (contract v5). A
// step body past the handler timeout, a drain past drainTimeout, and a fenced
// transaction racing a closing write: the business write either commits while
// the lease is held, or never. Against the code before this rule (closing
// writes took FOR NO KEY UPDATE, compatible with the fence's KEY SHARE, and
// the worker did not close the attempt's transactions), the first three tests
// found A's write committed after B had started, and release returned at once
// beside an open fence.
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { createWorker, type HandlerMap, type Worker } from '../../worker/index.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { admitEvents, setSettings, waitFor, waitForState } from '../support/worker-inbox.js';

let db: TestDatabase;
let worker: Worker | undefined;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

beforeAll(async () => {
  db = await createTestDatabase();
  await db.pool.query(`CREATE TABLE public.effect (
    event_id bigint NOT NULL, attempt integer NOT NULL, what text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`);
  await setSettings(db.pool, { base_delay: '10 milliseconds', max_delay: '20 milliseconds' });
});

afterEach(async () => {
  await worker?.stop();
  worker = undefined;
});

afterAll(async () => {
  await db?.drop();
});

/** Every handler's promise, so a test can wait until even an abandoned one is over. */
const handlersOver: Array<Promise<unknown>> = [];

function tracked(handler: HandlerMap[string]): HandlerMap[string] {
  if (typeof handler !== 'function') return handler;
  return (ctx) => {
    const run = Promise.resolve(handler(ctx));
    handlersOver.push(run.catch(() => undefined));
    return run;
  };
}

async function effects(ids: string[]): Promise<Array<{ event_id: string; attempt: number; what: string; at: Date }>> {
  const { rows } = await db.pool.query(
    'SELECT event_id::text, attempt, what, at FROM public.effect WHERE event_id = ANY($1::bigint[]) ORDER BY at', [ids]);
  return rows;
}

/** B records when its handler started, outside any lease (a plain insert). */
const recordStart: HandlerMap[string] = async (ctx) => {
  await db.pool.query(`INSERT INTO public.effect (event_id, attempt, what) VALUES ($1, $2, 'started')`,
    [ctx.event.id, ctx.event.attempt]);
};

/** A step whose body outlives the handler timeout (on `slowAttempts`), then writes. */
function slowStep(slowAttempts: (attempt: number) => boolean): HandlerMap[string] {
  return async (ctx) => {
    await ctx.step('write', async (tx) => {
      if (slowAttempts(ctx.event.attempt)) await sleep(3_000);
      await tx.query(`INSERT INTO public.effect (event_id, attempt, what) VALUES ($1, $2, 'step')`,
        [ctx.event.id, ctx.event.attempt]);
    });
  };
}

function startWorker(handlers: HandlerMap, settings: { handlerTimeout?: number; drainTimeout?: number }): Worker {
  const tracking = Object.fromEntries(Object.entries(handlers).map(([key, handler]) => [key, tracked(handler)]));
  worker = createWorker({
    pool: db.pool, handlers: tracking, concurrency: 2,
    settings: { renewEvery: 200, reapEvery: 200, pollEvery: 100, ...settings },
  });
  return worker;
}

it('a step body past the timeout never commits: A goes DEAD first, and B starts after it', async () => {
  await setSettings(db.pool, { max_attempts: '1' });
  const w = startWorker({ 'generic:slow-a': slowStep(() => true), 'generic:b': recordStart }, { handlerTimeout: 1_000 });
  await w.start();
  const [a, b] = await admitEvents(db.pool, [{ scope: 'dead', eventType: 'slow-a' }, { scope: 'dead', eventType: 'b' }]);
  await waitForState(db.pool, a!, 'DEAD', 20_000);
  await waitForState(db.pool, b!, 'DONE', 20_000);
  await Promise.all(handlersOver);  // A's step body is over too: its write was tried
  const written = await effects([a!, b!]);
  expect(written.map((row) => [row.event_id, row.what])).toEqual([[b, 'started']]);
  const { rows } = await db.pool.query<{ dead_at: Date }>('SELECT dead_at FROM wharf.provider_event WHERE id = $1', [a]);
  expect(written[0]!.at.getTime()).toBeGreaterThanOrEqual(rows[0]!.dead_at.getTime());
});

it('a step body past the timeout, retried: its write commits once, under the retry, and B runs after A is done', async () => {
  await setSettings(db.pool, { max_attempts: '3' });
  const w = startWorker({ 'generic:slow-a': slowStep((attempt) => attempt === 1), 'generic:b': recordStart },
    { handlerTimeout: 1_000 });
  await w.start();
  const [a, b] = await admitEvents(db.pool, [{ scope: 'retried', eventType: 'slow-a' }, { scope: 'retried', eventType: 'b' }]);
  await waitForState(db.pool, b!, 'DONE', 20_000);
  await Promise.all(handlersOver);
  const written = await effects([a!, b!]);
  expect(written.map((row) => [row.event_id, row.attempt, row.what])).toEqual([[a, 2, 'step'], [b, 1, 'started']]);
  const { rows } = await db.pool.query<{ state: string; attempt: number; handled_at: Date }>(
    'SELECT state, attempt, handled_at FROM wharf.provider_event WHERE id = $1', [a]);
  expect(rows[0]).toMatchObject({ state: 'DONE', attempt: 2 });
  expect(written[1]!.at.getTime()).toBeGreaterThanOrEqual(rows[0]!.handled_at.getTime());
});

it('a drain past drainTimeout cuts the open step: the row is released and its write never commits', async () => {
  await setSettings(db.pool, { max_attempts: '3' });
  let stepOpen!: () => void;
  const opened = new Promise<void>((resolve) => (stepOpen = resolve));
  const w = startWorker({
    'generic:drained': async (ctx) => {
      await ctx.step('write', async (tx) => {
        stepOpen();
        await sleep(3_000);
        await tx.query(`INSERT INTO public.effect (event_id, attempt, what) VALUES ($1, $2, 'step')`, [ctx.event.id, ctx.event.attempt]);
      });
    },
  }, { handlerTimeout: 60_000, drainTimeout: 300 });
  await w.start();
  const [id] = await admitEvents(db.pool, [{ scope: 'drained', eventType: 'drained' }]);
  await opened;
  await w.stop();
  worker = undefined;
  await Promise.all(handlersOver);
  expect(await effects([id!])).toEqual([]);
  const { rows } = await db.pool.query('SELECT state, attempt FROM wharf.provider_event WHERE id = $1', [id]);
  expect(rows[0]).toEqual({ state: 'QUEUED', attempt: 0 });
});

/** One leased event for the SQL-level races below: its id and epoch. */
async function leasedEvent(scope: string): Promise<{ id: string; epoch: string }> {
  const [id] = await admitEvents(db.pool, [{ scope, eventType: 'race' }]);
  const { rows } = await db.pool.query<{ id: string; lease_epoch: string }>(
    `SELECT id, lease_epoch FROM wharf.claim('race', 10) WHERE id = $1`, [id]);
  return { id: rows[0]!.id, epoch: rows[0]!.lease_epoch };
}

async function waitingForLock(client: pg.Client): Promise<boolean> {
  const pid = (client as unknown as { processID: number }).processID;
  const { rows } = await db.pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = $2', [pid, 'Lock']);
  return rows.length > 0;
}

for (const [name, end] of [
  ['release', (lease: { id: string; epoch: string }) => `SELECT wharf.release(${lease.id}, ${lease.epoch}) AS ended`],
  ['complete', (lease: { id: string; epoch: string }) => `SELECT wharf.complete(${lease.id}, ${lease.epoch}) AS ended`],
  ['fail', (lease: { id: string; epoch: string }) => `SELECT wharf.fail(${lease.id}, ${lease.epoch}, 'unknown', 'Error') IS NOT NULL AS ended`],
] as const) {
  it(`${name} waits for an open fenced transaction of the lease, then ends it`, async () => {
    const lease = await leasedEvent(`race-${name}`);
    const handler = await db.connect();
    const closer = await db.connect();
    try {
      await handler.query('BEGIN');
      await handler.query(`INSERT INTO public.effect (event_id, attempt, what) VALUES ($1, 1, 'fenced')`, [lease.id]);
      await handler.query('SELECT wharf.fence($1, $2)', [lease.id, lease.epoch]);
      const ending = closer.query<{ ended: boolean }>(end(lease));
      await waitFor(() => waitingForLock(closer), 10_000, `${name} to wait for the fenced transaction`);
      await handler.query('COMMIT');
      expect((await ending).rows[0]!.ended).toBe(true);
      expect((await effects([lease.id])).map((row) => row.what)).toEqual(['fenced']);
    } finally {
      await handler.end();
      await closer.end();
    }
  });
}

it('a fence after the lease ended refuses the transaction (WH412), and a fence while it ends is busy (55P03)', async () => {
  const lease = await leasedEvent('race-after');
  const closer = await db.connect();
  const handler = await db.connect();
  try {
    await closer.query('BEGIN');
    await closer.query('SELECT wharf.release($1, $2)', [lease.id, lease.epoch]);
    await handler.query('BEGIN');
    await expect(handler.query('SELECT wharf.fence($1, $2)', [lease.id, lease.epoch])).rejects.toMatchObject({ code: '55P03' });
    await handler.query('ROLLBACK');
    await closer.query('COMMIT');
    await expect(handler.query('SELECT wharf.fence($1, $2)', [lease.id, lease.epoch])).rejects.toMatchObject({ code: 'WH412' });
  } finally {
    await handler.end();
    await closer.end();
  }
});

it('the wait is bounded: a closing write behind a hung fenced transaction gives up with 55P03 and changes nothing', async () => {
  const lease = await leasedEvent('race-hung');
  const handler = await db.connect();
  try {
    await handler.query('BEGIN');
    await handler.query('SELECT wharf.fence($1, $2)', [lease.id, lease.epoch]);
    await expect(db.pool.query('SELECT wharf.release($1, $2)', [lease.id, lease.epoch])).rejects.toMatchObject({ code: '55P03' });
    const { rows } = await db.pool.query('SELECT state FROM wharf.provider_event WHERE id = $1', [lease.id]);
    expect(rows[0]).toEqual({ state: 'LEASED' });
  } finally {
    await handler.end();
  }
  // The hung transaction is gone (its connection closed): the same write goes through.
  const { rows } = await db.pool.query('SELECT wharf.release($1, $2) AS released', [lease.id, lease.epoch]);
  expect(rows[0]).toEqual({ released: true });
});
