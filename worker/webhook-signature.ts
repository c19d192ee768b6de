// The `webhook-signature` of what Wharf sends signed, a forwarded request or
// an alert, made by the Standard Webhooks library itself (so a receiver
// verifies it with the official library of its language). During a
// destination's secret rotation both the new and the previous secret sign: one
// `v1,<base64>` per secret in one header, space-separated, which every
// verifier of the spec accepts when any matches.
import { Webhook } from 'standardwebhooks';

/** A few hundred destinations' keys, so a busy destination's key is decoded once. */
const maxCached = 512;
const webhooks = new Map<string, Webhook>();

function webhookFor(secret: string): Webhook {
  let webhook = webhooks.get(secret);
  if (!webhook) {
    webhook = new Webhook(secret);
    if (webhooks.size >= maxCached) webhooks.delete(webhooks.keys().next().value!);
    webhooks.set(secret, webhook);
  }
  return webhook;
}

/**
 * The signature header's value for `body` sent as `msgId` at `timestamp`,
 * under each secret in order (the current one first).
 */
export function signatureHeader(secrets: readonly string[], msgId: string, timestamp: Date, body: string): string {
  if (secrets.length === 0) throw new TypeError('a signed request needs a signing secret');
  return secrets.map((secret) => webhookFor(secret).sign(msgId, timestamp, body)).join(' ');
}
