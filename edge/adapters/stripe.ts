// Stripe webhooks: `Stripe-Signature: t=<seconds>,v1=<hex HMAC-SHA256(endpoint
// secret, "<t>.<body>")>[,v1=…]` (several v1 while Stripe rolls an endpoint's
// secret), t within five minutes (Stripe's libraries' default tolerance). The
// secret (`whsec_…`) is the HMAC key as it is written. Delivery key: the
// event's `id` (signed); subjects: the customer the event is about, else its
// object, then the Connect account (`account:self` for the platform's own).
import { bytesOf, concatBytes, hmacSha256, toHex, utf8, type Bytes } from '../crypto.js';
import {
  headerShape, missingField, signingKeysOf,
  timestampToleranceMs, verifyTimestampedPairs, verifyWithAny, type Adapter, type SignedTimestamp, type Verification,
} from './adapter.js';
import { subjectsOf, textAt } from './payload.js';

/** The `t` of Stripe-Signature, in seconds. */
const stripeTimestamp: SignedTimestamp = { in: 'Stripe-Signature', unit: 'seconds', toleranceMs: timestampToleranceMs };

function signedContent(timestamp: string, body: Bytes | string): Bytes {
  return concatBytes(utf8(`${timestamp}.`), bytesOf(body));
}

/** A `Stripe-Signature` header with one v1 signature; `timestamp` in seconds. */
export async function signStripeBody(secret: string, body: Bytes | string, timestamp: number): Promise<string> {
  return `t=${timestamp},v1=${toHex(await hmacSha256(secret, signedContent(String(timestamp), body)))}`;
}

export function verifyStripeSignature(
  secret: string, body: Bytes, header: string | null, nowMs: number,
): Promise<Verification> {
  return verifyTimestampedPairs(secret, header, nowMs, {
    separator: ',', timestamp: 't', signature: 'v1', toleranceMs: stripeTimestamp.toleranceMs, signed: (timestamp) => signedContent(timestamp, body),
  });
}

export const stripe: Adapter = {
  provider: 'stripe',
  endpointKind: 'connection',
  secretDestination: "the endpoint's Signing secret (whsec_…) under Developers → Webhooks (Stripe signs with the Stripe-Signature header)",
  keptHeaders: ['content-type', 'user-agent'],
  signatureHeaders: ['stripe-signature'],
  signsBodyOnly: false,
  signedTimestamp: stripeTimestamp,
  checkHeaders: (headers) => headerShape(headers.get('stripe-signature'),
    /^(?=.{0,2048}$)(?=(?:.*,)?\s*t=\d{1,12}\s*(?:,|$))(?=(?:.*,)?\s*v1=[0-9a-fA-F]{64}\s*(?:,|$))/),
  verify({ headers, body, endpoint, nowMs }) {
    return verifyWithAny(signingKeysOf(endpoint),
      (secret) => verifyStripeSignature(secret, body, headers.get('stripe-signature'), nowMs));
  },
  async read({ payload, endpoint }) {
    const deliveryKey = textAt(payload, 'id');
    const eventType = textAt(payload, 'type');
    if (!deliveryKey || endpoint.kind !== 'connection') return missingField('id');
    if (!eventType) return missingField('type');
    const object = textAt(payload, 'data', 'object', 'object');
    const objectId = textAt(payload, 'data', 'object', 'id');
    const customer = object === 'customer'
      ? objectId
      : textAt(payload, 'data', 'object', 'customer') ?? textAt(payload, 'data', 'object', 'customer', 'id');
    return {
      kind: 'delivery',
      deliveryKey,
      eventType,
      route: { connection_id: endpoint.connection.connectionId },
      subjects: subjectsOf(
        ['customer:', customer],
        [`${object ?? 'object'}:`, customer === undefined ? objectId : undefined],
        ['account:', textAt(payload, 'account') ?? 'self'],
      ),
    };
  },
};
