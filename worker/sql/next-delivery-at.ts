// wharf.next_delivery_at: milliseconds until a claim of deliveries could next
// hand something out (a retry falling due, a rate limit's next token, a
// breaker's probe), measured on the database's clock so that the host's
// clock does not matter; null when nothing waits. It may be early, never late.
import type { Database } from '../../db/database.js';

export async function readNextDeliveryIn(db: Database): Promise<number | null> {
  const { rows } = await db.query<{ due_in_ms: number | null }>(
    'SELECT (extract(epoch FROM wharf.next_delivery_at() - clock_timestamp()) * 1000)::float8 AS due_in_ms');
  return rows[0]?.due_in_ms ?? null;
}
