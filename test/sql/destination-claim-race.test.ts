// claim_deliveries under real concurrency (sql/88-destinations.sql): several
// sessions claim and complete at once, while admitters keep routing new
// events to two destinations. Per (destination, scope) deliveries are handed
// out in event order and never two at a time; no destination ever has more
// leases than its max_in_flight across every session together; no session
// gets more than the rate limit's bucket holds; every delivery is handed out
// exactly once; a destination that keeps failing holds back neither the
// other destination nor the workspace's handlers; and sessions completing
// overlapping batches in opposite orders (each batch locking its deliveries,
// then promoting each scope's next under its advisory lock) never deadlock
// and complete each delivery once, in order per scope.
//
// Able to fail: with claim_deliveries' ordered check or its lease count
// removed, or its destination row not locked (each session then reads the
// same in-flight count and bucket), the bookkeeping below exceeds the bounds
// or sees a scope out of order, naming the destination and the scope.
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { admitEvents, testWorkspace } from '../support/worker-inbox.js';

const scopes = Array.from({ length: 8 }, (_, n) => `repo:acme/forward-${n}`);
const eventsPerScope = 12;
const claimers = 6;
const maxInFlight = 3;

let db: TestDatabase;
let ordered: string;
let unordered: string;

async function destination(name: string, spec: Record<string, unknown>): Promise<string> {
  const { rows } = await db.pool.query<{ id: string }>(
    `SELECT (wharf.create_destination($1, $2) ->> 'id') AS id`,
    [testWorkspace, { name, url: `https://app.example/${name}`, ...spec }]);
  const id = rows[0]!.id;
  await db.pool.query(`SELECT wharf.set_destination_secret($1, $2, 'aes256gcm:k:iv:sealed')`, [testWorkspace, id]);
  await db.pool.query(`SELECT wharf.create_destination_rule($1, $2)`, [testWorkspace, { destination_id: Number(id) }]);
  return id;
}

beforeAll(async () => {
  db = await createTestDatabase();
  await db.pool.query('SELECT wharf.upsert_workspace($1)', [testWorkspace]);
  ordered = await destination('ordered', { ordered: true, max_in_flight: maxInFlight });
  unordered = await destination('unordered', { ordered: false, max_in_flight: maxInFlight });
});

afterAll(async () => {
  await db?.drop();
});

interface Claimed { delivery_id: string; epoch: string; event_id: string; destination_id: string; subject: string }

