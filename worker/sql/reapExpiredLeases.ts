import type { Queryable } from './queryable.js';

/** Takes back every expired lease (wharf.reap); returns how many. */
export async function reapExpiredLeases(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ reaped: number }>('SELECT wharf.reap() AS reaped');
  return rows[0]?.reaped ?? 0;
}
