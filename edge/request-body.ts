// The raw body, read under a size limit, and its validation as UTF-8 JSON
// that PostgreSQL's jsonb accepts (no NUL, no unpaired surrogate escape).
import type { Bytes } from './crypto.js';
import { jsonSourceAt, parseJson } from './json-source.js';

/**
 * How many body bytes a receiver holds at once, across its requests, before
 * they are verified: past it a request is turned away (503) instead of
 * buffered. One per isolate or process.
 */
export class InflightBudget {
  private used = 0;
  constructor(readonly limit: number) {}

  /** Reserves `bytes`; false (nothing reserved) when that would pass the limit. */
  reserve(bytes: number): boolean {
    if (this.used + bytes > this.limit) return false;
    this.used += bytes;
    return true;
  }

  release(bytes: number): void {
    this.used -= bytes;
  }
}

/** The body's length as its Content-Length declares it; 0 when it declares none. */
export function declaredLength(request: Request): number {
  const declared = request.headers.get('content-length');
  return declared === null ? 0 : Number(declared);
}

export type BodyReading =
  | { ok: true; body: Bytes }
  | { ok: false; reason: 'body-too-large' | 'edge-busy' };

/**
 * The body's bytes, read under `limit` (declared or read) and within
 * `budget`; the bytes reserved are added to `reservation.bytes`, which the
 * caller releases when it is done. Rejects when the client goes away mid-body.
 */
export async function readBodyWithin(
  request: Request, limit: number, budget: InflightBudget, reservation: { bytes: number },
): Promise<BodyReading> {
  const declared = request.headers.get('content-length');
  if (declaredLength(request) > limit) return { ok: false, reason: 'body-too-large' };
  const take = (bytes: number) => {
    if (!budget.reserve(bytes)) return false;
    reservation.bytes += bytes;
    return true;
  };
  // A declared length bounds the body (HTTP/1.1 reads no further), so it can
  // be read whole. On Node that skips the ReadableStream @hono/node-server
  // otherwise builds over the socket: a third of the receiver's own CPU time
  // per delivery in a profile under autocannon. A chunked body is counted as
  // it streams.
  if (declared !== null && /^[0-9]+$/.test(declared)) {
    if (!take(Number(declared))) return { ok: false, reason: 'edge-busy' };
    return { ok: true, body: new Uint8Array(await request.arrayBuffer()) };
  }
  if (!request.body) return { ok: true, body: new Uint8Array(0) };
  const chunks: Uint8Array[] = [];
  let length = 0;
  const reader = request.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    length += value.length;
    if (length > limit || !take(value.length)) {
      await reader.cancel();
      return { ok: false, reason: length > limit ? 'body-too-large' : 'edge-busy' };
    }
    chunks.push(value);
  }
  const body = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    body.set(chunk, offset);
    offset += chunk.length;
  }
  return { ok: true, body };
}

export type JsonObject = { [key: string]: unknown };

export type ParsedBody =
  | { ok: true; text: string; value: JsonObject }
  | { ok: false; reason: 'invalid-utf8' | 'contains-nul' | 'invalid-json' | 'invalid-form'; message: string };

const decoder = new TextDecoder('utf-8', { fatal: true });
// A lone surrogate (from a \ud800-style escape) is valid in JSON.parse and
// invalid in jsonb, like NUL: reject both here rather than fail in admit.
const unstorableEscape = /\\u(?:0000|d[89a-f])/i;
const unpairedSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

export function parseJsonBody(body: Bytes): ParsedBody {
  let text: string;
  try {
    text = decoder.decode(body);
  } catch {
    return { ok: false, reason: 'invalid-utf8', message: 'The body is not valid UTF-8.' };
  }
  if (text.includes('\u0000')) return nulInBody;
  let value: unknown;
  try {
    // Remembering the text: an id past 2^53 is read from it (textAt).
    value = parseJson(text);
  } catch {
    return { ok: false, reason: 'invalid-json', message: 'The body is not JSON.' };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { ok: false, reason: 'invalid-json', message: 'The body is not a JSON object.' };
  }
  // Escapes decode only now: `\u0000` in a string or a key. The text has no
  // raw NUL (checked above) and no raw surrogate (the decoder is fatal), so
  // only an escape can bring either in, and most bodies hold none.
  const bad = unstorableEscape.test(text) ? findUnstorableString(value) : undefined;
  if (bad === 'nul') return nulInBody;
  if (bad === 'surrogate') {
    return { ok: false, reason: 'invalid-json', message: 'The body holds an unpaired surrogate escape.' };
  }
  return { ok: true, text, value: value as JsonObject };
}

