// Who is calling: the instance admin (WHARF_ADMIN_TOKEN) or the holder of a
// workspace token. Routes then ask for the admin or for one workspace. Failed
// authentications are throttled per client (throttle.ts).
import type { Context, MiddlewareHandler } from 'hono';
import type { Database } from '../../db/database.js';
import { ApiError } from './errors.js';
import { verifyApiToken } from '../sql/operator.js';
import { AuthThrottle, defaultClientKey, sharedBucket, type ClientKey } from './throttle.js';
import { looksLikeWorkspaceToken, sameSecret } from './tokens.js';

export type Principal =
  | { kind: 'admin'; account: string }
  | { kind: 'workspace'; workspaceId: string; account: string };

export type OperatorEnv = { Variables: { principal: Principal } };

/** What a bearer token may hold: printable ASCII without spaces. */
const bearerToken = /^[\x21-\x7e]+$/;

export const minAdminTokenLength = 32;
export const minAdminTokenDistinctCharacters = 16;

/**
 * Why an admin token must be refused, or undefined when it will do: at least
 * 32 characters of at least 16 different kinds, all of them printable ASCII
 * without spaces (a bearer token holds nothing else, so any other could never
 * be presented). The reason never repeats the token. The CLI refuses to start
 * with a token this refuses; operatorApi never accepts one.
 */
export function checkAdminToken(token: string): string | undefined {
  const advice = 'generate one with `openssl rand -base64 32`';
  if (!bearerToken.test(token)) {
    return `the admin token (WHARF_ADMIN_TOKEN) must be printable ASCII without spaces; ${advice}`;
  }
  if (token.length < minAdminTokenLength) {
    return `the admin token (WHARF_ADMIN_TOKEN) must be at least ${minAdminTokenLength} characters long, `
      + `this one has ${token.length}; ${advice}`;
  }
  const distinct = new Set(token).size;
  if (distinct < minAdminTokenDistinctCharacters) {
    return `the admin token (WHARF_ADMIN_TOKEN) is too easy to guess: it needs at least `
      + `${minAdminTokenDistinctCharacters} distinct characters, this one has ${distinct}; ${advice}`;
  }
  return undefined;
}

export interface AuthenticateOptions {
  /** An admin token checkAdminToken accepted; without it only workspace tokens are accepted. */
  adminToken?: string;
  /** Recorded as the admin's account (replayed_by); default 'admin'. */
  adminAccount?: string;
  throttle?: AuthThrottle;
  clientKey?: ClientKey;
}

export function authenticate(db: Database, options: AuthenticateOptions = {}): MiddlewareHandler<OperatorEnv> {
  const { adminToken, adminAccount, throttle = new AuthThrottle(), clientKey = defaultClientKey } = options;
  return async (c, next) => {
    const match = /^Bearer +([\x21-\x7e]+) *$/i.exec(c.req.header('authorization') ?? '');
    const token = match?.[1];
    // No token guesses nothing: it is not counted.
    if (!token) throw new ApiError(401, 'unauthorized', 'a bearer token is required');
    const attempt = await throttle.begin(clientKey(c) || sharedBucket);
    if (typeof attempt === 'number') {
      throw new ApiError(429, 'too_many_requests', 'too many failed authentications from this client; retry later',
        {}, { retryAfterSeconds: attempt });
    }
    let principal: Principal | undefined;
    let refused = false;
    try {
      principal = await identify(db, token, adminToken, adminAccount);
      refused = !principal;
    } finally {
      // A database that cannot say (503) is no failed authentication.
      throttle.end(attempt, refused);
    }
    if (!principal) throw new ApiError(401, 'unauthorized', 'the token is not valid');
    c.set('principal', principal);
    return next();
  };
}

/** The principal a bearer token stands for (the admin token, or a live workspace token), or undefined. */
export async function identify(
  db: Database, token: string, adminToken: string | undefined, adminAccount = 'admin',
): Promise<Principal | undefined> {
  // An empty admin token (unset variable) must never let anyone in.
  if (adminToken && sameSecret(token, adminToken)) return { kind: 'admin', account: adminAccount };
  // Anything that cannot be a workspace token costs no database lookup.
  const found = looksLikeWorkspaceToken(token) ? await verifyApiToken(db, token) : null;
  if (!found) return undefined;
  return { kind: 'workspace', workspaceId: String(found.workspace_id), account: `token:${found.name}` };
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
