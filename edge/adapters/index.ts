// The adapters by route segment (`/hooks/<provider>/…`), one per provider of
// the registry (db/providers.ts; the type makes a missing one an error), and
// each provider's signing function beside its verifier for tests, the
// benchmark and samples.
import type { Provider } from '../../db/providers.js';
import type { Adapter } from './adapter.js';
import { bitbucket, jira } from './atlassian.js';
import { forgejo } from './forgejo.js';
import { generic } from './generic.js';
import { github } from './github.js';
import { gitlab } from './gitlab.js';
import { hmac } from './hmac.js';
import { linear } from './linear.js';
import { outline } from './outline.js';
import { paddle } from './paddle.js';
import { shopify } from './shopify.js';
import { slack } from './slack.js';
import { stripe } from './stripe.js';
import { twilio } from './twilio.js';
import { zoom } from './zoom.js';

const byProvider: Readonly<Record<Provider, Adapter>> = {
  github, gitlab, slack, outline, forgejo, generic, stripe, shopify, linear, paddle, zoom, twilio, bitbucket, jira, hmac,
};

export const adapters: ReadonlyMap<string, Adapter> = new Map(Object.entries(byProvider));

export { signGitHubBody, verifyGitHubSignature } from './github.js';
export { hashGitLabToken, verifyGitLabToken } from './gitlab.js';
export { signSlackRequest, verifySlackSignature } from './slack.js';
export { signOutlineBody, verifyOutlineSignature } from './outline.js';
export { signForgejoBody, verifyForgejoSignature } from './forgejo.js';
export { signStandardWebhook, verifyStandardWebhook } from './generic.js';
export { signStripeBody, verifyStripeSignature } from './stripe.js';
export { signShopifyBody, verifyShopifySignature } from './shopify.js';
export { signLinearBody, verifyLinearSignature } from './linear.js';
export { signPaddleBody, verifyPaddleSignature } from './paddle.js';
export { signZoomRequest, verifyZoomSignature } from './zoom.js';
export { signTwilioRequest, verifyTwilioSignature } from './twilio.js';
export { signHubSignatureBody, verifyHubSignature } from './atlassian.js';
export { signConfiguredHmac } from './hmac.js';
