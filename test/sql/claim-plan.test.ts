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
import { flushStatistics } from '../support/statistics.js';
import { admitEvents } from '../support/worker-inbox.js';

const scopes = Array.from({ length: 200 }, (_, n) => `repo:plan-${n}`);
const perScope = 3;

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

/** Index entries read from ix_provider_event_scope_order (scope, id), as the statistics hold them once `client`'s are flushed. */
async function queueIndexReads(client: pg.Client): Promise<number> {
  await flushStatistics(client);
  const { rows } = await db.pool.query<{ reads: string }>(
    `SELECT idx_tup_read AS reads FROM pg_stat_user_indexes WHERE indexrelname = 'ix_provider_event_scope_order'`);
  return Number(rows[0]!.reads);
}

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
    const before = await queueIndexReads(client);
    const { rows } = await client.query(`SELECT id FROM wharf.claim('plan', 8)`);
    expect(rows).toHaveLength(8);
    const reads = (await queueIndexReads(client)) - before;
    // The claim reads a few entries per claimed scope to find its
    // next head; driving from the index read all 600 queued rows.
    expect(reads).toBeLessThan(8 * perScope * 2);
  } finally {
    await client.end();
  }
});
