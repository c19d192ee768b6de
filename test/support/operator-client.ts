// Calls the operator API in process like api-client.ts, with what those calls
// leave out: request headers of the test's choosing, the runtime's env (e.g.
// the Node adapter's { incoming } with its socket) and Cloudflare's
// `request.cf`, so that tests can act as several clients. Also serves the API
// over real HTTP with @hono/node-server, as `wharf serve` does.
import type { AddressInfo } from 'node:net';
import { request as httpRequest } from 'node:http';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import type { Database } from '../../db/database.js';
import { parseKeyRing } from '../../db/secret-box.js';
import { operatorApi, type OperatorApiDeps } from '../../operator/api/app.js';
import { testSecretKeys } from './edge-fixtures.js';
import type { ApiResponse } from './api-client.js';

export interface OperatorCallOptions {
  token?: string;
  body?: unknown;
  headers?: Record<string, string>;
  /** The env the runtime hands the app (the Node adapter's is { incoming, outgoing }). */
  env?: unknown;
  /** Set as `request.cf`, as Cloudflare Workers do. */
  cf?: Record<string, unknown>;
}

export type OperatorCall = (method: string, path: string, options?: OperatorCallOptions) => Promise<ApiResponse>;

function mountedApi(deps: OperatorApiDeps): Hono {
  return new Hono().route('/api', operatorApi({ keyRing: parseKeyRing(testSecretKeys), ...deps }));
}

function requestHeaders(options: OperatorCallOptions): Record<string, string> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  return headers;
}

function requestBody(options: OperatorCallOptions): string | undefined {
  if (options.body === undefined) return undefined;
  return typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
}

async function toApiResponse(response: Response): Promise<ApiResponse> {
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : {}, headers: response.headers };
}

export function operatorClient(deps: OperatorApiDeps): OperatorCall {
  const app = mountedApi(deps);
  return async (method, path, options = {}) => {
    const request = new Request(`http://wharf.test/api${path}`, {
      method, headers: requestHeaders(options), body: requestBody(options),
    });
    if (options.cf) Object.defineProperty(request, 'cf', { value: options.cf });
    return toApiResponse(await app.fetch(request, options.env as never));
  };
}

export interface CountingDatabase extends Database {
  /** The statements run so far, in order. */
  statements(): string[];
}

/** `db` itself, every statement of which is also written down: what a request cost the database. */
export function countingDatabase(db: Database): CountingDatabase {
  const statements: string[] = [];
  return {
    query(text, params) {
      statements.push(text);
      return db.query(text, params);
    },
    statements: () => [...statements],
  };
}

/** The Node adapter's env for a connection from `address`. */
export function nodeEnv(address: string): unknown {
  return { incoming: { socket: { remoteAddress: address } }, outgoing: {} };
}

export interface ServedOperatorApi {
  /** Where it listens (the API is at `${url}/api`). */
  url: string;
  /** Calls the API from the local address given (any 127.x.y.z works on Linux). */
  call(method: string, path: string, options: OperatorCallOptions & { from: string }): Promise<ApiResponse>;
  close(): Promise<void>;
}

/** The API at /api behind @hono/node-server on 127.0.0.1, as `wharf serve` runs it. */
export async function serveOperatorApi(deps: OperatorApiDeps): Promise<ServedOperatorApi> {
  const app = mountedApi(deps);
  const { server, port } = await new Promise<{ server: ReturnType<typeof serve>; port: number }>((resolve) => {
    const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, (info: AddressInfo) =>
      resolve({ server, port: info.port }));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    call: (method, path, options) => new Promise<ApiResponse>((resolve, reject) => {
      const body = requestBody(options);
      const req = httpRequest({
        host: '127.0.0.1', port, method, path: `/api${path}`, localAddress: options.from,
        headers: { ...requestHeaders(options), connection: 'close' }, agent: false,
      }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          const headers = new Headers();
          for (const [name, value] of Object.entries(res.headers)) {
            if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
          }
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : {}, headers });
        });
      });
      req.on('error', reject);
      req.end(body);
    }),
    close: () => new Promise<void>((resolve, reject) => {
      server.close((error) => (error ? reject(error) : resolve()));
    }),
  };
}
