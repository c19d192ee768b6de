// Reading PostgreSQL's cumulative statistics (pg_stat_user_indexes,
// pg_stat_user_tables) about what one session did, from another.
import type pg from 'pg';

/**
 * Makes `client`'s counts visible to other sessions. PostgreSQL 15 flushes a
 * backend's counts when it goes idle, at most once a second unless told; the
 * flush happens at the end of the next statement.
 */
export async function flushStatistics(client: pg.ClientBase): Promise<void> {
  await client.query('SELECT pg_stat_force_next_flush()');
  await client.query('SELECT 1');
}

/** What one transaction of a session read of a table and its indexes. */
export interface OwnScans {
  /** Per index of the table: index scans, and index entries read (idx_tup_read). */
  indexes: Map<string, { scans: number; entriesRead: number }>;
  /** Sequential scans of the table. */
  sequential: number;
}

/**
 * What `work` read of `table` (e.g. 'wharf.provider_event'), counted in
 * `client`'s own pending statistics: flushed first, then `work` in one
 * transaction on `client`, read before its commit (a backend flushes only
 * between transactions). The cumulative views (pg_stat_user_indexes) would
 * also count other sessions' reads whenever those happen to be flushed.
 */
export async function readsOfOwnTransaction<T>(
  client: pg.ClientBase, table: string, work: () => Promise<T>,
): Promise<{ result: T; reads: OwnScans }> {
  await flushStatistics(client);
  await client.query('BEGIN');
  try {
    const result = await work();
    const { rows } = await client.query<{ name: string; scans: string; read: string }>(
      `SELECT c.relname AS name, pg_stat_get_xact_numscans(c.oid) AS scans, pg_stat_get_xact_tuples_returned(c.oid) AS read
         FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = $1::regclass`, [table]);
    const { rows: heap } = await client.query<{ scans: string }>(
      'SELECT pg_stat_get_xact_numscans($1::regclass) AS scans', [table]);
    await client.query('COMMIT');
    return {
      result,
      reads: {
        indexes: new Map(rows.map((row) => [row.name, { scans: Number(row.scans), entriesRead: Number(row.read) }])),
        sequential: Number(heap[0]!.scans),
      },
    };
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  }
}
