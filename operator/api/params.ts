// Validation of what callers send, shared by the API and the CLI: a bad value
// is a 400 (or a CLI error) before any query runs.
import { ApiError } from './errors.js';

const maxBigint = 9223372036854775807n;

/**
 * Refuses text holding NUL (U+0000), which PostgreSQL cannot store in text
 * (it would raise 22021, or 22P05 in jsonb).
 */
export function rejectNul(value: string, name: string): string {
  if (value.includes('\u0000')) throw new ApiError(400, 'bad_request', `${name} must not contain NUL (\\u0000) characters`);
  return value;
}

/** Every parameter of a query string (name and values), whether a route reads it or not: no NUL. */
export function checkQueryParameters(parameters: Record<string, string[]>): void {
  for (const [name, values] of Object.entries(parameters)) {
    if (name.includes('\u0000')) {
      throw new ApiError(400, 'bad_request', 'a query parameter name must not contain NUL (\\u0000) characters');
    }
    for (const value of values) rejectNul(value, name);
  }
}

/** Whether `value` is a positive bigint id written as decimal text. */
export function isIdText(value: unknown): value is string {
  return typeof value === 'string' && /^[1-9][0-9]{0,18}$/.test(value) && BigInt(value) <= maxBigint;
}

/** A positive bigint id given as text; kept as text so no precision is lost. */
export function parseId(value: unknown, name: string): string {
  const text = typeof value === 'number' && Number.isSafeInteger(value) ? String(value) : value;
  if (!isIdText(text)) throw new ApiError(400, 'bad_request', `${name} must be a positive integer id`);
  return text;
}

export const eventStates = ['QUEUED', 'LEASED', 'DONE', 'DEAD'] as const;
export type EventState = (typeof eventStates)[number];

export function parseState(value: string | undefined): EventState | undefined {
  if (value === undefined || value === '') return undefined;
  const state = value.toUpperCase();
  if (!(eventStates as readonly string[]).includes(state)) {
    throw new ApiError(400, 'bad_request', `state must be one of ${eventStates.join(', ')}`);
  }
  return state as EventState;
}

export const maxPageSize = 500;

export function parseLimit(value: string | undefined, fallback = 50): number {
  if (value === undefined || value === '') return fallback;
  if (!/^[0-9]{1,4}$/.test(value) || Number(value) < 1 || Number(value) > maxPageSize) {
    throw new ApiError(400, 'bad_request', `limit must be an integer from 1 to ${maxPageSize}`);
  }
  return Number(value);
}

export function parseSubject(value: string | undefined): string | undefined {
  if (value === undefined || value === '') return undefined;
  if (value.length > 1000) throw new ApiError(400, 'bad_request', 'subject is too long');
  return rejectNul(value, 'subject');
}

/** A required non-empty text field of a request body. */
export function requireText(value: unknown, name: string, maxLength = 1000): string {
  if (typeof value !== 'string' || value === '' || value.length > maxLength) {
    throw new ApiError(400, 'bad_request', `${name} must be a non-empty string`);
  }
  return rejectNul(value, name);
}
