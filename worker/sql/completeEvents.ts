import type { Queryable } from './queryable.js';

export interface Completion {
  id: string;
  epoch: string;
  outcome: 'handled' | 'ignored';
}

/**
 * Ends several leases as DONE in one statement and one commit (wharf.complete
 * for each, in the order given); for each, false when it was no longer held.
 * Callers pass them in admission's lock order (workspace, then scope) so that
 * the scope rows the completions lock cannot form a cycle with an admission.
 */
export async function completeEvents(db: Queryable, completions: readonly Completion[]): Promise<boolean[]> {
  const { rows } = await db.query<{ completed: boolean }>(
    `SELECT wharf.complete(c.id, c.epoch, c.outcome) AS completed
       FROM unnest($1::bigint[], $2::bigint[], $3::text[]) WITH ORDINALITY AS c(id, epoch, outcome, n)
      ORDER BY c.n`,
    [completions.map((c) => c.id), completions.map((c) => c.epoch), completions.map((c) => c.outcome)],
  );
  return rows.map((row) => row.completed === true);
}
