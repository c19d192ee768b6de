// Who is calling: the instance admin (WHARF_ADMIN_TOKEN) or the holder of a
// workspace token. Routes then ask for the admin or for one workspace. The
// token is checked, and a wrong one made to cost its sender, by the
// Authenticator (authenticator.ts).
import type { Context, MiddlewareHandler } from 'hono';
import type { AdminIdentity, Authenticator } from './authenticator.js';
import { ApiError } from './errors.js';

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

/**
 * Requires a valid bearer token: 401 without one or with a wrong one, 429
 * with Retry-After once its client is past its failures (authenticator.ts).
 */
export function authenticate(authenticator: Authenticator, admin: AdminIdentity): MiddlewareHandler<OperatorEnv> {
  return async (c, next) => {
    const match = /^Bearer +([\x21-\x7e]+) *$/i.exec(c.req.header('authorization') ?? '');
    const token = match?.[1];
    // No token guesses nothing: it is not counted.
    if (!token) throw new ApiError(401, 'unauthorized', 'a bearer token is required');
    const { principal, retryAfterSeconds } = await authenticator.authenticate(c, token, admin);
    if (retryAfterSeconds !== undefined) {
      throw new ApiError(429, 'too_many_requests', 'too many failed authentications from this client; retry later',
        {}, { retryAfterSeconds });
    }
    if (!principal) throw new ApiError(401, 'unauthorized', 'the token is not valid');
    c.set('principal', principal);
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
