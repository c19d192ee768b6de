// A failure or a release whose commit could not be confirmed: the link to the
// database fails after wharf.fail or wharf.release committed and before its
// answer arrived (a failover, a proxy cut). The worker tries the write again
// under the same lease epoch, and the SQL answers as the first try did
// (contract v6): the state the failure left, or true for the release. So the
// event counts retried, dead or released, never as a lost lease; a dead letter
// is logged, and a retry wakes the idle host when it falls due. Before that
// rule the second try found the lease ended and the worker logged "lease lost:
// nothing written".
import pg from 'pg';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { createWorker, PayloadParsingError, type HandlerMap, type Worker } from '../../worker/index.js';
import type { RunOutcome } from '../../worker/event-run.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startDelayProxy, type DelayProxy } from '../support/delay-proxy.js';
import { captureLogs, type CapturedLogs } from '../support/worker-logs.js';
import { metricValue } from '../support/worker-metrics.js';
import { admitEvents, eventState, setSettings, waitFor } from '../support/worker-inbox.js';

let db: TestDatabase;
let proxy: DelayProxy;
let workerPool: pg.Pool;
let worker: Worker | undefined;

beforeAll(async () => {
  db = await createTestDatabase();
  // A retry falls due 1 to 2 s after its failure, well after the host went
  // idle, and with polls 10 minutes apart (startWorker) only the host's own
  // wake-up for it, which a retried attempt schedules, brings it back in time.
  await setSettings(db.pool, { base_delay: '2 seconds', max_delay: '2 seconds' });
  const direct = new URL(db.url);
  proxy = await startDelayProxy({ target: { host: direct.hostname, port: Number(direct.port || 5432) } });
  const viaProxy = new URL(db.url);
  viaProxy.host = proxy.address;
  // The worker's own statements (claim, fail, release) cross the link that fails.
  workerPool = new pg.Pool({ connectionString: viaProxy.href, max: 4 });
  workerPool.on('error', () => {});
});

afterEach(async () => {
  await worker?.stop();
  worker = undefined;
});

afterAll(async () => {
  await workerPool?.end();
  await proxy?.close();
  await db?.drop();
});

/** Every counter an ending may move, read together. */
async function counters(): Promise<Record<string, number>> {
  return {
    retried: await metricValue('integration_consumer_retry_total', { outcome: 'unknown' }),
    dead: await metricValue('integration_consumer_dead_total', { kind: 'permanent' }),
    released: await metricValue('integration_consumer_released_total'),
    leaseLost: await metricValue('integration_consumer_lease_lost_total'),
  };
}

/** A worker over the failing link, its log captured and each event's outcomes in order. */
function startWorker(handlers: HandlerMap): { logs: CapturedLogs; outcomes: Map<string, RunOutcome[]> } {
  const logs = captureLogs();
  const outcomes = new Map<string, RunOutcome[]>();
  worker = createWorker({
    pool: workerPool, handlerPool: db.pool, concurrency: 2, logger: logs.logger,
    // Polls far apart: a retry runs only if the host woke itself for it.
    settings: { renewEvery: 200, reapEvery: 60_000, pollEvery: 600_000 },
    handlers,
  });
  worker.on('settled', ({ eventId, outcome }) => outcomes.set(eventId, [...(outcomes.get(eventId) ?? []), outcome]));
  return { logs, outcomes };
}

/** The log lines of one event, as [msg, state]. */
function eventLines(logs: CapturedLogs, id: string): Array<[unknown, unknown]> {
  return logs.lines().filter((line) => String(line.event_id) === id).map((line) => [line.msg, line.state]);
}

it('a failure committed but unconfirmed counts retried once, and the retry runs when due', async () => {
  const before = await counters();
  const [id] = await admitEvents(db.pool, [{ scope: 'unconfirmed-retry' }]);
  const cut = proxy.cutAfterReplyTo('wharf.fail(');
  const { logs, outcomes } = startWorker({
    'generic:test': async (ctx) => {
      if (ctx.event.attempt === 1) throw new RangeError('the first attempt fails');
    },
  });
  await worker!.start();
  await cut;
  await waitFor(async () => outcomes.has(id!), 20_000, 'the failed attempt');
  expect(outcomes.get(id!)).toEqual(['retried']);
  await waitFor(async () => outcomes.get(id!)!.length === 2, 20_000, 'the retry, which only its wake-up starts');

  expect(outcomes.get(id!)).toEqual(['retried', 'handled']);
  expect(await eventState(db.pool, id!)).toMatchObject({ state: 'DONE', attempt: 2, failures: 1, lease_epoch: '2' });
  expect(await counters()).toEqual({ ...before, retried: before.retried! + 1 });
  expect(eventLines(logs, id!)).toEqual([
    ['database unavailable; retrying the closing write', undefined],
    ['attempt failed', 'QUEUED'],
  ]);
});

it('a dead letter committed but unconfirmed counts dead once and is logged', async () => {
  const before = await counters();
  const [id] = await admitEvents(db.pool, [{ scope: 'unconfirmed-dead' }]);
  const cut = proxy.cutAfterReplyTo('wharf.fail(');
  const { logs, outcomes } = startWorker({
    'generic:test': async () => {
      throw new PayloadParsingError('never parses');
    },
  });
  await worker!.start();
  await cut;
  await waitFor(async () => outcomes.has(id!), 20_000, 'the failed attempt');

  expect(outcomes.get(id!)).toEqual(['dead']);
  expect(await eventState(db.pool, id!)).toMatchObject({ state: 'DEAD', attempt: 1, error_class: 'PayloadParsingError' });
  expect(await counters()).toEqual({ ...before, dead: before.dead! + 1 });
  expect(eventLines(logs, id!)).toEqual([
    ['database unavailable; retrying the closing write', undefined],
    ['dead letter', 'DEAD'],
  ]);
});

it('a release committed but unconfirmed counts released once', async () => {
  const before = await counters();
  const [id] = await admitEvents(db.pool, [{ scope: 'unconfirmed-release' }]);
  let started: () => void;
  const handlerStarted = new Promise<void>((resolve) => { started = resolve; });
  const { logs, outcomes } = startWorker({
    // Runs until the stopping worker aborts it: the row is given back.
    'generic:test': async (ctx) => {
      started();
      await new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
    },
  });
  await worker!.start();
  await handlerStarted;
  const cut = proxy.cutAfterReplyTo('wharf.release(');
  await worker!.stop();
  worker = undefined;
  await cut;

  expect(outcomes.get(id!)).toEqual(['released']);
  expect(await eventState(db.pool, id!)).toMatchObject({ state: 'QUEUED', attempt: 0, failures: 0, lease_epoch: '1' });
  const { rows: history } = await db.pool.query(
    'SELECT lease_epoch::text, ended FROM wharf.event_attempt WHERE event_id = $1', [id]);
  expect(history).toEqual([{ lease_epoch: '1', ended: 'released' }]);
  expect(await counters()).toEqual({ ...before, released: before.released! + 1 });
  expect(eventLines(logs, id!)).toEqual([
    ['database unavailable; retrying the closing write', undefined],
    ['released', undefined],
  ]);
});
