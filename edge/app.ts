// The edge receiver as one Hono app serving /hooks, the same on Node and on
// Workers: the entry points (server/) give it a Database, the environment, a
// logger and metrics.
import { Hono } from 'hono';
import type { Admit } from './coalesced-admission.js';
import { createConnectionCache } from './connection-cache.js';
import type { Database } from '../db/database.js';
import { readReadiness } from '../db/readiness.js';
import { createWebhookReceiver } from './receive-webhook.js';
import { createReject } from './rejection.js';
import { readEdgeSettings, type EdgeEnv } from './settings.js';
import { admit } from './sql/admission.js';
import type { EdgeLogger, EdgeMetrics } from './telemetry.js';

export interface EdgeAppOptions {
  database: Database;
  /** Worker bindings or process.env: app secrets and settings (edge/settings.ts). */
  env: EdgeEnv;
  logger: EdgeLogger;
  metrics: EdgeMetrics;
  /**
   * How a verified delivery is admitted: by default one wharf.admit per
   * request (the Worker); the Node server coalesces concurrent ones.
   */
  admit?: Admit;
}

export function createEdgeApp(options: EdgeAppOptions): Hono {
  const { database, env, logger, metrics } = options;
  const settings = readEdgeSettings(env);
  const reject = createReject(logger, metrics);
  const receiveWebhook = createWebhookReceiver({
    database,
    admit: options.admit ?? ((admission) => admit(database, admission)),
    env,
    settings,
    logger,
    metrics,
    reject,
    connections: createConnectionCache(database, { ttlMs: settings.secretCacheMs, keyRing: settings.keyRing }),
  });

  const app = new Hono();
  // Liveness (the process answers) and readiness (its database does, as a
  // writable primary: a standby cannot admit), for load balancers and
  // orchestrators; no secret, no body.
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', async (c) => {
    const status = await readReadiness(database);
    return status === 'ready' ? c.json({ status }) : c.json({ status }, 503, { 'Retry-After': '5' });
  });
  app.post('/hooks/:provider/:endpoint', receiveWebhook);
  app.all('/hooks/:provider/:endpoint', (c) =>
    reject(c, 405, 'method-not-allowed', 'Use POST.', { method: c.req.method }, { Allow: 'POST' }));
  app.notFound((c) => c.json({ error: 'not-found', message: 'No such route.' }, 404));
  app.onError((error, c) => {
    logger.error({ event: 'edge_error', error: error.name }, 'unhandled error');
    return c.json({ error: 'internal', message: 'Internal error.' }, 500);
  });
  return app;
}
