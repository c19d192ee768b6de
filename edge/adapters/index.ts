// The adapters by route segment (`/hooks/<provider>/…`), and each provider's
// signing function beside its verifier for tests, the benchmark and samples.
import type { Adapter } from './adapter.js';
import { forgejo } from './forgejo.js';
import { generic } from './generic.js';
import { github } from './github.js';
import { gitlab } from './gitlab.js';
import { outline } from './outline.js';
import { slack } from './slack.js';

export const adapters: ReadonlyMap<string, Adapter> = new Map(
  [github, gitlab, slack, outline, forgejo, generic].map((adapter) => [adapter.provider, adapter]),
);

export { signGitHubBody, verifyGitHubSignature } from './github.js';
export { hashGitLabToken, verifyGitLabToken } from './gitlab.js';
export { signSlackRequest, verifySlackSignature } from './slack.js';
export { signOutlineBody, verifyOutlineSignature } from './outline.js';
export { signForgejoBody, verifyForgejoSignature } from './forgejo.js';
export { signStandardWebhook, verifyStandardWebhook } from './generic.js';
