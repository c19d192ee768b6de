// Serves a prom-client registry on GET /metrics, with /healthz (the process
// answers) and /readyz (its database does, as a writable primary) beside it.
// Binds 127.0.0.1 unless told otherwise: metrics name event types and queue
// depths.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import type { Readiness } from '../db/readiness.js';

export interface MetricsServer {
  port: number;
  close(): Promise<void>;
}

export interface MetricsServerOptions {
  host?: string;
  /** What /readyz says: 200 when 'ready', else 503 with the word ('standby', 'unavailable'). */
  readiness?: () => Promise<Readiness>;
  /** The older form, still read when `readiness` is not given: true is 'ready', false 'unavailable'. */
  ready?: () => Promise<boolean>;
}

/** A port already taken: a clean start failure, named, instead of a half-started process. */
export class MetricsPortInUse extends Error {
  override name = 'MetricsPortInUse';
}

export async function startMetricsServer(
  registry: Registry, port: number, options: MetricsServerOptions = {},
): Promise<MetricsServer> {
  const host = options.host ?? '127.0.0.1';
  const server: Server = createServer((request, response) => {
    const path = request.url?.split('?')[0];
    if (request.method !== 'GET') {
      response.writeHead(405, { allow: 'GET' }).end();
    } else if (path === '/metrics') {
      registry.metrics().then(
        (body) => response.writeHead(200, { 'content-type': registry.contentType }).end(body),
        () => response.writeHead(500).end(),
      );
    } else if (path === '/healthz') {
      response.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
    } else if (path === '/readyz') {
      const readiness = options.readiness
        ?? (options.ready ? async (): Promise<Readiness> => ((await options.ready!()) ? 'ready' : 'unavailable') : undefined);
      (readiness?.() ?? Promise.resolve<Readiness>('ready')).catch((): Readiness => 'unavailable').then((status) => {
        response.writeHead(status === 'ready' ? 200 : 503, { 'content-type': 'application/json' })
          .end(JSON.stringify({ status }));
      });
    } else {
      response.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => {
      reject(error.code === 'EADDRINUSE'
        ? new MetricsPortInUse(`the metrics port ${host}:${port} is in use: choose another with --metrics-port`)
        : error);
    });
    server.listen(port, host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
