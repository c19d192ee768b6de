import type { Lease } from './event-row.js';
import type { Queryable } from './queryable.js';

/** Gives an unfinished lease back, its attempt uncounted (wharf.release). */
export async function releaseEvent(db: Queryable, lease: Lease): Promise<boolean> {
  const { rows } = await db.query<{ released: boolean }>('SELECT wharf.release($1, $2) AS released', [
    lease.id,
    lease.epoch,
  ]);
  return rows[0]?.released === true;
}
