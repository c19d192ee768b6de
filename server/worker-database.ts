// Which path the Worker takes to PostgreSQL, chosen by its bindings:
//
//   HYPERDRIVE            a Hyperdrive binding → `pg` through Hyperdrive (any PostgreSQL)
//   DATABASE_URL          no Hyperdrive binding → Neon's HTTP query endpoint (a Neon URL)
//   NEON_HTTP_ENDPOINT    optional, with DATABASE_URL: where the HTTP queries go instead of
//                         Neon's own endpoint (a local stand-in, for wrangler dev)
//   WHARF_DATABASE_TIMEOUT_MS  how long one statement may take, connection included
//                         (default 5000); past it the delivery answers 503 + Retry-After
//
// Both paths cost one round trip to the database's region per statement once
// warm (bench/RESULTS.md, "Edge round trips (issue 19)").
import { DatabaseUnavailableError, type Database } from '../db/database.js';
import { readTimeoutMs } from './database-deadline.js';
import { createHyperdriveDatabase } from './hyperdrive-database.js';
import { createNeonHttpDatabase } from './neon-http-database.js';

/** The part of Cloudflare's Hyperdrive binding the Worker uses. */
export interface HyperdriveBinding {
  connectionString: string;
}

export type DatabasePath =
  | { kind: 'hyperdrive'; connectionString: string }
  | { kind: 'neon-http'; connectionString: string; fetchEndpoint?: string }
  | { kind: 'unconfigured' };

function isHyperdrive(binding: unknown): binding is HyperdriveBinding {
  return typeof binding === 'object' && binding !== null && 'connectionString' in binding &&
    typeof binding.connectionString === 'string' && binding.connectionString !== '';
}

const nonEmpty = (value: unknown): value is string => typeof value === 'string' && value !== '';

/** Hyperdrive when bound (it is the explicit choice), else Neon HTTP when DATABASE_URL is set. */
export function chooseDatabasePath(env: Record<string, unknown>): DatabasePath {
  if (isHyperdrive(env.HYPERDRIVE)) return { kind: 'hyperdrive', connectionString: env.HYPERDRIVE.connectionString };
  if (nonEmpty(env.DATABASE_URL)) {
    return {
      kind: 'neon-http',
      connectionString: env.DATABASE_URL,
      ...(nonEmpty(env.NEON_HTTP_ENDPOINT) ? { fetchEndpoint: env.NEON_HTTP_ENDPOINT } : {}),
    };
  }
  return { kind: 'unconfigured' };
}

/**
 * The Database for a path. Unconfigured, every statement fails as
 * unavailable: providers keep retrying (503) until the binding is set,
 * instead of being told a delivery is bad.
 */
export function createWorkerDatabase(
  path: DatabasePath,
  options: { timeoutMs: unknown; defer(work: Promise<unknown>): void },
): Database {
  const timeoutMs = readTimeoutMs(options.timeoutMs);
  switch (path.kind) {
    case 'hyperdrive':
      return createHyperdriveDatabase({ connectionString: path.connectionString, timeoutMs, defer: options.defer });
    case 'neon-http':
      return createNeonHttpDatabase({
        connectionString: path.connectionString,
        timeoutMs,
        ...(path.fetchEndpoint ? { fetchEndpoint: path.fetchEndpoint } : {}),
      });
    case 'unconfigured':
      return {
        query: () => Promise.reject(new DatabaseUnavailableError('no database is configured: bind HYPERDRIVE or set DATABASE_URL')),
      };
  }
}
