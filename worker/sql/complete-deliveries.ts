// wharf.complete_deliveries: 2xx answers end their leases as DONE, each
// recording its status, duration and at most 1 KB of the answer, in one
// statement for the deliveries that finished together. Per delivery, in
// the order given: false when its lease is gone (reaped, or its destination
// deleted); a repeat of a completion whose reply was lost answers true.
import { queryPrepared, type Queryable } from './prepared-statement.js';

export interface DeliveryCompletion {
  id: string;
  epoch: string;
  status: number;
  durationMs: number;
  response: string;
}

export async function completeDeliveries(db: Queryable, completions: readonly DeliveryCompletion[]): Promise<boolean[]> {
  const rows = await queryPrepared<{ completed: boolean[] }>(db, 'complete_deliveries',
    'SELECT wharf.complete_deliveries($1, $2, $3, $4, $5) AS completed', [
      completions.map((c) => c.id),
      completions.map((c) => c.epoch),
      completions.map((c) => c.status),
      completions.map((c) => c.durationMs),
      completions.map((c) => c.response),
    ]);
  return rows[0]?.completed ?? [];
}
