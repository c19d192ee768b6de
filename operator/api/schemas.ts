// The operator API's schemas: what a request may hold (validated before any
// query runs) and what each answer holds. The OpenAPI document at
// /api/openapi.json and the typed client (operator/api/client.ts) are both
// generated from these, so the three cannot drift apart.
import { z } from '@hono/zod-openapi';
import { alertDestinations, alertKinds } from '../sql/alerts.js';
import { credentialTypes, deliveryStates, destinationStates, ratePeriods } from '../sql/destinations.js';
import { issueStatuses } from '../sql/issues.js';
import { scopeActions } from '../sql/stuck-scopes.js';
import { eventStates, isIdText, maxPageSize } from './params.js';

/** A positive bigint id as decimal text (no precision lost on the way to PostgreSQL). */
export function idText(name: string) {
  const message = `${name} must be a positive integer id`;
  return z.string({ error: message }).refine(isIdText, message)
    .openapi({ example: '42', description: name, pattern: '^[1-9][0-9]{0,18}$' });
}

/** An id in a JSON body: a decimal string or a safe integer. */
function idInBody(name: string) {
  const message = `${name} must be a positive integer id`;
  return z.union([z.number({ error: message }).int(message).positive(message).max(Number.MAX_SAFE_INTEGER, message).transform(String),
    idText(name)], { error: message });
}

/** Text without NUL (PostgreSQL stores none), non-empty, at most maxLength. */
function text(name: string, maxLength = 1000) {
  const message = `${name} must be a non-empty string`;
  return z.string({ error: message }).min(1, message).max(maxLength, message)
    .refine((value) => !value.includes('\u0000'), `${name} must not contain NUL (\\u0000) characters`);
}

/** An optional query filter: '' counts as absent. */
function optionalQuery<T extends z.ZodType<string | undefined>>(schema: T) {
  return z.preprocess((value) => (value === '' ? undefined : value), schema.optional());
}

const timestamp = (name: string) => z.iso.datetime({ offset: true, error: `${name} must be an ISO 8601 time with a zone, e.g. 2026-12-01T10:00:00Z` });

// ---- path parameters -------------------------------------------------------

export const workspaceParam = z.object({ ws: idText('workspace').openapi({ param: { name: 'ws', in: 'path' } }) });
export const eventParam = workspaceParam.extend({ id: idText('event id').openapi({ param: { name: 'id', in: 'path' } }) });
export const bulkReplayParam = workspaceParam.extend({ id: idText('bulk replay id').openapi({ param: { name: 'id', in: 'path' } }) });
export const installationEventParam = z.object({ id: idText('event id').openapi({ param: { name: 'id', in: 'path' } }) });
export const connectionParam = z.object({ id: idText('connection').openapi({ param: { name: 'id', in: 'path' } }) });
export const tokenParam = workspaceParam.extend({ id: idText('token id').openapi({ param: { name: 'id', in: 'path' } }) });

// ---- queries --------------------------------------------------------------

const limit = optionalQuery(z.string().regex(/^[0-9]{1,4}$/, `limit must be an integer from 1 to ${maxPageSize}`)
  .refine((value) => Number(value) >= 1 && Number(value) <= maxPageSize, `limit must be an integer from 1 to ${maxPageSize}`))
  .transform((value) => (value === undefined ? 50 : Number(value)))
  .openapi({ type: 'string', description: `events per page, 1 to ${maxPageSize} (default 50)` });

export const pageQuery = z.object({
  limit,
  cursor: optionalQuery(idText('cursor')).openapi({ type: 'string', description: "the previous page's next_cursor" }),
});

const stateQuery = optionalQuery(z.string().transform((value) => value.toUpperCase())
  .refine((value) => (eventStates as readonly string[]).includes(value), `state must be one of ${eventStates.join(', ')}`))
  .transform((value) => value as (typeof eventStates)[number] | undefined)
  .openapi({ type: 'string', enum: [...eventStates] });

export const eventFilterQuery = pageQuery.extend({
  subject: optionalQuery(text('subject')),
  provider: optionalQuery(text('provider', 100)),
  event_type: optionalQuery(text('event_type', 200)),
  received_after: optionalQuery(timestamp('received_after')).openapi({ type: 'string', format: 'date-time', description: 'received at or after' }),
  received_before: optionalQuery(timestamp('received_before')).openapi({ type: 'string', format: 'date-time', description: 'received before' }),
});

