// The operator API: a Hono sub-app the edge mounts at /api. JSON in and out,
// bearer tokens, error bodies {error, message} that never carry internals.
// No answer of it may be cached (Cache-Control: no-store): some carry secrets
// (a new token, a rotated webhook secret), all carry operators' data.
import { Hono } from 'hono';
import { authenticate, checkAdminToken, type OperatorEnv } from './auth.js';
import type { Database } from '../../db/database.js';
import type { KeyRing } from '../../db/secret-box.js';
import { ApiError, toApiError } from './errors.js';
import { checkQueryParameters } from './params.js';
import { registerAdminRoutes } from './routes/admin.js';
import { registerEventRoutes } from './routes/events.js';
import { AuthThrottle, defaultClientKey, type AuthThrottleOptions, type ClientKey } from './throttle.js';

export interface OperatorApiDeps {
  db: Database;
  /**
   * WHARF_ADMIN_TOKEN; without it only workspace tokens are accepted. One that
   * checkAdminToken refuses is never accepted: see onConfigurationError.
   */
  adminToken?: string;
  /** WHARF_SECRET_KEYS, which encrypts the signing keys an operator sets. */
  keyRing?: Promise<KeyRing | undefined>;
  /** Told about every 500 (the answer says only "internal error"), e.g. to log its class. */
  onUnexpectedError?: (error: unknown) => void;
  /**
   * Told, once and at once, why the admin token is refused (checkAdminToken);
   * the API then runs as if none were set (workspace tokens only). Without
   * this callback operatorApi throws instead, so that a weak admin token
   * never goes unnoticed.
   */
  onConfigurationError?: (reason: string) => void;
  /**
   * The client a request comes from, whose failed authentications are
   * counted together; undefined puts it in one bucket shared by all such
   * callers. By default the remote address the runtime tells (defaultClientKey:
   * the Node adapter's socket, Cloudflare's CF-Connecting-IP), never
   * X-Forwarded-For: behind a reverse proxy, give one that reads the proxy's header.
   */
  clientKey?: ClientKey;
  /** Limits of the failed-authentication throttle (default: 10 failures per client and minute). */
  authThrottle?: AuthThrottleOptions;
}

export function operatorApi(deps: OperatorApiDeps): Hono<OperatorEnv> {
  const app = new Hono<OperatorEnv>();
  app.use('*', async (c, next) => {
    await next();
    c.header('Cache-Control', 'no-store');
  });
  app.use('*', authenticate(deps.db, {
    adminToken: acceptedAdminToken(deps),
    throttle: new AuthThrottle(deps.authThrottle),
    clientKey: deps.clientKey ?? defaultClientKey,
  }));
  app.use('*', async (c, next) => {
    checkQueryParameters(c.req.queries());
    return next();
  });
  registerEventRoutes(app, deps.db);
  registerAdminRoutes(app, deps.db, deps.keyRing ?? Promise.resolve(undefined));

  app.onError((error, c) => {
    const apiError = toApiError(error);
    if (apiError.status === 500) deps.onUnexpectedError?.(apiError.cause ?? error);
    if (apiError.status === 401) c.header('WWW-Authenticate', 'Bearer');
    const retryAfter = apiError.retryAfterSeconds ?? (apiError.status === 503 ? 5 : undefined);
    if (retryAfter !== undefined) c.header('Retry-After', String(retryAfter));
    return c.json(apiError.body(), apiError.status);
  });
  app.notFound((c) => c.json(new ApiError(404, 'not_found', 'no such route').body(), 404));
  return app;
}

/** The admin token if checkAdminToken accepts it; an unset or empty one is simply absent. */
function acceptedAdminToken(deps: OperatorApiDeps): string | undefined {
  if (deps.adminToken === undefined || deps.adminToken === '') return undefined;
  const reason = checkAdminToken(deps.adminToken);
  if (reason === undefined) return deps.adminToken;
  if (!deps.onConfigurationError) throw new Error(`operator API: ${reason}`);
  deps.onConfigurationError(reason);
  return undefined;
}
