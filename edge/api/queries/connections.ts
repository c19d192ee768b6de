import type { Database } from '../../database.js';
import { callWharf } from '../call.js';
import { ApiError } from '../errors.js';
import { generateWebhookSecret } from '../tokens.js';

export interface Connection {
  id: number;
  workspace_id: number;
  provider: string;
  source: string;
  kind: string;
  external_id: string | null;
  route: Record<string, unknown>;
  state: 'ACTIVE' | 'SUSPENDED' | 'REVOKED';
  generation: number;
  created_at: string;
  updated_at: string;
  subscriptions: string[];
}

export interface NewConnection {
  workspaceId: string;
  provider: string;
  source: string;
  kind: string;
  externalId?: string | null;
  route?: Record<string, unknown>;
}

/** Creates a connection, or gives an existing one the route (wharf.upsert_connection). */
export async function createConnection(db: Database, connection: NewConnection): Promise<Connection> {
  const id = await callWharf<string>(db, 'wharf.upsert_connection($1, $2, $3, $4, $5, $6)', [
    connection.workspaceId, connection.provider, connection.source, connection.kind,
    connection.externalId ?? null, JSON.stringify(connection.route ?? {}),
  ]);
  return (await showConnection(db, id)) as Connection;
}

export function showConnection(db: Database, id: string): Promise<Connection | null> {
  return callWharf(db, 'wharf.show_connection($1)', [id]);
}

/** Every connection of a workspace, or of every workspace when none is given. */
export function listConnections(db: Database, workspaceId?: string): Promise<Connection[]> {
  return callWharf(db, 'wharf.list_connections($1)', [workspaceId ?? null]);
}

/** wharf.set_connection_state; a 404 (P0002) for an unknown connection. */
export async function setConnectionState(
  db: Database, id: string, state: 'ACTIVE' | 'SUSPENDED' | 'REVOKED',
): Promise<Connection> {
  await callWharf(db, 'wharf.set_connection_state($1, $2)', [id, state]);
  return (await showConnection(db, id)) as Connection;
}

/**
 * Sets a connection's webhook secret (wharf.set_connection_secret), a new
 * random one unless given, and returns it: the only time it is shown.
 * 400 (22023) for GitHub and Slack, whose secrets belong to the app.
 */
export async function rotateConnectionSecret(db: Database, id: string, secret?: string): Promise<string> {
  const connection = await showConnection(db, id);
  if (!connection) throw new ApiError(404, 'not_found', `unknown connection ${id}`);
  const next = secret ?? generateWebhookSecret(connection.provider);
  await callWharf(db, 'wharf.set_connection_secret($1, $2)', [id, next]);
  return next;
}