/** A query parameter holding a JSON object, e.g. payload={"repository":{"full_name":"acme/api"}}. */
function jsonObjectQuery(name: string) {
  const message = `${name} must be a JSON object, e.g. {"repository":{"full_name":"acme/api"}}`;
  return optionalQuery(z.string().max(10_000, `${name} is too long`)).transform((value, context) => {
    if (value === undefined) return undefined;
    try {
      const parsed: unknown = JSON.parse(value);
      if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
    } catch {
      // reported below
    }
    context.addIssue({ code: 'custom', message });
    return z.NEVER;
  }).openapi({ type: 'string', description: `${name}: a JSON object the event's ${name} must contain (jsonb @>)` });
}

export const eventListQuery = eventFilterQuery.extend({
  state: stateQuery,
  payload: jsonObjectQuery('payload'),
  headers: jsonObjectQuery('headers'),
});

export const historyQuery = z.object({
  hours: optionalQuery(z.string().regex(/^([1-9]|1[0-9]|2[0-4])$/, 'hours must be an integer from 1 to 24'))
    .transform((value) => (value === undefined ? 3 : Number(value)))
    .openapi({ type: 'string', description: 'how many hours back, 1 to 24 (default 3)' }),
});

export const issueHistoryQuery = z.object({
  hours: optionalQuery(z.string().regex(/^([1-9]|[1-9][0-9]|1[0-5][0-9]|16[0-8])$/, 'hours must be an integer from 1 to 168'))
    .transform((value) => (value === undefined ? 48 : Number(value)))
    .openapi({ type: 'string', description: 'how many hours back, 1 to 168 (default 48)' }),
});

// ---- bodies ---------------------------------------------------------------

export const replayBody = z.object({
  force: z.boolean({ error: 'force must be true or false' }).optional()
    .openapi({ description: "replay even when the outcome is 'uncertain' (check the external effect first)" }),
});

export const bulkReplayBody = replayBody.extend({
  provider: text('provider', 100).optional(),
  event_type: text('event_type', 200).optional(),
  subject: text('subject').optional(),
  error_class: text('error_class', 200).optional(),
  dead_after: timestamp('dead_after').optional().openapi({ description: 'dead at or after' }),
  dead_before: timestamp('dead_before').optional().openapi({ description: 'dead before' }),
  received_after: timestamp('received_after').optional().openapi({ description: 'received at or after' }),
  received_before: timestamp('received_before').optional().openapi({ description: 'received before' }),
  payload: z.record(z.string(), z.unknown(), { error: 'payload must be a JSON object' }).optional()
    .openapi({ description: 'a JSON object the payload must contain (jsonb @>)' }),
  headers: z.record(z.string(), z.unknown(), { error: 'headers must be a JSON object' }).optional()
    .openapi({ description: 'a JSON object the stored headers must contain' }),
// A misspelt filter must not widen the replay to every dead letter.
}).strict();

export const bulkReplayCount = z.object({
  matched: z.number().openapi({ description: 'DEAD events a bulk replay with this filter would take now' }),
}).openapi('BulkReplayCount');

export const newWorkspaceBody = z.object({ id: idInBody('id') });

export const newConnectionBody = z.object({
  provider: text('provider'),
  source: text('source'),
  kind: text('kind'),
  external_id: z.string({ error: 'external_id must be a string' }).nullable().optional(),
  route: z.record(z.string(), z.unknown(), { error: 'route must be a JSON object' }).optional(),
});

export const rotateSecretBody = z.object({
  secret: text('secret').optional().openapi({ description: 'the new signing key; a random one when absent' }),
  overlap: z.boolean({ error: 'overlap must be true or false' }).optional()
    .openapi({ description: 'keep accepting the previous key for secret_overlap (default true)' }),
});

export const subscriptionBody = z.object({ subject: text('subject') });
export const newTokenBody = z.object({ name: text('name', 64) });

// ---- answers --------------------------------------------------------------

export const errorBody = z.object({
  error: z.string().openapi({ example: 'bad_request' }),
  message: z.string(),
}).catchall(z.unknown()).openapi('Error');

const time = z.string().openapi({ format: 'date-time' });
const eventState = z.enum(eventStates);

