// A setting changed while the worker runs takes effect without a restart:
// the worker reads wharf.setting again at every reaper run
// (docs/operating.md). Here handler_timeout goes from an hour to 300 ms while
// the worker runs; after a few reaper runs a handler that never ends is
// aborted at the new timeout and its event fails as HandlerTimeout.
//
// Able to fail: with the refresh taken out (worker/create-worker.ts, the
// reaper's onReaped no longer calling refreshSettings), the worker keeps the
// hour it read at start(), the handler is never aborted, and the wait for its
// outcome runs out (20 s, some 60 times the new timeout).
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createWorker, type RunOutcome, type Worker } from '../../worker/index.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { admitEvents, eventState, setSettings, waitFor } from '../support/worker-inbox.js';

let db: TestDatabase;
let worker: Worker;
const outcomes = new Map<string, RunOutcome>();
const abortReasons = new Map<string, string>();
let reaperRuns = 0;

beforeAll(async () => {
  db = await createTestDatabase();
  // One attempt: the timed-out event ends DEAD at once instead of waiting for a retry.
  await setSettings(db.pool, { handler_timeout: '1 hour', max_attempts: '1' });
  worker = createWorker({
    pool: db.pool,
    handlers: {
      // Ends only when aborted.
      'generic:never-ends': async (ctx) => {
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
        abortReasons.set(ctx.event.id, (ctx.signal.reason as Error).name);
        throw ctx.signal.reason;
      },
      'generic:quick': () => {},
    },
    concurrency: 2,
    // Host-side: the reaper (and so the refresh) runs often. handler_timeout
    // is not overridden: it comes from wharf.setting.
    settings: { reapEvery: 200, pollEvery: 200 },
  });
  worker.on('settled', ({ eventId, outcome }) => outcomes.set(eventId, outcome));
  worker.on('reaped', () => (reaperRuns += 1));
  await worker.start();
});

afterAll(async () => {
  await worker?.stop();
  await db?.drop();
});

it('a handler_timeout changed while the worker runs aborts the next handler at the new timeout', async () => {
  // The worker runs, and handles events, under the hour it read at start().
  const [before] = await admitEvents(db.pool, [{ scope: 'refresh', eventType: 'quick' }]);
  expect(await waitFor(async () => outcomes.get(before!), 20_000, 'an event under the first settings')).toBe('handled');

  await setSettings(db.pool, { handler_timeout: '300 milliseconds' });
  // Each reaper run reads the settings again once it has reaped; after two
  // more runs the first refresh since the change has been answered.
  const runsAtChange = reaperRuns;
  await waitFor(async () => reaperRuns >= runsAtChange + 3, 20_000, 'three reaper runs after the change');

  const [id] = await admitEvents(db.pool, [{ scope: 'refresh', eventType: 'never-ends' }]);
  expect(await waitFor(async () => outcomes.get(id!), 20_000, 'the handler to time out at the new handler_timeout')).toBe('dead');
  expect(abortReasons.get(id!)).toBe('HandlerTimeout');
  expect(await eventState(db.pool, id!)).toMatchObject({ state: 'DEAD', failures: 1, error_class: 'HandlerTimeout' });
});
