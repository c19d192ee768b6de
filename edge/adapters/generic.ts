// Standard Webhooks (https://www.standardwebhooks.com): `webhook-signature` =
// space-separated `v1,<base64 HMAC-SHA256(key, "<webhook-id>.<webhook-timestamp>.<body>")>`,
// key = base64 after `whsec_`, timestamp (seconds) within five minutes.
// Subjects come from the connection's `route.subject_pointers`: JSON pointers
// into the body, most specific first, each giving `<last pointer token>:<value>`
// (`/data/customer_id` → `customer_id:cus_42`).
import { constantTimeEqual } from '../../db/constant-time.js';
import { bytesOf, concatBytes, fromBase64, hmacSha256, toBase64, utf8, type Bytes } from '../crypto.js';
import {
  allOf, badSignature, maxSignatures, headerShape, missingField, missingSignature, signingKeysOf, staleTimestamp, timestampToleranceMs, verified, verifyWithAny,
  type Adapter, type SignedTimestamp, type Verification,
} from './adapter.js';
import { pointerTokens, textAt, textAtPointer } from './payload.js';
import type { JsonObject } from '../request-body.js';

const standardTimestamp: SignedTimestamp = { in: 'webhook-timestamp', unit: 'seconds', toleranceMs: timestampToleranceMs };

function keyOf(secret: string): Bytes | undefined {
  return fromBase64(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret);
}

function signedContent(id: string, timestamp: string, body: Bytes | string): Bytes {
  return concatBytes(utf8(`${id}.${timestamp}.`), bytesOf(body));
}

/** One `v1,<base64>` signature; `timestamp` in seconds. */
export async function signStandardWebhook(
  secret: string, id: string, timestamp: number | string, body: Bytes | string,
): Promise<string> {
  const key = keyOf(secret);
  if (!key) throw new Error('a Standard Webhooks key is whsec_<base64>');
  return `v1,${toBase64(await hmacSha256(key, signedContent(id, String(timestamp), body)))}`;
}

export async function verifyStandardWebhook(
  secret: string, body: Bytes, headers: Headers, nowMs: number,
): Promise<Verification> {
  const id = headers.get('webhook-id');
  const timestamp = headers.get('webhook-timestamp');
  const signatures = headers.get('webhook-signature');
  if (!id || !timestamp || !signatures) return missingSignature;
  const key = keyOf(secret);
  if (!key || !/^\d{1,12}$/.test(timestamp)) return badSignature;
  if (Math.abs(nowMs - Number(timestamp) * 1000) > standardTimestamp.toleranceMs) return staleTimestamp;
  // Several signatures while the sender rotates its key: any v1 one may
  // match. One HMAC over the body, compared with each (at most a few): an
  // unsigned header of many entries must not cost one body hash each.
  const candidates = signatures.split(' ').filter((signature) => signature.startsWith('v1,')).slice(0, maxSignatures);
  if (candidates.length === 0) return badSignature;
  const expected = await hmacSha256(key, signedContent(id, timestamp, body));
  for (const signature of candidates) {
    const provided = fromBase64(signature.slice(3));
    if (provided && constantTimeEqual(expected, provided)) return verified;
  }
  return badSignature;
}

/** `<last pointer token>:<value>` for each of the route's subject_pointers that the body has. */
export function subjectsFromPointers(payload: JsonObject, route: Record<string, unknown>): string[] {
  const pointers = Array.isArray(route.subject_pointers) ? route.subject_pointers : [];
  return pointers.flatMap((pointer) => {
    if (typeof pointer !== 'string') return [];
    const value = textAtPointer(payload, pointer);
    const name = pointerTokens(pointer).at(-1);
    return value === undefined || !name ? [] : [`${name}:${value}`];
  });
}

export const generic: Adapter = {
  provider: 'generic',
  endpointKind: 'connection',
  secretDestination: "the sender's signing secret (Standard Webhooks: it signs with the webhook-signature header)",
  keptHeaders: ['content-type', 'user-agent', 'webhook-id', 'webhook-timestamp'],
  signatureHeaders: ['webhook-signature'],
  signsBodyOnly: false,
  signedTimestamp: standardTimestamp,
  checkHeaders: (headers) => allOf(
    headerShape(headers.get('webhook-id'), /^[\x21-\x7e]{1,255}$/),
    headerShape(headers.get('webhook-timestamp'), /^\d{1,12}$/),
    headerShape(headers.get('webhook-signature'), /(?:^| )v1,[A-Za-z0-9+/]{20,}={0,2}(?: |$)/),
  ),
  verify({ headers, body, endpoint, nowMs }) {
    return verifyWithAny(signingKeysOf(endpoint), (secret) => verifyStandardWebhook(secret, body, headers, nowMs));
  },
  async read({ headers, payload, endpoint }) {
    // webhook-id is part of the signed content.
    const deliveryKey = headers.get('webhook-id');
    // The spec recommends a `type` but requires no payload field: a signed
    // payload without one is an `event`, never refused.
    const eventType = textAt(payload, 'type') || 'event';
    if (!deliveryKey || endpoint.kind !== 'connection') return missingField('the webhook-id header');
    return {
      kind: 'delivery',
      deliveryKey,
      eventType,
      route: { connection_id: endpoint.connection.connectionId },
      subjects: subjectsFromPointers(payload, endpoint.connection.route),
    };
  },
};
