// wharf.release_delivery: a stopping forwarder gives an unsent (or unfinished)
// delivery back, due at once, its attempt uncounted. False when the lease is
// gone already.
import type { Database } from '../../db/database.js';
import type { DeliveryLease } from './delivery-row.js';

export async function releaseDelivery(db: Database, lease: DeliveryLease): Promise<boolean> {
  const { rows } = await db.query<{ released: boolean }>('SELECT wharf.release_delivery($1, $2) AS released', [lease.id, lease.epoch]);
  return rows[0]?.released === true;
}
