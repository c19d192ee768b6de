// The calls of sql/95-operator.sql: listings and details of events,
// workspaces and connections, and workspace API tokens. Every event query
// binds its owner: one workspace, or the installation rows only an instance
// admin reaches.
import type { Database } from '../../db/database.js';
import type { EventState } from '../api/params.js';
import { generateWorkspaceToken, tokenHashHex } from '../api/tokens.js';
import { ApiError } from '../api/errors.js';
import { callWharf } from './call-wharf.js';

/** Whose events a query reads; no query takes a NULL workspace to mean "any". */
export type EventOwner = { workspaceId: string } | { installation: true };

export function isInstallation(owner: EventOwner): owner is { installation: true } {
  return 'installation' in owner;
}

export interface EventSummary {
  id: number;
  workspace_id: number | null;
  provider: string;
  source: string;
  event_type: string;
  subject: string | null;
  state: EventState;
  attempt: number;
  failures: number;
  received_at: string;
  next_attempt_at: string;
  error_class: string | null;
  outcome: string | null;
  handled_at: string | null;
  dead_at: string | null;
}

export interface EventPage {
  events: EventSummary[];
  /** Pass as `before` for the next page; null on the last page. */
  next_cursor: number | null;
}

export interface EventFilter {
  state?: EventState;
  subject?: string;
  provider?: string;
  eventType?: string;
  /** ISO timestamps: received at or after, and strictly before. */
  receivedAfter?: string;
  receivedBefore?: string;
  limit: number;
  /** Only events with a smaller id (the previous page's next_cursor). */
  before?: string;
}

export interface EventDetail extends EventSummary {
  delivery_key: string;
  scope_key: string;
  connection_id: number | null;
  payload: unknown;
  /** As admission stored them: without credentials or signatures. */
  headers: Record<string, unknown>;
  lease_epoch: number;
  leased_until: string | null;
  leased_by: string | null;
  replayed_by: string | null;
  replayed_at: string | null;
  steps: { name: string; committed_at: string }[];
  /** Every lease of the event, oldest first (wharf.event_attempts). */
  attempts: EventAttempt[];
  /** Where its last failure was thrown (a dead letter's cause); [] when its worker passed no frames. */
  error_frames: string[];
}

/**
 * One lease of an event. `ended` says how it ended: the outcome of a
 * completion ('handled', 'ignored'), the kind of a failure ('transient',
 * 'unknown', 'permanent', 'uncertain'), 'released', 'expired' (reaped), or
 * 'running' while the lease holds.
 */
export interface EventAttempt {
  attempt: number;
  epoch: number;
  worker: string;
  started_at: string | null;
  ended_at: string | null;
  ended: string;
  error_class: string | null;
  /** Where a failure was thrown in the application's code, innermost first: `path:line:column function`, never a message. */
  frames: string[];
}

/** A page of events, newest first (wharf.list_events / list_installation_events). */
export function listEvents(db: Database, owner: EventOwner, filter: EventFilter): Promise<EventPage> {
  const page = [filter.state ?? null, filter.subject ?? null, filter.limit, filter.before ?? null,
    filter.provider ?? null, filter.eventType ?? null, filter.receivedAfter ?? null, filter.receivedBefore ?? null];
  return isInstallation(owner)
    ? callWharf(db, 'wharf.list_installation_events($1, $2, $3, $4, $5, $6, $7, $8)', page)
    : callWharf(db, 'wharf.list_events($1, $2, $3, $4, $5, $6, $7, $8, $9)', [owner.workspaceId, ...page]);
}

/** A page of dead letters, newest first: listEvents with state DEAD. */
export function listDead(db: Database, owner: EventOwner, filter: Omit<EventFilter, 'state'>): Promise<EventPage> {
  return listEvents(db, owner, { ...filter, state: 'DEAD' });
}

/** One event of the owner, or null when the owner has no event with that id. */
export function showEvent(db: Database, owner: EventOwner, id: string): Promise<EventDetail | null> {
  return isInstallation(owner)
    ? callWharf(db, 'wharf.show_installation_event($1)', [id])
    : callWharf(db, 'wharf.show_event($1, $2)', [owner.workspaceId, id]);
}

export interface Workspace {
  id: number;
  state: 'ACTIVE' | 'PAUSED' | 'SUSPENDED' | 'DELETING';
  created_at: string;
  connections: number;
}

export function showWorkspace(db: Database, id: string): Promise<Workspace | null> {
  return callWharf(db, 'wharf.show_workspace($1)', [id]);
}

