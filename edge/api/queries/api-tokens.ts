import type { Database } from '../../database.js';
import { callWharf } from '../call.js';
import { generateWorkspaceToken, tokenHashHex } from '../tokens.js';

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
    [workspaceId, name, await tokenHashHex(token)]);
  return { ...created, token };
}

/** The live token with this secret, or null. */
export async function verifyApiToken(
  db: Database, token: string,
): Promise<Pick<ApiToken, 'id' | 'workspace_id' | 'name'> | null> {
  return callWharf(db, "wharf.verify_token(decode($1, 'hex'))", [await tokenHashHex(token)]);
}

export function listApiTokens(db: Database, workspaceId: string): Promise<ApiToken[]> {
  return callWharf(db, 'wharf.list_tokens($1)', [workspaceId]);
}

/** True when a live token of that workspace was revoked. */
export function revokeApiToken(db: Database, workspaceId: string, id: string): Promise<boolean> {
  return callWharf(db, 'wharf.revoke_token($1, $2)', [workspaceId, id]);
}
