// The operator console: server-rendered pages (Hono JSX) that the edge mounts
// at /console next to the API. It signs in with the same tokens as the API,
// reads and writes through the same modules (operator/sql, the bulk replay
// runner), never SQL of its own, and is runtime-neutral: Web Crypto, no
// node: imports.
import { Hono } from 'hono';
import { HTTPException } from 'hono/http-exception';
import { checkAdminToken } from '../api/auth.js';
import { Authenticator } from '../api/authenticator.js';
import { csrfSigner } from './csrf-token.js';
import type { ConsoleDeps, ConsoleEnv, RouteDeps } from './env.js';
import { errorResponse } from './error-page.js';
import { ConsoleError, toConsoleError, type ConsoleStatus } from './errors.js';
import { formBodyLimit, noStore, requireCsrfToken, sameOriginPosts, securityHeaders } from './protection.js';
import { registerAdmissionPages } from './routes/admissions.js';
import { registerAlertPages } from './routes/alerts.js';
import { registerBulkReplayPages } from './routes/bulk-replay.js';
import { registerConnectionPages } from './routes/connections.js';
import { registerDashboard } from './routes/dashboard.js';
import { registerDestinationPages } from './routes/destinations.js';
import { registerEventPages } from './routes/events.js';
import { registerIssuePages } from './routes/issues.js';
import { registerSignIn, registerSignOut } from './routes/sign-in.js';
import { registerWorkspacePages } from './routes/workspaces.js';
import { identifier, requireSession } from './session.js';
import { stylesheet } from './styles.js';

export type { ConsoleDeps } from './env.js';

export function consoleApp(deps: ConsoleDeps): Hono<ConsoleEnv> {
  const basePath = deps.basePath ?? '/console';
  // The API never accepts an admin token checkAdminToken refuses; neither does the console.
  const adminToken = deps.adminToken && checkAdminToken(deps.adminToken) === undefined ? deps.adminToken : undefined;
  const csrf = csrfSigner(adminToken);
  const identify = identifier(deps.authenticator ?? new Authenticator(deps.db), adminToken);
  const routeDeps: RouteDeps = {
    db: deps.db, basePath, onUnexpectedError: deps.onUnexpectedError ?? (() => {}), ...(deps.keyRing ? { keyRing: deps.keyRing } : {}),
  };

  const app = new Hono<ConsoleEnv>();
  app.use('*', noStore, securityHeaders, formBodyLimit, sameOriginPosts);
  app.get('/assets/console.css', (c) => c.body(stylesheet, 200, { 'Content-Type': 'text/css; charset=utf-8' }));
  registerSignIn(app, { basePath, csrf, identify });

  // Everything below needs a live session, and a POST its CSRF token.
  app.use('*', requireSession(identify, csrf, basePath), requireCsrfToken);
  registerSignOut(app, basePath);
  registerWorkspacePages(app, routeDeps);
  registerDashboard(app, routeDeps);
  registerEventPages(app, routeDeps);
  registerIssuePages(app, routeDeps);
  registerAlertPages(app, routeDeps);
  registerBulkReplayPages(app, routeDeps);
  registerAdmissionPages(app, routeDeps);
  registerConnectionPages(app, routeDeps);
  registerDestinationPages(app, routeDeps);
  // The edge's notFound answers JSON; a console page answers HTML.
  app.all('*', () => {
    throw new ConsoleError(404, 'There is no such page.');
  });

  app.onError((error, c) => {
    if (error instanceof HTTPException) {
      // hono/csrf's refusal of a cross-site post, or another middleware's answer.
      const message = error.status === 403 ? 'This form did not come from this console.' : 'That request was refused.';
      return errorResponse(c, basePath, new ConsoleError(knownStatus(error.status), message));
    }
    const { error: consoleError, unexpected } = toConsoleError(error);
    if (unexpected !== undefined) routeDeps.onUnexpectedError(unexpected);
    return errorResponse(c, basePath, consoleError);
  });
  return app;
}

/** The middlewares' refusals this console knows (hono/csrf: 403, body limit: 413); anything else is a bad request. */
function knownStatus(status: number): ConsoleStatus {
  return status === 403 || status === 413 ? status : 400;
}
