// The typed client of the operator API, for scripts and for the CLI: every
// path, parameter, body and answer is typed from the routes themselves
// (Hono's RPC client over operatorApi's type), so a script that calls the API
// wrongly fails to compile rather than at run time.
//
//   const api = operatorApiClient('https://wharf.example.com/api', { token });
//   const page = await answerOf(api.workspaces[':ws'].dead.$get({ param: { ws: '1' }, query: {} }));
import { hc, type ClientResponse } from 'hono/client';
import type { SuccessStatusCode } from 'hono/utils/http-status';
import type { OperatorApi } from './app.js';
import { ApiError } from './errors.js';

export interface OperatorApiClientOptions {
  /** A workspace token or the instance-admin token. */
  token: string;
  /** How requests are sent (default: global fetch); e.g. an app's own `request` to call it in process. */
  fetch?: (input: RequestInfo | URL, init?: RequestInit) => Promise<Response>;
}

/** A client of the operator API mounted at `baseUrl` (e.g. `http://127.0.0.1:8788/api`). */
export function operatorApiClient(baseUrl: string, options: OperatorApiClientOptions) {
  return hc<OperatorApi>(baseUrl, {
    headers: { authorization: `Bearer ${options.token}` },
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
}

export type OperatorApiClient = ReturnType<typeof operatorApiClient>;

/** The body of a successful answer. */
type SuccessBody<R> = R extends ClientResponse<infer T, infer S, 'json'> ? (S extends SuccessStatusCode ? T : never) : never;

/**
 * The body of a successful answer; any other answer as an ApiError carrying
 * the API's status, error code, message and further fields.
 */
export async function answerOf<R extends ClientResponse<unknown, number, 'json'>>(call: Promise<R>): Promise<SuccessBody<R>> {
  const response = await call;
  const text = await response.text();
  let body: unknown;
  try {
    body = text === '' ? {} : JSON.parse(text);
  } catch {
    // Not the API's answer: a proxy's error page, say.
    throw new ApiError(response.status === 503 ? 503 : 500, 'not_json',
      `HTTP ${response.status} with a body that is not JSON: is the URL that of \`wharf serve\`?`);
  }
  if (response.ok) return body as SuccessBody<R>;
  const { error, message, ...details } = body as { error?: string; message?: string };
  throw new ApiError(response.status as ApiError['status'], error ?? 'error', message ?? `HTTP ${response.status}`, details);
}
