import type { Database } from '../../database.js';
import { callWharf } from '../call.js';
import { isInstallation, type EventOwner } from './event-owner.js';
import type { EventFilter, EventPage } from './list-events.js';

/** A page of dead letters, newest first (wharf.list_dead / list_installation_dead). */
export function listDead(
  db: Database, owner: EventOwner, filter: Omit<EventFilter, 'state'>,
): Promise<EventPage> {
  const page = [filter.subject ?? null, filter.limit, filter.before ?? null];
  return isInstallation(owner)
    ? callWharf(db, 'wharf.list_installation_dead($1, $2, $3)', page)
    : callWharf(db, 'wharf.list_dead($1, $2, $3, $4)', [owner.workspaceId, ...page]);
}
