import type { Context } from 'hono';
import { ApiError } from './errors.js';

/** The request's JSON object body; {} when the body is empty. */
export async function readJsonObject(c: Context): Promise<Record<string, unknown>> {
  const text = await c.req.text();
  if (text.trim() === '') return {};
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new ApiError(400, 'bad_request', 'the body is not valid JSON');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new ApiError(400, 'bad_request', 'the body must be a JSON object');
  }
  return body as Record<string, unknown>;
}

export function optionalBoolean(body: Record<string, unknown>, name: string): boolean {
  const value = body[name];
  if (value === undefined) return false;
  if (typeof value !== 'boolean') throw new ApiError(400, 'bad_request', `${name} must be true or false`);
  return value;
}
