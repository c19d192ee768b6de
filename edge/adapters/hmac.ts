// A signed source configured without code (provider `hmac`): its
// connection's route.signature says the signature header and prefix, the
// algorithm and encoding, the signed template over {timestamp}, {url} and
// {body}, the timestamp header and tolerance, and where the event type and
// delivery id are (db/hmac-scheme.ts, validated when saved). Subjects come
// from route.subject_pointers, as for Standard Webhooks. Without a delivery
// id the key is the body's SHA-256; with one from a header (not signed) the
// body is deduplicated by its SHA-256 too.
import { readHmacScheme, type FieldSource, type HmacScheme } from '../../db/hmac-scheme.js';
import { bytesOf, concatBytes, fromBase64, fromHex, hmacWith, sha256Hex, toBase64, toHex, utf8, type Bytes } from '../crypto.js';
import type { JsonObject } from '../request-body.js';
import {
  badSignature, fresh, headerPairs, matchesAny, maxSignatures, missingField, missingSignature, signingKeysOf, staleTimestamp, verified, verifyWithAny,
  type Adapter, type Endpoint, type Verification,
} from './adapter.js';
import { subjectsFromPointers } from './generic.js';
import { textAtPointer } from './payload.js';

// A connection's route object lives as long as its cache entry: its scheme
// is read once per entry, not per delivery.
const schemes = new WeakMap<object, HmacScheme | undefined>();

function schemeOf(endpoint: Endpoint): HmacScheme | undefined {
  if (endpoint.kind !== 'connection') return undefined;
  const route = endpoint.connection.route;
  if (!schemes.has(route)) {
    const reading = readHmacScheme(route.signature);
    schemes.set(route, reading.ok ? reading.scheme : undefined);
  }
  return schemes.get(route);
}

function signedContent(scheme: HmacScheme, timestamp: string, url: string, body: Bytes): Bytes {
  return concatBytes(...scheme.signed.map((part) => {
    if ('literal' in part) return utf8(part.literal);
    if (part.placeholder === 'body') return body;
    return utf8(part.placeholder === 'url' ? url : timestamp);
  }));
}

/** The signature header's value for `body` under `scheme`: for tests and samples. */
export function signConfiguredHmac(
  scheme: HmacScheme, secret: string, body: Bytes | string, options: { timestamp?: string; url?: string } = {},
): string {
  const mac = hmacWith(scheme.algorithm, secret, signedContent(scheme, options.timestamp ?? '', options.url ?? '', bytesOf(body)));
  const signature = scheme.prefix + (scheme.encoding === 'hex' ? toHex(mac) : toBase64(mac));
  if (!scheme.pairs) return signature;
  const { separator, signature: key, timestamp } = scheme.pairs;
  return [...(timestamp === undefined ? [] : [`${timestamp}=${options.timestamp ?? ''}`]), `${key}=${signature}`].join(separator);
}

/** The encoded signatures the header holds (without the prefix), and the timestamp its pairs hold. */
function signaturesOf(scheme: HmacScheme, header: string): { encoded: string[]; timestamp?: string } {
  if (!scheme.pairs) return { encoded: header.startsWith(scheme.prefix) ? [header.slice(scheme.prefix.length)] : [] };
  const pairs = headerPairs(header, scheme.pairs.separator);
  const encoded = pairs.filter(([key]) => key === scheme.pairs!.signature).slice(0, maxSignatures)
    .map(([, value]) => value).filter((value) => value.startsWith(scheme.prefix)).map((value) => value.slice(scheme.prefix.length));
  const timestamp = scheme.pairs.timestamp === undefined ? undefined : pairs.find(([key]) => key === scheme.pairs!.timestamp)?.[1];
  return timestamp === undefined ? { encoded } : { encoded, timestamp };
}

