// The issue trigger under concurrent writers on real connections: reapers
// taking many expired leases at once (each counting into several issues in
// one statement) and hosts failing leases one by one, in the opposite key
// order, all at the same time. Nothing deadlocks, and every failed or
// expired lease is counted exactly once, per issue and per minute.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { admitEvent, createConnection, createWorkspace } from '../support/api-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

let db: TestDatabase;
const W = 1201;

beforeAll(async () => {
  db = await createTestDatabase();
  await createWorkspace(db.pool, W);
});

afterAll(async () => {
  await db?.drop();
});

it('counts every failure of concurrent reapers and failing hosts exactly once, without a deadlock', async () => {
  const connection = await createConnection(db.pool, W);
  const ids: number[] = [];
  for (let i = 0; i < 120; i += 1) ids.push(await admitEvent(db.pool, connection));
  const { rows: leases } = await db.pool.query<{ id: string; lease_epoch: string }>(
    `SELECT id, lease_epoch FROM wharf.claim('fixture', 10000) WHERE id = ANY($1) ORDER BY id`, [ids]);
  expect(leases).toHaveLength(120);
  // Half expire (the reapers' share); the other half fail with one of three classes.
  const expired = leases.filter((_, i) => i % 2 === 0);
  const failing = leases.filter((_, i) => i % 2 === 1);
  await db.pool.query(`UPDATE wharf.provider_event SET leased_until = now() - interval '1 minute' WHERE id = ANY($1)`,
    [expired.map((lease) => lease.id)]);
  const classes = ['AlphaError', 'BetaError', 'GammaError'];

  const failers = Array.from({ length: 4 }, async (_, host) => {
    const client = await db.pool.connect();
    try {
      // Each host walks the classes in its own order, so that two hosts take the issue rows in opposite orders.
      const mine = failing.filter((_, i) => i % 4 === host).reverse();
      for (const [i, lease] of mine.entries()) {
        const errorClass = classes[(i + host) % classes.length]!;
        await client.query(`SELECT wharf.fail($1, $2, 'unknown', $3)`, [lease.id, lease.lease_epoch, errorClass]);
      }
    } finally {
      client.release();
    }
  });
  const reapers = Array.from({ length: 3 }, async () => {
    const client = await db.pool.connect();
    try {
      let total = 0;
      for (let round = 0; round < 20; round += 1) total += (await client.query<{ n: number }>('SELECT wharf.reap() AS n')).rows[0]!.n;
      return total;
    } finally {
      client.release();
    }
  });
  const [reaped] = await Promise.all([Promise.all(reapers), Promise.all(failers)]);
  // A reaper passes over rows another holds: what one skipped, a later round took.
  expect(reaped.reduce((sum, n) => sum + n, 0)).toBe(expired.length);

  const { rows: issues } = await db.pool.query<{ error_class: string; failures: string }>(
    'SELECT error_class, failures FROM wharf.issue WHERE workspace_id = $1 ORDER BY error_class', [W]);
  const counted = Object.fromEntries(issues.map((row) => [row.error_class, Number(row.failures)]));
  expect(counted.LeaseExpired).toBe(expired.length);
  expect(counted.AlphaError! + counted.BetaError! + counted.GammaError!).toBe(failing.length);
  const { rows: minutes } = await db.pool.query<{ failed: string }>(
    'SELECT sum(failed) AS failed FROM wharf.failure_minute WHERE workspace_id = $1', [W]);
  expect(Number(minutes[0]!.failed)).toBe(leases.length);
});
