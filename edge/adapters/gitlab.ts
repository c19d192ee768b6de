// GitLab webhooks: `X-Gitlab-Token` is a shared token, not a signature; the
// connection stores only its SHA-256 and the edge compares digests.
import { constantTimeEqual } from '../../db/constant-time.js';
import { fromHex, sha256, toHex } from '../crypto.js';
import {
  badSignature, headerShape, missingField, missingSignature, verified, verifyWithAny, type Adapter, type Verification,
} from './adapter.js';
import { subjectsOf, textAt } from './payload.js';

/** What wharf.set_connection_secret stores for a GitLab token, as hex. */
export async function hashGitLabToken(token: string): Promise<string> {
  return toHex(await sha256(token));
}

export async function verifyGitLabToken(tokenSha256Hex: string, header: string | null): Promise<Verification> {
  if (!header) return missingSignature;
  const stored = fromHex(tokenSha256Hex);
  if (!stored) return badSignature;
  return constantTimeEqual(await sha256(header), stored) ? verified : badSignature;
}

export const gitlab: Adapter = {
  provider: 'gitlab',
  endpointKind: 'connection',
  secretDestination: "the webhook's Secret token field (GitLab sends it as X-Gitlab-Token)",
  keptHeaders: [
    'content-type', 'user-agent', 'x-gitlab-event', 'x-gitlab-event-uuid', 'x-gitlab-webhook-uuid',
    'x-gitlab-instance', 'idempotency-key',
  ],
  signatureHeaders: ['x-gitlab-token'],
  signsBodyOnly: false,
  checkHeaders: (headers) => headerShape(headers.get('x-gitlab-token'), /^[\x21-\x7e]{1,1024}$/),
  verify({ headers, endpoint }) {
    const stored = endpoint.kind === 'connection' ? endpoint.connection.tokenSha256s : [];
    return verifyWithAny(stored, (tokenSha256) => verifyGitLabToken(tokenSha256, headers.get('x-gitlab-token')));
  },
  async read({ headers, text, payload, endpoint }) {
    // Project hooks name it object_kind, system hooks event_name.
    const eventType = textAt(payload, 'object_kind') ?? textAt(payload, 'event_name');
    if (!eventType || endpoint.kind !== 'connection') return missingField('object_kind');
    // Older GitLab sends neither header: the same body of the same event is
    // the same delivery. A blank header counts as none.
    const deliveryKey = headers.get('idempotency-key')?.trim()
      || headers.get('x-gitlab-event-uuid')?.trim()
      || `sha256:${toHex(await sha256(`${headers.get('x-gitlab-event') ?? eventType}\n${text}`))}`;
    const project = textAt(payload, 'project', 'path_with_namespace') ?? textAt(payload, 'path_with_namespace');
    const group = textAt(payload, 'group', 'full_path')
      ?? textAt(payload, 'group_path')
      ?? (project?.includes('/') ? project.slice(0, project.lastIndexOf('/')) : undefined);
    return {
      kind: 'delivery',
      deliveryKey,
      eventType,
      route: { connection_id: endpoint.connection.connectionId },
      subjects: subjectsOf(['project:', project], ['group:', group]),
    };
  },
};
