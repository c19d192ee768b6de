// Bounded database calls for the edge, on Workers and on Node. A Worker whose
// query never settles is cancelled by workerd with a 500 and no Retry-After;
// a Node request waits as long as the database makes it. A call that gives up
// in time instead rejects with an error that carries no SQLSTATE, which
// classifyDatabaseError (db/database.ts) answers as "unavailable" (503 with
// Retry-After), and the provider retries.
import { environment } from '../db/environment.js';
import { DatabaseUnavailableError, type Database } from '../db/database.js';
import { parsePositiveInteger } from '../db/numbers.js';

/** What the edge waits for one statement, connection included, unless WHARF_DATABASE_TIMEOUT_MS says otherwise. */
export const defaultDatabaseTimeoutMs = environment.WHARF_DATABASE_TIMEOUT_MS.default;

/** A positive whole number of milliseconds from a binding, else the default. */
export function readTimeoutMs(value: unknown): number {
  return parsePositiveInteger(value) ?? defaultDatabaseTimeoutMs;
}

/**
 * Runs `work` with a signal that aborts after `timeoutMs`; rejects with a
 * DatabaseUnavailableError at that moment even when `work` ignores the
 * signal, so that no caller waits longer than the deadline.
 */
export async function withDeadline<T>(timeoutMs: number, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = new DatabaseUnavailableError(`no answer from the database within ${timeoutMs} ms`);
      controller.abort(error);
      reject(error);
    }, timeoutMs);
  });
  // Promise.resolve adopts a thenable with a single then(): a lazy one (the
  // Neon driver's query) must not be started twice by the race below.
  const running = Promise.resolve(work(controller.signal));
  // Whichever loses the race must not surface as an unhandled rejection.
  running.catch(() => {});
  try {
    return await Promise.race([running, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `db` with every call bounded by `timeoutMs`: the Node edge's receiver
 * answers 503 with Retry-After when the database does not answer in time (a
 * migration's ACCESS EXCLUSIVE lock, a full pool), as the Worker does, never
 * a request that hangs until the database frees up.
 */
export function withDatabaseDeadline(db: Database, timeoutMs: number): Database {
  return {
    query: (text, params) => withDeadline(timeoutMs, () => db.query(text, params)),
  };
}
