// What a failure means to an API caller or a CLI user: a status, a stable
// code and a message that names no internals (no SQL, no stack, no host).
import { HTTPException } from 'hono/http-exception';
import { classifyDatabaseError } from '../../db/database.js';

export class ApiError extends Error {
  /** The Retry-After of a 429 (a 503 says 5 seconds unless told otherwise). */
  readonly retryAfterSeconds: number | undefined;

  constructor(
    readonly status: 400 | 401 | 403 | 404 | 409 | 415 | 429 | 500 | 503,
    readonly code: string,
    message: string,
    /** Further fields of the error body, e.g. the state of a row that cannot be replayed. */
    readonly details: Record<string, unknown> = {},
    options?: { cause?: unknown; retryAfterSeconds?: number },
  ) {
    super(message, options && 'cause' in options ? { cause: options.cause } : undefined);
    this.name = 'ApiError';
    this.retryAfterSeconds = options?.retryAfterSeconds;
  }

  body(): Record<string, unknown> {
    return { error: this.code, message: this.message, ...this.details };
  }
}

/**
 * What a failed query means (callWharf applies it to every query). The wharf
 * functions raise 22004/22023 (bad argument) and P0002 (unknown object) with
 * messages written for operators, which are passed on. A value PostgreSQL
 * cannot store (NUL in text, 22021, or in jsonb, 22P05; too large, 54000,
 * e.g. for its index) is a 400 with a message of our own, since the server's
 * own message names tables and indexes. What the edge's classifier calls unavailable is a 503;
 * any other server error a 500 that keeps the original as its cause.
 */
export function databaseError(error: unknown): ApiError {
  if (classifyDatabaseError(error) !== 'database-error') {
    return new ApiError(503, 'database_unavailable', 'the database is unavailable; retry later', {}, { cause: error });
  }
  const code = (error as { code: string }).code;
  const message = error instanceof Error ? error.message : '';
  const operatorMessage = message.startsWith('wharf') ? message.replace(/^wharf(\.\w+)?: /, '') : undefined;
  if (code === '22004' || code === '22023' || code === '22P02' || code === '22003') {
    return new ApiError(400, 'bad_request', operatorMessage ?? 'invalid argument');
  }
  if (code === '22021' || code === '22P05') {
    return new ApiError(400, 'bad_request', 'a value holds a character that cannot be stored (NUL, \\u0000)', {}, { cause: error });
  }
  if (code === '54000') {
    return new ApiError(400, 'bad_request', 'a value is too large to be stored', {}, { cause: error });
  }
  if (code === 'P0002') return new ApiError(404, 'not_found', operatorMessage ?? 'not found');
  if (code === '23505') return new ApiError(409, 'conflict', 'it already exists');
  if (code === '23503') return new ApiError(409, 'conflict', 'it refers to something that no longer exists');
  return new ApiError(500, 'internal', 'internal error', {}, { cause: error });
}

/**
 * Any error a route throws: ApiErrors as they are; the validators' own
 * refusals (a body that is not JSON, 400; not sent as JSON, 415) as the API's;
 * anything else (a bug) a 500.
 */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof HTTPException && error.status === 400) {
    return new ApiError(400, 'bad_request', 'the body is not valid JSON');
  }
  if (error instanceof HTTPException && error.status === 415) {
    return new ApiError(415, 'unsupported_media_type', 'send the body as JSON (Content-Type: application/json)');
  }
  return new ApiError(500, 'internal', 'internal error', {}, { cause: error });
}
