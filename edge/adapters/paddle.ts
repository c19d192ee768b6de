// Paddle Billing webhooks: `Paddle-Signature: ts=<seconds>;h1=<hex
// HMAC-SHA256(the notification destination's secret key, "<ts>:<body>")>`
// (several h1 while a secret is rotated), ts within five seconds, as Paddle's
// SDKs check. Delivery key: the body's `event_id` (signed). Subjects: the
// customer, then the subscription or the entity, then `account:self`.
import { bytesOf, concatBytes, hmacSha256, toHex, utf8, type Bytes } from '../crypto.js';
import {
  headerShape, missingField, signingKeysOf,
  verifyTimestampedPairs, verifyWithAny, type Adapter, type SignedTimestamp, type Verification,
} from './adapter.js';
import { subjectsOf, textAt } from './payload.js';

/**
 * The `ts` of Paddle-Signature, in seconds. Paddle's SDKs refuse a signature
 * older than 5 s (WebhooksValidator.MAX_VALID_TIME_DIFFERENCE).
 */
const paddleTimestamp: SignedTimestamp = { in: 'Paddle-Signature', unit: 'seconds', toleranceMs: 5 * 1000 };

function signedContent(timestamp: string, body: Bytes | string): Bytes {
  return concatBytes(utf8(`${timestamp}:`), bytesOf(body));
}

/** A `Paddle-Signature` header; `timestamp` in seconds. */
export async function signPaddleBody(secret: string, body: Bytes | string, timestamp: number): Promise<string> {
  return `ts=${timestamp};h1=${toHex(await hmacSha256(secret, signedContent(String(timestamp), body)))}`;
}

export function verifyPaddleSignature(
  secret: string, body: Bytes, header: string | null, nowMs: number,
): Promise<Verification> {
  return verifyTimestampedPairs(secret, header, nowMs, {
    separator: ';', timestamp: 'ts', signature: 'h1', toleranceMs: paddleTimestamp.toleranceMs, signed: (timestamp) => signedContent(timestamp, body),
  });
}

export const paddle: Adapter = {
  provider: 'paddle',
  endpointKind: 'connection',
  secretDestination: "the notification destination's Secret key (pdl_ntfset_…) under Developer tools → Notifications (Paddle signs with Paddle-Signature)",
  keptHeaders: ['content-type', 'user-agent'],
  signatureHeaders: ['paddle-signature'],
  signsBodyOnly: false,
  signedTimestamp: paddleTimestamp,
  checkHeaders: (headers) => headerShape(headers.get('paddle-signature'),
    /^(?=.{0,2048}$)(?=(?:.*;)?\s*ts=\d{1,12}\s*(?:;|$))(?=(?:.*;)?\s*h1=[0-9a-fA-F]{64}\s*(?:;|$))/),
  verify({ headers, body, endpoint, nowMs }) {
    return verifyWithAny(signingKeysOf(endpoint),
      (secret) => verifyPaddleSignature(secret, body, headers.get('paddle-signature'), nowMs));
  },
  async read({ payload, endpoint }) {
    const deliveryKey = textAt(payload, 'event_id');
    const eventType = textAt(payload, 'event_type');
    if (!deliveryKey || endpoint.kind !== 'connection') return missingField('event_id');
    if (!eventType) return missingField('event_type');
    const entity = eventType.split('.')[0]!;
    const subscription = entity === 'subscription' ? textAt(payload, 'data', 'id') : textAt(payload, 'data', 'subscription_id');
    const customer = entity === 'customer' ? textAt(payload, 'data', 'id') : textAt(payload, 'data', 'customer_id');
    return {
      kind: 'delivery',
      deliveryKey,
      eventType,
      route: { connection_id: endpoint.connection.connectionId },
      subjects: subjectsOf(
        ['customer:', customer],
        ['subscription:', subscription],
        [`${entity}:`, customer === undefined && subscription === undefined ? textAt(payload, 'data', 'id') : undefined],
        ['account:', 'self'],
      ),
    };
  },
};