export const eventSummary = z.object({
  id: z.number(), workspace_id: z.number().nullable(), provider: z.string(), source: z.string(),
  event_type: z.string(), subject: z.string().nullable(), state: eventState,
  attempt: z.number(), failures: z.number(), received_at: time, next_attempt_at: time,
  error_class: z.string().nullable(), outcome: z.string().nullable(),
  handled_at: time.nullable(), dead_at: time.nullable(),
}).openapi('EventSummary');

export const eventPage = z.object({
  events: z.array(eventSummary),
  next_cursor: z.number().nullable().openapi({ description: 'pass as cursor for the next page; null on the last' }),
}).openapi('EventPage');

export const eventAttempt = z.object({
  attempt: z.number(), epoch: z.number(), worker: z.string(), started_at: time.nullable(),
  ended_at: time.nullable(),
  ended: z.string().openapi({ description: "handled, ignored, transient, unknown, permanent, uncertain, released, expired or running" }),
  error_class: z.string().nullable(),
  frames: z.array(z.string()).openapi({ description: "where a failure was thrown in the application's code, innermost first: path:line:column and function, never a message; [] when its worker passed none" }),
}).openapi('EventAttempt');

export const eventDetail = eventSummary.extend({
  delivery_key: z.string(), scope_key: z.string(), connection_id: z.number().nullable(),
  payload: z.unknown(), headers: z.record(z.string(), z.unknown()),
  lease_epoch: z.number(), leased_until: time.nullable(), leased_by: z.string().nullable(),
  replayed_by: z.string().nullable(), replayed_at: time.nullable(),
  steps: z.array(z.object({ name: z.string(), committed_at: time })),
  attempts: z.array(eventAttempt),
  error_frames: z.array(z.string()).openapi({ description: "the frames of the event's last failure (a dead letter's cause); [] when none" }),
}).openapi('EventDetail');

export const admissionPage = z.object({
  entries: z.array(z.object({
    id: z.number(), at: time, provider: z.string().nullable(), source: z.string().nullable(),
    delivery_key: z.string().nullable(), connection_id: z.number().nullable(),
    workspace_id: z.number().nullable(), reason: z.string(),
  })),
  next_cursor: z.number().nullable(),
}).openapi('AdmissionPage');

export const bulkReplay = z.object({
  id: z.number(), workspace_id: z.number(), filter: z.record(z.string(), z.unknown()), force: z.boolean(),
  requested_by: z.string(), state: z.enum(['running', 'finished', 'cancelled']),
  matched: z.number(), replayed: z.number(), skipped: z.number(),
  started_at: time, updated_at: time, finished_at: time.nullable(),
  cancelled_by: z.string().nullable(), cancelled_at: time.nullable(),
}).openapi('BulkReplay');

export const cancelledBulkReplay = bulkReplay.extend({
  cancelled: z.boolean().openapi({ description: 'whether this request cancelled it (true whenever it was running when asked; false: it had finished or been cancelled before)' }),
}).openapi('CancelledBulkReplay');

export const queueMinute = z.object({
  at: time, admitted: z.number(), handled: z.number(),
  attempts: z.number().openapi({ description: 'attempts the events handled in the minute took, all told (attempts / handled: attempts per handled event)' }),
  dead: z.number(), depth: z.number(),
  oldest_age_seconds: z.number(),
}).openapi('QueueMinute');

export const workspace = z.object({
  id: z.number(), state: z.enum(['ACTIVE', 'PAUSED', 'SUSPENDED', 'DELETING']), created_at: time,
  connections: z.number(),
}).openapi('Workspace');

export const connection = z.object({
  id: z.number(), workspace_id: z.number(), provider: z.string(), source: z.string(), kind: z.string(),
  external_id: z.string().nullable(), route: z.record(z.string(), z.unknown()),
  state: z.enum(['ACTIVE', 'PAUSED', 'SUSPENDED', 'REVOKED']), generation: z.number(),
  created_at: time, updated_at: time, subscriptions: z.array(z.string()),
}).openapi('Connection');

export const rotatedSecret = z.object({
  connection_id: z.number(),
  secret: z.string().openapi({ description: 'the new signing key: shown once, give it to the provider now' }),
}).openapi('RotatedSecret');

export const subscriptionChange = z.object({ connection_id: z.number(), subject: z.string(), changed: z.boolean() });

