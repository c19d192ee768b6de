import type pg from 'pg';

// Any fixed key will do, as long as nothing else in the database uses it.
const retentionLockKey = 0x77686172_66 /* "wharf" */;

export type PurgeResult =
  | { purged: true; doneDeleted: number; deadDeleted: number }
  | { purged: false };

/**
 * Runs wharf.purge() in one transaction, only when it wins the retention
 * advisory lock: concurrent hosts never purge at once. The lock ends with the
 * transaction. A failure rolls back and rethrows: the rows stay.
 */
export async function purgeExpiredEvents(client: pg.ClientBase): Promise<PurgeResult> {
  await client.query('BEGIN');
  try {
    const { rows: lock } = await client.query<{ locked: boolean }>(
      'SELECT pg_try_advisory_xact_lock($1) AS locked',
      [retentionLockKey],
    );
    if (lock[0]?.locked !== true) {
      await client.query('ROLLBACK');
      return { purged: false };
    }
    const { rows } = await client.query<{ done_deleted: string; dead_deleted: string }>(
      'SELECT done_deleted, dead_deleted FROM wharf.purge()',
    );
    await client.query('COMMIT');
    return { purged: true, doneDeleted: Number(rows[0]?.done_deleted ?? 0), deadDeleted: Number(rows[0]?.dead_deleted ?? 0) };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
}
