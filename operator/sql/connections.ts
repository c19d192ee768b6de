// The calls of sql/70-connections.sql: workspaces, connections and their
// subscriptions, as an operator changes them.
import type { Database } from '../../db/database.js';
import { hmacRouteProblem } from '../../db/hmac-scheme.js';
import { ApiError } from '../api/errors.js';
import { callWharf } from './call-wharf.js';
import { showConnection, showWorkspace, type Connection, type Workspace } from './operator.js';

/** Creates workspace `id` ACTIVE when missing (wharf.upsert_workspace) and returns it. */
export async function createWorkspace(db: Database, id: string): Promise<Workspace> {
  await callWharf(db, 'wharf.upsert_workspace($1)', [id]);
  return (await showWorkspace(db, id)) as Workspace;
}

/** wharf.set_workspace_state; a 404 (P0002) for an unknown workspace. */
export async function setWorkspaceState(
  db: Database, id: string, state: 'ACTIVE' | 'PAUSED' | 'SUSPENDED',
): Promise<Workspace> {
  await callWharf(db, 'wharf.set_workspace_state($1, $2)', [id, state]);
  return (await showWorkspace(db, id)) as Workspace;
}

export interface NewConnection {
  workspaceId: string;
  provider: string;
  source: string;
  kind: string;
  externalId?: string | null;
  route?: Record<string, unknown>;
}

/**
 * Creates a connection, or gives an existing one the route
 * (wharf.upsert_connection). A configured HMAC source's route is validated
 * first (db/hmac-scheme.ts): a 400 that says what is wrong, nothing saved.
 */
export async function createConnection(db: Database, connection: NewConnection): Promise<Connection> {
  if (connection.provider === 'hmac') {
    const problem = hmacRouteProblem(connection.route ?? {});
    if (problem) throw new ApiError(400, 'invalid_signature_scheme', problem);
  }
  const id = await callWharf<string>(db, 'wharf.upsert_connection($1, $2, $3, $4, $5, $6)', [
    connection.workspaceId, connection.provider, connection.source, connection.kind,
    connection.externalId ?? null, JSON.stringify(connection.route ?? {}),
  ]);
  return (await showConnection(db, id)) as Connection;
}

/** wharf.set_connection_state; a 404 (P0002) for an unknown connection. */
export async function setConnectionState(
  db: Database, id: string, state: 'ACTIVE' | 'PAUSED' | 'SUSPENDED' | 'REVOKED',
): Promise<Connection> {
  await callWharf(db, 'wharf.set_connection_state($1, $2)', [id, state]);
  return (await showConnection(db, id)) as Connection;
}

/** wharf.subscribe / wharf.unsubscribe: true when something changed. */
export async function setSubscription(
  db: Database, connectionId: string, subject: string, subscribed: boolean,
): Promise<boolean> {
  const call = subscribed ? 'wharf.subscribe($1, $2)' : 'wharf.unsubscribe($1, $2)';
  return callWharf<boolean>(db, call, [connectionId, subject]);
}
