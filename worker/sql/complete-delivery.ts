// wharf.complete_delivery: a 2xx answer ends the lease as DONE, recording
// the status, the duration and at most 1 KB of the answer. False when the
// lease is gone (reaped, or its destination deleted); a repeat of a
// completion whose reply was lost answers true.
import { queryPrepared, type Queryable } from './prepared-statement.js';
import type { DeliveryLease } from './delivery-row.js';

export async function completeDelivery(
  db: Queryable, lease: DeliveryLease, answer: { status: number; durationMs: number; response: string },
): Promise<boolean> {
  const rows = await queryPrepared<{ completed: boolean }>(db, 'complete_delivery',
    'SELECT wharf.complete_delivery($1, $2, $3, $4, $5) AS completed',
    [lease.id, lease.epoch, answer.status, answer.durationMs, answer.response]);
  return rows[0]?.completed === true;
}
