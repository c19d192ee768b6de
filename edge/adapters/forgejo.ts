// Forgejo and Gitea webhooks: `X-Forgejo-Signature` (else `X-Gitea-Signature`)
// = bare hex HMAC-SHA256(secret, body). Routing fact: the endpoint's connection.
import { fromHex, hmacSha256, toHex, type Bytes } from '../crypto.js';
import {
  badSignature, headerShape, hmacMatches, missingField, missingSignature, signingKeysOf, verifyWithAny, type Adapter, type Verification,
} from './adapter.js';
import { subjectsOf, textAt } from './payload.js';

export async function signForgejoBody(secret: string, body: Bytes | string): Promise<string> {
  return toHex(await hmacSha256(secret, body));
}

export async function verifyForgejoSignature(secret: string, body: Bytes, header: string | null): Promise<Verification> {
  if (!header) return missingSignature;
  return hmacMatches(secret, body, fromHex(header));
}

export const forgejo: Adapter = {
  provider: 'forgejo',
  endpointKind: 'connection',
  secretDestination: "the webhook's Secret field (Forgejo and Gitea sign with X-Forgejo-Signature / X-Gitea-Signature), content type application/json",
  keptHeaders: [
    'content-type', 'user-agent', 'x-forgejo-event', 'x-forgejo-event-type', 'x-forgejo-delivery',
    'x-gitea-event', 'x-gitea-event-type', 'x-gitea-delivery',
  ],
  signatureHeaders: ['x-forgejo-signature', 'x-gitea-signature'],
  signsBodyOnly: true,
  checkHeaders: (headers) =>
    headerShape(headers.get('x-forgejo-signature') ?? headers.get('x-gitea-signature'), /^[0-9a-fA-F]{64}$/),
  verify({ headers, body, endpoint }) {
    return verifyWithAny(signingKeysOf(endpoint), (secret) => verifyForgejoSignature(
      secret, body, headers.get('x-forgejo-signature') ?? headers.get('x-gitea-signature'),
    ));
  },
  async read({ headers, payload, endpoint }) {
    const eventType = headers.get('x-forgejo-event') ?? headers.get('x-gitea-event');
    const deliveryKey = headers.get('x-forgejo-delivery') ?? headers.get('x-gitea-delivery');
    if (!eventType) return missingField('the X-Forgejo-Event header');
    if (!deliveryKey || endpoint.kind !== 'connection') return missingField('the X-Forgejo-Delivery header');
    return {
      kind: 'delivery',
      deliveryKey,
      eventType,
      route: { connection_id: endpoint.connection.connectionId },
      subjects: subjectsOf(
        ['repo:', textAt(payload, 'repository', 'full_name')],
        ['org:', textAt(payload, 'organization', 'login') ?? textAt(payload, 'repository', 'owner', 'login')],
      ),
    };
  },
};
