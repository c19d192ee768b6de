// The signature scheme of a configured HMAC source (provider `hmac`): data
// in its connection's route (`route.signature`), never code. One reading of
// it, for the operator surface (validated when saved: a bad scheme is a 400
// with the reason) and for the edge (which verifies with it). The signed
// content is a template of literal text and the placeholders {timestamp},
// {url} and {body}, nothing else: no expression is ever evaluated.

export type HmacAlgorithm = 'sha1' | 'sha256' | 'sha512';
export type SignatureEncoding = 'hex' | 'base64';

/** Where a delivery's id or event type is read: a request header, or a JSON pointer into the signed body. */
export type FieldSource = { header: string } | { pointer: string };

export type TemplatePart = { literal: string } | { placeholder: 'timestamp' | 'url' | 'body' };

export interface HmacScheme {
  /** The signature header's name, lower case. */
  header: string;
  /** Text before the encoded signature (`sha256=`, `v0=`), or ''. */
  prefix: string;
  algorithm: HmacAlgorithm;
  encoding: SignatureEncoding;
  /** What is signed, in order. */
  signed: TemplatePart[];
  /**
   * The header is a list of `key=value` pairs (Stripe's `t=…,v1=…,v1=…`,
   * Paddle's `ts=…;h1=…`): the signatures are the values of `signature`
   * (any may match: a sender rotating its secret signs with each), the
   * timestamp the value of `timestamp`.
   */
  pairs?: { separator: ',' | ';' | ' '; signature: string; timestamp?: string };
  /** The signed timestamp: in `header`, or (no header) in the signature's pairs. */
  timestamp?: { header?: string; unit: 'seconds' | 'milliseconds'; toleranceSeconds: number };
  eventType?: FieldSource;
  deliveryId?: FieldSource;
}

export type SchemeReading = { ok: true; scheme: HmacScheme } | { ok: false; reason: string };

const keys = new Set(['header', 'prefix', 'algorithm', 'encoding', 'signed', 'pairs', 'timestamp', 'event_type', 'delivery_id']);
const pairKey = /^[A-Za-z0-9_-]{1,16}$/;
const headerName = /^[A-Za-z0-9][A-Za-z0-9-]{0,63}$/;
const placeholders = new Set(['timestamp', 'url', 'body']);
const maxTemplateLength = 256;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

class SchemeError extends Error {}

function fail(reason: string): never {
  throw new SchemeError(reason);
}

function header(value: unknown, what: string): string {
  if (typeof value !== 'string' || !headerName.test(value)) fail(`${what} must be a header name (letters, digits and dashes)`);
  return value.toLowerCase();
}

/** `{timestamp}.{body}` → its parts; refuses unknown placeholders, stray braces and a template without {body}. */
export function parseTemplate(template: unknown): TemplatePart[] {
  if (typeof template !== 'string' || template === '') fail('signed must be a template such as "{body}" or "{timestamp}.{body}"');
  if (template.length > maxTemplateLength) fail(`signed is at most ${maxTemplateLength} characters`);
  const parts: TemplatePart[] = [];
  let rest = template;
  while (rest !== '') {
    const open = rest.indexOf('{');
    const close = rest.indexOf('}');
    if (close >= 0 && (open < 0 || close < open)) fail('signed has a "}" without its "{"');
    if (open < 0) {
      parts.push({ literal: rest });
      break;
    }
    if (open > 0) parts.push({ literal: rest.slice(0, open) });
    if (close < 0) fail('signed has a "{" without its "}"');
    const name = rest.slice(open + 1, close);
    if (!placeholders.has(name)) fail(`signed names {${name}}; the placeholders are {timestamp}, {url} and {body}`);
    parts.push({ placeholder: name as 'timestamp' | 'url' | 'body' });
    rest = rest.slice(close + 1);
  }
  const bodies = parts.filter((part) => 'placeholder' in part && part.placeholder === 'body').length;
  if (bodies !== 1) fail('signed must hold {body} exactly once: a signature that does not cover the body proves nothing');
  return parts;
}

function fieldSource(value: unknown, what: string): FieldSource | undefined {
  if (value === undefined) return undefined;
  if (!isObject(value) || Object.keys(value).length !== 1) fail(`${what} must be {"header": "<name>"} or {"pointer": "/json/pointer"}`);
  if ('header' in value) return { header: header(value.header, `${what}.header`) };
  if (typeof value.pointer !== 'string' || !/^(?:\/[^/]*)+$/.test(value.pointer) || value.pointer.length > 256) {
    fail(`${what}.pointer must be a JSON pointer such as "/data/id"`);
  }
  return { pointer: value.pointer };
}