export const apiToken = z.object({
  id: z.number(), workspace_id: z.number(), name: z.string(), created_at: time,
  last_used_at: time.nullable().optional(), revoked_at: time.nullable().optional(),
}).openapi('ApiToken');

export const newApiToken = apiToken.extend({
  token: z.string().openapi({ description: 'the bearer token: shown once' }),
}).openapi('NewApiToken');

export const revokedToken = z.object({ id: z.number(), revoked: z.literal(true) });

// ---- issues and stuck scopes ----------------------------------------------

export const issueParam = workspaceParam.extend({ id: idText('issue id').openapi({ param: { name: 'id', in: 'path' } }) });
export const installationIssueParam = z.object({ id: idText('issue id').openapi({ param: { name: 'id', in: 'path' } }) });

const issueStatus = z.enum(issueStatuses, { error: `status must be one of ${issueStatuses.join(', ')}` });

export const issueListQuery = z.object({
  status: optionalQuery(z.string()).pipe(issueStatus.optional()).openapi({ type: 'string', enum: [...issueStatuses] }),
  limit: optionalQuery(z.string().regex(/^[0-9]{1,4}$/, 'limit must be an integer from 1 to 1000')
    .refine((value) => Number(value) >= 1 && Number(value) <= 1000, 'limit must be an integer from 1 to 1000'))
    .transform((value) => (value === undefined ? 100 : Number(value)))
    .openapi({ type: 'string', description: 'issues at most, 1 to 1000 (default 100)' }),
});

export const issueStatusBody = z.object({ status: issueStatus }).strict();

export const issue = z.object({
  id: z.number(), workspace_id: z.number().nullable(), provider: z.string(),
  event_type: z.string().openapi({ description: "'*' gathers a workspace's failures past the setting issue_limit" }),
  error_class: z.string(),
  frames: z.array(z.string()).openapi({ description: "with error_class, what makes the issue: the top frames of the application's code where it was thrown (path:line:column and function, never a message); [] for failures without frames and for '*'" }),
  status: issueStatus,
  status_by: z.string().nullable().openapi({ description: 'who set the status; null when Wharf opened or reopened it' }),
  status_at: time, first_seen_at: time, last_seen_at: time,
  failures: z.number().openapi({ description: 'failed or expired leases counted' }),
  dead: z.number().openapi({ description: 'how many of them left their event DEAD' }),
  sample_event_id: z.number(), reopened: z.number(), reopened_at: time.nullable(),
}).openapi('Issue');

export const stuckScopeQuery = z.object({
  older_than: optionalQuery(z.string().regex(/^[0-9]{1,7}$/, 'older_than must be a number of seconds from 0 to 9999999'))
    .transform((value) => (value === undefined ? undefined : Number(value)))
    .openapi({ type: 'string', description: 'seconds a head has waited at least (default: the setting stuck_after)' }),
  limit: optionalQuery(z.string().regex(/^[0-9]{1,3}$/, `limit must be an integer from 1 to ${maxPageSize}`)
    .refine((value) => Number(value) >= 1 && Number(value) <= maxPageSize, `limit must be an integer from 1 to ${maxPageSize}`))
    .transform((value) => (value === undefined ? 100 : Number(value)))
    .openapi({ type: 'string', description: `scopes at most, 1 to ${maxPageSize} (default 100)` }),
});

export const stuckScope = z.object({
  scope_key: z.string(), subject: z.string().nullable(),
  reason: z.enum(['leased', 'failing', 'waiting']),
  waiting_since: time, waiting_seconds: z.number(),
  behind: z.number().openapi({ description: 'QUEUED events after the head, counted up to 10000' }),
  behind_capped: z.boolean(),
  head: eventSummary.extend({
    leased_by: z.string().nullable(), leased_until: time.nullable(),
    dead_letter_pending: z.boolean().openapi({ description: 'moved to the dead letters if the lease running now fails' }),
  }),
  connection: z.object({ id: z.number().nullable(), state: z.string().nullable() }),
}).openapi('StuckScope');

export const scopeActionBody = z.object({
  action: z.enum(scopeActions, { error: `action must be one of ${scopeActions.join(', ')}` }),
  scope_key: text('scope_key'),
  event_id: idInBody('event_id').openapi({ description: "the head the action is meant for: refused (409) when it no longer heads the scope" }),
}).strict();

