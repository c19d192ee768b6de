// The call of sql/92-delivery-history.sql: deliveries accepted, and refused
// or dropped by reason, per minute and connection of one workspace.
import type { Database } from '../../db/database.js';
import { callWharf } from './call-wharf.js';

export interface DeliveryMinute {
  /** Start of the minute (ISO). */
  at: string;
  /** The connection the deliveries came through (null: a drop naming none). */
  connection_id: number | null;
  /** Deliveries stored as events. */
  accepted: number;
  /** Deliveries refused by a recipient not ACTIVE (its connection or workspace), by reason. */
  refused: Record<string, number>;
  /** Deliveries dropped with no recipient (unknown or inactive source, no subscriber, …), by reason. */
  dropped: Record<string, number>;
}

/** The last `hours` hours (1–24) of the workspace: a row per minute and connection that saw a delivery, oldest first. */
export function deliveryHistory(db: Database, workspaceId: string, hours: number): Promise<DeliveryMinute[]> {
  return callWharf(db, 'wharf.delivery_history($1, $2)', [workspaceId, hours]);
}