export function listWorkspaces(db: Database): Promise<Workspace[]> {
  return callWharf(db, 'wharf.list_workspaces()', []);
}

export interface Connection {
  id: number;
  workspace_id: number;
  provider: string;
  source: string;
  kind: string;
  external_id: string | null;
  route: Record<string, unknown>;
  state: 'ACTIVE' | 'PAUSED' | 'SUSPENDED' | 'REVOKED';
  generation: number;
  created_at: string;
  updated_at: string;
  subscriptions: string[];
}

export function showConnection(db: Database, id: string): Promise<Connection | null> {
  return callWharf(db, 'wharf.show_connection($1)', [id]);
}

/** Every connection of a workspace, or of every workspace when none is given. */
export function listConnections(db: Database, workspaceId?: string): Promise<Connection[]> {
  return callWharf(db, 'wharf.list_connections($1)', [workspaceId ?? null]);
}

export interface ApiToken {
  id: number;
  workspace_id: number;
  name: string;
  created_at: string;
  last_used_at?: string | null;
  revoked_at?: string | null;
}

/** Creates a workspace token; the secret is in the result and nowhere else. */
export async function createApiToken(
  db: Database, workspaceId: string, name: string,
): Promise<ApiToken & { token: string }> {
  const token = generateWorkspaceToken();
  const created = await callWharf<ApiToken>(db, "wharf.create_token($1, $2, decode($3, 'hex'))",
    [workspaceId, name, tokenHashHex(token)]);
  return { ...created, token };
}

/** The live token with this secret, or null. */
export function verifyApiToken(
  db: Database, token: string,
): Promise<Pick<ApiToken, 'id' | 'workspace_id' | 'name'> | null> {
  return verifyApiTokenHash(db, tokenHashHex(token));
}

/** The live token whose secret hashes to `hashHex` (tokenHashHex), or null. */
export function verifyApiTokenHash(
  db: Database, hashHex: string,
): Promise<Pick<ApiToken, 'id' | 'workspace_id' | 'name'> | null> {
  return callWharf(db, "wharf.verify_token(decode($1, 'hex'))", [hashHex]);
}

/**
 * The hashes (tokenHashHex) of every live token, or undefined when this
 * role may not read them: no EXECUTE on wharf.live_token_hashes (README,
 * "Roles"), or a database not migrated that far. Any other failure is
 * thrown, as callWharf's.
 */
export async function liveTokenHashes(db: Database): Promise<string[] | undefined> {
  try {
    return await callWharf<string[]>(db, 'wharf.live_token_hashes()', []);
  } catch (error) {
    const cause = error instanceof ApiError ? error.cause : undefined;
    const code = typeof cause === 'object' && cause !== null && 'code' in cause ? cause.code : undefined;
    // 42501 insufficient_privilege, 42883 undefined_function.
    if (code === '42501' || code === '42883') return undefined;
    throw error;
  }
}

export function listApiTokens(db: Database, workspaceId: string): Promise<ApiToken[]> {
  return callWharf(db, 'wharf.list_tokens($1)', [workspaceId]);
}

/** True when a live token of that workspace was revoked. */
export function revokeApiToken(db: Database, workspaceId: string, id: string): Promise<boolean> {
  return callWharf(db, 'wharf.revoke_token($1, $2)', [workspaceId, id]);
}

/** One refusal or drop of wharf.admission_log: never a payload or a header. */
export interface AdmissionEntry {
  id: number;
  at: string;
  provider: string | null;
  source: string | null;
  delivery_key: string | null;
  connection_id: number | null;
  workspace_id: number | null;
  reason: string;
}

export interface AdmissionPage {
  entries: AdmissionEntry[];
  /** Pass as `before` for the next page; null on the last page. */
  next_cursor: number | null;
}

/**
 * The deliveries refused or dropped at admission, newest first: those that
 * concern one workspace (wharf.list_admissions), or every one for the
 * instance admin (wharf.list_all_admissions).
 */
export function listAdmissions(
  db: Database, owner: EventOwner, page: { limit: number; before?: string },
): Promise<AdmissionPage> {
  return isInstallation(owner)
    ? callWharf(db, 'wharf.list_all_admissions($1, $2)', [page.limit, page.before ?? null])
    : callWharf(db, 'wharf.list_admissions($1, $2, $3)', [owner.workspaceId, page.limit, page.before ?? null]);
}