export const scopeActionResult = z.object({
  action: z.enum(scopeActions), done: z.literal(true),
  after_lease: z.boolean().optional().openapi({
    description: 'dead_letter_head on a head a handler retries now: it waits for that lease, and a failure then is a dead letter' }),
  event: eventSummary.optional(), connection: connection.optional(),
}).openapi('ScopeActionResult');

export const scopeAction = z.object({
  id: z.number(), scope_key: z.string(), event_id: z.number().nullable(), connection_id: z.number().nullable(),
  action: z.enum(scopeActions), account: z.string(), at: time,
  after_lease: z.boolean().openapi({ description: 'a move to the dead letters that waited for the lease running then' }),
}).openapi('ScopeAction');

// ---- alerts ----------------------------------------------------------------

export const alertRuleParam = workspaceParam.extend({ id: idText('alert rule id').openapi({ param: { name: 'id', in: 'path' } }) });
export const instanceAlertRuleParam = z.object({ id: idText('alert rule id').openapi({ param: { name: 'id', in: 'path' } }) });

const positiveSeconds = (name: string) => z.number({ error: `${name} must be a positive integer` })
  .int(`${name} must be a positive integer`).positive(`${name} must be a positive integer`).max(31_536_000, `${name} is at most a year`);

export const alertRuleBody = z.object({
  name: text('name', 64),
  kind: z.enum(alertKinds, { error: `kind must be one of ${alertKinds.join(', ')}` }),
  threshold: z.number({ error: 'threshold must be a positive integer' }).int('threshold must be a positive integer')
    .positive('threshold must be a positive integer').max(1_000_000_000).optional()
    .openapi({ description: 'dead_letter_rate: how many dead letters within window_seconds' }),
  window_seconds: positiveSeconds('window_seconds').optional()
    .openapi({ description: 'dead_letter_rate: the window; oldest_due_age and stuck_scope: how long' }),
  destination: z.enum(alertDestinations, { error: `destination must be one of ${alertDestinations.join(', ')}` }),
  url: text('url', 2000).openapi({ description: 'https (or http to a loopback address); for slack, the incoming webhook URL' }),
  secret: text('secret', 200).optional()
    .openapi({ description: 'webhook: the Standard Webhooks key (whsec_…); a random one, returned once, when absent' }),
}).strict();

// An edit states the rule whole, as a new one, but may leave out the URL and
// the secret (never shown, so an editor may not have them): those are kept.
export const alertRuleEditBody = alertRuleBody.extend({
  url: text('url', 2000).optional()
    .openapi({ description: 'https (or http to a loopback address); for slack, the incoming webhook URL. Absent: the URL is kept' }),
  secret: text('secret', 200).optional()
    .openapi({ description: "webhook: a new Standard Webhooks key (whsec_…). Absent: the rule's secret is kept" }),
}).strict();

export const alertRule = z.object({
  id: z.number(), workspace_id: z.number().nullable(), name: z.string(), kind: z.enum(alertKinds),
  threshold: z.number().nullable(), window_seconds: z.number().nullable(), destination: z.enum(alertDestinations),
  destination_host: z.string().nullable(), created_by: z.string(), created_at: time,
  updated_by: z.string().nullable().openapi({ description: 'who edited it last; null when never edited' }), updated_at: time.nullable(),
}).openapi('AlertRule');

export const newAlertRule = alertRule.extend({
  secret: z.string().optional().openapi({ description: 'the generated webhook key: shown once, give it to the receiver' }),
}).openapi('NewAlertRule');

export const alert = z.object({
  id: z.number(), rule_id: z.number(), rule_name: z.string(), workspace_id: z.number().nullable(), kind: z.enum(alertKinds),
  test: z.boolean().openapi({ description: "sent on request to try the rule's channel, about nothing that happened" }),
  about: z.string().openapi({ description: 'what it is about, in a few words: its issue, its stuck scope, or the measure' }),
  issue_id: z.number().nullable().openapi({ description: 'the issue it is about, if any' }),
  scope_key: z.string().nullable().openapi({ description: 'the stuck scope it is about, if any' }),
  facts: z.record(z.string(), z.unknown()).openapi({ description: 'names, ids, counts and times: never a payload, a header or a secret' }),
  created_at: time, state: z.enum(['pending', 'delivered', 'failed']), attempts: z.number(),
  last_attempt_at: time.nullable(), last_status: z.number().nullable(), last_error: z.string().nullable(),
  delivered_at: time.nullable(),
}).openapi('Alert');

