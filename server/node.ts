// The edge, and the operator API where an operator token is configured, on
// Node: @hono/node-server, `pg` pools (one per role), pino logs, deliveries
// admitted in coalesced batches (WHARF_ADMIT_BATCH), and the prom-client
// metrics webhook_rejected_total{reason}, webhook_admit_batch_size and
// webhook_admit_waiting.
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import pg from 'pg';
import { pino } from 'pino';
import { Counter, Gauge, Histogram, register, type Registry } from 'prom-client';
import { createServerApp } from './app.js';
import { environment } from '../db/environment.js';
import { parsePositiveInteger } from '../db/numbers.js';
import { createPool } from '../db/pool.js';
import { readTimeoutMs, withDatabaseDeadline } from './database-deadline.js';
import { coalesceAdmissions, type CoalescingOptions } from '../edge/coalesced-admission.js';
import { readAdmitBatch } from '../edge/settings.js';
import type { EdgeLogger, EdgeMetrics } from '../edge/telemetry.js';

export interface NodeServerOptions {
  /** Either a connection string (the server owns its pool) or a pool (the caller's): the edge's role. */
  databaseUrl?: string;
  pool?: pg.Pool;
  /**
   * The operator API's database, as the operator's role: a connection string
   * or a pool. Default: the edge's. The API is served only when the
   * environment has WHARF_ADMIN_TOKEN.
   */
  operatorDatabaseUrl?: string;
  operatorPool?: pg.Pool;
  /** 0 or unset: any free port. */
  port?: number;
  hostname?: string;
  /** App secrets and settings (edge/settings.ts); process.env by default. */
  env?: Record<string, string | undefined>;
  logger?: EdgeLogger;
  /** Where the edge's metrics are registered; prom-client's default registry by default. */
  registry?: Registry;
}

export interface NodeServer {
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

/**
 * webhook_admit_batch_size (deliveries per admission batch: one wharf.admit
 * or wharf.admit_many call) and webhook_admit_waiting (verified deliveries
 * waiting for the next batch) on `registry`, shared by every server of the process.
 */
export function admissionBatchMetrics(registry: Registry): Pick<CoalescingOptions, 'observeBatch' | 'changeWaiting'> {
  const sizes = (registry.getSingleMetric('webhook_admit_batch_size') as Histogram | undefined)
    ?? new Histogram({
      name: 'webhook_admit_batch_size',
      help: 'Deliveries per admission batch of the Node receiver (one wharf.admit or wharf.admit_many call).',
      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
      registers: [registry],
    });
  const waiting = (registry.getSingleMetric('webhook_admit_waiting') as Gauge | undefined)
    ?? new Gauge({
      name: 'webhook_admit_waiting',
      help: 'Verified deliveries waiting for the admission batch in flight to finish before theirs is sent.',
      registers: [registry],
    });
  return { observeBatch: (deliveries) => sizes.observe(deliveries), changeWaiting: (change) => waiting.inc(change) };
}

/**
 * With `deadlineMs` (the edge's own pool), the server gives up a statement
 * past the deadline too (statement_timeout): one that waited behind a lock
 * after its request was answered 503 would hold its connection slot, and
 * commit late, until the lock went away.
 */
function ownPool(connectionString: string, deadlineMs?: number): pg.Pool {
  const pool = createPool(connectionString, {
    connectionTimeoutMillis: deadlineMs ?? 5_000,
    ...(deadlineMs !== undefined ? { statement_timeout: deadlineMs } : {}),
  });
  // An idle client's error (server restart) must not crash the process.
  pool.on('error', () => {});
  return pool;
}

/**
 * Slow or idle clients may not hold a socket for long (Node's defaults allow
 * a minute for a request head and five for a request), checked every second;
 * at most this many sockets at once.
 */
const timeouts = {
  headersTimeout: 10_000, requestTimeout: 60_000, keepAliveTimeout: 5_000, connectionsCheckingInterval: 1_000,
};

export async function startNodeServer(options: NodeServerOptions): Promise<NodeServer> {
  if (!options.pool && !options.databaseUrl) throw new Error('startNodeServer needs databaseUrl or pool');
  const env = options.env ?? process.env;
  // Read before anything is opened: a bound that does not parse stops the start.
  const admitBatch = readAdmitBatch(env);
  const owned: pg.Pool[] = [];
  const own = (url: string, deadlineMs?: number) => {
    const pool = ownPool(url, deadlineMs);
    owned.push(pool);
    return pool;
  };
  // The receiver's bound on each database call (WHARF_DATABASE_TIMEOUT_MS, as on Workers).
  const deadlineMs = readTimeoutMs(env.WHARF_DATABASE_TIMEOUT_MS);
  const pool = options.pool ?? own(options.databaseUrl!, deadlineMs);
  const operatorPool = options.operatorPool ?? (options.operatorDatabaseUrl ? own(options.operatorDatabaseUrl) : pool);
  const logger = options.logger ?? pino({ name: 'wharf-edge' });
  const registry = options.registry ?? register;
  // Every edge call is bounded, a batch's included, so that one stuck behind
  // a lock lets the next batch go; each delivery's answer is bounded from
  // its arrival besides (coalesceAdmissions), its wait in the queue included.
  const database = withDatabaseDeadline(pool, deadlineMs);
  const app = createServerApp({
    ...(env.WHARF_ADMIN_TOKEN ? { operator: { database: operatorPool } } : {}),
    database,
    // This server's own queue of deliveries: concurrent requests share a batch.
    ...(admitBatch ? { admit: coalesceAdmissions({ database, bound: admitBatch, deadlineMs, logger, ...admissionBatchMetrics(registry) }) } : {}),
    env,
    logger,
    metrics: rejectionCounter(registry),
  });
  const hostname = options.hostname ?? '127.0.0.1';
  let listening: { server: ReturnType<typeof serve>; address: AddressInfo };
  try {
    listening = await new Promise((resolve, reject) => {
      const server = serve({ fetch: app.fetch, port: options.port ?? 0, hostname, serverOptions: timeouts }, (address) =>
        resolve({ server, address }));
      // A busy port is the caller's to report (EADDRINUSE), not a crash.
      server.once('error', reject);
      server.maxConnections = parsePositiveInteger(env.WHARF_MAX_CONNECTIONS) ?? environment.WHARF_MAX_CONNECTIONS.default;
    });
  } catch (error) {
    await Promise.all(owned.map((owner) => owner.end()));
    throw error;
  }
  const { server, address } = listening;
  // After listening, an accept error (EMFILE) is logged, not a crash.
  server.on('error', (error: NodeJS.ErrnoException) => logger.error({ event: 'server_error', code: error.code }, 'server error'));
  return {
    url: `http://${hostname.includes(':') ? `[${hostname}]` : hostname}:${address.port}`,
    port: address.port,
    async close() {
      await new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
      await Promise.all(owned.map((owner) => owner.end()));
    },
  };
}
