// What every route description shares: JSON answers, the error answers, and
// the hook that turns a request the schemas refuse into the API's 400.
import type { Context } from 'hono';
import { OpenAPIHono, type z } from '@hono/zod-openapi';
import type { OperatorEnv } from './auth.js';
import { ApiError } from './errors.js';
import { errorBody } from './schemas.js';

export function json<T extends z.ZodType>(schema: T, description: string) {
  return { content: { 'application/json': { schema } }, description };
}

/** A JSON request body; optional ones may be left out (then {}). */
export function jsonBody<T extends z.ZodType>(schema: T, required = false) {
  return { content: { 'application/json': { schema } }, required };
}

const errorDescriptions = {
  400: 'the request is malformed: {error: "bad_request", message}',
  401: 'no token, or one that is not valid',
  403: 'the token does not reach this',
  404: 'no such thing here',
  409: 'the state of the thing forbids it (the answer names the state)',
  429: 'too many failed authentications from this client (Retry-After)',
  503: 'the database is unavailable; retry later (Retry-After)',
} as const;

type ErrorStatus = keyof typeof errorDescriptions;

/** The error answers a route may give, besides 401, 429 and 503 which every route may. */
export function errors<S extends ErrorStatus>(...statuses: S[]) {
  const all = [...new Set<ErrorStatus>([...statuses, 401, 429, 503])];
  return Object.fromEntries(all.map((status) => [status, json(errorBody, errorDescriptions[status])])) as
    Record<S | 401 | 429 | 503, ReturnType<typeof json<typeof errorBody>>>;
}

/** The first thing the schemas refused, as the API's usual 400. */
function refused(result: { success: boolean; error?: z.ZodError }, _c: Context): void {
  if (result.success || !result.error) return;
  const issue = result.error.issues[0];
  const where = issue && issue.path.length > 0 && !issue.message.startsWith(String(issue.path[0]))
    ? `${issue.path.join('.')}: ` : '';
  throw new ApiError(400, 'bad_request', `${where}${issue?.message ?? 'invalid request'}`);
}

/** A group of routes, validated the API's way. */
export function routeGroup(): OpenAPIHono<OperatorEnv> {
  return new OpenAPIHono<OperatorEnv>({ defaultHook: refused });
}
