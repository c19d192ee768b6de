import type pg from 'pg';
import type { Lease } from './event-row.js';

/**
 * Inside the handler's transaction: fences the lease and records the step
 * (wharf.step). False: it committed earlier, skip its writes.
 */
export async function claimStep(tx: pg.ClientBase, lease: Lease, stepName: string): Promise<boolean> {
  const { rows } = await tx.query<{ run: boolean }>('SELECT wharf.step($1, $2, $3) AS run', [
    lease.id,
    lease.epoch,
    stepName,
  ]);
  return rows[0]?.run === true;
}
