// A stand-in for Neon's HTTP query endpoint (`POST /sql`), for tests, the
// benchmark and `wrangler dev` against a local PostgreSQL: a fake, not Neon.
//
// What of the real service it reproduces, and where that is documented:
// - One statement per HTTP request, run outside any interactive transaction
//   (Neon's "serverless driver" guide: `neon()` sends each query as one HTTP
//   request; the driver's CONFIG.md, `fetchEndpoint`, is how a client points
//   it elsewhere, as the Worker does through NEON_HTTP_ENDPOINT).
// - The request and answer shapes that @neondatabase/serverless 1.2.0 sends
//   and reads, which Neon does not document apart from the driver's source
//   (node_modules/@neondatabase/serverless/index.mjs): the statement and its
//   parameters as JSON `{query, params}`, the target in the
//   `Neon-Connection-String` header, `Neon-Raw-Text-Output` and
//   `Neon-Array-Mode`; rows answered as arrays of PostgreSQL's text forms with
//   `fields` (type ids) that the client parses, `command` and `rowCount`.
// - A PostgreSQL error answered 400 with its fields (SQLSTATE in `code`,
//   severity, detail, hint, …), which the driver turns into a NeonDbError
//   carrying them: the edge sees the same SQLSTATEs (WH409, 22003) as on `pg`.
// - Statements run on connections already open next to the database (a `pg`
//   pool per target), as Neon's endpoint holds them: no per-statement connect.
//
// What it does not reproduce: TLS and authentication (the password in the
// connection string is passed to PostgreSQL as is, and only loopback targets
// are served, so it is no open relay); batches and transactions over HTTP
// (`queries`, the Neon-Batch-* headers) answer 400; Neon's own failures
// (its proxy's error texts and status codes, compute cold starts and
// suspend, rate limits) — an unreachable target answers a plain 503 with a
// message only; network latency (tests put a delay-proxy.ts in front for it).
//
//   npm run neon-http-stand-in     listens on 127.0.0.1:4444 (NEON_HTTP_STAND_IN_PORT to change;
//                                  db/environment.ts, docs/configuration.md)
import { realpathSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { environment } from '../../db/environment.js';

export interface NeonHttpStandIn {
  /** What NEON_HTTP_ENDPOINT (neonConfig.fetchEndpoint) is set to. */
  endpoint: string;
  port: number;
  /** Statements run since start. */
  statements: number;
  /**
   * false: every answer closes its connection (Connection: close), so each
   * statement needs a new one, as after an idle timeout or in a new isolate.
   */
  keepAlive: boolean;
  close(): Promise<void>;
}

const loopback = new Set(['127.0.0.1', '::1', 'localhost']);

/** The connection string's host when it is loopback, else undefined: the stand-in is no open relay. */
export function allowedTarget(connectionString: string | undefined): string | undefined {
  if (!connectionString) return undefined;
  let url: URL;
  try {
    url = new URL(connectionString);
  } catch {
    return undefined;
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (!['postgres:', 'postgresql:'].includes(url.protocol) || !loopback.has(host)) return undefined;
  return host === 'localhost' || isIP(host) ? host : undefined;
}

// What `neon()` decodes: every value as PostgreSQL's text form, parsed on the
// client by the type ids in `fields`.
const asText = { getTypeParser: () => (value: string) => value };

// The fields of a PostgreSQL error that Neon's endpoint passes on (and the
// driver copies onto its NeonDbError).
const errorFields = ['severity', 'code', 'detail', 'hint', 'position', 'internalPosition', 'internalQuery',
  'where', 'schema', 'table', 'column', 'dataType', 'constraint', 'file', 'line', 'routine'] as const;

async function readJson(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

function answer(response: ServerResponse, status: number, body: unknown, keepAlive = true): void {
  const text = JSON.stringify(body);
  response.writeHead(status, {
    'content-type': 'application/json', 'content-length': Buffer.byteLength(text),
    ...(keepAlive ? {} : { connection: 'close' }),
  });
  response.end(text);
}

export async function startNeonHttpStandIn(options: { port?: number; host?: string } = {}): Promise<NeonHttpStandIn> {
  const pools = new Map<string, pg.Pool>();
  const poolFor = (connectionString: string) => {
    let pool = pools.get(connectionString);
    if (!pool) {
      pool = new pg.Pool({ connectionString, max: 10, connectionTimeoutMillis: 5_000 });
      pool.on('error', () => {});
      pools.set(connectionString, pool);
    }
    return pool;
  };

  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    if (request.method !== 'POST' || new URL(request.url ?? '/', 'http://stand-in').pathname !== '/sql') {
      return answer(response, 404, { message: 'stand-in: only POST /sql' });
    }
    const connectionString = request.headers['neon-connection-string'];
    const target = typeof connectionString === 'string' ? connectionString : undefined;
    if (!allowedTarget(target)) return answer(response, 403, { message: 'stand-in: loopback targets only' });
    let body: unknown;
    try {
      body = await readJson(request);
    } catch {
      return answer(response, 400, { message: 'stand-in: the body is not JSON' });
    }
    if (typeof body !== 'object' || body === null || !('query' in body) || typeof body.query !== 'string') {
      return answer(response, 400, { message: 'stand-in: expected {"query", "params"}; batches are not supported' });
    }
    const params = 'params' in body && Array.isArray(body.params) ? body.params : [];
    try {
      stand.statements += 1;
      const result = await poolFor(target!).query({ text: body.query, values: params, rowMode: 'array', types: asText });
      return answer(response, 200, {
        command: result.command,
        rowCount: result.rowCount,
        rowAsArray: true,
        fields: result.fields.map(({ name, tableID, columnID, dataTypeID, dataTypeSize, dataTypeModifier, format }) =>
          ({ name, tableID, columnID, dataTypeID, dataTypeSize, dataTypeModifier, format })),
        rows: result.rows,
      }, stand.keepAlive);
    } catch (error) {
      if (error instanceof pg.DatabaseError) {
        const fields: Record<string, unknown> = { message: error.message };
        for (const field of errorFields) fields[field] = error[field];
        return answer(response, 400, fields);
      }
      // Not an answer from PostgreSQL (refused, reset, timed out): no SQLSTATE.
      return answer(response, 503, { message: `stand-in: the database is unreachable (${(error as Error).message})` });
    }
  };

  const server: Server = createServer((request, response) => {
    handle(request, response).catch(() => response.destroy());
  });
  // Longer than Node's 5 s default, so that a kept-alive connection from the
  // Worker outlives the pauses between deliveries, as an endpoint's would.
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve()));
  const port = (server.address() as { port: number }).port;
  const stand: NeonHttpStandIn = {
    endpoint: `http://127.0.0.1:${port}/sql`,
    port,
    statements: 0,
    keepAlive: true,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await Promise.all([...pools.values()].map((pool) => pool.end()));
    },
  };
  return stand;
}

/** Whether this module is the program node was started with (its real path: a checkout may be reached through a link). */
function isMain(): boolean {
  const started = process.argv[1];
  if (!started) return false;
  try {
    return import.meta.url === pathToFileURL(realpathSync(started)).href;
  } catch {
    return false;
  }
}

// `npm run neon-http-stand-in`: the stand-in on its own, for `wrangler dev`.
if (isMain()) {
  const port = Number(process.env.NEON_HTTP_STAND_IN_PORT || environment.NEON_HTTP_STAND_IN_PORT.default);
  const stand = await startNeonHttpStandIn({ port });
  console.log(`Neon HTTP stand-in (a local fake of Neon's /sql endpoint) at ${stand.endpoint}`);
  const stop = () => void stand.close().then(() => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}
