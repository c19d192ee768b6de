import type { Database } from '../../database.js';
import { callWharf } from '../call.js';
import type { EventState } from '../params.js';
import { isInstallation, type EventOwner } from './event-owner.js';

export interface EventSummary {
  id: number;
  workspace_id: number | null;
  provider: string;
  source: string;
  event_type: string;
  subject: string | null;
  state: EventState;
  attempt: number;
  failures: number;
  received_at: string;
  next_attempt_at: string;
  error_class: string | null;
  outcome: string | null;
  handled_at: string | null;
  dead_at: string | null;
}

export interface EventPage {
  events: EventSummary[];
  /** Pass as `before` for the next page; null on the last page. */
  next_cursor: number | null;
}

export interface EventFilter {
  state?: EventState;
  subject?: string;
  limit: number;
  /** Only events with a smaller id (the previous page's next_cursor). */
  before?: string;
}

/** A page of events, newest first (wharf.list_events / list_installation_events). */
export function listEvents(db: Database, owner: EventOwner, filter: EventFilter): Promise<EventPage> {
  const page = [filter.state ?? null, filter.subject ?? null, filter.limit, filter.before ?? null];
  return isInstallation(owner)
    ? callWharf(db, 'wharf.list_installation_events($1, $2, $3, $4)', page)
    : callWharf(db, 'wharf.list_events($1, $2, $3, $4, $5)', [owner.workspaceId, ...page]);
}
