// `wharf worker` started before its database is up, as an operator meets it
// when hosts and database boot together: the worker does not exit, says once
// that the database is unavailable (naming host and port, never the
// credentials), and handles events as soon as the database is there. Both
// ways a database is "not up": nothing listens on its port yet (connection
// refused), and it listens but is still starting (57P03).
import { afterAll, beforeAll, expect, it } from 'vitest';
import pg from 'pg';
import { migrate } from '../../db/migrate.js';
import { createOwnPostgres, type OwnPostgres } from '../support/own-postgres.js';
import { admitEvents, setSettings, waitFor, waitForState } from '../support/worker-inbox.js';
import { fixtureHandlers, killSpawnedWorkers, spawnWorker, type WorkerProcess } from '../support/worker-process.js';
import { jsonLines } from '../support/json-lines.js';

let own: OwnPostgres;
/** The worker's URL: with a password, which must never reach a log (the server trusts, so it is never sent). */
let workerUrl: string;
const password = 'do-not-log-me';

beforeAll(async () => {
  own = await createOwnPostgres();
  await own.start();
  await migrate({ databaseUrl: own.url });
  await withClient(async (client) => {
    await client.query('CREATE TABLE handled_log (seq bigint GENERATED ALWAYS AS IDENTITY, event_id bigint, scope_key text, pid int)');
    await setSettings(client, { poll_every: '300 milliseconds' });
  });
  await own.halt();
  workerUrl = own.url.replace('postgres@', `postgres:${password}@`);
}, 120_000);

afterAll(async () => {
  await killSpawnedWorkers();
  await own?.stop();
}, 60_000);

async function withClient<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: own.url });
  client.on('error', () => {});
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end().catch(() => {});
  }
}

/** The worker's JSON log lines (anything else it printed is left out). */
function logLines(worker: WorkerProcess): Array<Record<string, unknown>> {
  return jsonLines(worker.output());
}

const unavailable = (worker: WorkerProcess) =>
  logLines(worker).filter((line) => typeof line.msg === 'string' && /database is unavailable/.test(line.msg));

/** Spawns a worker, waits until it has said the database is unavailable and has kept waiting a while, and checks it is still there. */
async function spawnWaitingWorker(): Promise<WorkerProcess> {
  const worker = spawnWorker({
    databaseUrl: workerUrl,
    args: ['--handlers', fixtureHandlers('record-order.ts'), '--concurrency', '2'],
  });
  let exit: unknown;
  void worker.exited.then((value) => (exit = value));
  await waitFor(async () => unavailable(worker).length > 0 || exit !== undefined, 30_000, 'the worker to say the database is unavailable');
  // Several retries' worth of waiting (the backoff starts at 100 ms).
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  expect(exit, worker.output()).toBeUndefined();
  return worker;
}

function expectToldOnce(worker: WorkerProcess): void {
  const told = unavailable(worker);
  expect(told, worker.output()).toHaveLength(1);
  expect(told[0]).toMatchObject({ host: '127.0.0.1', port: own.port });
}

async function expectHandlesAnEvent(worker: WorkerProcess, scope: string): Promise<void> {
  await waitFor(async () => worker.output().includes('"msg":"worker started"'), 30_000, 'the worker to start');
  const [id] = await withClient((client) => admitEvents(client, [{ scope }]));
  await withClient((client) => waitForState(client, id!, 'DONE', 20_000));
  const handled = await withClient(async (client) =>
    (await client.query<{ pid: number }>('SELECT pid FROM handled_log WHERE event_id = $1', [id])).rows);
  expect(handled).toEqual([{ pid: worker.child.pid }]);
}

async function expectCleanExit(worker: WorkerProcess): Promise<void> {
  worker.child.kill('SIGTERM');
  expect(await worker.exited).toEqual({ code: 0, signal: null });
  const output = worker.output();
  // Told once, even though it retried; no credential and no stack trace on the way.
  expectToldOnce(worker);
  expect(output).not.toContain(password);
  expect(output).not.toMatch(/\n\s+at /);
}

it('waits while nothing listens on the database port, says so once, then handles events', async () => {
  await own.halt();
  const waiting = await spawnWaitingWorker();
  expectToldOnce(waiting);
  expect(unavailable(waiting)[0]).toMatchObject({ error_class: expect.stringMatching(/ECONNREFUSED/) });
  expect(waiting.output()).not.toContain('"msg":"worker started"');

  await own.start();
  await expectHandlesAnEvent(waiting, 'refused-first');
  await expectCleanExit(waiting);
}, 60_000);

it('waits while the database is starting up (57P03), says so once, then handles events', async () => {
  await own.halt();
  await own.startInRecovery();
  const waiting = await spawnWaitingWorker();
  // It keeps trying: the server turns away more than one connection (polled
  // for, however slowly the machine runs the retries) ...
  const refusals = () => own.log().match(/FATAL: {2}the database system is not accepting connections/g)?.length ?? 0;
  await waitFor(async () => refusals() > 1, 30_000, 'a second refused connection');
  // ... and says so once.
  expectToldOnce(waiting);
  expect(unavailable(waiting)[0]).toMatchObject({ error_class: expect.stringMatching(/57P03/) });
  expect(waiting.output()).not.toContain('"msg":"worker started"');

  await own.promote();
  await expectHandlesAnEvent(waiting, 'starting-first');
  await expectCleanExit(waiting);
}, 60_000);

it('a worker still waiting for its database stops on SIGTERM, exit 0', async () => {
  await own.halt();
  const waiting = await spawnWaitingWorker();
  const signalled = Date.now();
  waiting.child.kill('SIGTERM');
  expect(await waiting.exited).toEqual({ code: 0, signal: null });
  // It stopped instead of waiting on for a database that never comes (it
  // would wait forever: the wait has no end of its own). A bound with a wide
  // margin on a loaded machine (it takes well under a second), not a speed:
  // the wait's backoff (at most 5 s) is no part of the verdict.
  expect(Date.now() - signalled).toBeLessThan(20_000);
  expect(waiting.output()).not.toMatch(/\n\s+at |^wharf: /m);
}, 60_000);
