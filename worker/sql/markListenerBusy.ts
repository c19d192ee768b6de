import type { Queryable } from './queryable.js';

/** Admissions may stop paying for pg_notify on this host's account (wharf.mark_busy). */
export async function markListenerBusy(db: Queryable, listener: string): Promise<void> {
  await db.query('SELECT wharf.mark_busy($1)', [listener]);
}
