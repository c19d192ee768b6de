// Statements a host runs many times a second (claim, complete_many) go as
// named statements: PostgreSQL parses and plans them once per connection
// instead of on every call, which was about a tenth of a one-row claim's
// round trip. Their result columns are named, never `*`, so a migration that
// adds a column leaves the prepared result type alone. One that changes the
// type of a returned column breaks the prepared statement on every connection
// that holds it: PostgreSQL refuses it (0A000, "cached plan must not change
// result type") or its row no longer matches the function's (42804, "attribute
// 4 of type record has wrong type"). The statement is then prepared again
// under a new name, and the host carries on through the migration.
import type pg from 'pg';
import { errorCode } from '../../db/error-codes.js';

/** A pg Pool or a connection: named statements are prepared per connection. */
export type Queryable = pg.Pool | pg.ClientBase;

/** Bumped when a schema change breaks a prepared statement, so that every name is prepared anew. */
let generation = 0;

/** SQLSTATEs, not messages: a server may speak another language. */
function isOutdatedPreparedPlan(error: unknown): boolean {
  const code = errorCode(error);
  return code === '0A000' || code === '42804';
}

/** Runs `text` as the named statement `name` (autocommit callers only: an outdated plan is run again). */
export async function queryPrepared<Row extends pg.QueryResultRow>(
  db: Queryable, name: string, text: string, values: unknown[],
): Promise<Row[]> {
  const run = () => db.query<Row>({ name: `wharf.${name}.${generation}`, text, values });
  try {
    return (await run()).rows;
  } catch (error) {
    if (!isOutdatedPreparedPlan(error)) throw error;
    generation += 1;
    return (await run()).rows;
  }
}
