// A claim finds due heads from the scope side, whatever the statistics say.
// Autovacuum analyzes the inbox whenever enough rows changed, often while
// the queue is empty; its QUEUED partial index then looks empty, and a claim
// that let the planner drive from it read every queued row to serve a few
// heads (sql/30-claim-lease.sql). The benchmark's sustained load showed it:
// after one such analyze the drain stalled for a minute while 20,000 rows
// piled up, until the next analyze.
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { readsOfOwnTransaction } from '../support/statistics.js';
import { admitEvents, subscribedConnection, testSource } from '../support/worker-inbox.js';

const scopes = Array.from({ length: 200 }, (_, n) => `repo:plan-${n}`);
const perScope = 3;

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

async function drain(): Promise<void> {
  for (;;) {
    const { rows } = await db.pool.query<{ id: string; lease_epoch: string }>(
      `SELECT id, lease_epoch FROM wharf.claim('plan-drain', 100)`);
    if (rows.length === 0) return;
    await db.pool.query(`SELECT wharf.complete_many($1, $2, array_fill('handled'::text, ARRAY[$3::int]))`,
      [rows.map((row) => row.id), rows.map((row) => row.lease_epoch), rows.length]);
  }
}

it('claims a few heads without reading the queue, after an analyze taken while it was empty', async () => {
  await admitEvents(db.pool, scopes.map((scope) => ({ scope })));
  await drain();
  await db.pool.query('VACUUM ANALYZE wharf.provider_event');
  await db.pool.query('VACUUM ANALYZE wharf.scope');
  await admitEvents(db.pool, Array.from({ length: perScope }, () => scopes.map((scope) => ({ scope }))).flat());

  // A new session: claim's generic plan is made with the statistics above.
  const client = await db.connect();
  try {
    const { result: rows, reads: own } = await readsOfOwnTransaction(client, 'wharf.provider_event', async () =>
      (await client.query(`SELECT id FROM wharf.claim('plan', 8)`)).rows);
    expect(rows).toHaveLength(8);
    const reads = own.indexes.get('ix_provider_event_scope_order')!.entriesRead;
    // The claim reads a few entries per claimed scope to find its
    // next head; driving from the index read all 600 queued rows.
    expect(reads).toBeLessThan(8 * perScope * 2);
  } finally {
    await client.end();
  }
});

/** `count` deliveries of `provider:eventType`, each in a scope of its own, admitted set-based. */
async function admitMany(provider: string, eventType: string, count: number): Promise<void> {
  const connection = await subscribedConnection(db.pool, `${eventType}-0`, provider);
  await db.pool.query(`SELECT wharf.subscribe($1, $2 || '-' || n) FROM generate_series(1, $3::int) n`, [connection, eventType, count]);
  for (let from = 0; from < count; from += 500) {
    await db.pool.query(`
      SELECT wharf.admit_many(jsonb_agg(jsonb_build_object(
               'provider', $1::text, 'source', $2::text, 'delivery_key', $3 || '-' || n, 'event_type', $3,
               'route', jsonb_build_object('connection_id', $4::bigint), 'subjects', jsonb_build_array($3 || '-' || n),
               'payload', '{}'::jsonb, 'headers', '{}'::jsonb) ORDER BY n))
        FROM generate_series($5::int, $6::int) n`,
      [provider, testSource, eventType, connection, from, Math.min(from + 500, count) - 1]);
  }
}

/** Scope and event rows one statement of `client` fetches through indexes, from its transaction's own counts. */
async function readsOf(client: pg.Client, sql: string, params: unknown[] = []): Promise<{ rows: Array<{ id: string }>; scopeIndex: number; eventFetches: number }> {
  const count = async () => {
    const { rows } = await client.query<{ scope_index: string; event_fetches: string }>(`
      SELECT (SELECT coalesce(sum(idx_tup_fetch), 0) FROM pg_stat_xact_user_tables WHERE relname = 'scope') AS scope_index,
             (SELECT coalesce(sum(idx_tup_fetch), 0) FROM pg_stat_xact_user_tables WHERE relname = 'provider_event') AS event_fetches`);
    return { scopeIndex: Number(rows[0]!.scope_index), eventFetches: Number(rows[0]!.event_fetches) };
  };
  await client.query('BEGIN');
  try {
    const before = await count();
    const { rows } = await client.query<{ id: string }>(sql, params);
    const after = await count();
    await client.query('COMMIT');
    return { rows, scopeIndex: after.scopeIndex - before.scopeIndex, eventFetches: after.eventFetches - before.eventFetches };
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  }
}

it('a claim reads about the same whatever waits that it cannot take: unhandled kinds, paused connections', async () => {
  // 3,000 due heads of a kind this host does not handle, and 1,000 of a paused connection, each in its own scope.
  await admitMany('generic', 'unhandled', 3_000);
  await admitMany('forgejo', 'handled', 1_000);
  const { rows: paused } = await db.pool.query<{ id: string }>(
    `SELECT id FROM wharf.connection WHERE provider = 'forgejo'`);
  await db.pool.query(`SELECT wharf.set_connection_state($1, 'PAUSED')`, [paused[0]!.id]);
  const handles = ['generic:handled', 'forgejo:*'];
  const client = await db.connect();
  try {
    // The first claims meet the paused heads and park them; nothing is there to take.
    for (let n = 0; n < 100; n += 1) {
      const { rows } = await client.query(`SELECT id FROM wharf.claim('plan', 100, $1)`, [handles]);
      expect(rows).toEqual([]);
      const { rows: left } = await client.query(`SELECT count(*)::int AS n FROM wharf.scope WHERE active AND head_kind = 'forgejo:handled'`);
      if (left[0]!.n === 0) break;
    }
    const [handled] = await admitEvents(db.pool, [{ scope: 'handled-now', eventType: 'handled' }]);
    const claim = await readsOf(client, `SELECT id FROM wharf.claim('plan', 1, $1)`, [handles]);
    expect(claim.rows.map((row) => row.id)).toEqual([handled]);
    // A few rows per kind, not the 4,000 heads it passes over.
    expect(claim.scopeIndex).toBeLessThan(20);
    expect(claim.eventFetches).toBeLessThan(20);
    const stats = await readsOf(client, 'SELECT 1 AS id FROM wharf.queue_stats()');
    expect(stats.scopeIndex).toBeLessThan(40);

    // The paused connection resumes: its rows are claimable again, in their order.
    await db.pool.query(`SELECT wharf.set_connection_state($1, 'ACTIVE')`, [paused[0]!.id]);
    const { rows: resumed } = await client.query<{ id: string }>(`SELECT id FROM wharf.claim('plan', 2000, $1)`, [handles]);
    expect(resumed).toHaveLength(1_000);
  } finally {
    await client.end();
  }
});