export const deletedAlertRule = z.object({ id: z.number(), deleted: z.literal(true) });

export const failureMinute = z.object({ at: time, failed: z.number(), dead: z.number() }).openapi('FailureMinute');
export const issueHour = z.object({ at: time, failures: z.number(), dead: z.number() }).openapi('IssueHour');

export const deliveryMinute = z.object({
  at: time, connection_id: z.number().nullable(), accepted: z.number(),
  refused: z.record(z.string(), z.number()).openapi({ description: 'refused by a recipient not ACTIVE (connection-inactive, workspace-inactive), by reason' }),
  dropped: z.record(z.string(), z.number()).openapi({ description: 'dropped with no recipient (no-subscriber, unknown-source, source-inactive, …), by reason' }),
}).openapi('DeliveryMinute');

// ---- destinations (contract v6) ---------------------------------------------
// The workspace's own application endpoints, the rules that route events to
// them, and their deliveries. The database validates a destination's URL and
// numbers and a rule's filter (22023, a 400 naming the bad part); these
// schemas check the JSON types. No answer carries a secret, except the new
// signing secret in the answers of create and rotate-secret.

export const destinationParam = workspaceParam.extend({ id: idText('destination id').openapi({ param: { name: 'id', in: 'path' } }) });
export const destinationRuleParam = workspaceParam.extend({ id: idText('rule id').openapi({ param: { name: 'id', in: 'path' } }) });
export const deliveryParam = workspaceParam.extend({ id: idText('delivery id').openapi({ param: { name: 'id', in: 'path' } }) });

const whole = (name: string, min: number, max: number) => {
  const message = `${name} must be an integer from ${min} to ${max}`;
  return z.number({ error: message }).int(message).min(min, message).max(max, message);
};

const jsonObject = (name: string) => z.record(z.string(), z.unknown(), { error: `${name} must be a JSON object` });

const destinationFields = {
  name: text('name', 100),
  url: text('url', 2048).openapi({ description: 'https://… of your application (the server may allow others for one on its own network)' }),
  timeout_ms: whole('timeout_ms', 100, 60_000).openapi({ description: 'how long one request may take, 100 to 60000 (default 10000)' }),
  rate_limit: whole('rate_limit', 1, 1_000_000).nullable()
    .openapi({ description: 'deliveries per rate_period over every worker host together; null: no limit' }),
  rate_period: z.enum(ratePeriods, { error: `rate_period must be one of ${ratePeriods.join(', ')}` }),
  max_in_flight: whole('max_in_flight', 1, 1000).openapi({ description: 'requests in flight at once, 1 to 1000 (default 10)' }),
  ordered: z.boolean({ error: 'ordered must be true or false' })
    .openapi({ description: "one delivery at a time per scope, in order (default true)" }),
  headers: z.record(z.string(), z.string({ error: 'headers must be an object of strings' }), { error: 'headers must be an object of strings' })
    .openapi({ description: 'extra non-secret headers sent with every request (a secret belongs in credentials)' }),
  breaker_failures: whole('breaker_failures', 1, 100_000)
    .openapi({ description: 'consecutive failed attempts that open the circuit breaker (default 20)' }),
  breaker_minutes: whole('breaker_minutes', 1, 10_080)
    .openapi({ description: 'minutes of failing without a success that open it (default 10)' }),
};

export const newDestinationBody = z.object({
  ...destinationFields,
  timeout_ms: destinationFields.timeout_ms.optional(), rate_limit: destinationFields.rate_limit.optional(),
  rate_period: destinationFields.rate_period.optional(), max_in_flight: destinationFields.max_in_flight.optional(),
  ordered: destinationFields.ordered.optional(), headers: destinationFields.headers.optional(),
  breaker_failures: destinationFields.breaker_failures.optional(), breaker_minutes: destinationFields.breaker_minutes.optional(),
}).strict();

/** An edit names only what changes. */
export const destinationEditBody = newDestinationBody.partial().strict();

export const rotateDestinationSecretBody = z.object({
  overlap: z.boolean({ error: 'overlap must be true or false' }).optional()
    .openapi({ description: 'the replaced secret keeps signing beside the new one for 24 hours (default true); false cuts it off at once' }),
}).strict();