function verifyConfigured(scheme: HmacScheme, secret: string, body: Bytes, headers: Headers, url: string, nowMs: number): Verification {
  const header = headers.get(scheme.header);
  if (!header) return missingSignature;
  const signatures = signaturesOf(scheme, header);
  if (signatures.encoded.length === 0) return badSignature;
  let timestamp = '';
  if (scheme.timestamp) {
    timestamp = (scheme.timestamp.header === undefined ? signatures.timestamp : headers.get(scheme.timestamp.header)) ?? '';
    if (!/^\d{1,15}$/.test(timestamp)) return badSignature;
    const ms = Number(timestamp) * (scheme.timestamp.unit === 'seconds' ? 1000 : 1);
    if (!fresh(ms, nowMs, scheme.timestamp.toleranceSeconds * 1000)) return staleTimestamp;
  }
  const provided = signatures.encoded.map((encoded) => scheme.encoding === 'hex' ? fromHex(encoded) : fromBase64(encoded));
  return matchesAny(hmacWith(scheme.algorithm, secret, signedContent(scheme, timestamp, url, body)), provided);
}

function fieldOf(source: FieldSource | undefined, headers: Headers, payload: JsonObject): string | undefined {
  if (!source) return undefined;
  if ('header' in source) return headers.get(source.header) || undefined;
  return textAtPointer(payload, source.pointer);
}

export const hmac: Adapter = {
  provider: 'hmac',
  endpointKind: 'connection',
  secretDestination: "the sender's signing secret (it signs as the connection's route.signature says)",
  keptHeaders: ['content-type', 'user-agent'],
  // Its own signature header is configured: never kept (keptHeadersOf), and refused
  // as an event type, delivery id or timestamp header when saved.
  signatureHeaders: [],
  signsBodyOnly: false,
  // route.signature.timestamp: its header or pair, unit and tolerance_seconds.
  signedTimestamp: 'configured',
  // Which headers must be there depends on the connection: checked once it is known (checkEndpointHeaders).
  checkHeaders: () => verified,
  checkEndpointHeaders(headers, endpoint) {
    const scheme = schemeOf(endpoint);
    // A route saved around the API's validation: no delivery can verify.
    if (!scheme) return badSignature;
    if (!headers.get(scheme.header)) return missingSignature;
    if (scheme.timestamp?.header !== undefined && !headers.get(scheme.timestamp.header)) return missingSignature;
    return verified;
  },
  keptHeadersOf(endpoint) {
    const scheme = schemeOf(endpoint);
    return [scheme?.timestamp?.header, scheme?.eventType, scheme?.deliveryId]
      .flatMap((source) => typeof source === 'string' ? [source] : source && 'header' in source ? [source.header] : []);
  },
  verify({ headers, body, endpoint, nowMs, url }) {
    const scheme = schemeOf(endpoint);
    if (!scheme) return Promise.resolve(badSignature);
    return verifyWithAny(signingKeysOf(endpoint), async (secret) => verifyConfigured(scheme, secret, body, headers, url, nowMs));
  },
  async read({ headers, text, payload, endpoint }) {
    const scheme = schemeOf(endpoint);
    if (!scheme || endpoint.kind !== 'connection') return missingField('a signature scheme');
    const deliveryKey = fieldOf(scheme.deliveryId, headers, payload);
    if (scheme.deliveryId && !deliveryKey) return missingField(`the delivery id (${JSON.stringify(scheme.deliveryId)})`);
    const eventType = fieldOf(scheme.eventType, headers, payload);
    if (scheme.eventType && !eventType) return missingField(`the event type (${JSON.stringify(scheme.eventType)})`);
    return {
      kind: 'delivery',
      deliveryKey: deliveryKey ?? `sha256:${sha256Hex(text)}`,
      eventType: eventType ?? 'event',
      route: { connection_id: endpoint.connection.connectionId },
      subjects: subjectsFromPointers(payload, endpoint.connection.route),
      dedupeByBody: scheme.deliveryId === undefined || 'header' in scheme.deliveryId,
    };
  },
};
