// The Admission a verified GitHub App push becomes at the edge, for tests that
// call wharf.admit directly (edge/sql/admission.ts) rather than through HTTP.
import type { Admission } from '../../edge/sql/admission.js';

export interface GitHubPush {
  deliveryKey: string;
  subjects: string[];
  source?: string;
  installationId?: string;
  payload?: unknown;
  headers?: Record<string, string>;
}

export function githubPush(push: GitHubPush): Admission {
  return {
    provider: 'github',
    source: push.source ?? 'https://github.com',
    deliveryKey: push.deliveryKey,
    eventType: 'push',
    route: { installation_id: push.installationId ?? '1' },
    subjects: push.subjects,
    payloadText: JSON.stringify(push.payload ?? {}),
    headers: push.headers ?? {},
  };
}
