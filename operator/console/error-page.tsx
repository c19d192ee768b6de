// The page of a refused or failed request: the signed-in frame when there is a
// session, a bare document otherwise (sign-in problems, forged posts).
import type { Context } from 'hono';
import type { ConsoleEnv } from './env.js';
import type { ConsoleError } from './errors.js';
import { Document, Page } from './layout.js';

const titles: Record<number, string> = {
  400: 'That request is not valid', 401: 'Not signed in', 403: 'Not allowed', 404: 'Not found',
  409: 'Not possible now', 413: 'Too large', 415: 'Not a form', 429: 'Too many attempts', 500: 'Internal error', 503: 'Database unavailable',
};

export function errorResponse(c: Context<ConsoleEnv>, basePath: string, error: ConsoleError): Response | Promise<Response> {
  const title = titles[error.status] ?? 'Error';
  if (error.retryAfterSeconds !== undefined) c.header('Retry-After', String(error.retryAfterSeconds));
  const principal = c.get('principal');
  const csrfToken = c.get('csrfToken');
  const body = (
    <>
      <p class="problem" role="alert">{error.message}</p>
      <p><a href={basePath}>Back to the console</a></p>
    </>
  );
  if (principal && csrfToken) {
    return c.html(<Page title={title} basePath={basePath} principal={principal} csrfToken={csrfToken}>{body}</Page>, error.status);
  }
  return c.html(<Document title={title} basePath={basePath}><main id="main"><h1>{title}</h1>{body}</main></Document>, error.status);
}
