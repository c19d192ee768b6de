// Outline webhooks: `Outline-Signature: t=<ms>,s=<hex HMAC-SHA256(secret,
// "<t>.<body>")>`, t within five minutes. Routing fact: the endpoint's connection.
import { bytesOf, concatBytes, fromHex, hmacSha256, toHex, utf8, type Bytes } from '../crypto.js';
import {
  badSignature, headerShape, hmacMatches, missingField, missingSignature, signingKeysOf, staleTimestamp, timestampToleranceMs, verifyWithAny,
  type Adapter, type SignedTimestamp, type Verification,
} from './adapter.js';
import { subjectsOf, textAt } from './payload.js';

/** The `t` of Outline-Signature, in milliseconds. */
const outlineTimestamp: SignedTimestamp = { in: 'Outline-Signature', unit: 'milliseconds', toleranceMs: timestampToleranceMs };

function signedContent(timestampMs: string, body: Bytes | string): Bytes {
  return concatBytes(utf8(`${timestampMs}.`), bytesOf(body));
}

export async function signOutlineBody(secret: string, body: Bytes | string, timestampMs: number): Promise<string> {
  const t = String(timestampMs);
  return `t=${t},s=${toHex(await hmacSha256(secret, signedContent(t, body)))}`;
}

export async function verifyOutlineSignature(
  secret: string, body: Bytes, header: string | null, nowMs: number,
): Promise<Verification> {
  if (!header) return missingSignature;
  const parts = new Map(header.split(',').map((part) => {
    const at = part.indexOf('=');
    return [part.slice(0, at).trim(), part.slice(at + 1).trim()] as const;
  }));
  const t = parts.get('t');
  const s = parts.get('s');
  if (!t || !s || !/^\d{1,15}$/.test(t)) return badSignature;
  if (Math.abs(nowMs - Number(t)) > outlineTimestamp.toleranceMs) return staleTimestamp;
  return hmacMatches(secret, signedContent(t, body), fromHex(s));
}

export const outline: Adapter = {
  provider: 'outline',
  endpointKind: 'connection',
  secretDestination: "the webhook subscription's signing secret (Outline signs with the Outline-Signature header)",
  keptHeaders: ['content-type', 'user-agent'],
  signatureHeaders: ['outline-signature'],
  signsBodyOnly: false,
  signedTimestamp: outlineTimestamp,
  checkHeaders: (headers) =>
    headerShape(headers.get('outline-signature'), /^(?=.*(?:^|,)\s*t=\d{1,15}\s*(?:,|$))(?=.*(?:^|,)\s*s=[0-9a-fA-F]{64}\s*(?:,|$)).{0,200}$/),
  verify({ headers, body, endpoint, nowMs }) {
    return verifyWithAny(signingKeysOf(endpoint),
      (secret) => verifyOutlineSignature(secret, body, headers.get('outline-signature'), nowMs));
  },
  async read({ payload, endpoint }) {
    const deliveryKey = textAt(payload, 'id');
    const eventType = textAt(payload, 'event');
    if (!deliveryKey || endpoint.kind !== 'connection') return missingField('id');
    if (!eventType) return missingField('event');
    const modelId = textAt(payload, 'payload', 'model', 'id') ?? textAt(payload, 'payload', 'id');
    const isDocument = eventType.startsWith('documents.');
    const isCollection = eventType.startsWith('collections.');
    return {
      kind: 'delivery',
      deliveryKey,
      eventType,
      route: { connection_id: endpoint.connection.connectionId },
      subjects: subjectsOf(
        ['document:', isDocument ? modelId : undefined],
        ['collection:', isCollection ? modelId : textAt(payload, 'payload', 'model', 'collectionId')],
      ),
    };
  },
};
