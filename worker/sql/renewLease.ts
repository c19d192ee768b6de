import type { Lease } from './event-row.js';
import type { Queryable } from './queryable.js';

/** Extends a lease (wharf.renew); false when it is no longer held. */
export async function renewLease(db: Queryable, lease: Lease): Promise<boolean> {
  const { rows } = await db.query<{ renewed: boolean }>('SELECT wharf.renew($1, $2) AS renewed', [
    lease.id,
    lease.epoch,
  ]);
  return rows[0]?.renewed === true;
}
