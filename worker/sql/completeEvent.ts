import type { Lease } from './event-row.js';
import type { Queryable } from './queryable.js';

/** Ends a lease as DONE with `outcome` (wharf.complete); false when it is no longer held. */
export async function completeEvent(db: Queryable, lease: Lease, outcome: 'handled' | 'ignored'): Promise<boolean> {
  const { rows } = await db.query<{ completed: boolean }>('SELECT wharf.complete($1, $2, $3) AS completed', [
    lease.id,
    lease.epoch,
    outcome,
  ]);
  return rows[0]?.completed === true;
}
