import { errorCode, isUnavailableSqlState, sqlState } from './error-codes.js';

// The one query interface every part uses: one parameterized statement at a
// time. A `pg` Pool or Client is one; the Worker entry backs it with
// `@neondatabase/serverless`; nothing that calls SQL knows which.
export interface Database {
  query<Row extends object = Record<string, unknown>>(
    text: string,
    params?: unknown[],
  ): Promise<{ rows: Row[] }>;
}

/** The database could not be reached, or did not answer in time. Deliberately has no `code`: classifyDatabaseError answers it as unavailable. */
export class DatabaseUnavailableError extends Error {
  override readonly name = 'DatabaseUnavailableError';
}

/** Why a database call failed, as a caller answers it. */
export type DatabaseFailure = 'route-changed' | 'database-unavailable' | 'database-error';

/**
 * WH409 (admit's "route changed") and anything that is not an answer from the
 * server (refused, reset, timed out, a dead WebSocket), a server that cannot
 * serve now (isUnavailableSqlState: 08, 53, 57P0x, 57014, 58, and 25006 from a
 * server that became a standby) or a conflict (40) make the caller retry; any
 * other SQLSTATE is a bug to look at.
 */
export function classifyDatabaseError(error: unknown): DatabaseFailure {
  if (errorCode(error) === 'WH409') return 'route-changed';
  const state = sqlState(error);
  if (state === undefined || state.startsWith('40') || isUnavailableSqlState(state)) return 'database-unavailable';
  return 'database-error';
}