export interface FormReading {
  /** Each field a string, a repeated field an array of its values in order. */
  fields: JsonObject;
  /**
   * The body is a form as the edge stores one: UTF-8 of the printable ASCII
   * a form is written in, every percent-escape UTF-8, and not JSON (a form
   * escapes the "{" a JSON object starts with).
   */
  wellFormed: boolean;
}

// A byte that is not UTF-8 becomes U+FFFD, as a form parser reads it.
const replacingDecoder = new TextDecoder('utf-8');

/**
 * The fields of an `application/x-www-form-urlencoded` body as a form parser
 * reads them (WHATWG's, URLSearchParams: `+` a space, a percent-escape that
 * is not UTF-8 U+FFFD), whatever the body: what a provider that signs the
 * fields (Twilio) signed, so that a signed body that is no form can be told
 * from a forged one. Only a well-formed one is stored (parseFormBody): for
 * it these fields are exactly the ones decodeURIComponent reads.
 */
export function readForm(body: Bytes): FormReading {
  const text = replacingDecoder.decode(body);
  const fields: JsonObject = {};
  // After an "&": URLSearchParams drops a leading "?", which a form body keeps.
  for (const [name, field] of new URLSearchParams(`&${text}`)) {
    const previous = fields[name];
    fields[name] = !Object.hasOwn(fields, name) ? field : Array.isArray(previous) ? [...previous, field] : [previous, field];
  }
  return { fields, wellFormed: /^[\x21-\x7e]*$/.test(text) && !text.startsWith('{') && decodesAsUtf8(text) };
}

/** Every percent-escape of `text` is UTF-8 (decodeURIComponent throws rather than put U+FFFD in its place). */
function decodesAsUtf8(text: string): boolean {
  try {
    decodeURIComponent(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * A well-formed form body (Twilio, Slack's slash commands and
 * interactivity) as the JSON object stored for it (readForm). A field named
 * in `jsonFields` whose value is a JSON object (Slack's `payload`) is stored
 * as that object. What is stored obeys the rule of JSON bodies: no NUL, no
 * unpaired surrogate.
 */
export function parseFormBody(body: Bytes, jsonFields: readonly string[] = []): ParsedBody {
  const { fields: value, wellFormed } = readForm(body);
  if (!wellFormed) return { ok: false, reason: 'invalid-form', message: 'The body is not a URL-encoded form in UTF-8.' };
  for (const name of jsonFields) {
    const field = value[name];
    if (typeof field !== 'string' || !field.startsWith('{')) continue;
    try {
      value[name] = parseJson(field);
    } catch {
      return { ok: false, reason: 'invalid-json', message: `The form's ${name} field is not JSON.` };
    }
  }
  const bad = findUnstorableString(value);
  if (bad === 'nul') return nulInBody;
  if (bad === 'surrogate') return { ok: false, reason: 'invalid-json', message: 'The body holds an unpaired surrogate.' };
  return { ok: true, text: formJson(value), value };
}

/**
 * The stored text of a form's fields: each as JSON, a field parsed as JSON
 * as the text it was sent as (JSON.stringify would write its numbers past
 * 2^53 rounded).
 */
function formJson(fields: JsonObject): string {
  let text = '';
  for (const [name, field] of Object.entries(fields)) {
    text += `${text === '' ? '{' : ','}${JSON.stringify(name)}:${jsonSourceAt(field, []) ?? JSON.stringify(field)}`;
  }
  return text === '' ? '{}' : `${text}}`;
}

/** Whether the request says its body is a URL-encoded form. */
export function isFormBody(headers: Headers): boolean {
  return /^\s*application\/x-www-form-urlencoded\s*(?:;|$)/i.test(headers.get('content-type') ?? '');
}

const nulInBody = { ok: false, reason: 'contains-nul', message: 'The body holds a NUL character.' } as const;

function findUnstorableString(value: unknown): 'nul' | 'surrogate' | undefined {
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const next = pending.pop();
    if (typeof next === 'string') {
      if (next.includes('\u0000')) return 'nul';
      if (unpairedSurrogate.test(next)) return 'surrogate';
    } else if (Array.isArray(next)) {
      for (const item of next) pending.push(item);
    } else if (typeof next === 'object' && next !== null) {
      for (const [key, child] of Object.entries(next)) pending.push(key, child);
    }
  }
  return undefined;
}
