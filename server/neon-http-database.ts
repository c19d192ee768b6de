// The Database seam over Neon's HTTP query endpoint: `neon()` of
// @neondatabase/serverless sends each statement as one HTTPS POST to Neon's
// `/sql` endpoint in the database's region, which runs it on a connection it
// already holds. The Worker then pays one round trip per statement when its
// HTTP connection is warm (workerd keeps it alive between requests), against
// about five for a WebSocket Client (connect, startup, query, close).
// `admit` is one autocommit statement, so nothing here needs a session.
//
// Errors keep their meaning: a PostgreSQL error comes back as a NeonDbError
// carrying its SQLSTATE in `code` (WH409, 22003, …) and is rethrown as is; a
// failed or timed-out fetch has no SQLSTATE and so reads as "unavailable".
import { neon, neonConfig } from '@neondatabase/serverless';
import { DatabaseUnavailableError, type Database } from '../db/database.js';
import { sqlState } from '../db/error-codes.js';
import { withDeadline } from './database-deadline.js';

export interface NeonHttpOptions {
  /** postgres://user:password@ep-….neon.tech/db — the same URL Neon gives for its driver. */
  connectionString: string;
  /**
   * Where the statements go instead of Neon's own endpoint (derived from the
   * URL's host): a local stand-in of `/sql` for `wrangler dev` and tests.
   */
  fetchEndpoint?: string;
  timeoutMs: number;
}

export function createNeonHttpDatabase(options: NeonHttpOptions): Database {
  // The driver reads fetchEndpoint from its module-wide configuration only;
  // one isolate serves one configuration, so setting it here is enough.
  if (options.fetchEndpoint) neonConfig.fetchEndpoint = options.fetchEndpoint;
  const sql = neon(options.connectionString, { fullResults: true });
  return {
    async query<Row extends object>(text: string, params: unknown[] = []) {
      try {
        // `sql.query` returns a lazy thenable that sends the statement again
        // on every then/catch/finally: awaiting it once, here, is what makes
        // it run exactly once.
        const result = await withDeadline(options.timeoutMs, async (signal) =>
          await sql.query(text, params, { fetchOptions: { signal } }));
        // The driver types rows loosely (Record<string, any>); the caller names their shape.
        return { rows: result.rows as Row[] };
      } catch (error) {
        throw availability(error);
      }
    },
  };
}

/**
 * A SQLSTATE-bearing error passes through untouched; anything else (the fetch
 * failed, the endpoint answered a non-SQL error, the deadline passed) becomes
 * a DatabaseUnavailableError, which carries no SQLSTATE either but says so.
 */
function availability(error: unknown): unknown {
  if (error instanceof DatabaseUnavailableError) return error;
  if (sqlState(error) !== undefined) return error;
  return new DatabaseUnavailableError('the Neon HTTP endpoint could not run the statement', { cause: error });
}
