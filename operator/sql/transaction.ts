// One transaction over the operator's database, for the few operator calls
// that must commit together or not at all (a destination and its sealed
// signing secret: the secret is sealed under the id the first call returns,
// so the two cannot be one statement).
import type { Database } from '../../db/database.js';
import { ApiError, databaseError } from '../api/errors.js';

/** A pg Pool, as `wharf serve`, `wharf start` and the CLI give the operator API. */
interface PoolLike extends Database {
  connect(): Promise<Database & { release(error?: Error | boolean): void }>;
  idleCount: number;
}

function isPool(db: Database): db is PoolLike {
  return typeof (db as Partial<PoolLike>).connect === 'function' && typeof (db as Partial<PoolLike>).idleCount === 'number';
}

/**
 * Runs `work` on one connection of the pool between BEGIN and COMMIT; any
 * error rolls it back and is thrown as it was. A database that is not a pool
 * (a single statement at a time, nothing to hold a transaction on) is
 * refused as a bug of the caller's wiring, never run without one.
 */
export async function inTransaction<T>(db: Database, work: (tx: Database) => Promise<T>): Promise<T> {
  if (!isPool(db)) {
    throw new ApiError(500, 'internal', 'internal error', {}, {
      cause: new Error('wharf: this operator call needs a transaction: give the operator API a pg Pool'),
    });
  }
  let client: Awaited<ReturnType<PoolLike['connect']>>;
  try {
    client = await db.connect();
  } catch (error) {
    throw databaseError(error);
  }
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    try {
      await client.query('ROLLBACK');
    } catch (rollbackError) {
      // A connection that cannot roll back is not given back to the pool.
      broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
    }
    throw error instanceof ApiError ? error : databaseError(error);
  } finally {
    client.release(broken);
  }
}
