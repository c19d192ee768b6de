import type pg from 'pg';

// Any fixed key will do, as long as nothing else in the database uses it.
const retentionLockKey = 0x77686172_66 /* "wharf" */;

export type PurgeResult =
  | { purged: true; doneDeleted: number; deadDeleted: number; logsDeleted: number }
  | { purged: false };

/**
 * Runs one batch of retention, wharf.purge() and wharf.purge_logs(), in one
 * short transaction, only when it wins the retention advisory lock:
 * concurrent hosts never purge at once. The lock ends with the transaction.
 * A failure rolls back and rethrows: the rows stay.
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
    const { rows } = await client.query<{ done_deleted: string; dead_deleted: string; logs_deleted: string }>(
      'SELECT p.done_deleted, p.dead_deleted, wharf.purge_logs() AS logs_deleted FROM wharf.purge() p',
    );
    await client.query('COMMIT');
    return {
      purged: true,
      doneDeleted: Number(rows[0]?.done_deleted ?? 0),
      deadDeleted: Number(rows[0]?.dead_deleted ?? 0),
      logsDeleted: Number(rows[0]?.logs_deleted ?? 0),
    };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
}
