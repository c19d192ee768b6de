// The calls of sql/62-bulk-replay.sql: replaying every DEAD event of a
// workspace that matches a filter, one bounded batch per transaction.
import type { Database } from '../../db/database.js';
import { callWharf } from './call-wharf.js';

/**
 * Which DEAD events a bulk replay takes; every field narrows, none means all.
 * Named as wharf.bulk_replay stores it and the API takes it.
 */
export interface BulkReplayFilter {
  provider?: string;
  event_type?: string;
  subject?: string;
  error_class?: string;
  /** ISO timestamps: dead at or after, and strictly before. */
  dead_after?: string;
  dead_before?: string;
  /** ISO timestamps: received at or after, and strictly before. */
  received_after?: string;
  received_before?: string;
  /** JSON objects the payload and the stored headers must contain (jsonb @>). */
  payload?: Record<string, unknown>;
  headers?: Record<string, unknown>;
}

export interface BulkReplay {
  id: number;
  workspace_id: number;
  /** The filter as stored: times in UTC. */
  filter: BulkReplayFilter;
  force: boolean;
  requested_by: string;
  /** cancelled: stopped by cancelled_by at cancelled_at; what it replayed before stays replayed. */
  state: 'running' | 'finished' | 'cancelled';
  /** DEAD events that matched when it started: the progress bar's 100 %. */
  matched: number;
  replayed: number;
  /** Matched rows it passed over: replayed or purged meanwhile, or uncertain without force. */
  skipped: number;
  started_at: string;
  updated_at: string;
  finished_at: string | null;
  cancelled_by: string | null;
  cancelled_at: string | null;
}

/** Records a bulk replay (wharf.start_bulk_replay); nothing is replayed yet. */
export function startBulkReplay(
  db: Database, workspaceId: string, filter: BulkReplayFilter, account: string, force = false,
): Promise<BulkReplay> {
  return callWharf(db, 'wharf.start_bulk_replay($1, $2, $3, $4)',
    [workspaceId, JSON.stringify(filter), account, force]);
}

/**
 * Replays the next batch of at most batchSize events in id order, in one
 * transaction (wharf.continue_bulk_replay); the bulk replay as it is after.
 * Null, replaying nothing, while another caller runs a batch of it or
 * cancels it.
 */
export function continueBulkReplay(
  db: Database, workspaceId: string, id: string, batchSize: number,
): Promise<BulkReplay | null> {
  return callWharf(db, 'wharf.continue_bulk_replay($1, $2, $3)', [workspaceId, id, batchSize]);
}

/** How many DEAD events a bulk replay with this filter would take now (wharf.count_bulk_replay); replays nothing. */
export async function countBulkReplay(db: Database, workspaceId: string, filter: BulkReplayFilter, force = false): Promise<number> {
  return Number(await callWharf<string>(db, 'wharf.count_bulk_replay($1, $2, $3)', [workspaceId, JSON.stringify(filter), force]));
}

/**
 * Cancels a running bulk replay as `account` (wharf.cancel_bulk_replay): no
 * batch replays anything after the one running now, which it waits for.
 * `cancelled` is true whenever it was running when asked, false when it had
 * finished, or was cancelled, before. A 404 when the workspace has no such
 * bulk replay.
 */
export function cancelBulkReplay(
  db: Database, workspaceId: string, id: string, account: string,
): Promise<BulkReplay & { cancelled: boolean }> {
  return callWharf(db, 'wharf.cancel_bulk_replay($1, $2, $3)', [workspaceId, id, account]);
}

export function showBulkReplay(db: Database, workspaceId: string, id: string): Promise<BulkReplay | null> {
  return callWharf(db, 'wharf.show_bulk_replay($1, $2)', [workspaceId, id]);
}

/** The workspace's bulk replays, newest first (at most 50). */
export function listBulkReplays(db: Database, workspaceId: string): Promise<BulkReplay[]> {
  return callWharf(db, 'wharf.list_bulk_replays($1)', [workspaceId]);
}
