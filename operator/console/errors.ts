// What a console page answers when something goes wrong: a status and a
// message written for the operator, never internals (ApiErrors from the SQL
// calls already carry such messages).
import { ApiError, toApiError } from '../api/errors.js';

/** The API's statuses (the SQL calls' errors arrive as ApiErrors), and 413 for a form too large. */
export type ConsoleStatus = ApiError['status'] | 413;

export class ConsoleError extends Error {
  readonly retryAfterSeconds: number | undefined;

  constructor(readonly status: ConsoleStatus, message: string, options: { retryAfterSeconds?: number } = {}) {
    super(message);
    this.name = 'ConsoleError';
    this.retryAfterSeconds = options.retryAfterSeconds;
  }
}

/** Any error as a ConsoleError; `unexpected` is set for a 500, whose cause is to be logged. */
export function toConsoleError(error: unknown): { error: ConsoleError; unexpected?: unknown } {
  if (error instanceof ConsoleError) return { error };
  const api = error instanceof ApiError ? error : toApiError(error);
  const consoleError = new ConsoleError(api.status, api.status === 500 ? 'Something went wrong on our side.' : api.message,
    { retryAfterSeconds: api.retryAfterSeconds ?? (api.status === 503 ? 5 : undefined) });
  return api.status === 500 ? { error: consoleError, unexpected: api.cause ?? error } : { error: consoleError };
}
