import type { FailureKind } from '../classify.js';
import type { Lease } from './event-row.js';
import type { Database } from '../../db/database.js';

/**
 * Records a failed attempt (wharf.fail) with a class name and where it was
 * thrown in the application's code (worker/sanitize.ts appFrames), never a
 * message. Returns the row's new state, or null when the lease is no longer held.
 */
export async function failEvent(
  db: Database,
  lease: Lease,
  kind: FailureKind,
  errorClass: string,
  frames: readonly string[] = [],
): Promise<'QUEUED' | 'DEAD' | null> {
  const { rows } = await db.query<{ state: 'QUEUED' | 'DEAD' | null }>(
    'SELECT wharf.fail($1, $2, $3, $4, $5) AS state',
    [lease.id, lease.epoch, kind, errorClass, frames],
  );
  return rows[0]?.state ?? null;
}
