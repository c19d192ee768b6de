// The calls of sql/98-stuck-scopes.sql: scopes held behind a head that has
// waited too long, and the audited actions that unblock them.
import type { Database } from '../../db/database.js';
import { callWharf } from './call-wharf.js';
import type { Connection, EventSummary } from './operator.js';

/** Why a stuck scope's head has not run. */
export type StuckReason = 'leased' | 'failing' | 'waiting';

export interface StuckScope {
  scope_key: string;
  subject: string | null;
  reason: StuckReason;
  /** When its head arrived, or was last replayed. */
  waiting_since: string;
  waiting_seconds: number;
  /** QUEUED events after the head, counted up to 10000. */
  behind: number;
  behind_capped: boolean;
  head: EventSummary & { leased_by: string | null; leased_until: string | null; dead_letter_pending: boolean };
  connection: { id: number | null; state: Connection['state'] | null };
}

export const scopeActions = ['retry_head', 'dead_letter_head', 'pause_connection'] as const;
export type ScopeActionName = (typeof scopeActions)[number];

/** One recorded action on a scope. */
export interface ScopeAction {
  id: number;
  scope_key: string;
  event_id: number | null;
  connection_id: number | null;
  action: ScopeActionName;
  account: string;
  at: string;
  /** A move to the dead letters that waited for the lease running then. */
  after_lease: boolean;
}

/**
 * What an action on a head did: done (after_lease: a move to the dead letters
 * that waits for the lease a handler holds now), or refused because the head
 * is leased (a retry) or no longer the head.
 */
export interface HeadActionResult {
  done: boolean;
  reason: 'leased' | 'not_head' | null;
  after_lease?: boolean;
  event: EventSummary;
}

/** The workspace's stuck scopes, oldest head first; `olderThanSeconds` defaults to the setting stuck_after. */
export function listStuckScopes(
  db: Database, workspaceId: string, filter: { olderThanSeconds?: number; limit: number },
): Promise<StuckScope[]> {
  return callWharf(db, "wharf.list_stuck_scopes($1, $2 * interval '1 second', $3)",
    [workspaceId, filter.olderThanSeconds ?? null, filter.limit]);
}

/** Retries the scope's head now (wharf.retry_scope_head). */
export function retryScopeHead(
  db: Database, workspaceId: string, scopeKey: string, eventId: string, account: string,
): Promise<HeadActionResult> {
  return callWharf(db, 'wharf.retry_scope_head($1, $2, $3, $4)', [workspaceId, scopeKey, eventId, account]);
}

/** Moves the scope's head to the dead letters so that its successors run (wharf.dead_letter_scope_head). */
export function deadLetterScopeHead(
  db: Database, workspaceId: string, scopeKey: string, eventId: string, account: string,
): Promise<HeadActionResult> {
  return callWharf(db, 'wharf.dead_letter_scope_head($1, $2, $3, $4)', [workspaceId, scopeKey, eventId, account]);
}

/** Pauses the connection that admitted the scope's head; the connection after. */
export function pauseScopeConnection(
  db: Database, workspaceId: string, scopeKey: string, eventId: string, account: string,
): Promise<Connection> {
  return callWharf(db, 'wharf.pause_scope_connection($1, $2, $3, $4)', [workspaceId, scopeKey, eventId, account]);
}

/** The workspace's newest scope actions. */
export function listScopeActions(db: Database, workspaceId: string, limit: number): Promise<ScopeAction[]> {
  return callWharf(db, 'wharf.list_scope_actions($1, $2)', [workspaceId, limit]);
}
