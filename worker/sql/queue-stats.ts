import type { Database } from '../../db/database.js';

export interface QueueStats {
  depthByState: Record<string, number>;
  /** Seconds since the oldest claimable head became due; 0 when none is. */
  oldestDueAge: number;
}

/** Queue depth by state and the age of the oldest due scope head. */
export async function readQueueStats(db: Database): Promise<QueueStats> {
  const { rows } = await db.query<{ depth: Record<string, number>; oldest_due_age: number }>(`
    SELECT (SELECT coalesce(jsonb_object_agg(state, n), '{}')
              FROM (SELECT state, count(*) AS n FROM wharf.provider_event GROUP BY state) s) AS depth,
           coalesce((SELECT extract(epoch FROM clock_timestamp() - min(head_due_at))::float8
                       FROM wharf.scope
                      WHERE head_id IS NOT NULL AND leased_id IS NULL AND active
                        AND head_due_at <= clock_timestamp()), 0) AS oldest_due_age`);
  return { depthByState: rows[0]?.depth ?? {}, oldestDueAge: rows[0]?.oldest_due_age ?? 0 };
}
