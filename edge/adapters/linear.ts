// Linear webhooks: `Linear-Signature` = hex HMAC-SHA256(the webhook's signing
// secret, body); the body's `webhookTimestamp` (milliseconds, signed with it)
// within 60 seconds, as Linear's SDK checks. Delivery key: `Linear-Delivery`
// (the body is deduplicated by its SHA-256 too). Event type:
// `<type>.<action>` (`Issue.create`). Subjects: the issue, then the team,
// then the organization.
import { fromHex, hmacSha256, toHex, type Bytes } from '../crypto.js';
import {
  fresh, headerShape, hmacMatches, missingField, missingSignature, signingKeysOf, verifyWithAny,
  type Adapter, type SignedTimestamp, type Verification,
} from './adapter.js';
import { subjectsOf, textAt } from './payload.js';

/** The body's webhookTimestamp, in milliseconds: Linear's SDK refuses one further than 60 s from its clock. */
const linearTimestamp: SignedTimestamp = { in: 'webhookTimestamp', unit: 'milliseconds', toleranceMs: 60 * 1000 };

export async function signLinearBody(secret: string, body: Bytes | string): Promise<string> {
  return toHex(await hmacSha256(secret, body));
}

/**
 * The signature over the raw body. Its timestamp is inside the body: read
 * once the verified body is parsed (linear.read), so that a signed body
 * that is not a JSON object is a 400, never a 401.
 */
export async function verifyLinearSignature(secret: string, body: Bytes, header: string | null): Promise<Verification> {
  if (!header) return missingSignature;
  return hmacMatches(secret, body, fromHex(header));
}

export const linear: Adapter = {
  provider: 'linear',
  endpointKind: 'connection',
  secretDestination: "the webhook's Signing secret in Settings → API → Webhooks (Linear signs with the Linear-Signature header)",
  keptHeaders: ['content-type', 'user-agent', 'linear-delivery', 'linear-event'],
  signatureHeaders: ['linear-signature'],
  signsBodyOnly: true,
  signedTimestamp: linearTimestamp,
  checkHeaders: (headers) => headerShape(headers.get('linear-signature'), /^[0-9a-fA-F]{64}$/),
  verify({ headers, body, endpoint }) {
    return verifyWithAny(signingKeysOf(endpoint), (secret) => verifyLinearSignature(secret, body, headers.get('linear-signature')));
  },
  async read({ headers, payload, endpoint, nowMs }) {
    const timestamp = payload.webhookTimestamp;
    if (typeof timestamp !== 'number') return missingField('webhookTimestamp (milliseconds)');
    if (!fresh(timestamp, nowMs, linearTimestamp.toleranceMs)) return { kind: 'stale' };
    const deliveryKey = headers.get('linear-delivery');
    const type = textAt(payload, 'type');
    if (!deliveryKey || endpoint.kind !== 'connection') return missingField('the Linear-Delivery header');
    if (!type) return missingField('type');
    const action = textAt(payload, 'action');
    const issue = type === 'Issue' ? textAt(payload, 'data', 'id')
      : textAt(payload, 'data', 'issueId') ?? textAt(payload, 'data', 'issue', 'id');
    return {
      kind: 'delivery',
      deliveryKey,
      eventType: action ? `${type}.${action}` : type,
      route: { connection_id: endpoint.connection.connectionId },
      subjects: subjectsOf(
        ['issue:', issue],
        ['team:', textAt(payload, 'data', 'teamId') ?? textAt(payload, 'data', 'team', 'id')],
        ['organization:', textAt(payload, 'organizationId')],
      ),
    };
  },
};
