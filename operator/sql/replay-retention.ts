// The calls of sql/60-replay-retention.sql an operator makes: replay.
import type { Database } from '../../db/database.js';
import { callWharf } from './call-wharf.js';
import { isInstallation, showEvent, type EventDetail, type EventOwner } from './operator.js';

export type ReplayResult =
  | { replayed: true; event: EventDetail }
  | { replayed: false; reason: 'not_found' }
  | { replayed: false; reason: 'not_replayable'; state: string }
  | { replayed: false; reason: 'uncertain_outcome' };

/**
 * Sends a DEAD event back to the queue (wharf.replay, or for installation
 * rows wharf.replay_installation, which also writes replay_audit). When the
 * function refuses, the row as it is now says why. The row shown is read
 * after the replay commits, and the replay wakes idle workers: a worker may
 * already hold it (LEASED, attempt 1) or even have finished it.
 */
export async function replayEvent(
  db: Database, owner: EventOwner, id: string, account: string, force: boolean,
): Promise<ReplayResult> {
  const replayed = isInstallation(owner)
    ? await callWharf<boolean>(db, 'wharf.replay_installation($1, $2, $3)', [id, account, force])
    : await callWharf<boolean>(db, 'wharf.replay($1, $2, $3, $4)', [owner.workspaceId, id, account, force]);
  const event = await showEvent(db, owner, id);
  if (!event) return { replayed: false, reason: 'not_found' };
  if (replayed) return { replayed: true, event };
  if (event.state === 'DEAD' && event.outcome === 'uncertain' && !force) {
    return { replayed: false, reason: 'uncertain_outcome' };
  }
  return { replayed: false, reason: 'not_replayable', state: event.state };
}
