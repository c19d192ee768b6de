// The operator API: a Hono sub-app the edge mounts at /api. JSON in and out,
// bearer tokens, error bodies {error, message} that never carry internals.
// Every route is described by the schemas that validate it (schemas.ts);
// the OpenAPI 3.1 document is served at /api/openapi.json and the typed
// client (client.ts) is built from the same routes.
// No answer of it may be cached (Cache-Control: no-store): some carry secrets
// (a new token, a rotated webhook secret), all carry operators' data.
import { OpenAPIHono } from '@hono/zod-openapi';
import { authenticate, checkAdminToken, type OperatorEnv } from './auth.js';
import { Authenticator } from './authenticator.js';
import { checkJsonBody } from './body.js';
import type { Database } from '../../db/database.js';
import type { KeyRing } from '../../db/secret-box.js';
import { ApiError, toApiError } from './errors.js';
import { checkQueryParameters } from './params.js';
import { adminRoutes } from './routes/admin.js';
import { alertRoutes } from './routes/alerts.js';
import { bulkReplayRoutes } from './routes/bulk-replays.js';
import { destinationRoutes } from './routes/destinations.js';
import { eventRoutes } from './routes/events.js';
import { issueRoutes } from './routes/issues.js';
import { queueHistoryRoutes } from './routes/queue-history.js';
import { stuckScopeRoutes } from './routes/stuck-scopes.js';

export interface OperatorApiDeps {
  db: Database;
  /**
   * WHARF_ADMIN_TOKEN; without it only workspace tokens are accepted. One that
   * checkAdminToken refuses is never accepted: see onConfigurationError.
   */
  adminToken?: string;
  /** Recorded as the admin's account on replays (default 'admin'); the CLI names its user. */
  adminAccount?: string;
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
   * Checks tokens and throttles failed authentications (authenticator.ts).
   * A server passes one it shares with the console, so that a guesser has
   * one budget for both and the token table is loaded once; by default the
   * API has its own, with the defaults (the client is the address the
   * runtime tells; no forwarded header is trusted).
   */
  authenticator?: Authenticator;
}

export const openApiDocumentPath = '/openapi.json';

export function operatorApi(deps: OperatorApiDeps) {
  const app = new OpenAPIHono<OperatorEnv>();
  app.use('*', async (c, next) => {
    await next();
    c.header('Cache-Control', 'no-store');
  });
  app.onError((error, c) => {
    const apiError = toApiError(error);
    if (apiError.status === 500) deps.onUnexpectedError?.(apiError.cause ?? error);
    if (apiError.status === 401) c.header('WWW-Authenticate', 'Bearer');
    const retryAfter = apiError.retryAfterSeconds ?? (apiError.status === 503 ? 5 : undefined);
    if (retryAfter !== undefined) c.header('Retry-After', String(retryAfter));
    return c.json(apiError.body(), apiError.status);
  });
  app.notFound((c) => c.json(new ApiError(404, 'not_found', 'no such route').body(), 404));

  const routes = operatorRoutes(deps);

  // The description is public: it holds no data, and a client needs it before it has a token.
  app.doc31(openApiDocumentPath, (c) => ({
    openapi: '3.1.0',
    // The paths are relative to where the API is mounted (/api in `wharf
    // serve`), which is where this document was asked for, less its own name:
    // a generic client or Swagger UI then calls them there, not at the host's root.
    servers: [{ url: c.req.path.slice(0, -openApiDocumentPath.length) || '/', description: 'this API' }],
    info: {
      title: 'Wharf operator API',
      version: '0.2.0',
      description: 'Events, dead letters, replay, bulk replay, the admission log, issues, stuck scopes, alert rules, destinations '
        + '(forwarding to your application: rules, deliveries, dead letters, replay), workspaces, connections and tokens. '
        + 'Bearer tokens: the instance admin token (WHARF_ADMIN_TOKEN) or a workspace token.',
    },
    security: [{ bearer: [] }],
  }));
  app.openAPIRegistry.registerComponent('securitySchemes', 'bearer', { type: 'http', scheme: 'bearer' });
  return app.route('/', routes);
}

/** Every route of the API behind its authentication and request checks. */
function operatorRoutes(deps: OperatorApiDeps) {
  return new OpenAPIHono<OperatorEnv>()
    .use('*', authenticate(deps.authenticator ?? new Authenticator(deps.db), {
      token: acceptedAdminToken(deps),
      ...(deps.adminAccount ? { account: deps.adminAccount } : {}),
    }))
    .use('*', async (c, next) => {
      checkQueryParameters(c.req.queries());
      await checkJsonBody(c);
      return next();
    })
    .route('/', eventRoutes(deps.db))
    .route('/', bulkReplayRoutes(deps.db, deps.onUnexpectedError))
    .route('/', queueHistoryRoutes(deps.db))
    .route('/', issueRoutes(deps.db))
    .route('/', stuckScopeRoutes(deps.db))
    .route('/', alertRoutes(deps.db))
    .route('/', destinationRoutes(deps.db, deps.keyRing ?? Promise.resolve(undefined)))
    .route('/', adminRoutes(deps.db, deps.keyRing ?? Promise.resolve(undefined)));
}

/** The operator API's routes and their types, for the typed client (client.ts). */
export type OperatorApi = ReturnType<typeof operatorRoutes>;

/** The admin token if checkAdminToken accepts it; an unset or empty one is simply absent. */
function acceptedAdminToken(deps: OperatorApiDeps): string | undefined {
  if (deps.adminToken === undefined || deps.adminToken === '') return undefined;
  const reason = checkAdminToken(deps.adminToken);
  if (reason === undefined) return deps.adminToken;
  if (!deps.onConfigurationError) throw new Error(`operator API: ${reason}`);
  deps.onConfigurationError(reason);
  return undefined;
}
