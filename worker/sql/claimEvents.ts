import type { ProviderEventRow } from './event-row.js';
import type { Queryable } from './queryable.js';

/** Leases up to `max` due scope heads for `worker` (wharf.claim). */
export async function claimEvents(db: Queryable, worker: string, max: number): Promise<ProviderEventRow[]> {
  const { rows } = await db.query<ProviderEventRow>('SELECT * FROM wharf.claim($1, $2)', [worker, max]);
  return rows;
}
