import type pg from 'pg';

/**
 * Tells admissions to notify (wharf.mark_idle). Runs on the LISTEN connection
 * itself: the row names its backend, and the reaper forgets it when that
 * session ends. It waits for admissions in flight, so a claim made after it
 * sees their rows.
 */
export async function markListenerIdle(listenerConnection: pg.ClientBase, listener: string): Promise<void> {
  await listenerConnection.query('SELECT wharf.mark_idle($1)', [listener]);
}
