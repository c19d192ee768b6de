// Bitbucket Cloud and Jira webhooks: `X-Hub-Signature: sha256=<hex
// HMAC-SHA256(the webhook's secret, body)>`. No timestamp is signed; the
// delivery id is a header, so the body is deduplicated by its SHA-256 too.
// Bitbucket: event type `X-Event-Key` (`repo:push`), delivery
// `X-Request-UUID`, subjects the repository then its workspace. Jira: event
// type the body's `webhookEvent` (`jira:issue_updated`), delivery
// `X-Atlassian-Webhook-Identifier`, subjects the issue then its project.
import { fromHex, hmacSha256, toHex, type Bytes } from '../crypto.js';
import {
  badSignature, headerShape, hmacMatches, missingField, missingSignature, signingKeysOf, verifyWithAny, type Adapter, type Verification,
} from './adapter.js';
import { subjectsOf, textAt } from './payload.js';

export async function signHubSignatureBody(secret: string, body: Bytes | string): Promise<string> {
  return `sha256=${toHex(await hmacSha256(secret, body))}`;
}

export async function verifyHubSignature(secret: string, body: Bytes, header: string | null): Promise<Verification> {
  if (!header) return missingSignature;
  if (!header.startsWith('sha256=')) return badSignature;
  return hmacMatches(secret, body, fromHex(header.slice('sha256='.length)));
}

const hubSignature = {
  endpointKind: 'connection',
  signatureHeaders: ['x-hub-signature'],
  signsBodyOnly: true,
  checkHeaders: (headers: Headers) => headerShape(headers.get('x-hub-signature'), /^sha256=[0-9a-fA-F]{64}$/),
  verify({ headers, body, endpoint }: Parameters<Adapter['verify']>[0]) {
    return verifyWithAny(signingKeysOf(endpoint), (secret) => verifyHubSignature(secret, body, headers.get('x-hub-signature')));
  },
} as const;

export const bitbucket: Adapter = {
  ...hubSignature,
  provider: 'bitbucket',
  secretDestination: "the webhook's Secret in Repository settings → Webhooks (Bitbucket signs with X-Hub-Signature)",
  keptHeaders: ['content-type', 'user-agent', 'x-event-key', 'x-request-uuid', 'x-hook-uuid', 'x-attempt-number'],
  async read({ headers, payload, endpoint }) {
    const eventType = headers.get('x-event-key');
    const deliveryKey = headers.get('x-request-uuid');
    if (!eventType) return missingField('the X-Event-Key header');
    if (!deliveryKey || endpoint.kind !== 'connection') return missingField('the X-Request-UUID header');
    return {
      kind: 'delivery',
      deliveryKey,
      eventType,
      route: { connection_id: endpoint.connection.connectionId },
      subjects: subjectsOf(
        ['repo:', textAt(payload, 'repository', 'full_name')],
        ['workspace:', textAt(payload, 'repository', 'workspace', 'slug') ?? textAt(payload, 'repository', 'owner', 'username')],
      ),
    };
  },
};

export const jira: Adapter = {
  ...hubSignature,
  provider: 'jira',
  secretDestination: "the webhook's Secret in System → WebHooks (Jira signs with X-Hub-Signature)",
  keptHeaders: ['content-type', 'user-agent', 'x-atlassian-webhook-identifier', 'x-atlassian-webhook-retry'],
  async read({ headers, payload, endpoint }) {
    const eventType = textAt(payload, 'webhookEvent');
    const deliveryKey = headers.get('x-atlassian-webhook-identifier');
    if (!eventType) return missingField('webhookEvent');
    if (!deliveryKey || endpoint.kind !== 'connection') return missingField('the X-Atlassian-Webhook-Identifier header');
    return {
      kind: 'delivery',
      deliveryKey,
      eventType,
      route: { connection_id: endpoint.connection.connectionId },
      subjects: subjectsOf(
        ['issue:', textAt(payload, 'issue', 'key')],
        ['project:', textAt(payload, 'issue', 'fields', 'project', 'key') ?? textAt(payload, 'project', 'key')],
      ),
    };
  },
};
