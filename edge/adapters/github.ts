// GitHub App webhooks: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(app secret, body)>`.
// Routing fact: `installation.id` of the signed body; installation events are
// control events (stored once per source, with no workspace).
import { fromHex, toHex, hmacSha256, type Bytes } from '../crypto.js';
import {
  badSignature, headerShape, hmacMatches, missingField, missingSignature, signingKeysOf, verifyWithAny, type Adapter, type Verification,
} from './adapter.js';
import { subjectsOf, textAt } from './payload.js';

export async function signGitHubBody(secret: string, body: Bytes | string): Promise<string> {
  return `sha256=${toHex(await hmacSha256(secret, body))}`;
}

export async function verifyGitHubSignature(
  secret: string, body: Bytes, header: string | null,
): Promise<Verification> {
  if (!header) return missingSignature;
  if (!header.startsWith('sha256=')) return badSignature;
  return hmacMatches(secret, body, fromHex(header.slice('sha256='.length)));
}

const controlEventTypes = new Set(['installation', 'installation_repositories', 'installation_target']);

export const github: Adapter = {
  provider: 'github',
  endpointKind: 'app',
  keptHeaders: [
    'content-type', 'user-agent', 'x-github-event', 'x-github-delivery', 'x-github-hook-id',
    'x-github-hook-installation-target-id', 'x-github-hook-installation-target-type',
  ],
  signatureHeaders: ['x-hub-signature-256'],
  signsBodyOnly: true,
  checkHeaders: (headers) => headerShape(headers.get('x-hub-signature-256'), /^sha256=[0-9a-fA-F]{64}$/),
  verify({ headers, body, endpoint }) {
    return verifyWithAny(signingKeysOf(endpoint),
      (secret) => verifyGitHubSignature(secret, body, headers.get('x-hub-signature-256')));
  },
  async read({ headers, payload }) {
    const eventType = headers.get('x-github-event');
    const deliveryKey = headers.get('x-github-delivery');
    if (!eventType) return missingField('the X-GitHub-Event header');
    if (!deliveryKey) return missingField('the X-GitHub-Delivery header');
    if (eventType === 'ping') return { kind: 'handshake', body: { status: 'pong' } };
    const installationId = textAt(payload, 'installation', 'id');
    const control = controlEventTypes.has(eventType);
    return {
      kind: 'delivery',
      deliveryKey,
      eventType,
      route: {
        ...(installationId === undefined ? {} : { installation_id: installationId }),
        ...(control ? { control: true } : {}),
      },
      subjects: subjectsOf(
        ['repo:', textAt(payload, 'repository', 'full_name')],
        ['org:', textAt(payload, 'organization', 'login')
          ?? textAt(payload, 'repository', 'owner', 'login')
          ?? textAt(payload, 'installation', 'account', 'login')],
      ),
    };
  },
};
