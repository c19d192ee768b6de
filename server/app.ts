// One Hono app from the parts: the edge's /hooks, and the operator API at
// /api where the process serves operators. Runtime-neutral; server/node.ts
// and server/cloudflare-worker.ts give it its database and environment.
import type { Hono } from 'hono';
import { createEdgeApp, type EdgeAppOptions } from '../edge/app.js';
import { parseKeyRing } from '../db/secret-box.js';
import { operatorApi } from '../operator/api/app.js';

export interface ServerAppOptions extends EdgeAppOptions {
  /** Serve the operator API at /api (WHARF_ADMIN_TOKEN from the environment, when set). */
  operator: boolean;
}

export function createServerApp(options: ServerAppOptions): Hono {
  const app = createEdgeApp(options);
  if (options.operator) {
    const adminToken = options.env.WHARF_ADMIN_TOKEN;
    app.route('/api', operatorApi({
      db: options.database,
      adminToken: typeof adminToken === 'string' && adminToken !== '' ? adminToken : undefined,
      keyRing: parseKeyRing(options.env.WHARF_SECRET_KEYS),
      onUnexpectedError: (error) =>
        options.logger.error({ event: 'api_error', error: error instanceof Error ? error.name : typeof error }, 'operator API error'),
    }));
  }
  return app;
}
