// The call of sql/93-event-search.sql: a workspace's events by JSON
// containment on payload and headers, with the listing's filters.
import type { Database } from '../../db/database.js';
import { callWharf } from './call-wharf.js';
import type { EventFilter, EventPage } from './operator.js';

export interface EventSearch {
  /** A JSON object the payload must contain (jsonb @>). */
  payload?: Record<string, unknown>;
  /** A JSON object the stored headers must contain. */
  headers?: Record<string, unknown>;
}

/** A page of the workspace's events matching the search and the filter, newest first (wharf.search_events). */
export function searchEvents(db: Database, workspaceId: string, search: EventSearch, filter: EventFilter): Promise<EventPage> {
  return callWharf(db, 'wharf.search_events($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)', [
    workspaceId,
    search.payload === undefined ? null : JSON.stringify(search.payload),
    search.headers === undefined ? null : JSON.stringify(search.headers),
    filter.state ?? null, filter.subject ?? null, filter.limit, filter.before ?? null,
    filter.provider ?? null, filter.eventType ?? null, filter.receivedAfter ?? null, filter.receivedBefore ?? null,
  ]);
}
