import type { Context } from 'hono';
import { ApiError } from './errors.js';

/** How deeply a body's objects and arrays may nest (the body itself is level 1). */
export const maxBodyDepth = 64;

/**
 * Refuses, with a 400 before the route's schema sees it, a body that is not
 * a JSON object, one nested deeper than maxBodyDepth (serialising it again
 * for PostgreSQL would overflow the stack, a 500) and one with a NUL
 * (\u0000) anywhere in it, key or value, read by the route or not
 * (PostgreSQL stores NUL neither in text nor in jsonb). An empty body passes:
 * the route's schema says whether it needs one.
 */
export async function checkJsonBody(c: Context): Promise<void> {
  if (c.req.method === 'GET' || c.req.method === 'HEAD') return;
  const text = await c.req.text();
  if (text.trim() === '') return;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new ApiError(400, 'bad_request', 'the body is not valid JSON');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new ApiError(400, 'bad_request', 'the body must be a JSON object');
  }
  checkStorable(body as Record<string, unknown>);
}

/** Walks the body without recursion (it may be nested deeper than the stack allows). */
function checkStorable(body: Record<string, unknown>): void {
  // Each value with its depth and the top-level field it is in.
  const stack: { value: unknown; depth: number; field: string | undefined }[] = [{ value: body, depth: 1, field: undefined }];
  for (let item = stack.pop(); item; item = stack.pop()) {
    const { value, depth, field } = item;
    if (typeof value === 'string') {
      if (value.includes('\u0000')) throw nulIn(field);
      continue;
    }
    if (typeof value !== 'object' || value === null) continue;
    if (depth > maxBodyDepth) {
      throw new ApiError(400, 'bad_request', `the body is nested too deeply (more than ${maxBodyDepth} levels)`);
    }
    for (const [key, member] of Object.entries(value)) {
      if (key.includes('\u0000')) throw nulIn(field ?? key);
      stack.push({ value: member, depth: depth + 1, field: field ?? key });
    }
  }
}

function nulIn(field: string | undefined): ApiError {
  const where = field === undefined || field.includes('\u0000') ? 'a field name' : `"${field}"`;
  return new ApiError(400, 'bad_request', `the body holds a NUL (\\u0000) character in ${where}, which cannot be stored`);
}
