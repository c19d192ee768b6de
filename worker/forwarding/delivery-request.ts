// The request a claimed delivery becomes (DESIGN.md, "Destinations"): a POST
// of the stored payload text exactly as stored (never parsed and written
// again: a big number or a key order survives), signed with Standard
// Webhooks under a `webhook-id` that names the delivery, so it is the same on
// every retry and replay of it. Headers, from weakest to strongest: the
// provider's kept headers under their own names, the destination's extra
// headers, its credentials, then Wharf's own, which nothing overrides.
import type { ClaimedDelivery } from '../sql/delivery-row.js';
import { credentialsHeader, type OpenedSecrets } from './open-secrets.js';
import { signatureHeader } from '../webhook-signature.js';

export interface DeliveryRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
}

/** Hop-by-hop headers (RFC 9110 §7.6.1) and the ones fetch sets itself. */
const hopByHop = new Set([
  'connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'proxy-connection', 'te', 'trailer', 'trailers',
  'transfer-encoding', 'upgrade', 'host', 'expect',
]);

/** Whether a provider's kept header may be passed on under its own name. */
export function isForwardableEventHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return !hopByHop.has(lower) && !lower.startsWith('content-') && !lower.startsWith('webhook-') && !lower.startsWith('wharf-');
}

/** Whether a destination's extra header may be sent: not one fetch owns, nor one Wharf sets. */
function isAllowedExtraHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return !hopByHop.has(lower) && lower !== 'content-length' && lower !== 'content-type'
    && !lower.startsWith('webhook-') && !lower.startsWith('wharf-');
}

const tokenPattern = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * A value a header can carry: printable ASCII as it is; anything else (a
 * subject with non-ASCII characters, a control character) percent-encoded as
 * UTF-8, so the request is never refused for it.
 */
export function headerValue(value: string): string {
  return /^[\x20-\x7e]*$/.test(value) ? value.trim() : encodeURI(value).trim();
}

function put(headers: Record<string, string>, name: string, value: unknown): void {
  if (typeof value !== 'string' && typeof value !== 'number') return;
  const lower = name.toLowerCase();
  if (!tokenPattern.test(lower)) return;
  headers[lower] = headerValue(String(value));
}

export function webhookId(deliveryId: string): string {
  return `wd_${deliveryId}`;
}

export function buildDeliveryRequest(row: ClaimedDelivery, secrets: OpenedSecrets, now: Date): DeliveryRequest {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(row.event_headers ?? {})) {
    if (isForwardableEventHeader(name)) put(headers, name, value);
  }
  for (const [name, value] of Object.entries(row.extra_headers ?? {})) {
    if (isAllowedExtraHeader(name)) put(headers, name, value);
  }
  if (secrets.credentials) {
    const [name, value] = credentialsHeader(secrets.credentials);
    if (tokenPattern.test(name)) headers[name] = value;
  }
  const id = webhookId(row.delivery_id);
  headers['content-type'] = 'application/json';
  headers['webhook-id'] = id;
  headers['webhook-timestamp'] = String(Math.floor(now.getTime() / 1000));
  headers['webhook-signature'] = signatureHeader(secrets.signingSecrets, id, now, row.payload);
  put(headers, 'wharf-provider', row.provider);
  put(headers, 'wharf-event-type', row.event_type);
  put(headers, 'wharf-subject', row.subject);
  if (row.delivery_key !== null && row.delivery_key !== undefined) put(headers, 'wharf-delivery-key', row.delivery_key);
  put(headers, 'wharf-attempt', row.attempt);
  put(headers, 'wharf-event-id', row.event_id);
  return { url: row.url, headers, body: row.payload, timeoutMs: row.timeout_ms };
}
