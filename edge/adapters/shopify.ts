// Shopify webhooks: `X-Shopify-Hmac-SHA256` = base64 HMAC-SHA256(the app's
// client secret, body). No timestamp is signed. Delivery key:
// `X-Shopify-Webhook-Id`, which Shopify's retries repeat; the body is
// deduplicated by its SHA-256 too, since the headers are not signed. Event
// type: `X-Shopify-Topic` (`orders/create`). Subjects: the resource
// (`order:<id>`: one order's events in order), then the shop
// (`shop:<domain>`, from X-Shopify-Shop-Domain).
import { fromBase64, hmacSha256, toBase64, type Bytes } from '../crypto.js';
import {
  headerShape, hmacMatches, missingField, missingSignature, signingKeysOf, verifyWithAny, type Adapter, type Verification,
} from './adapter.js';
import { subjectsOf, textAt } from './payload.js';

export async function signShopifyBody(secret: string, body: Bytes | string): Promise<string> {
  return toBase64(await hmacSha256(secret, body));
}

export async function verifyShopifySignature(secret: string, body: Bytes, header: string | null): Promise<Verification> {
  if (!header) return missingSignature;
  return hmacMatches(secret, body, fromBase64(header));
}

/** `orders/create` → `order`; `app/uninstalled` → `app`. */
function resourceOf(topic: string): string {
  const resource = topic.split('/')[0] ?? topic;
  return resource.endsWith('ies') ? `${resource.slice(0, -3)}y` : resource.replace(/s$/, '');
}

export const shopify: Adapter = {
  provider: 'shopify',
  endpointKind: 'connection',
  secretDestination: "the app's Client secret (Shopify signs every webhook of the app with it, in X-Shopify-Hmac-SHA256)",
  keptHeaders: [
    'content-type', 'user-agent', 'x-shopify-topic', 'x-shopify-webhook-id', 'x-shopify-event-id',
    'x-shopify-shop-domain', 'x-shopify-api-version', 'x-shopify-triggered-at',
  ],
  signatureHeaders: ['x-shopify-hmac-sha256'],
  signsBodyOnly: true,
  checkHeaders: (headers) => headerShape(headers.get('x-shopify-hmac-sha256'), /^[A-Za-z0-9+/]{43}=$/),
  verify({ headers, body, endpoint }) {
    return verifyWithAny(signingKeysOf(endpoint),
      (secret) => verifyShopifySignature(secret, body, headers.get('x-shopify-hmac-sha256')));
  },
  async read({ headers, payload, endpoint }) {
    const eventType = headers.get('x-shopify-topic');
    const deliveryKey = headers.get('x-shopify-webhook-id');
    if (!eventType) return missingField('the X-Shopify-Topic header');
    if (!deliveryKey || endpoint.kind !== 'connection') return missingField('the X-Shopify-Webhook-Id header');
    return {
      kind: 'delivery',
      deliveryKey,
      eventType,
      route: { connection_id: endpoint.connection.connectionId },
      subjects: subjectsOf(
        [`${resourceOf(eventType)}:`, textAt(payload, 'id')],
        ['shop:', headers.get('x-shopify-shop-domain') ?? undefined],
      ),
    };
  },
};
