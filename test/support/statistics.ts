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
