import type { Database } from '../../database.js';
import { callWharf } from '../call.js';
import { isInstallation, type EventOwner } from './event-owner.js';
import type { EventSummary } from './list-events.js';

export interface EventDetail extends EventSummary {
  delivery_key: string;
  scope_key: string;
  connection_id: number | null;
  payload: unknown;
  /** As admission stored them: without credentials or signatures. */
  headers: Record<string, unknown>;
  lease_epoch: number;
  leased_until: string | null;
  leased_by: string | null;
  replayed_by: string | null;
  replayed_at: string | null;
  steps: { name: string; committed_at: string }[];
}

/** One event of the owner, or null when the owner has no event with that id. */
export function showEvent(db: Database, owner: EventOwner, id: string): Promise<EventDetail | null> {
  return isInstallation(owner)
    ? callWharf(db, 'wharf.show_installation_event($1)', [id])
    : callWharf(db, 'wharf.show_event($1, $2)', [owner.workspaceId, id]);
}
