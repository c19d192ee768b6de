// The edge and the operator API on Node: @hono/node-server, a `pg` Pool,
// pino logs and the prom-client counter webhook_rejected_total{reason}.
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import pg from 'pg';
import { pino } from 'pino';
import { Counter, register, type Registry } from 'prom-client';
import { createServerApp } from './app.js';
import type { EdgeLogger, EdgeMetrics } from '../edge/telemetry.js';

export interface EdgeServerOptions {
  /** Either a connection string (the server owns its pool) or a pool (the caller's). */
  databaseUrl?: string;
  pool?: pg.Pool;
  /** 0 or unset: any free port. */
  port?: number;
  hostname?: string;
  /** App secrets and settings (edge/settings.ts); process.env by default. */
  env?: Record<string, string | undefined>;
  logger?: EdgeLogger;
  /** Where webhook_rejected_total is registered; prom-client's default registry by default. */
  registry?: Registry;
}

export interface EdgeServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

/** webhook_rejected_total{reason} on `registry`, shared by every server of the process. */
export function rejectionCounter(registry: Registry): EdgeMetrics {
  const counter = (registry.getSingleMetric('webhook_rejected_total') as Counter<'reason'> | undefined)
    ?? new Counter({
      name: 'webhook_rejected_total',
      help: 'Webhook deliveries not stored, by reason (HTTP rejections, refusals and drops).',
      labelNames: ['reason'],
      registers: [registry],
    });
  return { rejected: (reason) => counter.inc({ reason }) };
}

export async function startEdgeServer(options: EdgeServerOptions): Promise<EdgeServer> {
  if (!options.pool && !options.databaseUrl) throw new Error('startEdgeServer needs databaseUrl or pool');
  const ownPool = options.pool
    ? undefined
    : new pg.Pool({ connectionString: options.databaseUrl, connectionTimeoutMillis: 5_000 });
  // An idle client's error (server restart) must not crash the process.
  ownPool?.on('error', () => {});
  const pool = (options.pool ?? ownPool)!;
  const app = createServerApp({
    operator: true,
    database: pool,
    env: options.env ?? process.env,
    logger: options.logger ?? pino({ name: 'wharf-edge' }),
    metrics: rejectionCounter(options.registry ?? register),
  });
  const hostname = options.hostname ?? '127.0.0.1';
  const { server, address } = await new Promise<{ server: ReturnType<typeof serve>; address: AddressInfo }>(
    (resolve) => {
      const server = serve({ fetch: app.fetch, port: options.port ?? 0, hostname }, (address) =>
        resolve({ server, address }));
    },
  );
  return {
    url: `http://${hostname.includes(':') ? `[${hostname}]` : hostname}:${address.port}`,
    port: address.port,
    async close() {
      await new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
      await ownPool?.end();
    },
  };
}
