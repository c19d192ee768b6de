// What a filter form sends, read and checked: the same fields the API takes
// (state, provider, event type, subject, received between) plus the keyset
// cursor. A bad value is a 400 page before any query runs.
import { isIdText, parseState, parseSubject, rejectNul, type EventState } from '../api/params.js';
import type { EventSearch } from '../sql/event-search.js';
import type { EventFilter } from '../sql/operator.js';
import { ConsoleError } from './errors.js';

export const pageSize = 50;

/** The raw form values, for putting them back into the form and the "older" link. */
export type FormValues = Record<string, string>;

type Query = (name: string) => string | undefined;

/** A posted form's text field, trimmed; '' when absent or a file. */
export function formField(body: Record<string, unknown>, name: string): string {
  const value = body[name];
  return typeof value === 'string' ? value.trim() : '';
}

/** Optional short text (provider, event type, error class): at most 200 characters, no NUL. */
export function optionalText(value: string | undefined, name: string): string | undefined {
  const text = value?.trim();
  if (!text) return undefined;
  if (text.length > 200) throw new ConsoleError(400, `${name} is too long.`);
  return rejectNul(text, name);
}

/**
 * An instant from a datetime-local field (taken as UTC, as the labels say) or
 * a full ISO timestamp; as ISO text.
 */
export function optionalTime(value: string | undefined, name: string): string | undefined {
  const text = value?.trim();
  if (!text) return undefined;
  const withZone = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?$/.test(text) ? `${text}Z` : text;
  const at = /^\d{4}-\d{2}-\d{2}T/.test(withZone) ? new Date(withZone) : new Date(Number.NaN);
  if (Number.isNaN(at.getTime())) throw new ConsoleError(400, `${name} must be a date and time, e.g. 2026-01-31T13:45.`);
  return at.toISOString();
}

export function optionalCursor(value: string | undefined): string | undefined {
  if (value === undefined || value === '') return undefined;
  if (!isIdText(value)) throw new ConsoleError(400, 'The page cursor is not valid.');
  return value;
}

export interface EventListQuery {
  filter: EventFilter;
  values: FormValues;
  /** The JSON containment search, when the form asks for one. */
  search?: EventSearch;
}

/** A search field: a JSON object, or nothing. */
export function optionalJsonObject(value: string | undefined, name: string): Record<string, unknown> | undefined {
  const text = value?.trim();
  if (!text) return undefined;
  if (text.length > 10_000) throw new ConsoleError(400, `${name} is too long.`);
  try {
    const parsed: unknown = JSON.parse(rejectNul(text, name));
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // reported below
  }
  throw new ConsoleError(400, `${name} must be a JSON object, e.g. {"repository": {"full_name": "acme/api"}}.`);
}

export function readEventFilter(query: Query, options: { withState: boolean }): EventListQuery {
  const values: FormValues = {};
  for (const name of ['state', 'provider', 'event_type', 'subject', 'received_after', 'received_before', 'payload', 'headers']) {
    const value = query(name);
    if (value) values[name] = value;
  }
  const state: EventState | undefined = options.withState ? parseState(values.state) : undefined;
  const filter: EventFilter = { limit: pageSize };
  const set = <K extends keyof EventFilter>(key: K, value: EventFilter[K] | undefined) => {
    if (value !== undefined) filter[key] = value;
  };
  set('state', state);
  set('provider', optionalText(values.provider, 'Provider'));
  set('eventType', optionalText(values.event_type, 'Event type'));
  set('subject', parseSubject(values.subject));
  set('receivedAfter', optionalTime(values.received_after, 'Received from'));
  set('receivedBefore', optionalTime(values.received_before, 'Received before'));
  set('before', optionalCursor(query('cursor')));
  const payload = optionalJsonObject(values.payload, 'Payload contains');
  const headers = optionalJsonObject(values.headers, 'Headers contain');
  const search = payload || headers ? { ...(payload ? { payload } : {}), ...(headers ? { headers } : {}) } : undefined;
  return { filter, values, ...(search ? { search } : {}) };
}

/** `path?values&cursor=…`: the next (older) page with the same filters. */
export function olderLink(path: string, values: FormValues, cursor: number | string): string {
  const params = new URLSearchParams(values);
  params.set('cursor', String(cursor));
  return `${path}?${params.toString()}`;
}