function readScheme(value: unknown): HmacScheme {
  if (!isObject(value)) fail('route.signature must be an object: header, algorithm, encoding, signed…');
  const unknown = Object.keys(value).filter((key) => !keys.has(key));
  if (unknown.length > 0) fail(`route.signature has unknown settings: ${unknown.join(', ')}`);
  const prefix = value.prefix ?? '';
  if (typeof prefix !== 'string' || !/^[\x21-\x7e]{0,32}$/.test(prefix)) fail('prefix must be up to 32 printable characters, e.g. "sha256="');
  if (value.algorithm !== 'sha1' && value.algorithm !== 'sha256' && value.algorithm !== 'sha512') {
    fail('algorithm must be sha1, sha256 or sha512');
  }
  if (value.encoding !== 'hex' && value.encoding !== 'base64') fail('encoding must be hex or base64');
  const signed = parseTemplate(value.signed ?? '{body}');
  const scheme: HmacScheme = {
    header: header(value.header, 'header'), prefix, algorithm: value.algorithm, encoding: value.encoding, signed,
  };
  if (value.pairs !== undefined) {
    const p = value.pairs;
    if (!isObject(p) || (p.separator !== ',' && p.separator !== ';' && p.separator !== ' ')
        || typeof p.signature !== 'string' || !pairKey.test(p.signature)
        || (p.timestamp !== undefined && (typeof p.timestamp !== 'string' || !pairKey.test(p.timestamp) || p.timestamp === p.signature))) {
      fail('pairs must be {"separator": "," | ";" | " ", "signature": "<key>", "timestamp": "<another key>"}, e.g. Stripe\'s {"separator": ",", "signature": "v1", "timestamp": "t"}');
    }
    const unknownPairs = Object.keys(p).filter((key) => !['separator', 'signature', 'timestamp'].includes(key));
    if (unknownPairs.length > 0) fail(`pairs has unknown settings: ${unknownPairs.join(', ')}`);
    scheme.pairs = { separator: p.separator, signature: p.signature, ...(p.timestamp === undefined ? {} : { timestamp: p.timestamp }) };
  }
  if (value.timestamp !== undefined || scheme.pairs?.timestamp !== undefined) {
    const t = value.timestamp ?? {};
    if (!isObject(t)) fail('timestamp must be {"header": "<name>", "unit": "seconds", "tolerance_seconds": 300}');
    const unit = t.unit ?? 'seconds';
    if (unit !== 'seconds' && unit !== 'milliseconds') fail('timestamp.unit must be seconds or milliseconds');
    const tolerance = t.tolerance_seconds ?? 300;
    if (typeof tolerance !== 'number' || !Number.isInteger(tolerance) || tolerance < 1 || tolerance > 86_400) {
      fail('timestamp.tolerance_seconds must be a whole number of seconds from 1 to 86400');
    }
    if (scheme.pairs?.timestamp !== undefined && t.header !== undefined) {
      fail('the timestamp is in the signature header\'s pairs (pairs.timestamp) or in a header of its own (timestamp.header), not both');
    }
    scheme.timestamp = {
      ...(scheme.pairs?.timestamp === undefined ? { header: header(t.header, 'timestamp.header') } : {}),
      unit, toleranceSeconds: tolerance,
    };
  }
  if (signed.some((part) => 'placeholder' in part && part.placeholder === 'timestamp') && !scheme.timestamp) {
    fail('signed uses {timestamp}: say which header holds it (timestamp.header, or pairs.timestamp)');
  }
  if (scheme.timestamp && !signed.some((part) => 'placeholder' in part && part.placeholder === 'timestamp')) {
    fail('a timestamp that signed does not hold ({timestamp}) proves nothing: add it to the template or drop timestamp');
  }
  const eventType = fieldSource(value.event_type, 'event_type');
  const deliveryId = fieldSource(value.delivery_id, 'delivery_id');
  if (eventType) scheme.eventType = eventType;
  if (deliveryId) scheme.deliveryId = deliveryId;
  for (const source of [eventType, deliveryId]) {
    if (source && 'header' in source && source.header === scheme.header) {
      fail('the signature header cannot also be the event type or delivery id header: it would be stored');
    }
  }
  if (scheme.timestamp?.header === scheme.header) fail('the timestamp and the signature are separate headers');
  return scheme;
}

/** The scheme of a configured source's route.signature, or why it is not one. Runs nothing it reads. */
export function readHmacScheme(value: unknown): SchemeReading {
  try {
    return { ok: true, scheme: readScheme(value) };
  } catch (error) {
    if (error instanceof SchemeError) return { ok: false, reason: error.message };
    throw error;
  }
}

/**
 * Why `route` cannot be a configured source's route, or undefined: its
 * `signature` scheme, and its optional `subject_pointers` (JSON pointers
 * into the body, most specific first, as for Standard Webhooks).
 */
export function hmacRouteProblem(route: Record<string, unknown>): string | undefined {
  const reading = readHmacScheme(route.signature);
  if (!reading.ok) return reading.reason;
  const pointers = route.subject_pointers;
  if (pointers !== undefined && (!Array.isArray(pointers) || pointers.length > 8
      || !pointers.every((pointer) => typeof pointer === 'string' && /^(?:\/[^/]*)+$/.test(pointer)))) {
    return 'subject_pointers must be a list of up to 8 JSON pointers such as "/data/customer_id"';
  }
  return undefined;
}
