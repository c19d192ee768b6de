// A completion whose commit could not be confirmed: the link to the database
// fails after complete_many committed and before its answer arrived (a
// failover, a proxy cut). The worker retries the batch under the same lease
// epochs, and wharf.complete_many recognises its own committed completion
// (sql/30): every event counts handled once, none as a lost lease, and no
// step runs again. Before that rule the retry found the rows DONE and the
// worker counted each as lease-lost.
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createWorker, type Worker } from '../../worker/index.js';
import type { RunOutcome } from '../../worker/event-run.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startDelayProxy, type DelayProxy } from '../support/delay-proxy.js';
import { admitEvents, waitFor } from '../support/worker-inbox.js';

let db: TestDatabase;
let proxy: DelayProxy;
let workerPool: pg.Pool;
let worker: Worker | undefined;

beforeAll(async () => {
  db = await createTestDatabase();
  await db.pool.query(`CREATE TABLE public.effect (event_id bigint NOT NULL, attempt integer NOT NULL)`);
  const direct = new URL(db.url);
  proxy = await startDelayProxy({ target: { host: direct.hostname, port: Number(direct.port || 5432) } });
  const viaProxy = new URL(db.url);
  viaProxy.host = proxy.address;
  // The worker's own statements (claim, renew, complete_many) cross the link
  // that fails; its handlers' business transactions do not.
  workerPool = new pg.Pool({ connectionString: viaProxy.href, max: 4 });
  workerPool.on('error', () => {});
});

afterAll(async () => {
  await worker?.stop();
  await workerPool?.end();
  await proxy?.close();
  await db?.drop();
});

it('a completion committed but unconfirmed is retried under its epoch: handled once, no lease lost, no step twice', async () => {
  const cut = proxy.cutAfterReplyTo('complete_many');
  const outcomes = new Map<string, RunOutcome[]>();
  worker = createWorker({
    pool: workerPool, handlerPool: db.pool, concurrency: 4,
    settings: { renewEvery: 200, reapEvery: 200, pollEvery: 100 },
    handlers: {
      'generic:test': async (ctx) => {
        await ctx.step('effect', async (tx) => {
          await tx.query('INSERT INTO public.effect (event_id, attempt) VALUES ($1, $2)', [ctx.event.id, ctx.event.attempt]);
        });
      },
    },
  });
  worker.on('settled', ({ eventId, outcome }) => outcomes.set(eventId, [...(outcomes.get(eventId) ?? []), outcome]));
  const ids = await admitEvents(db.pool, Array.from({ length: 12 }, (_, n) => ({ scope: `unconfirmed-${n % 3}` })));
  await worker.start();
  await cut;

  // The worker carries on through the cut: an event admitted after it is handled too.
  const [later] = await admitEvents(db.pool, [{ scope: 'unconfirmed-later' }]);
  const all = [...ids, later!];
  await waitFor(async () => all.every((id) => outcomes.has(id)), 20_000, 'every event settled');

  expect(Object.fromEntries(all.map((id) => [id, outcomes.get(id)]))).toEqual(
    Object.fromEntries(all.map((id) => [id, ['handled']])));
  const { rows: states } = await db.pool.query<{ id: string; state: string; attempt: number; lease_epoch: string }>(
    'SELECT id::text, state, attempt, lease_epoch::text FROM wharf.provider_event WHERE id = ANY($1::bigint[]) ORDER BY id', [all]);
  expect(states.map((row) => [row.state, row.attempt, row.lease_epoch])).toEqual(all.map(() => ['DONE', 1, '1']));
  const { rows: effects } = await db.pool.query<{ id: string; n: number }>(
    'SELECT event_id::text AS id, count(*)::int AS n FROM public.effect GROUP BY event_id ORDER BY event_id');
  expect(effects).toEqual(all.map((id) => ({ id, n: 1 })));
  // The link was cut once, after the answer to a completion, and the retry went over a new connection.
  expect(proxy.accepted).toBeGreaterThan(1);
});