it('hands out each delivery once, in event order per (destination, scope), within max_in_flight across sessions', async () => {
  // Half the events are there before the claimers start; the rest arrive while they run.
  const events = scopes.flatMap((scope) => Array.from({ length: eventsPerScope }, () => ({ scope })));
  const firstHalf = events.filter((_, n) => n % 2 === 0);
  const secondHalf = events.filter((_, n) => n % 2 === 1);
  await admitEvents(db.pool, firstHalf);

  const sessions = await Promise.all(Array.from({ length: claimers }, () => db.connect()));
  const held = new Map<string, number>([[ordered, 0], [unordered, 0]]);
  const mostHeld = new Map<string, number>([[ordered, 0], [unordered, 0]]);
  const leasedScopes = new Set<string>();
  const handedOut: string[] = [];
  /** Per ordered scope, the event ids in the order they were handed out. */
  const orderSeen = new Map<string, string[]>();
  const problems: string[] = [];
  let admitting = true;

  const claimLoop = async (client: pg.Client, name: string): Promise<void> => {
    let idle = 0;
    while (admitting || idle < 20) {
      const { rows } = await client.query<Claimed>(
        `SELECT delivery_id, epoch, event_id, destination_id, subject FROM wharf.claim_deliveries($1, 4)`, [name]);
      if (rows.length === 0) {
        idle += 1;
        await new Promise((resolve) => setTimeout(resolve, 5));
        continue;
      }
      idle = 0;
      for (const row of rows) {
        handedOut.push(row.delivery_id);
        const count = held.get(row.destination_id)! + 1;
        held.set(row.destination_id, count);
        mostHeld.set(row.destination_id, Math.max(mostHeld.get(row.destination_id)!, count));
        if (row.destination_id === ordered) {
          if (leasedScopes.has(row.subject)) problems.push(`two leases at once in ${row.subject}`);
          leasedScopes.add(row.subject);
          orderSeen.set(row.subject, [...(orderSeen.get(row.subject) ?? []), row.event_id]);
        }
      }
      // The bookkeeping is released before the write that ends the lease
      // commits, so it never counts more than the database holds.
      for (const row of rows) {
        held.set(row.destination_id, held.get(row.destination_id)! - 1);
        if (row.destination_id === ordered) leasedScopes.delete(row.subject);
        const done = await client.query<{ ok: boolean }>(
          `SELECT wharf.complete_delivery($1, $2, 200, 1, NULL) AS ok`, [row.delivery_id, row.epoch]);
        if (!done.rows[0]!.ok) problems.push(`lease of delivery ${row.delivery_id} lost`);
      }
    }
  };

  const admitter = async (): Promise<void> => {
    for (const event of secondHalf) await admitEvents(db.pool, [event]);
    admitting = false;
  };

  await Promise.all([admitter(), ...sessions.map((client, n) => claimLoop(client, `claimer-${n}`))]);
  await Promise.all(sessions.map((client) => client.end()));

  expect(problems).toEqual([]);
  const { rows: all } = await db.pool.query<{ id: string; destination_id: string; state: string; event_id: string; subject: string }>(
    `SELECT q.id, q.destination_id, q.state, q.event_id, e.subject
       FROM wharf.destination_delivery q JOIN wharf.provider_event e ON e.id = q.event_id ORDER BY q.event_id`);
  expect(all).toHaveLength(events.length * 2);
  expect(all.filter((row) => row.state !== 'DONE')).toEqual([]);
  expect(handedOut.sort()).toEqual(all.map((row) => row.id).sort());
  for (const scope of scopes) {
    const expected = all.filter((row) => row.destination_id === ordered && row.subject === scope).map((row) => row.event_id);
    expect({ scope, order: orderSeen.get(scope) }).toEqual({ scope, order: expected });
  }
  expect(mostHeld.get(ordered)).toBeLessThanOrEqual(maxInFlight);
  expect(mostHeld.get(unordered)).toBeLessThanOrEqual(maxInFlight);
});

it('hands out no more than the rate limit across sessions, and a failing destination holds back nothing else', async () => {
  await db.pool.query(`SELECT wharf.update_destination($1, $2, '{"rate_limit": 10, "rate_period": "minute", "max_in_flight": 1000}')`,
    [testWorkspace, unordered]);
  await db.pool.query(`SELECT wharf.update_destination($1, $2, '{"breaker_failures": 1000}')`, [testWorkspace, ordered]);
  await admitEvents(db.pool, scopes.flatMap((scope) => Array.from({ length: 5 }, () => ({ scope }))));

  const sessions = await Promise.all(Array.from({ length: claimers }, () => db.connect()));
  const counts = new Map<string, number>([[ordered, 0], [unordered, 0]]);
  // Each session claims 10 times; the ordered destination fails every delivery (it stays QUEUED, due later).
  await Promise.all(sessions.map(async (client, n) => {
    for (let round = 0; round < 10; round += 1) {
      const { rows } = await client.query<Claimed>(
        `SELECT delivery_id, epoch, destination_id FROM wharf.claim_deliveries($1, 50)`, [`limited-${n}`]);
      for (const row of rows) {
        counts.set(row.destination_id, counts.get(row.destination_id)! + 1);
        if (row.destination_id === ordered) {
          await client.query(`SELECT wharf.fail_delivery($1, $2, 'transient', 'HTTP503', 503, 1, NULL)`, [row.delivery_id, row.epoch]);
        }
      }
    }
  }));
  await Promise.all(sessions.map((client) => client.end()));

  // A bucket of 10 refilled at 10 a minute: the test runs for seconds, so at most 10 plus what a few seconds refill.
  const { rows: [elapsed] } = await db.pool.query<{ seconds: number }>(
    `SELECT extract(epoch FROM max(leased_at) - min(leased_at))::float8 AS seconds
       FROM wharf.destination_delivery WHERE destination_id = $1 AND leased_at IS NOT NULL AND state <> 'DONE'`, [unordered]);
  expect(counts.get(unordered)).toBeLessThanOrEqual(10 + Math.ceil(((elapsed?.seconds ?? 0) * 10) / 60));
  expect(counts.get(unordered)).toBeGreaterThanOrEqual(10);
  // The failing destination was claimed (one head per scope, then its retries wait) and held back the unordered one in nothing.
  expect(counts.get(ordered)).toBeGreaterThanOrEqual(scopes.length);
  // The workspace's handlers still claim every new event.
  const { rows: handlers } = await db.pool.query(`SELECT id FROM wharf.claim('handlers', 100)`);
  expect(handlers.length).toBeGreaterThanOrEqual(scopes.length);
});