export const credentialsBody = z.discriminatedUnion('type', [
  z.object({ type: z.literal('bearer'), token: text('token', 4000) }).strict(),
  z.object({ type: z.literal('basic'), username: text('username', 1000), password: text('password', 4000) }).strict(),
  z.object({
    type: z.literal('header'),
    name: text('name', 200).refine((value) => /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(value), 'name must be an HTTP header name'),
    value: text('value', 4000),
  }).strict(),
], { error: `type must be one of ${credentialTypes.join(', ')}, with its fields (bearer: token; basic: username, password; header: name, value)` })
  .openapi('DestinationCredentials', { description: 'stored encrypted and never shown again' });

const ruleFields = {
  connection_id: idInBody('connection_id').nullable().optional().openapi({ description: "only the events of this connection" }),
  provider: text('provider', 100).nullable().optional(),
  event_types: z.array(text('event_types[]', 200), { error: 'event_types must be an array of strings' }).max(100, 'event_types: at most 100 patterns')
    .nullable().optional().openapi({ description: "patterns, * for any run of characters: ['pull_request.*', 'issue*']" }),
  subject_prefix: text('subject_prefix').nullable().optional(),
  filter: jsonObject('filter').nullable().optional()
    .openapi({ description: 'over {payload, headers}: equality, $eq, $neq, $in, $nin, $startsWith, $endsWith, $contains, $gt, $gte, $lt, $lte, $exist, $and, $or, $not' }),
  forward_only: z.boolean({ error: 'forward_only must be true or false' }).optional()
    .openapi({ description: "the workspace's own handlers do not receive an event this rule matches" }),
};

export const newDestinationRuleBody = z.object(ruleFields).strict();
export const destinationRuleEditBody = z.object(ruleFields).strict();

export const filterTestBody = z.object({
  filter: jsonObject('filter'),
  event_id: idInBody('event_id').openapi({ description: 'a stored event of the workspace' }),
}).strict();

export const filterTestResult = z.object({ matched: z.boolean() }).openapi('FilterTestResult');

const deliveryState = z.enum(deliveryStates);

export const deliveryListQuery = pageQuery.extend({
  state: optionalQuery(z.string().transform((value) => value.toUpperCase())
    .refine((value) => (deliveryStates as readonly string[]).includes(value), `state must be one of ${deliveryStates.join(', ')}`))
    .transform((value) => value as (typeof deliveryStates)[number] | undefined)
    .openapi({ type: 'string', enum: [...deliveryStates] }),
});

export const deliveryReplayFilterBody = z.object({
  event_type: text('event_type', 200).optional(),
  error_class: text('error_class', 200).optional(),
  dead_after: timestamp('dead_after').optional().openapi({ description: 'dead at or after' }),
  dead_before: timestamp('dead_before').optional().openapi({ description: 'dead before' }),
// A misspelt filter must not widen the replay to every dead letter.
}).strict();

export const deliveryReplayBody = deliveryReplayFilterBody.extend({
  batch_size: whole('batch_size', 1, 1000).optional()
    .openapi({ description: 'deliveries per transaction, 1 to 1000 (default 500)' }),
  one_batch: z.boolean({ error: 'one_batch must be true or false' }).optional()
    .openapi({ description: 'replay one batch and answer (call again until replayed is 0, e.g. to show progress); default: every batch' }),
}).strict();

export const deliveryReplayCount = z.object({
  matched: z.number().openapi({ description: 'DEAD deliveries a bulk replay with this filter would take now' }),
}).openapi('DeliveryReplayCount');

export const deliveryReplayResult = z.object({
  replayed: z.number().openapi({ description: 'deliveries sent back to the queue by this request' }),
}).openapi('DeliveryReplayResult');

export const destinationStats = z.object({
  queued: z.number().openapi({ description: 'counted up to 10000 (queued_capped)' }), queued_capped: z.boolean(),
  leased: z.number(),
  dead: z.number().openapi({ description: 'counted up to 10000 (dead_capped)' }), dead_capped: z.boolean(),
  delivered_last_hour: z.number(), failed_last_hour: z.number(),
  last_hour_sampled: z.boolean().openapi({ description: "the hour held more than 10000 attempts: its figures are the latest 10000's" }),
  per_minute: z.number().openapi({ description: 'delivered in the last minute' }),
  success_rate: z.number().nullable().openapi({ description: "of the last hour's attempts; null when none" }),
  latency_p50_ms: z.number().nullable(), latency_p99_ms: z.number().nullable(),
  filtered_last_hour: z.number().openapi({ description: "events its rules' filters left out in the last hour (counted, not lost)" }),
}).openapi('DestinationStats');

