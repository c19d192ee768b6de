// The `wharf worker` process: a SIGKILL mid-handler loses nothing and repeats
// no committed step; SIGTERM releases unfinished rows within the drain and
// exits 0; a second signal exits at once.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { eventState, admitEvents, setSettings, waitFor, waitForState } from '../support/worker-inbox.js';
import { fixtureHandlers, killSpawnedWorkers, spawnWorker } from '../support/worker-process.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
  await db.pool.query('CREATE TABLE step_log (event_id bigint, step text, pid int)');
  await db.pool.query('CREATE TABLE started_log (event_id bigint, pid int)');
  // A short lease, renewed often, and a quick retry after the reaper.
  await setSettings(db.pool, {
    lease: '1 second',
    renew_every: '200 milliseconds',
    base_delay: '100 milliseconds',
    poll_every: '300 milliseconds',
  });
});

afterAll(async () => {
  await killSpawnedWorkers();
  await db?.drop();
});

async function started(id: string): Promise<number> {
  return waitFor(async () => {
    const { rows } = await db.pool.query<{ pid: number }>('SELECT pid FROM started_log WHERE event_id = $1', [id]);
    return rows[0]?.pid;
  }, 20_000, 'the slow handler to start');
}

it('after a SIGKILL between two steps, a second worker finishes: the committed step is skipped, the other runs once', async () => {
  // Two hosts; whichever runs the first step hangs there and is killed.
  const args = ['--handlers', fixtureHandlers('two-step.ts'), '--concurrency', '2', '--reap-every', '200ms'];
  const env = { WHARF_TEST_HANG_AFTER_FIRST: '1' };
  const hosts = [spawnWorker({ databaseUrl: db.url, args, env }), spawnWorker({ databaseUrl: db.url, args, env })];
  await waitFor(async () => hosts.every((host) => host.output().includes('"msg":"worker started"')), 20_000, 'both hosts');
  const [id] = await admitEvents(db.pool, [{ scope: 'killed', eventType: 'two-step' }]);
  const firstPid = await waitFor(async () => {
    const { rows } = await db.pool.query<{ pid: number }>(`SELECT pid FROM step_log WHERE event_id = $1 AND step = 'first'`, [id]);
    return rows[0]?.pid;
  }, 20_000, 'the first step to commit');
  const killed = hosts.find((host) => host.child.pid === firstPid)!;
  const survivor = hosts.find((host) => host !== killed)!;
  killed.child.kill('SIGKILL');
  expect(await killed.exited).toMatchObject({ signal: 'SIGKILL' });

  const done = await waitForState(db.pool, id!, 'DONE', 20_000);
  expect(done).toMatchObject({ failures: 1, error_class: 'LeaseExpired', outcome: 'handled' });
  const { rows } = await db.pool.query<{ step: string; pid: number }>(
    'SELECT step, pid FROM step_log WHERE event_id = $1 ORDER BY step',
    [id],
  );
  expect(rows).toEqual([
    { step: 'first', pid: killed.child.pid },
    { step: 'second', pid: survivor.child.pid },
  ]);
  survivor.child.kill('SIGTERM');
  expect(await survivor.exited).toEqual({ code: 0, signal: null });
}, 60_000);

it('SIGTERM during a slow handler releases the row uncounted and exits 0 within the drain', async () => {
  const [id] = await admitEvents(db.pool, [{ scope: 'terminated', eventType: 'slow' }]);
  const worker = spawnWorker({
    databaseUrl: db.url,
    args: ['--handlers', fixtureHandlers('slow.ts'), '--drain-timeout', '1s'],
  });
  await started(id!);
  worker.child.kill('SIGTERM');
  // The handler would run for a minute; the drain ends it after a second.
  expect(await worker.exited).toEqual({ code: 0, signal: null });
  expect(await eventState(db.pool, id!)).toMatchObject({ state: 'QUEUED', attempt: 0, failures: 0, error_class: null });
  expect(worker.output()).toContain('"msg":"released"');
}, 30_000);

it('a second signal exits at once, without waiting for the drain', async () => {
  const [id] = await admitEvents(db.pool, [{ scope: 'impatient', eventType: 'slow' }]);
  const worker = spawnWorker({
    databaseUrl: db.url,
    args: ['--handlers', fixtureHandlers('slow.ts'), '--drain-timeout', '5m'],
  });
  await started(id!);
  worker.child.kill('SIGTERM');
  await waitFor(async () => worker.output().includes('"msg":"stopping"'), 10_000, 'the first signal to be seen');
  worker.child.kill('SIGINT');
  expect(await worker.exited).toEqual({ code: 130, signal: null });
  // Left LEASED: the reaper of another host takes it back when the lease ends.
  expect(await eventState(db.pool, id!)).toMatchObject({ state: 'LEASED', attempt: 1 });
}, 30_000);
