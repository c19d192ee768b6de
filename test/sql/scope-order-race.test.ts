// Within a scope ids commit in order and a claim never passes over a row still
// being inserted (docs/sql.md, "Why claims stay fast"): several sessions admit
// into the same few scopes at once, each holding its admission's transaction
// open a little after wharf.admit returned (the window in which a row has its
// id but is not committed), while claimers claim and complete. Then, per
// scope, the order the rows were claimed in is their id order, and every row
// was claimed once.
//
// Half the admitters call wharf.admit (one delivery), half wharf.admit_many
// (two deliveries, often of two scopes), the Node receiver's batches.
//
// Able to fail: with admit_many's scope lock taken out (sql/80-admission.sql,
// admit_items' `ON CONFLICT (scope_key) DO UPDATE SET active = s.active WHERE
// false` made `DO NOTHING`, applied over the test database in beforeAll), a
// later id of a scope commits while an earlier one is still open, the
// claimers take it or leave the earlier one stranded, and this test fails
// naming the scope and both orders. (admit's own lock, wharf.lock_scope, is
// backed by the scope trigger's row lock a moment later, so removing it alone
// leaves a window too narrow for this test to hit.)
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { fileSeed, Rng } from '../support/random.js';
import { admitEvent, subscribedConnection, testSource } from '../support/worker-inbox.js';

const scopeCount = 6;
const admitters = 4;
const admissionsEach = 60;
const claimers = 3;
/** The longest an admitter holds its transaction open after wharf.admit (ms). */
const holdOpenMs = 4;

/** Which scope each admission goes to and how long it holds: printed on failure, WHARF_TEST_SEED replays them. */
const seed = fileSeed(import.meta.url);

let db: TestDatabase;
let connectionId: string;
const subjects = Array.from({ length: scopeCount }, (_, n) => `repo:acme/order-${n}`);

beforeAll(async () => {
  db = await createTestDatabase();
  for (const subject of subjects) connectionId = await subscribedConnection(db.pool, subject);
});

afterAll(async () => {
  await db?.drop();
});

interface Claimed {
  id: string;
  lease_epoch: string;
  scope_key: string;
}

it('per scope, rows admitted from several sessions while claimers run are claimed in id order, none passed over', async () => {
  const sessions = await Promise.all(Array.from({ length: admitters + claimers }, () => db.connect()));
  const admitting = sessions.slice(0, admitters);
  const claiming = sessions.slice(admitters);
  /** Per scope, the ids in the order they were claimed: a scope's next row is claimable only after its last one completed, so recording at the claim keeps that order. */
  const claimedOrder = new Map<string, string[]>();
  let admissionsOpen = admitters;
  let claimsWhileAdmitting = 0;

  /** Two deliveries in one wharf.admit_many call (the Node receiver's batches): its scopes are locked in (workspace, scope) order. */
  let batches = 0;
  const admitTwo = async (client: pg.Client, first: string, second: string): Promise<void> => {
    batches += 1;
    const deliveries = [first, second].map((subject, n) => ({
      provider: 'generic', source: testSource, delivery_key: `order-batch-${batches}-${n}`, event_type: 'ordered',
      route: { connection_id: Number(connectionId) }, subjects: [subject], payload: {}, headers: {},
    }));
    const { rows } = await client.query<{ receipts: { events?: unknown[] }[] }>('SELECT wharf.admit_many($1) AS receipts', [JSON.stringify(deliveries)]);
    expect(rows[0]!.receipts.map((receipt) => receipt.events?.length)).toEqual([1, 1]);
  };

  /** Admitter `many` admits through wharf.admit_many, two deliveries a call; the others through wharf.admit. */
  const admit = async (client: pg.Client, random: Rng, many: boolean): Promise<void> => {
    try {
      for (let n = 0; n < admissionsEach; n += 1) {
        const subject = random.pick(subjects);
        await client.query('BEGIN');
        if (many) await admitTwo(client, subject, random.pick(subjects));
        else await admitEvent(client, connectionId, subject, 'ordered');
        // The id is taken and the row not yet committed: a claim must not pass over it.
        await client.query('SELECT pg_sleep($1)', [random.int(0, holdOpenMs) / 1000]);
        await client.query('COMMIT');
      }
    } finally {
      admissionsOpen -= 1;
    }
  };

  const claim = async (client: pg.Client, worker: string): Promise<void> => {
    let strandedChecks = 0;
    for (;;) {
      const stillAdmitting = admissionsOpen > 0;
      const { rows } = await client.query<Claimed>('SELECT id, lease_epoch, scope_key FROM wharf.claim($1, 4)', [worker]);
      for (const row of rows) {
        if (stillAdmitting) claimsWhileAdmitting += 1;
        const order = claimedOrder.get(row.scope_key) ?? [];
        order.push(row.id);
        claimedOrder.set(row.scope_key, order);
        const { rows: completed } = await client.query<{ ok: boolean }>('SELECT wharf.complete($1, $2) AS ok', [row.id, row.lease_epoch]);
        expect(completed[0]?.ok, `complete of a held lease (${row.id})`).toBe(true);
      }
      if (rows.length > 0) {
        strandedChecks = 0;
        continue;
      }
      if (!stillAdmitting) {
        const { rows: open } = await client.query<{ queued: number; leased: number }>(
          `SELECT count(*) FILTER (WHERE state = 'QUEUED')::int AS queued, count(*) FILTER (WHERE state = 'LEASED')::int AS leased
             FROM wharf.provider_event`);
        if (open[0]!.queued + open[0]!.leased === 0) return;
        // Queued rows, none leased, and claims find nothing (no row waits for
        // a retry here): those rows were passed over for good. Stop; the
        // order check below names them.
        strandedChecks = open[0]!.leased === 0 ? strandedChecks + 1 : 0;
        if (strandedChecks >= 3) return;
      }
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
  };

  try {
    await Promise.all([
      ...claiming.map((client, n) => claim(client, `order-claimer-${n}`)),
      ...admitting.map((client, n) => admit(client, Rng.for(seed, 1, n), n % 2 === 1)),
    ]);
  } finally {
    await Promise.all(sessions.map((session) => session.end()));
  }

  const { rows: stored } = await db.pool.query<{ scope_key: string; ids: string[]; states: string[] }>(
    `SELECT scope_key, array_agg(id::text ORDER BY id) AS ids, array_agg(DISTINCT state) AS states
       FROM wharf.provider_event GROUP BY scope_key ORDER BY scope_key`);
  expect(stored).toHaveLength(scopeCount);
  expect(stored.reduce((sum, scope) => sum + scope.ids.length, 0)).toBe(admitters * admissionsEach + batches);
  // The race was run: claims happened while admissions were still arriving.
  expect(claimsWhileAdmitting).toBeGreaterThan(0);
  for (const scope of stored) {
    expect(claimedOrder.get(scope.scope_key), `scope ${scope.scope_key}: claimed order is id order, each row once`).toEqual(scope.ids);
    expect(scope.states, `scope ${scope.scope_key}: every row completed`).toEqual(['DONE']);
  }
});
