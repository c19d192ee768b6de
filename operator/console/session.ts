// Who is signed in: every request presents the cookie's token again and it is
// identified again, as the API does, so a revoked workspace token stops
// working at the next click. Failed identifications, from the sign-in form
// or from a forged cookie, cost their client as the API's do
// (authenticator.ts): a valid token is never delayed or refused.
import type { Context, MiddlewareHandler } from 'hono';
import type { Principal } from '../api/auth.js';
import type { Authenticator } from '../api/authenticator.js';
import { clearSession, readCookie, sessionCookie } from './cookies.js';
import type { CsrfSigner } from './csrf-token.js';
import type { ConsoleEnv } from './env.js';
import { ConsoleError } from './errors.js';

export interface Identifier {
  /** The principal the token stands for, undefined when it stands for nobody; a throttled client gets a 429. */
  (c: Context, token: string): Promise<Principal | undefined>;
}

export function identifier(authenticator: Authenticator, adminToken: string | undefined): Identifier {
  return async (c, token) => {
    const { principal, retryAfterSeconds } = await authenticator.authenticate(c, token, { token: adminToken });
    if (retryAfterSeconds !== undefined) {
      throw new ConsoleError(429, 'Too many failed sign-ins from this address; try again later.', { retryAfterSeconds });
    }
    return principal;
  };
}

/**
 * Requires a live session: without one a page sends the browser to the
 * sign-in form, and a write is refused (it cannot be a form of ours).
 */
export function requireSession(
  identifyToken: Identifier, csrf: CsrfSigner, basePath: string,
): MiddlewareHandler<ConsoleEnv> {
  return async (c, next) => {
    const token = readCookie(c, sessionCookie);
    const principal = token ? await identifyToken(c, token) : undefined;
    if (!token || !principal) {
      if (token) clearSession(c, basePath);
      if (c.req.method !== 'GET' && c.req.method !== 'HEAD') throw new ConsoleError(403, 'You are not signed in.');
      return c.redirect(`${basePath}/login${token ? '?expired=1' : ''}`, 303);
    }
    c.set('principal', principal);
    c.set('csrfToken', await csrf.sign(token));
    return next();
  };
}
