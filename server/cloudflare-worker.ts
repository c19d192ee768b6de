// The edge on Cloudflare Workers (/hooks only; operators use `wharf serve`):
// @neondatabase/serverless over WebSockets.
// Bindings: DATABASE_URL (a secret), the app secrets of edge/settings.ts, and
// WS_PROXY (host:port of a local WebSocket-to-TCP proxy, for `wrangler dev`
// against a plain PostgreSQL; unset on Neon).
import { Client } from '@neondatabase/serverless';
import type { ExecutionContext, Hono } from 'hono';
import { createEdgeApp } from '../edge/app.js';
import type { Database } from '../db/database.js';
import { consoleJsonLogger, type EdgeMetrics } from '../edge/telemetry.js';

interface WorkerEnv {
  DATABASE_URL: string;
  WS_PROXY?: string;
  [binding: string]: unknown;
}

// A Worker may not reuse one request's socket in another, so each query gets
// its own client; the edge makes one query per delivery (secrets are cached).
function neonDatabase(env: WorkerEnv): Database {
  return {
    async query(text, params) {
      const client = new Client({ connectionString: env.DATABASE_URL });
      if (env.WS_PROXY) {
        const proxy = env.WS_PROXY;
        client.neonConfig.wsProxy = (host, port) => `${proxy}/v1?address=${host}:${port}`;
        client.neonConfig.useSecureWebSocket = false;
        client.neonConfig.pipelineTLS = false;
        client.neonConfig.pipelineConnect = false;
      }
      client.on('error', () => {});
      try {
        await client.connect();
        return await client.query(text, params);
      } finally {
        await client.end().catch(() => {});
      }
    },
  };
}

// workerd keeps no Prometheus registry: the rejection's log line is its count.
const loggedOnly: EdgeMetrics = { rejected: () => {} };

let app: Hono | undefined;

export default {
  fetch(request: Request, env: WorkerEnv, ctx: ExecutionContext): Response | Promise<Response> {
    // One app per isolate, so that its connection cache lives as long as the isolate.
    app ??= createEdgeApp({ database: neonDatabase(env), env, logger: consoleJsonLogger, metrics: loggedOnly });
    return app.fetch(request, env, ctx);
  },
};
