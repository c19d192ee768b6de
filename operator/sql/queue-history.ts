// The call of wharf.queue_history: the console's charts, computed from the
// inbox itself.
import type { Database } from '../../db/database.js';
import { callWharf } from './call-wharf.js';

/** One minute of a workspace's inbox. */
export interface QueueMinute {
  /** Start of the minute (ISO). */
  at: string;
  /** Events received in that minute. */
  admitted: number;
  /** Events that became DONE in that minute. */
  handled: number;
  /** The attempts those events took, all told: attempts / handled is the attempts per handled event. */
  attempts: number;
  /** Events that became DEAD in that minute. */
  dead: number;
  /** Events received by the minute's end and neither DONE nor DEAD then. */
  depth: number;
  /** Age in seconds, at the minute's end, of the oldest such event (0 when none). */
  oldest_age_seconds: number;
}

/** The last `hours` hours (1–24) of workspace `workspaceId`, a row per minute, oldest first. */
export function queueHistory(db: Database, workspaceId: string, hours: number): Promise<QueueMinute[]> {
  return callWharf(db, 'wharf.queue_history($1, $2)', [workspaceId, hours]);
}
