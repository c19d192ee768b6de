// The edge's whole view of PostgreSQL: one parameterized statement at a time.
// The Node entry backs it with a `pg` Pool, the Worker entry with
// `@neondatabase/serverless`; nothing else in edge/ knows which.
export interface Database {
  query<Row extends object = Record<string, unknown>>(
    text: string,
    params?: unknown[],
  ): Promise<{ rows: Row[] }>;
}

/** Why a database call failed, as the edge answers it. */
export type DatabaseFailure = 'route-changed' | 'database-unavailable' | 'database-error';

/**
 * WH409 (admit's "route changed") and anything that is not an answer from the
 * server (refused, reset, timed out, a dead WebSocket) or a server that cannot
 * serve now (08 connection, 53 resources, 57P0x shutdown, 40 conflicts) make
 * the provider retry; any other SQLSTATE is a bug to look at.
 */
export function classifyDatabaseError(error: unknown): DatabaseFailure {
  const code = typeof error === 'object' && error !== null && 'code' in error ? error.code : undefined;
  if (code === 'WH409') return 'route-changed';
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return 'database-unavailable';
  if (/^(08|53|40|57P0)/.test(code)) return 'database-unavailable';
  return 'database-error';
}
