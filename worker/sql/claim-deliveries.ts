// wharf.claim_deliveries (sql/88-destinations.sql): leases up to `max`
// deliveries that may be sent now, and up to `ahead` more for the forwarder
// to start as its requests end (never of a rate-limited destination, nor a
// probe). Rate limits, in-flight bounds, order per (destination, scope),
// paused destinations and open breakers are all decided there, across every
// host; an empty answer means "nothing may be sent now".
import { deliveryColumns, type ClaimedDelivery } from './delivery-row.js';
import { queryPrepared, type Queryable } from './prepared-statement.js';

export function claimDeliveries(db: Queryable, worker: string, max: number, ahead: number): Promise<ClaimedDelivery[]> {
  return queryPrepared<ClaimedDelivery>(db, 'claim_deliveries',
    `SELECT ${deliveryColumns} FROM wharf.claim_deliveries($1, $2, $3)`, [worker, max, ahead]);
}
