// Claim, renew and complete write no column that an index of the inbox
// names, so their row versions stay on their page and no index gets an
// entry (contract v4; sql/20-scope-heads.sql). An index added later on state,
// handled_at or a lease column would make every one of them a full update
// again: this drain fails then.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { flushStatistics } from '../support/statistics.js';
import { admitEvents } from '../support/worker-inbox.js';

const scopes = 60;
const perScope = 50;

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

interface Lease {
  id: string;
  lease_epoch: string;
}

/**
 * Claims and completes until nothing is left, as a worker host does; renews
 * every tenth batch (a host renews every 30 s, most events never).
 */
async function drain(worker: string): Promise<number> {
  const client = await db.connect();
  let handled = 0;
  try {
    for (let batch = 0; ; batch += 1) {
      const { rows } = await client.query<Lease>(`SELECT id, lease_epoch FROM wharf.claim($1, 10)`, [worker]);
      if (rows.length === 0) return handled;
      const ids = rows.map((row) => row.id);
      const epochs = rows.map((row) => row.lease_epoch);
      if (batch % 10 === 0) {
        await client.query('SELECT wharf.renew(l.id, l.epoch) FROM unnest($1::bigint[], $2::bigint[]) AS l(id, epoch)', [ids, epochs]);
      }
      const { rows: done } = await client.query(
        `SELECT id FROM wharf.complete_many($1, $2, array_fill('handled'::text, ARRAY[$3::int])) AS id`,
        [ids, epochs, rows.length]);
      handled += done.length;
    }
  } finally {
    await flushStatistics(client);
    await client.end();
  }
}

it('drains with at least 90 % of the inbox updates heap-only', async () => {
  // The state under test, pinned: one claimer, and no autovacuum or
  // autoanalyze of any inbox table meanwhile (an analyze of the scope table
  // holds a snapshot). Either keeps the versions an update leaves from being
  // pruned while it lasts, so that how many of the next updates find room on
  // their page would depend on what else runs. (Claimers racing over one
  // page are the benchmark's: bench/ prints the HOT share of its drains.)
  await db.pool.query(`DO $$ DECLARE t regclass; BEGIN
    FOR t IN SELECT c.oid FROM pg_class c WHERE c.relnamespace = 'wharf'::regnamespace AND c.relkind = 'r' LOOP
      EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = false)', t);
    END LOOP; END $$`);
  const events = Array.from({ length: perScope }, () =>
    Array.from({ length: scopes }, (_, n) => ({ scope: `repo:hot-${n}` }))).flat();
  await admitEvents(db.pool, events);
  const stats = async () => {
    const { rows } = await db.pool.query<{ updates: string; hot: string }>(
      `SELECT n_tup_upd AS updates, n_tup_hot_upd AS hot FROM pg_stat_user_tables
        WHERE schemaname = 'wharf' AND relname = 'provider_event'`);
    return { updates: Number(rows[0]!.updates), hot: Number(rows[0]!.hot) };
  };
  const before = await stats();

  expect(await drain('hot')).toBe(events.length);

  const after = await stats();
  const updates = after.updates - before.updates;
  const hot = after.hot - before.hot;
  // A claim and a completion per event, and some renewals.
  expect(updates).toBeGreaterThan(events.length * 2);
  expect(hot / updates).toBeGreaterThanOrEqual(0.9);
});
