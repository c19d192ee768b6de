// The calls of sql/50-steps-fences.sql, made inside a handler's business
// transaction: a step record and the fence that proves the lease.
import type pg from 'pg';
import type { LeaseWithToken } from './event-row.js';

/**
 * Fences the lease and records the step (wharf.step, under the lease's
 * token). False: it committed earlier, skip its writes.
 */
export async function claimStep(tx: pg.ClientBase, lease: LeaseWithToken, stepName: string): Promise<boolean> {
  const { rows } = await tx.query<{ run: boolean }>('SELECT wharf.step($1, $2, $3, $4) AS run', [
    lease.id,
    lease.epoch,
    stepName,
    lease.token,
  ]);
  return rows[0]?.run === true;
}

/** Before commit: raises WH410/WH412/55P03 unless the lease holds (wharf.fence, under its token). */
export async function fenceEvent(tx: pg.ClientBase, lease: LeaseWithToken): Promise<void> {
  await tx.query('SELECT wharf.fence($1, $2, $3)', [lease.id, lease.epoch, lease.token]);
}
