// Who is calling: the instance admin (WHARF_ADMIN_TOKEN) or the holder of a
// workspace token. Routes then ask for the admin or for one workspace.
import type { Context, MiddlewareHandler } from 'hono';
import type { Database } from '../../db/database.js';
import { ApiError } from './errors.js';
import { verifyApiToken } from '../sql/operator.js';
import { looksLikeWorkspaceToken, sameSecret } from './tokens.js';

export type Principal =
  | { kind: 'admin'; account: string }
  | { kind: 'workspace'; workspaceId: string; account: string };

export type OperatorEnv = { Variables: { principal: Principal } };

export function authenticate(db: Database, adminToken: string | undefined): MiddlewareHandler<OperatorEnv> {
  return async (c, next) => {
    const match = /^Bearer +([\x21-\x7e]+) *$/i.exec(c.req.header('authorization') ?? '');
    const token = match?.[1];
    if (!token) throw new ApiError(401, 'unauthorized', 'a bearer token is required');
    // An empty admin token (unset variable) must never let anyone in.
    if (adminToken && (await sameSecret(token, adminToken))) {
      c.set('principal', { kind: 'admin', account: 'admin' });
      return next();
    }
    // Anything that cannot be a workspace token costs no database lookup.
    const found = looksLikeWorkspaceToken(token) ? await verifyApiToken(db, token) : null;
    if (!found) throw new ApiError(401, 'unauthorized', 'the token is not valid');
    c.set('principal', {
      kind: 'workspace',
      workspaceId: String(found.workspace_id),
      account: `token:${found.name}`,
    });
    return next();
  };
}

export function requireAdmin(c: Context<OperatorEnv>): Principal {
  const principal = c.get('principal');
  if (principal.kind !== 'admin') throw new ApiError(403, 'forbidden', 'this needs the instance-admin token');
  return principal;
}

/** The admin, or the holder of a token of this workspace. */
export function requireWorkspace(c: Context<OperatorEnv>, workspaceId: string): Principal {
  const principal = c.get('principal');
  if (principal.kind === 'workspace' && principal.workspaceId !== workspaceId) {
    throw new ApiError(403, 'forbidden', 'this token does not reach that workspace');
  }
  return principal;
}
