// wharf.claim_deliveries (sql/88-destinations.sql): leases up to `max`
// deliveries that may be sent now. Rate limits, in-flight bounds, order per
// (destination, scope), paused destinations and open breakers are all decided
// there, across every host; an empty answer means "nothing may be sent now".
import { deliveryColumns, type ClaimedDelivery } from './delivery-row.js';
import { queryPrepared, type Queryable } from './prepared-statement.js';

export function claimDeliveries(db: Queryable, worker: string, max: number): Promise<ClaimedDelivery[]> {
  return queryPrepared<ClaimedDelivery>(db, 'claim_deliveries',
    `SELECT ${deliveryColumns} FROM wharf.claim_deliveries($1, $2)`, [worker, max]);
}
