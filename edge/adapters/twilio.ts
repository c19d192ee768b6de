// Twilio webhooks: a form-encoded POST (not JSON), `X-Twilio-Signature` =
// base64 HMAC-SHA1(the account's Auth Token, the full URL Twilio requested
// followed by each POST parameter's name and value, sorted by name; a
// repeated parameter's distinct values sorted). HMAC-SHA256 when
// X-Twilio-Webhooks-Signature-Settings says `algorithm=HMAC_SHA256`. No
// timestamp is signed. The URL is the connection's `route.signed_url` when
// set (the URL pasted in Twilio's console, e.g. behind a proxy that rewrites
// it), else the URL the edge received (or it under https). Stored as a JSON object of the form's
// fields. Delivery key: `I-Twilio-Idempotency-Token`, else the form's
// SHA-256; the body is deduplicated by its SHA-256 too. Subjects: the message
// or call SID, then the account.
import { fromBase64, hmacWith, sha256Hex, toBase64 } from '../crypto.js';
import { parseFormBody, readForm } from '../request-body.js';
import {
  badSignature, headerShape, matchesAny, missingField, missingSignature, signingKeysOf, verifyWithAny, type Adapter,
  type Endpoint, type Verification,
} from './adapter.js';
import { subjectsOf, textAt } from './payload.js';

type TwilioAlgorithm = 'sha1' | 'sha256';

/** What Twilio signs: the URL, then each parameter's name and value by name. */
function signedContent(url: string, fields: Record<string, unknown>): string {
  let content = url;
  for (const name of Object.keys(fields).sort()) {
    const value = fields[name];
    const values = Array.isArray(value) ? [...new Set(value.map(String))].sort() : [String(value)];
    for (const each of values) content += name + each;
  }
  return content;
}

export function signTwilioRequest(
  authToken: string, url: string, fields: Record<string, unknown>, algorithm: TwilioAlgorithm = 'sha1',
): string {
  return toBase64(hmacWith(algorithm, authToken, signedContent(url, fields)));
}

function algorithmOf(headers: Headers): TwilioAlgorithm {
  return /algorithm\s*=\s*HMAC_SHA256/i.test(headers.get('x-twilio-webhooks-signature-settings') ?? '') ? 'sha256' : 'sha1';
}

/**
 * The URLs Twilio may have signed: the connection's route.signed_url when
 * set; else the one received, and the same under https (a TLS proxy in
 * front of a Node edge hands it on as http).
 */
function signedUrls(endpoint: Endpoint, received: string): string[] {
  const configured = endpoint.kind === 'connection' ? endpoint.connection.route.signed_url : undefined;
  if (typeof configured === 'string' && configured !== '') return [configured];
  return received.startsWith('http:') ? [received, `https:${received.slice('http:'.length)}`] : [received];
}

export function verifyTwilioSignature(
  authToken: string, urls: readonly string[], fields: Record<string, unknown>, header: string | null, algorithm: TwilioAlgorithm,
): Verification {
  if (!header) return missingSignature;
  const provided = [fromBase64(header)];
  for (const url of urls) {
    const verification = matchesAny(hmacWith(algorithm, authToken, signedContent(url, fields)), provided);
    if (verification.ok) return verification;
  }
  return badSignature;
}

export const twilio: Adapter = {
  provider: 'twilio',
  endpointKind: 'connection',
  secretDestination: "the account's Auth Token (Twilio signs each webhook with it, in X-Twilio-Signature); paste the endpoint as the webhook URL exactly",
  keptHeaders: ['content-type', 'user-agent', 'i-twilio-idempotency-token', 'x-home-region'],
  signatureHeaders: ['x-twilio-signature'],
  signsBodyOnly: true,
  checkHeaders: (headers) => headerShape(headers.get('x-twilio-signature'),
    algorithmOf(headers) === 'sha1' ? /^[A-Za-z0-9+/]{27}=$/ : /^[A-Za-z0-9+/]{43}=$/),
  parseBody: (body) => parseFormBody(body),
  verify({ headers, body, endpoint, url }) {
    // The form's fields are what Twilio signs: read before the check, as a
    // form parser reads any body. One that is not a well-formed form is
    // refused by parseBody once verified (400 invalid-form), not here.
    const { fields } = readForm(body);
    const signed = signedUrls(endpoint, url);
    const algorithm = algorithmOf(headers);
    return verifyWithAny(signingKeysOf(endpoint), async (authToken) =>
      verifyTwilioSignature(authToken, signed, fields, headers.get('x-twilio-signature'), algorithm));
  },
  async read({ headers, text, payload, endpoint }) {
    if (endpoint.kind !== 'connection') return missingField('a connection');
    const message = textAt(payload, 'MessageSid') ?? textAt(payload, 'SmsSid');
    const call = textAt(payload, 'CallSid');
    const status = textAt(payload, 'MessageStatus') ?? textAt(payload, 'SmsStatus') ?? textAt(payload, 'CallStatus');
    const kind = message !== undefined ? 'message' : call !== undefined ? 'call' : undefined;
    if (!kind) return missingField('MessageSid or CallSid');
    return {
      kind: 'delivery',
      deliveryKey: headers.get('i-twilio-idempotency-token') || `sha256:${sha256Hex(text)}`,
      eventType: status ? `${kind}.${status}` : kind,
      route: { connection_id: endpoint.connection.connectionId },
      subjects: subjectsOf(['message:', message], ['call:', call], ['account:', textAt(payload, 'AccountSid')]),
    };
  },
};
