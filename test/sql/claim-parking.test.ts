// A claim parks the scopes whose head's connection is PAUSED (sql/30), a
// statement that looks every candidate up again by key. It runs only while
// some connection is PAUSED (ix_connection_paused): on an inbox with none,
// which is nearly always, a claim looks up only the heads it takes.
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { readsOfOwnTransaction } from '../support/statistics.js';
import { admitEvents } from '../support/worker-inbox.js';

let db: TestDatabase;
let client: pg.Client;
beforeAll(async () => {
  db = await createTestDatabase();
  // Every third head is a Forgejo connection's, the others a generic one's.
  await admitEvents(db.pool, Array.from({ length: 60 }, (_, n) => ({
    scope: `repo:park-${String(n).padStart(2, '0')}`, provider: n % 3 === 0 ? 'forgejo' : 'generic',
  })));
  client = await db.connect();
});
afterAll(async () => {
  await client?.end();
  await db?.drop();
});

/**
 * Claims `max` heads in a transaction of its own; what it read of
 * wharf.scope's primary key. Vacuumed first: every scope row updated by an
 * admission or a claim leaves a dead version whose index entry a lookup
 * reads until an index scan or a vacuum disposes of it, and autovacuum's
 * timing must not decide the count (no other session of this database
 * holds a snapshot, so the vacuum removes them all).
 */
async function claimCountingScopeLookups(max: number): Promise<{ claimed: string[]; scopeLookups: number }> {
  await db.pool.query('VACUUM wharf.scope, wharf.provider_event');
  const { result, reads } = await readsOfOwnTransaction(client, 'wharf.scope', async () =>
    (await client.query<{ scope_key: string }>(`SELECT scope_key FROM wharf.claim('parking', $1)`, [max])).rows);
  return { claimed: result.map((row) => row.scope_key), scopeLookups: reads.indexes.get('scope_pkey')!.entriesRead };
}

it('looks up only the heads it takes when no connection is paused', async () => {
  const { claimed, scopeLookups } = await claimCountingScopeLookups(8);
  expect(claimed).toHaveLength(8);
  // Once to lock it and once in the update that leads its scope on. With the
  // parking statement run as well (a connection elsewhere paused, nothing
  // here to park) the same claim reads 40: every one of the 24 candidates
  // (8 + the window of 16) looked up again.
  expect(scopeLookups).toBeLessThanOrEqual(2 * 8);
});

it('parks the candidates of a paused connection, and claims past them', async () => {
  const { rows: heads } = await db.pool.query<{ scope_key: string; connection_id: string }>(`
    SELECT s.scope_key, e.connection_id FROM wharf.scope s JOIN wharf.provider_event e ON e.id = s.head_id
     WHERE s.leased_id IS NULL AND s.active ORDER BY s.ready_at, s.head_id LIMIT 1`);
  const first = heads[0]!;
  await db.pool.query(`SELECT wharf.set_connection_state($1, 'PAUSED')`, [first.connection_id]);

  const { claimed } = await claimCountingScopeLookups(8);
  expect(claimed).toHaveLength(8);
  expect(claimed).not.toContain(first.scope_key);
  const { rows: parked } = await db.pool.query<{ active: boolean }>(
    'SELECT active FROM wharf.scope WHERE scope_key = $1', [first.scope_key]);
  expect(parked[0]!.active).toBe(false);
});
