// The request-level defences of every console answer: no caching, security
// headers with a strict Content-Security-Policy (inline script only with the
// page's nonce, no inline style, no framing), bounded form bodies, the
// Origin / Sec-Fetch-Site check of hono/csrf, and the session's CSRF token
// on every POST.
import type { MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { csrf as originCheck } from 'hono/csrf';
import { NONCE, secureHeaders } from 'hono/secure-headers';
import type { ConsoleEnv } from './env.js';
import { ConsoleError } from './errors.js';
import { constantTimeEqual } from '../../db/constant-time.js';

export const noStore: MiddlewareHandler = async (c, next) => {
  await next();
  // Pages carry operators' data and CSRF tokens: never cached anywhere.
  c.header('Cache-Control', 'no-store');
};

export const securityHeaders: MiddlewareHandler = secureHeaders({
  contentSecurityPolicy: {
    defaultSrc: ["'none'"],
    scriptSrc: [NONCE],
    styleSrc: ["'self'"],
    imgSrc: ["'self'", 'data:'],
    connectSrc: ["'self'"],
    formAction: ["'self'"],
    frameAncestors: ["'none'"],
    baseUri: ["'none'"],
  },
  xFrameOptions: 'DENY',
  referrerPolicy: 'no-referrer',
});

/** A console form is small: a token, a few filters. */
export const formBodyLimit: MiddlewareHandler = bodyLimit({
  maxSize: 16 * 1024,
  onError: () => {
    throw new ConsoleError(413, 'That form is too large.');
  },
});

/** A cross-site form post: refused before anything reads it (Origin / Sec-Fetch-Site). */
export const sameOriginPosts: MiddlewareHandler = originCheck();

/**
 * Every POST after sign-in carries the session's CSRF token in the form field
 * `csrf` (requireSession computed the expected one). Anything else, a JSON
 * body included, is refused with 403.
 */
export const requireCsrfToken: MiddlewareHandler<ConsoleEnv> = async (c, next) => {
  if (c.req.method === 'GET' || c.req.method === 'HEAD') return next();
  const type = c.req.header('content-type') ?? '';
  const form = /^(application\/x-www-form-urlencoded|multipart\/form-data)\b/i.test(type) ? await c.req.parseBody() : {};
  const presented = typeof form.csrf === 'string' ? form.csrf : '';
  if (!constantTimeEqual(presented, c.get('csrfToken'))) {
    throw new ConsoleError(403, 'This form did not come from this console (missing or wrong CSRF token); reload the page and try again.');
  }
  return next();
};
