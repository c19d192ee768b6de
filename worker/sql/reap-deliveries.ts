// wharf.reap_deliveries: every delivery lease past its end (a forwarder that
// died mid-request) back to QUEUED, to be sent again under the same
// webhook-id. How many.
import type { Database } from '../../db/database.js';

export async function reapDeliveries(db: Database): Promise<number> {
  const { rows } = await db.query<{ reaped: number }>('SELECT wharf.reap_deliveries() AS reaped');
  return rows[0]?.reaped ?? 0;
}
