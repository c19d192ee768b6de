import type pg from 'pg';
import type { Lease } from './event-row.js';

/** Inside the handler's transaction, before commit: raises WH410/WH412/55P03 unless the lease holds (wharf.fence). */
export async function fenceEvent(tx: pg.ClientBase, lease: Lease): Promise<void> {
  await tx.query('SELECT wharf.fence($1, $2)', [lease.id, lease.epoch]);
}
