// wharf.fail_delivery: a failed attempt, recorded with its class (a class
// name, never a message), status, duration and at most 1 KB of the answer.
// The delivery's new state ('QUEUED' for a retry or a 410, 'DEAD'); null when
// the lease is gone. A Retry-After is passed as an interval, which the
// database honours up to max_delay.
import { queryPrepared, type Queryable } from './prepared-statement.js';
import type { DeliveryLease } from './delivery-row.js';

export interface DeliveryFailure {
  kind: 'transient' | 'permanent' | 'gone';
  errorClass: string;
  status: number | null;
  durationMs: number;
  response: string | null;
  retryAfterMs: number | null;
}

export async function failDelivery(db: Queryable, lease: DeliveryLease, failure: DeliveryFailure): Promise<string | null> {
  const rows = await queryPrepared<{ state: string | null }>(db, 'fail_delivery',
    "SELECT wharf.fail_delivery($1, $2, $3, $4, $5, $6, $7, $8 * interval '1 millisecond') AS state",
    [lease.id, lease.epoch, failure.kind, failure.errorClass, failure.status, failure.durationMs, failure.response,
      failure.retryAfterMs]);
  return rows[0]?.state ?? null;
}
