import type pg from 'pg';

/**
 * Tells admissions to notify (wharf.mark_idle). Runs on the LISTEN connection
 * itself: the row names its backend, and the reaper forgets it when that
 * session ends. False while an admission is in flight: claim, then try again.
 * Once true, a claim made after it sees every row admitted before.
 */
export async function markListenerIdle(listenerConnection: pg.ClientBase, listener: string): Promise<boolean> {
  const { rows } = await listenerConnection.query<{ marked: boolean }>('SELECT wharf.mark_idle($1) AS marked', [listener]);
  return rows[0]?.marked === true;
}