it('completes overlapping batches from several sessions at once, in opposite orders, without a deadlock: each delivery once, in order per scope', async () => {
  // Only this test's destination hands anything out.
  for (const id of [ordered, unordered]) await db.pool.query(`SELECT wharf.set_destination_state($1, $2, 'PAUSED', 'test')`, [testWorkspace, id]);
  const batched = await destination('batched', { ordered: true, max_in_flight: 1000 });
  const raceScopes = Array.from({ length: 10 }, (_, n) => `repo:acme/batched-${n}`);
  await admitEvents(db.pool, raceScopes.flatMap((scope) => Array.from({ length: 6 }, () => ({ scope }))));

  const [claimer, ...completers] = await Promise.all(Array.from({ length: 4 }, () => db.connect()));
  let rounds = 0;
  try {
    for (;;) {
      const { rows } = await claimer!.query<Claimed>(`SELECT delivery_id, epoch, destination_id FROM wharf.claim_deliveries('batcher', 100)`);
      if (rows.length === 0) break;
      expect(rows.every((row) => row.destination_id === batched)).toBe(true);
      rounds += 1;
      // Each session completes every lease of the round, in batches of three, each in its own order:
      // ascending, descending, rotated. Their batches overlap and lock the same rows and scopes.
      await Promise.all(completers.map(async (client, n) => {
        const order = n === 0 ? rows : n === 1 ? [...rows].reverse() : [...rows.slice(4), ...rows.slice(0, 4)];
        for (let i = 0; i < order.length; i += 3) {
          const batch = order.slice(i, i + 3);
          await client.query('SELECT wharf.complete_deliveries($1, $2, $3, $4, $5)', [
            batch.map((row) => row.delivery_id), batch.map((row) => row.epoch),
            batch.map(() => 200), batch.map(() => 1), batch.map(() => 'ok')]);
        }
      }));
    }
  } finally {
    await Promise.all([claimer!, ...completers].map((client) => client.end()));
  }

  // One head per scope per round: the six events of each scope took six rounds.
  expect(rounds).toBe(6);
  const { rows: done } = await db.pool.query<{ scope_key: string; in_order: boolean; handled: string; deliveries: string }>(
    `SELECT q.scope_key,
            array_agg(q.event_id ORDER BY q.handled_at, q.id) = array_agg(q.event_id ORDER BY q.event_id) AS in_order,
            sum((SELECT count(*) FROM wharf.delivery_attempt h WHERE h.delivery_id = q.id AND h.ended = 'handled')) AS handled,
            count(*) FILTER (WHERE q.state = 'DONE') AS deliveries
       FROM wharf.destination_delivery q WHERE q.destination_id = $1 GROUP BY q.scope_key`, [batched]);
  expect(done).toHaveLength(raceScopes.length);
  for (const scope of done) expect(scope, scope.scope_key).toMatchObject({ in_order: true, handled: '6', deliveries: '6' });
});