export const destination = z.object({
  id: z.number(), workspace_id: z.number(), name: z.string(), url: z.string(),
  timeout_ms: z.number(), rate_limit: z.number().nullable(), rate_period: z.enum(ratePeriods), max_in_flight: z.number(),
  ordered: z.boolean(), headers: z.record(z.string(), z.string()), breaker_failures: z.number(), breaker_minutes: z.number(),
  state: z.enum(destinationStates), paused_reason: z.string().nullable().openapi({ description: 'operator, gone (HTTP 410) or breaker' }),
  paused_by: z.string().nullable().openapi({ description: 'who paused it, when an operator did' }),
  consecutive_failures: z.number(), failing_since: time.nullable(), probe_at: time.nullable(),
  has_secret: z.boolean(), has_credentials: z.boolean(), credentials_type: z.enum(credentialTypes).nullable(),
  secret_rotating_until: time.nullable().openapi({ description: 'until then the previous signing secret signs too' }),
  created_at: time, updated_at: time, stats: destinationStats,
}).openapi('Destination');

export const destinationWithSecret = destination.extend({
  secret: z.string().openapi({ description: 'the signing secret (whsec_…): shown this once, give it to your application to verify each request' }),
}).openapi('DestinationWithSecret');

export const deletedDestination = z.object({ id: z.number(), deleted: z.literal(true) });

export const destinationRule = z.object({
  id: z.number(), workspace_id: z.number(), destination_id: z.number(), connection_id: z.number().nullable(),
  provider: z.string().nullable(), event_types: z.array(z.string()).nullable(), subject_prefix: z.string().nullable(),
  filter: z.record(z.string(), z.unknown()).nullable(), forward_only: z.boolean(),
  filtered_last_hour: z.number().openapi({ description: 'events its filter left out in the last hour (counted, not lost)' }),
  created_at: time, updated_at: time.nullable(),
}).openapi('DestinationRule');

export const destinationDelivery = z.object({
  id: z.number(), event_id: z.number(), destination_id: z.number(), state: deliveryState,
  attempt: z.number(), failures: z.number(),
  next_attempt_at: time.nullable().openapi({ description: 'when it is due; null when it waits behind its (destination, scope) head, or is done' }),
  waiting_behind_head: z.boolean().openapi({ description: 'an ordered delivery waiting for the one before it in its scope' }),
  error_class: z.string().nullable(),
  outcome: z.string().nullable(), last_status: z.number().nullable(), handled_at: time.nullable(), dead_at: time.nullable(),
  replayed_by: z.string().nullable(), replayed_at: time.nullable(),
  provider: z.string(), event_type: z.string(), subject: z.string().nullable(), received_at: time,
}).openapi('DestinationDelivery');

export const deliveryPage = z.object({
  deliveries: z.array(destinationDelivery),
  next_cursor: z.number().nullable().openapi({ description: 'pass as cursor for the next page; null on the last' }),
}).openapi('DeliveryPage');

export const deliveryAttempt = z.object({
  epoch: z.number(), attempt: z.number(), worker: z.string(), started_at: time, ended_at: time.nullable(),
  ended: z.string().nullable().openapi({ description: 'handled, failed, dead, released or expired; null while running' }),
  error_class: z.string().nullable(), status: z.number().nullable(), duration_ms: z.number().nullable(),
  response: z.string().nullable().openapi({ description: 'at most 1 KB of the answer' }),
}).openapi('DeliveryAttempt');

export const deliveryDetail = destinationDelivery.extend({
  webhook_id: z.string().openapi({ description: 'the webhook-id header of its every request (wd_<id>), retries and replays included' }),
  attempts: z.array(deliveryAttempt),
}).openapi('DeliveryDetail');

export const eventDestinationDeliveries = z.array(destinationDelivery.extend({ destination_name: z.string() }))
  .openapi('EventDestinationDeliveries');
