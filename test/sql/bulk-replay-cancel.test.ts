// A cancel stops a bulk replay at the next batch boundary, whatever the
// scheduling (issue 55): the operator cancels at "100 of 250" while the second
// batch runs. The cancel waits for that batch, which counts; then the runner's
// next batch replays nothing, even when it reaches the bulk replay before the
// woken cancel does, and the cancel answers cancelled: true. A cancel asked
// while the last batch runs answers cancelled: true too, and is recorded.
//
// The interleavings are pinned with real sessions and lock waits seen in
// pg_stat_activity, never with sleeps. The runner's session getting in first
// is what the scheduler did in the console runs (the runner's next call came
// before the cancel, woken by the batch's commit, took the row): here the
// next batch queues for the bulk_replay table ahead of the cancel, so that
// it has the table, and runs, while the cancel still waits behind it.
//
// Able to fail: with the cancel and the batch meeting only on the bulk
// replay's row, the next batch replays the last 50 and finishes the replay,
// and the cancel, reaching the row after, answers cancelled: false with
// cancelled_by null ("the cancel cancelled it: expected false to be true"); a cancel that waited
// for the last batch answered false as well.
import type pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startBulkReplay, type BulkReplay } from '../../operator/sql/bulk-replay.js';
import { subscribe } from '../support/inbox-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { backendPid, blockedOnLock, scalar, timedSession } from '../support/sessions.js';
import { subscribedConnection, testSource, testWorkspace } from '../support/worker-inbox.js';

const total = 250;
const batchSize = 100;

let db: TestDatabase;
let observer: pg.Client;
const sessions: pg.Client[] = [];

beforeEach(async () => {
  db = await createTestDatabase();
  observer = await db.connect();
});

afterEach(async () => {
  await Promise.all([...sessions.splice(0), observer].map((session) => session?.end()));
  await db?.drop();
});

/**
 * `total` DEAD events of event type `type`, each in a scope of its own (so
 * that one claim takes them all), through admit_many, claim and fail.
 */
async function deadLetters(type: string): Promise<void> {
  const subjects = Array.from({ length: total }, (_, n) => `repo:acme/cancel-${n}`);
  const connectionId = await subscribedConnection(db.pool, subjects[0]!);
  await subscribe(db.pool, connectionId, subjects.slice(1));
  const deliveries = subjects.map((subject, n) => ({
    provider: 'generic', source: testSource, delivery_key: `cancel-${n}`, event_type: type,
    route: { connection_id: Number(connectionId) }, subjects: [subject], payload: { n }, headers: {},
  }));
  await db.pool.query('SELECT wharf.admit_many($1)', [JSON.stringify(deliveries)]);
  const dead = await scalar<number>(db.pool,
    `WITH claimed AS (SELECT id, lease_epoch FROM wharf.claim('cancel-seed', $1))
     SELECT count(wharf.fail(id, lease_epoch, 'permanent', 'Seeded'))::int AS value FROM claimed`, [total]);
  expect(dead).toBe(total);
}

async function session(): Promise<{ client: pg.Client; pid: number }> {
  const client = await timedSession(db);
  sessions.push(client);
  return { client, pid: await backendPid(client) };
}

async function batch(client: pg.Client | pg.Pool, id: number): Promise<BulkReplay | null> {
  return scalar<BulkReplay | null>(client, 'SELECT wharf.continue_bulk_replay($1, $2, $3) AS value', [testWorkspace, id, batchSize]);
}

function cancel(client: pg.Client, id: number): Promise<BulkReplay & { cancelled: boolean }> {
  return scalar(client, `SELECT wharf.cancel_bulk_replay($1, $2, 'oncall') AS value`, [testWorkspace, id]);
}

async function stateCounts(type: string): Promise<Record<string, number>> {
  const { rows } = await db.pool.query<{ state: string; n: number }>(
    'SELECT state, count(*)::int AS n FROM wharf.provider_event WHERE event_type = $1 GROUP BY state', [type]);
  return Object.fromEntries(rows.map((row) => [row.state, row.n]));
}

describe('cancelling a bulk replay at "100 of 250"', () => {
  it('wins at the next batch boundary even when the runner\'s next batch reaches the replay first', async () => {
    await deadLetters('cancel-race');
    const replay = await startBulkReplay(db.pool, String(testWorkspace), { event_type: 'cancel-race' }, 'bulk');
    expect((await batch(db.pool, replay.id))?.replayed).toBe(100);

    // The second batch in flight: replayed, not committed.
    const runner = await session();
    await runner.client.query('BEGIN');
    expect((await batch(runner.client, replay.id))?.replayed).toBe(200);

    // The runner's next batch, first in line for the table.
    const next = await session();
    await next.client.query('BEGIN');
    const nextHasTable = next.client.query('LOCK TABLE wharf.bulk_replay IN EXCLUSIVE MODE');
    await blockedOnLock(observer, next.pid, { timeout: 5_000, what: 'the next batch to queue behind the batch in flight' });

    // The cancel, asked now, waits.
    const canceller = await session();
    const cancelling = cancel(canceller.client, replay.id);
    await blockedOnLock(observer, canceller.pid, { timeout: 5_000, what: 'the cancel to wait' });

    await runner.client.query('COMMIT');
    await nextHasTable;
    // The next batch runs while the cancel still waits behind it.
    const nextBatch = await batch(next.client, replay.id);
    await blockedOnLock(observer, canceller.pid, { timeout: 5_000, what: 'the cancel to wait for the next batch' });
    await next.client.query('COMMIT');
    const cancelled = await cancelling;

    expect(cancelled.cancelled, 'the cancel cancelled it').toBe(true);
    expect(cancelled).toMatchObject({ state: 'cancelled', cancelled_by: 'oncall', matched: total, replayed: 200, skipped: 0 });
    expect(nextBatch, 'the next batch ran nothing').toBeNull();
    expect(await stateCounts('cancel-race')).toEqual({ QUEUED: 200, DEAD: 50 });
    // The runner's batch after that stops at once.
    expect(await batch(db.pool, replay.id)).toMatchObject({ state: 'cancelled', replayed: 200 });
  });

  it('answers cancelled: true, and records it, when the batch it waited for was the last', async () => {
    await deadLetters('cancel-last');
    const replay = await startBulkReplay(db.pool, String(testWorkspace), { event_type: 'cancel-last' }, 'bulk');
    for (const replayed of [100, 200]) expect((await batch(db.pool, replay.id))?.replayed).toBe(replayed);

    const runner = await session();
    await runner.client.query('BEGIN');
    expect(await batch(runner.client, replay.id)).toMatchObject({ state: 'finished', replayed: total });
    const canceller = await session();
    const cancelling = cancel(canceller.client, replay.id);
    await blockedOnLock(observer, canceller.pid, { timeout: 5_000, what: 'the cancel to wait for the last batch' });
    await runner.client.query('COMMIT');
    const cancelled = await cancelling;

    expect(cancelled.cancelled, 'the cancel cancelled it').toBe(true);
    expect(cancelled).toMatchObject({ state: 'cancelled', cancelled_by: 'oncall', replayed: total });
    expect(await stateCounts('cancel-last')).toEqual({ QUEUED: total });
    // Asked once it had finished (here: cancelled), a cancel changes nothing.
    const again = await cancel(canceller.client, replay.id);
    expect(again).toMatchObject({ cancelled: false, state: 'cancelled', cancelled_by: 'oncall' });
  });
});
