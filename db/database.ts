// The one query interface every part uses: one parameterized statement at a
// time. A `pg` Pool or Client is one; the Worker entry backs it with
// `@neondatabase/serverless`; nothing that calls SQL knows which.
export interface Database {
  query<Row extends object = Record<string, unknown>>(
    text: string,
    params?: unknown[],
  ): Promise<{ rows: Row[] }>;
}

/** Why a database call failed, as a caller answers it. */
export type DatabaseFailure = 'route-changed' | 'database-unavailable' | 'database-error';

/**
 * WH409 (admit's "route changed") and anything that is not an answer from the
 * server (refused, reset, timed out, a dead WebSocket) or a server that cannot
 * serve now (08 connection, 53 resources, 57P0x shutdown, 57014 cancelled, 40
 * conflicts, 58 system errors) make the caller retry; any other SQLSTATE is a
 * bug to look at.
 */
export function classifyDatabaseError(error: unknown): DatabaseFailure {
  const code = typeof error === 'object' && error !== null && 'code' in error ? error.code : undefined;
  if (code === 'WH409') return 'route-changed';
  // Node's socket codes (EPIPE, ECONNRESET) are no SQLSTATE: no class starts with E.
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code) || code.startsWith('E')) return 'database-unavailable';
  // 58: a system error on the server's side (Hyperdrive reports its own failures as 58000).
  // 57014: the statement was cancelled (a statement_timeout, an operator's
  // pg_cancel_backend) and rolled back: nothing was stored, so retry.
  if (/^(08|53|40|57P0|57014|58)/.test(code)) return 'database-unavailable';
  return 'database-error';
}
