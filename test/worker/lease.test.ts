// Leases while a handler runs: renewed every renew_every (a handler running
// three lease lengths keeps its lease; one whose lease a renewal finds taken
// is told and writes nothing), abandoned at handler_timeout, and taken back
// by the reaper when a worker vanished.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createWorker, type HandlerMap, type RunOutcome, type Worker } from '../../worker/index.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { eventState, admitEvents, setSettings, waitFor, waitForState } from '../support/worker-inbox.js';
import { metricValue } from '../support/worker-metrics.js';
import { sleep } from '../support/sleep.js';

let db: TestDatabase;
let worker: Worker;
const outcomes = new Map<string, RunOutcome>();
const abortReasons = new Map<string, string>();

const leaseMs = 1_000;
const handlerTimeout = 5_000;


const handlers: HandlerMap = {
  'generic:three-leases': async (ctx) => {
    await sleep(3.5 * leaseMs);
    // Fenced: commits only if this worker still holds the lease.
    await ctx.transaction((tx) => tx.query('SELECT 1'));
  },
  'generic:lease-taken': async (ctx) => {
    await new Promise<void>((resolve) =>
      ctx.signal.addEventListener('abort', () => {
        abortReasons.set(ctx.event.id, (ctx.signal.reason as Error).name);
        resolve();
      }),
    );
    throw ctx.signal.reason;
  },
  'generic:never-ends': async (ctx) => {
    await new Promise<void>((resolve) =>
      ctx.signal.addEventListener('abort', () => {
        abortReasons.set(ctx.event.id, (ctx.signal.reason as Error).name);
        resolve();
      }),
    );
    // Abandoned: nothing it does from here on counts.
    await new Promise(() => {});
  },
};

beforeAll(async () => {
  db = await createTestDatabase();
  await setSettings(db.pool, { lease: `${leaseMs} milliseconds`, max_attempts: '1', base_delay: '1 hour' });
  worker = createWorker({
    pool: db.pool,
    handlers,
    concurrency: 4,
    settings: { renewEvery: 250, handlerTimeout, reapEvery: 200, pollEvery: 100 },
  });
  worker.on('settled', ({ eventId, outcome }) => outcomes.set(eventId, outcome));
  await worker.start();
});

afterAll(async () => {
  await worker?.stop();
  await db?.drop();
});

it('a handler that runs three lease lengths keeps its lease while the reaper runs', async () => {
  const [id] = await admitEvents(db.pool, [{ scope: 'long', eventType: 'three-leases' }]);
  const outcome = await waitFor(async () => outcomes.get(id!), 15_000, 'the long handler');
  expect(outcome).toBe('handled');
  expect(await eventState(db.pool, id!)).toMatchObject({ state: 'DONE', attempt: 1, failures: 0, error_class: null });
});

it('a handler whose lease a renewal finds taken is aborted (LeaseLost) and writes nothing', async () => {
  const before = await metricValue('integration_consumer_lease_lost_total');
  const [id] = await admitEvents(db.pool, [{ scope: 'taken', eventType: 'lease-taken' }]);
  await waitForState(db.pool, id!, 'LEASED');
  // Another holder's lease, as a reap and a second claim would leave it (long, so the reaper leaves it alone).
  await db.pool.query(
    `UPDATE wharf.provider_event SET lease_epoch = lease_epoch + 1, leased_until = clock_timestamp() + interval '1 hour' WHERE id = $1`,
    [id]);
  const outcome = await waitFor(async () => outcomes.get(id!), 5_000, 'the renewal');
  expect(outcome).toBe('lease-lost');
  expect(abortReasons.get(id!)).toBe('LeaseLost');
  expect(await eventState(db.pool, id!)).toMatchObject({ state: 'LEASED', lease_epoch: '2', failures: 0, error_class: null });
  expect(await metricValue('integration_consumer_lease_lost_total')).toBe(before + 1);
});

it('a handler past handler_timeout is aborted, abandoned and failed as unknown (HandlerTimeout)', async () => {
  const [id] = await admitEvents(db.pool, [{ scope: 'stuck', eventType: 'never-ends' }]);
  const outcome = await waitFor(async () => outcomes.get(id!), handlerTimeout + 10_000, 'the timeout');
  expect(outcome).toBe('dead');
  expect(abortReasons.get(id!)).toBe('HandlerTimeout');
  expect(await eventState(db.pool, id!)).toMatchObject({ state: 'DEAD', failures: 1, error_class: 'HandlerTimeout' });
});

it('the reaper takes back a lease whose worker vanished', async () => {
  const before = await metricValue('integration_consumer_reaped_total');
  const client = await db.connect();
  await client.query('BEGIN');
  const [id] = await admitEvents(client, [{ scope: 'orphan', eventType: 'nobody' }]);
  await client.query(
    `UPDATE wharf.provider_event
        SET state = 'LEASED', attempt = 1, lease_epoch = 1, leased_by = 'vanished',
            leased_until = clock_timestamp() - interval '1 second'
      WHERE id = $1`,
    [id],
  );
  await client.query('COMMIT');
  // max_attempts is 1 here: the reaped row ends DEAD instead of waiting an hour.
  const row = await waitFor(async () => {
    const state = await eventState(db.pool, id!);
    return state?.state === 'DEAD' ? state : undefined;
  }, 10_000, 'the reaper');
  expect(row).toMatchObject({ failures: 1, error_class: 'LeaseExpired' });
  expect(await metricValue('integration_consumer_reaped_total')).toBe(before + 1);
});
