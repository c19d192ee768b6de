// Admission reads a delivery's recipients by its subjects, whatever the
// statistics say (sql/80-admission.sql, admission_snapshot). Planned without
// statistics, as a new database or a server with autovacuum off has it, the
// read walked every subscription of the installation's connection, twice per
// delivery: a GitHub App installation with a thousand repositories paid for
// a thousand index entries to find one.
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { flushStatistics } from '../support/statistics.js';

const source = 'https://github.com';
const repositories = 1_000;
const otherInstallations = 50;
const deliveries = 30;

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
  await db.pool.query('SELECT wharf.upsert_workspace(1)');
  await db.pool.query(`SELECT wharf.upsert_connection(1, 'github', $1, 'app_installation', '1')`, [source]);
  await db.pool.query(
    `SELECT count(wharf.subscribe(c.id, 'repo:acme/r' || k))
       FROM wharf.connection c, generate_series(1, $1::int) k WHERE c.external_id = '1'`, [repositories]);
  // Other workspaces' installations on the same source: recipients are found
  // by subject, not by walking every connection of github.com.
  await db.pool.query(
    `SELECT count(wharf.subscribe(wharf.upsert_connection(wharf.upsert_workspace(100 + k), 'github', $1,
                                                          'app_installation', 'other-' || k), 'repo:other/r' || k))
       FROM generate_series(1, $2::int) k`, [source, otherInstallations]);
});
afterAll(async () => {
  await db?.drop();
});

/** Index entries read from the indexes of `table`, as the statistics hold them once `client`'s are flushed. */
async function indexReads(client: pg.Client, table: string): Promise<number> {
  await flushStatistics(client);
  const { rows } = await db.pool.query<{ reads: string }>(
    `SELECT coalesce(sum(idx_tup_read), 0) AS reads FROM pg_stat_user_indexes WHERE schemaname = 'wharf' AND relname = $1`,
    [table]);
  return Number(rows[0]!.reads);
}

/** Admits `deliveries` pushes on one session (past the five calls after which PL/pgSQL caches a generic plan). */
async function admitPushes(label: string): Promise<{ subscriptionReads: number; connectionReads: number }> {
  const client = await db.connect();
  try {
    const subscriptionsBefore = await indexReads(client, 'subscription');
    const connectionsBefore = await indexReads(client, 'connection');
    for (let n = 0; n < deliveries; n += 1) {
      const subject = `repo:acme/r${1 + ((n * 37) % repositories)}`;
      const { rows } = await client.query<{ receipt: { events: { outcome: string }[]; dropped: string | null } }>(
        `SELECT wharf.admit('github', $1, $2, 'push', '{"installation_id": "1"}', ARRAY[$3], '{"ref": "main"}', '{}') AS receipt`,
        [source, `${label}-${n}`, subject]);
      expect(rows[0]!.receipt.events.map((event) => event.outcome)).toEqual(['stored']);
    }
    return {
      subscriptionReads: (await indexReads(client, 'subscription')) - subscriptionsBefore,
      connectionReads: (await indexReads(client, 'connection')) - connectionsBefore,
    };
  } finally {
    await client.end();
  }
}

// Two reads per delivery, each one subject's subscriptions and one connection
// of each subscriber: a few entries each, never the installation's thousand.
const bound = deliveries * 2 * 4;

it('reads only the routed subjects\' subscriptions before the tables were ever analyzed', async () => {
  const { rows } = await db.pool.query<{ analyzed: boolean }>(
    `SELECT bool_or(last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL) AS analyzed
       FROM pg_stat_user_tables WHERE schemaname = 'wharf' AND relname IN ('subscription', 'connection')`);
  expect(rows[0]!.analyzed).toBe(false);
  const reads = await admitPushes('unanalyzed');
  expect(reads.subscriptionReads).toBeGreaterThan(0);
  expect(reads.subscriptionReads).toBeLessThanOrEqual(bound);
  expect(reads.connectionReads).toBeLessThanOrEqual(bound);
});

it('reads only the routed subjects\' subscriptions once the tables are analyzed', async () => {
  await db.pool.query('ANALYZE wharf.subscription, wharf.connection, wharf.workspace');
  const reads = await admitPushes('analyzed');
  expect(reads.subscriptionReads).toBeGreaterThan(0);
  expect(reads.subscriptionReads).toBeLessThanOrEqual(bound);
  expect(reads.connectionReads).toBeLessThanOrEqual(bound);
});
