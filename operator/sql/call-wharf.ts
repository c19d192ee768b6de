import type { Database } from '../../db/database.js';
import { databaseError } from '../api/errors.js';

/**
 * The value of one wharf function call, e.g. `wharf.show_event($1, $2)` with
 * its $n parameters (jsonb arrives parsed, bigint as text). A failure comes
 * out as an ApiError (databaseError).
 */
export async function callWharf<T>(db: Database, call: string, params: unknown[]): Promise<T> {
  let rows: { result: T }[];
  try {
    ({ rows } = await db.query<{ result: T }>(`SELECT ${call} AS result`, params));
  } catch (error) {
    throw databaseError(error);
  }
  const row = rows[0];
  if (!row) throw new Error(`wharf: ${call} returned no row`);
  return row.result;
}
