// Zoom webhooks: `x-zm-signature: v0=<hex HMAC-SHA256(the app's secret token,
// "v0:<x-zm-request-timestamp>:<body>")>`, the timestamp (seconds) within
// five minutes. `endpoint.url_validation` (sent when the URL is saved and
// every 72 hours) is answered with the challenge, nothing stored. Zoom sends
// no delivery id: the key is the body's SHA-256 (a retry repeats the body).
// Subjects: the meeting, webinar or other object, then the account. A stored
// delivery is answered 200, not 202: Zoom retries anything but 200 and 204.
import { bytesOf, concatBytes, fromHex, hmacSha256, sha256Hex, toHex, utf8, type Bytes } from '../crypto.js';
import {
  allOf, badSignature, fresh, headerShape, hmacMatches, missingField, missingSignature, signingKeysOf, staleTimestamp,
  timestampToleranceMs, verifyWithAny, type Adapter, type SignedTimestamp, type Verification,
} from './adapter.js';
import { subjectsOf, textAt } from './payload.js';

const zoomTimestamp: SignedTimestamp = { in: 'x-zm-request-timestamp', unit: 'seconds', toleranceMs: timestampToleranceMs };

function signedContent(timestamp: string, body: Bytes | string): Bytes {
  return concatBytes(utf8(`v0:${timestamp}:`), bytesOf(body));
}

/** `timestamp` in seconds, as sent in x-zm-request-timestamp. */
export async function signZoomRequest(secret: string, timestamp: number | string, body: Bytes | string): Promise<string> {
  return `v0=${toHex(await hmacSha256(secret, signedContent(String(timestamp), body)))}`;
}

export async function verifyZoomSignature(
  secret: string, body: Bytes, timestampHeader: string | null, signatureHeader: string | null, nowMs: number,
): Promise<Verification> {
  if (!timestampHeader || !signatureHeader) return missingSignature;
  if (!/^\d{1,12}$/.test(timestampHeader) || !signatureHeader.startsWith('v0=')) return badSignature;
  if (!fresh(Number(timestampHeader) * 1000, nowMs, zoomTimestamp.toleranceMs)) return staleTimestamp;
  return hmacMatches(secret, signedContent(timestampHeader, body), fromHex(signatureHeader.slice(3)));
}

export const zoom: Adapter = {
  provider: 'zoom',
  endpointKind: 'connection',
  secretDestination: "the app's Secret Token under Features → Access (Zoom signs with x-zm-signature and validates the URL with it)",
  keptHeaders: ['content-type', 'user-agent', 'x-zm-request-timestamp', 'x-zm-trackingid'],
  signatureHeaders: ['x-zm-signature'],
  signsBodyOnly: false,
  signedTimestamp: zoomTimestamp,
  // Zoom counts any answer but 200 and 204 as a failed delivery, and retries it.
  acceptedStatus: 200,
  checkHeaders: (headers) => allOf(
    headerShape(headers.get('x-zm-request-timestamp'), /^\d{1,12}$/),
    headerShape(headers.get('x-zm-signature'), /^v0=[0-9a-fA-F]{64}$/),
  ),
  verify({ headers, body, endpoint, nowMs }) {
    return verifyWithAny(signingKeysOf(endpoint), (secret) => verifyZoomSignature(
      secret, body, headers.get('x-zm-request-timestamp'), headers.get('x-zm-signature'), nowMs,
    ));
  },
  async read({ text, payload, endpoint }) {
    const eventType = textAt(payload, 'event');
    if (!eventType || endpoint.kind !== 'connection') return missingField('event');
    if (eventType === 'endpoint.url_validation') {
      const plainToken = textAt(payload, 'payload', 'plainToken');
      const secret = endpoint.connection.signingKeys[0];
      if (plainToken === undefined || secret === undefined) return missingField('payload.plainToken');
      return { kind: 'handshake', body: { plainToken, encryptedToken: toHex(await hmacSha256(secret, plainToken)) } };
    }
    const kind = eventType.split('.')[0]!;
    const objectId = textAt(payload, 'payload', 'object', 'id') ?? textAt(payload, 'payload', 'object', 'uuid');
    return {
      kind: 'delivery',
      deliveryKey: `sha256:${sha256Hex(text)}`,
      eventType,
      route: { connection_id: endpoint.connection.connectionId },
      subjects: subjectsOf(
        [`${kind === 'recording' ? 'meeting' : kind}:`, objectId],
        ['account:', textAt(payload, 'payload', 'account_id')],
      ),
    };
  },
};
