// The operator API: a Hono sub-app the edge mounts at /api. JSON in and out,
// bearer tokens, error bodies {error, message} that never carry internals.
import { Hono } from 'hono';
import { authenticate, type OperatorEnv } from './auth.js';
import type { Database } from '../../db/database.js';
import type { KeyRing } from '../../db/secret-box.js';
import { ApiError, toApiError } from './errors.js';
import { registerAdminRoutes } from './routes/admin.js';
import { registerEventRoutes } from './routes/events.js';

export interface OperatorApiDeps {
  db: Database;
  /** WHARF_ADMIN_TOKEN; without it only workspace tokens are accepted. */
  adminToken?: string;
  /** WHARF_SECRET_KEYS, which encrypts the signing keys an operator sets. */
  keyRing?: Promise<KeyRing | undefined>;
  /** Told about every 500 (the answer says only "internal error"), e.g. to log its class. */
  onUnexpectedError?: (error: unknown) => void;
}

export function operatorApi(deps: OperatorApiDeps): Hono<OperatorEnv> {
  const app = new Hono<OperatorEnv>();
  app.use('*', authenticate(deps.db, deps.adminToken));
  registerEventRoutes(app, deps.db);
  registerAdminRoutes(app, deps.db, deps.keyRing ?? Promise.resolve(undefined));

  app.onError((error, c) => {
    const apiError = toApiError(error);
    if (apiError.status === 500) deps.onUnexpectedError?.(apiError.cause ?? error);
    if (apiError.status === 401) c.header('WWW-Authenticate', 'Bearer');
    if (apiError.status === 503) c.header('Retry-After', '5');
    return c.json(apiError.body(), apiError.status);
  });
  app.notFound((c) => c.json(new ApiError(404, 'not_found', 'no such route').body(), 404));
  return app;
}
