// Who is signed in: every request presents the cookie's token again and it is
// identified again (identify, as the API does), so a revoked workspace token
// stops working at the next click. Failed identifications, from the sign-in
// form or from a forged cookie, count in the same per-client throttle.
import type { Context, MiddlewareHandler } from 'hono';
import { identify, type Principal } from '../api/auth.js';
import { AuthThrottle, defaultClientKey, sharedBucket } from '../api/throttle.js';
import type { Database } from '../../db/database.js';
import { clearSession, readCookie, sessionCookie } from './cookies.js';
import type { CsrfSigner } from './csrf-token.js';
import type { ConsoleEnv } from './env.js';
import { ConsoleError } from './errors.js';

export interface Identifier {
  /** The principal the token stands for, undefined when it stands for nobody; a throttled client gets a 429. */
  (c: Context, token: string): Promise<Principal | undefined>;
}

export function identifier(db: Database, adminToken: string | undefined, throttle = new AuthThrottle()): Identifier {
  return async (c, token) => {
    const attempt = await throttle.begin(defaultClientKey(c) || sharedBucket);
    if (typeof attempt === 'number') {
      throw new ConsoleError(429, 'Too many failed sign-ins from this address; try again later.', { retryAfterSeconds: attempt });
    }
    let principal: Principal | undefined;
    let refused = false;
    try {
      principal = await identify(db, token, adminToken);
      refused = !principal;
    } finally {
      // A database that cannot say is no failed sign-in.
      throttle.end(attempt, refused);
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
