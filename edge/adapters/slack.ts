// Slack Events API: `X-Slack-Signature: v0=<hex HMAC-SHA256(signing secret,
// "v0:<timestamp>:<body>")>`, timestamp within five minutes. Routing fact:
// `team_id` of the signed body.
import { bytesOf, concatBytes, fromHex, hmacSha256, toHex, utf8, type Bytes } from '../crypto.js';
import {
  allOf, badSignature, headerShape, hmacMatches, missingField, missingSignature, signingKeysOf, staleTimestamp, timestampToleranceMs, verifyWithAny, type Adapter, type Verification,
} from './adapter.js';
import { subjectsOf, textAt } from './payload.js';

function signedContent(timestamp: string, body: Bytes | string): Bytes {
  return concatBytes(utf8(`v0:${timestamp}:`), bytesOf(body));
}

/** `timestamp` in seconds, as sent in X-Slack-Request-Timestamp. */
export async function signSlackRequest(secret: string, timestamp: number | string, body: Bytes | string): Promise<string> {
  return `v0=${toHex(await hmacSha256(secret, signedContent(String(timestamp), body)))}`;
}

export async function verifySlackSignature(
  secret: string, body: Bytes, timestampHeader: string | null, signatureHeader: string | null, nowMs: number,
): Promise<Verification> {
  if (!timestampHeader || !signatureHeader) return missingSignature;
  if (!/^\d{1,12}$/.test(timestampHeader)) return badSignature;
  if (Math.abs(nowMs - Number(timestampHeader) * 1000) > timestampToleranceMs) return staleTimestamp;
  if (!signatureHeader.startsWith('v0=')) return badSignature;
  return hmacMatches(secret, signedContent(timestampHeader, body), fromHex(signatureHeader.slice(3)));
}

export const slack: Adapter = {
  provider: 'slack',
  endpointKind: 'app',
  keptHeaders: ['content-type', 'user-agent', 'x-slack-request-timestamp', 'x-slack-retry-num', 'x-slack-retry-reason'],
  signsBodyOnly: false,
  checkHeaders: (headers) => allOf(
    headerShape(headers.get('x-slack-request-timestamp'), /^\d{1,12}$/),
    headerShape(headers.get('x-slack-signature'), /^v0=[0-9a-fA-F]{64}$/),
  ),
  verify({ headers, body, endpoint, nowMs }) {
    return verifyWithAny(signingKeysOf(endpoint), (secret) => verifySlackSignature(
      secret, body, headers.get('x-slack-request-timestamp'), headers.get('x-slack-signature'), nowMs,
    ));
  },
  async read({ payload }) {
    const type = textAt(payload, 'type');
    if (type === 'url_verification') {
      const challenge = textAt(payload, 'challenge');
      return challenge === undefined ? missingField('challenge') : { kind: 'handshake', body: { challenge } };
    }
    // Slack's notice that it paused deliveries: nothing to store.
    if (type === 'app_rate_limited') return { kind: 'handshake', body: { status: 'ok' } };
    const deliveryKey = textAt(payload, 'event_id');
    const eventType = textAt(payload, 'event', 'type');
    if (!deliveryKey) return missingField('event_id');
    if (!eventType) return missingField('event.type');
    const teamId = textAt(payload, 'team_id');
    return {
      kind: 'delivery',
      deliveryKey,
      eventType,
      route: teamId === undefined ? {} : { team_id: teamId },
      subjects: subjectsOf(
        ['channel:', textAt(payload, 'event', 'channel') ?? textAt(payload, 'event', 'channel', 'id')
          ?? textAt(payload, 'event', 'item', 'channel')],
        ['team:', teamId],
      ),
    };
  },
};
