// Slack Events API: `X-Slack-Signature: v0=<hex HMAC-SHA256(signing secret,
// "v0:<timestamp>:<body>")>`, timestamp within five minutes. Routing fact:
// `team_id` of the signed body. Slash commands and interactivity post a
// form (`application/x-www-form-urlencoded`) signed the same way over its
// exact bytes: stored as a JSON object of its fields, interactivity's
// `payload` field as the object it holds, and answered 200 with an empty body
// (Slack would show a body to the user).
import { bytesOf, concatBytes, fromHex, hmacSha256, toHex, utf8, type Bytes } from '../crypto.js';
import {
  allOf, badSignature, headerShape, hmacMatches, missingField, missingSignature, signingKeysOf, staleTimestamp, timestampToleranceMs, verifyWithAny,
  type Adapter, type SignedTimestamp, type Verification,
} from './adapter.js';
import { subjectsOf, textAt } from './payload.js';
import { isFormBody, parseFormBody, parseJsonBody, type JsonObject } from '../request-body.js';
import type { Reading } from './adapter.js';

/**
 * A slash command (`command`, `trigger_id`) or an interaction (`payload`
 * with its `type`): keyed by its trigger id, which Slack draws per
 * invocation, typed `slash_command` or the interaction's type.
 */
function readForm(form: JsonObject): Reading {
  const interaction = form.payload;
  if (typeof interaction === 'object' && interaction !== null && !Array.isArray(interaction)) {
    const type = textAt(interaction, 'type');
    const deliveryKey = textAt(interaction, 'trigger_id') ?? textAt(interaction, 'action_ts')
      ?? textAt(interaction, 'actions', 0, 'action_ts');
    if (!type) return missingField('payload.type');
    if (!deliveryKey) return missingField('payload.trigger_id');
    const teamId = textAt(interaction, 'team', 'id') ?? textAt(interaction, 'user', 'team_id');
    return {
      kind: 'delivery', deliveryKey, eventType: type,
      route: teamId === undefined ? {} : { team_id: teamId },
      subjects: subjectsOf(['channel:', textAt(interaction, 'channel', 'id') ?? textAt(interaction, 'container', 'channel_id')],
        ['team:', teamId]),
      emptyAnswer: true,
    };
  }
  const deliveryKey = textAt(form, 'trigger_id');
  if (textAt(form, 'command') === undefined) return missingField('command or payload');
  if (!deliveryKey) return missingField('trigger_id');
  const teamId = textAt(form, 'team_id');
  return {
    kind: 'delivery', deliveryKey, eventType: 'slash_command',
    route: teamId === undefined ? {} : { team_id: teamId },
    subjects: subjectsOf(['channel:', textAt(form, 'channel_id')], ['team:', teamId]),
    emptyAnswer: true,
  };
}

const slackTimestamp: SignedTimestamp = { in: 'X-Slack-Request-Timestamp', unit: 'seconds', toleranceMs: timestampToleranceMs };

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
  if (Math.abs(nowMs - Number(timestampHeader) * 1000) > slackTimestamp.toleranceMs) return staleTimestamp;
  if (!signatureHeader.startsWith('v0=')) return badSignature;
  return hmacMatches(secret, signedContent(timestampHeader, body), fromHex(signatureHeader.slice(3)));
}

export const slack: Adapter = {
  provider: 'slack',
  endpointKind: 'app',
  keptHeaders: ['content-type', 'user-agent', 'x-slack-request-timestamp', 'x-slack-retry-num', 'x-slack-retry-reason'],
  signatureHeaders: ['x-slack-signature'],
  signsBodyOnly: false,
  signedTimestamp: slackTimestamp,
  checkHeaders: (headers) => allOf(
    headerShape(headers.get('x-slack-request-timestamp'), /^\d{1,12}$/),
    headerShape(headers.get('x-slack-signature'), /^v0=[0-9a-fA-F]{64}$/),
  ),
  verify({ headers, body, endpoint, nowMs }) {
    return verifyWithAny(signingKeysOf(endpoint), (secret) => verifySlackSignature(
      secret, body, headers.get('x-slack-request-timestamp'), headers.get('x-slack-signature'), nowMs,
    ));
  },
  // A form says so in its content type, and cannot start with "{" (a form
  // escapes it): a JSON body under a form's content type is read as JSON.
  parseBody: (body, headers) => isFormBody(headers) && body[0] !== 0x7b ? parseFormBody(body, ['payload']) : parseJsonBody(body),
  async read({ payload }) {
    // The Events API's envelopes all have a `type`; a form's fields never do.
    if (payload.type === undefined && (payload.command !== undefined || payload.payload !== undefined)) return readForm(payload);
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
