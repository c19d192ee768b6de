// The Database seam over a Hyperdrive binding with `pg`, for any PostgreSQL
// that is not Neon. Hyperdrive answers the connection setup (TCP, TLS,
// authentication) next to the Worker and sends the statement over a
// connection its pool already holds near the database, so a fresh `pg`
// Client per statement costs one round trip to the database's region.
// A Worker cannot keep a socket from one request for the next, hence the
// Client per statement; its close is never awaited before answering (it
// runs after the response, through `defer`).
import pg from 'pg';
import { DatabaseUnavailableError, type Database } from '../db/database.js';
import { corkable } from './corkable-socket.js';
import { withDeadline } from './database-deadline.js';

export interface HyperdriveOptions {
  /** env.HYPERDRIVE.connectionString (locally: wrangler's stand-in for it, from localConnectionString). */
  connectionString: string;
  timeoutMs: number;
  /** Keeps work alive after the response (ctx.waitUntil in the request being served). */
  defer(work: Promise<unknown>): void;
}

/**
 * Hyperdrive's own failures ("Failed to acquire a connection from the pool.",
 * "Server connection attempt failed: connection_refused") come as an
 * ErrorResponse with SQLSTATE 58000: the origin cannot be reached, which the
 * provider should retry like any other unreachable database.
 */
const hyperdriveUnavailable = '58000';

export function createHyperdriveDatabase(options: HyperdriveOptions): Database {
  return {
    async query<Row extends object>(text: string, params: unknown[] = []) {
      const client = new pg.Client({ connectionString: options.connectionString });
      corkable(client.connection.stream);
      // A socket error while no query runs is emitted, not thrown: without a
      // listener it would be an uncaught 'error' event. While a query runs,
      // that query rejects with the same error, which is what we report.
      client.on('error', () => {});
      try {
        return await withDeadline(options.timeoutMs, async () => {
          await client.connect();
          const result = await client.query<Row>(text, params);
          return { rows: result.rows };
        });
      } catch (error) {
        throw availability(error);
      } finally {
        // end() on a Client still connecting, or with a query in flight,
        // destroys its socket; otherwise it says goodbye. Either way it is
        // the response's business no longer.
        options.defer(client.end());
      }
    },
  };
}

/**
 * Only an ErrorResponse from the server keeps its SQLSTATE (WH409, 22003, …).
 * Anything else is the connection failing (refused, reset, closed mid-query,
 * the deadline): it becomes a DatabaseUnavailableError, with no `code` at
 * all, because a socket error's own code can look like a SQLSTATE ('EPIPE').
 */
function availability(error: unknown): unknown {
  if (!(error instanceof pg.DatabaseError)) {
    return error instanceof DatabaseUnavailableError
      ? error
      : new DatabaseUnavailableError('the connection to the database failed', { cause: error });
  }
  if (error.code === hyperdriveUnavailable) {
    return new DatabaseUnavailableError('Hyperdrive could not reach the database', { cause: error });
  }
  return error;
}
