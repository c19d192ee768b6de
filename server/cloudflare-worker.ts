// The edge on Cloudflare Workers (/hooks only; operators use `wharf serve`).
// Its path to PostgreSQL is chosen by its bindings (server/worker-database.ts):
// a HYPERDRIVE binding → `pg` through Hyperdrive; else DATABASE_URL → Neon's
// HTTP query endpoint. Either costs one round trip per statement when warm,
// and every statement is bounded by WHARF_DATABASE_TIMEOUT_MS, so that an
// unreachable database answers 503 with Retry-After instead of hanging.
// The other bindings are the app secrets and settings of edge/settings.ts.
import type { ExecutionContext, Hono } from 'hono';
import { createEdgeApp } from '../edge/app.js';
import { consoleJsonLogger, type EdgeMetrics } from '../edge/telemetry.js';
import { afterResponse, inRequest } from './request-scope.js';
import { chooseDatabasePath, createWorkerDatabase } from './worker-database.js';

// workerd keeps no Prometheus registry: the rejection's log line is its count.
const loggedOnly: EdgeMetrics = { rejected: () => {} };

function createApp(env: Record<string, unknown>): Hono {
  const path = chooseDatabasePath(env);
  if (path.kind === 'unconfigured') {
    consoleJsonLogger.error({ event: 'edge_database', path: path.kind },
      'no database binding: set a HYPERDRIVE binding or DATABASE_URL; deliveries answer 503 until then');
  }
  const database = createWorkerDatabase(path, { timeoutMs: env.WHARF_DATABASE_TIMEOUT_MS, defer: afterResponse });
  return createEdgeApp({ database, env, logger: consoleJsonLogger, metrics: loggedOnly });
}

let app: Hono | undefined;

export default {
  fetch(request: Request, env: Record<string, unknown>, ctx: ExecutionContext): Response | Promise<Response> {
    // One app per isolate, so that its connection cache (and the HTTP
    // path's kept-alive connection) lives as long as the isolate.
    app ??= createApp(env);
    const serving = app;
    return inRequest(ctx, () => serving.fetch(request, env, ctx));
  },
};
