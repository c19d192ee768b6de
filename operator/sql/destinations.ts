// The calls of sql/88-destinations.sql the operator surface makes:
// destinations of a workspace (its own application's HTTPS endpoints), the
// rules that route events to them, their deliveries and dead letters, and
// replay. Every function takes the workspace first; null (or false) is "not
// in this workspace", never an error. A bad URL, spec or filter comes back
// from the database as 22023 with a message naming the bad part, which
// callWharf turns into a 400 that says it.
//
// Secrets: a destination's signing secret (`whsec_…`, drawn here) and its
// credentials are sealed with the key ring (db/secret-box.ts, owner
// {destinationId}) before they reach the database, and never come back out:
// a summary says only has_credentials, credentials_type and
// secret_rotating_until. A new secret is returned once, by createDestination
// and rotateDestinationSecret.
import type { Database } from '../../db/database.js';
import { encryptSecret, type KeyRing } from '../../db/secret-box.js';
import { ApiError } from '../api/errors.js';
import { callWharf } from './call-wharf.js';
import { inTransaction } from './transaction.js';

export const destinationStates = ['ACTIVE', 'PAUSED', 'BREAKER_OPEN'] as const;
export type DestinationState = (typeof destinationStates)[number];
export const ratePeriods = ['second', 'minute'] as const;
export type RatePeriod = (typeof ratePeriods)[number];
export const deliveryStates = ['QUEUED', 'LEASED', 'DONE', 'DEAD'] as const;
export type DeliveryState = (typeof deliveryStates)[number];
export const credentialTypes = ['bearer', 'basic', 'header'] as const;
export type CredentialType = (typeof credentialTypes)[number];

/** What create_destination and update_destination take; update changes only the keys given. */
export interface DestinationSpec {
  name?: string;
  url?: string;
  timeout_ms?: number;
  /** Deliveries per rate_period; null: no limit. */
  rate_limit?: number | null;
  rate_period?: RatePeriod;
  max_in_flight?: number;
  ordered?: boolean;
  /** Extra non-secret headers sent with every request. */
  headers?: Record<string, string>;
  breaker_failures?: number;
  breaker_minutes?: number;
}

export interface DestinationStats {
  /** Counted up to 10000: queued_capped says the count stopped there. */
  queued: number;
  queued_capped: boolean;
  leased: number;
  /** Counted up to 10000, as queued. */
  dead: number;
  dead_capped: boolean;
  delivered_last_hour: number;
  failed_last_hour: number;
  /** The hour held more than 10000 attempts: its figures are those of the latest 10000. */
  last_hour_sampled: boolean;
  /** Delivered in the last minute. */
  per_minute: number;
  /** Of the last hour's attempts; null when there were none. */
  success_rate: number | null;
  latency_p50_ms: number | null;
  latency_p99_ms: number | null;
  /** Events its rules' filters left out in the last hour. */
  filtered_last_hour: number;
}

/** A destination as every answer shows it: never a secret. */
export interface Destination {
  id: number;
  workspace_id: number;
  name: string;
  url: string;
  timeout_ms: number;
  rate_limit: number | null;
  rate_period: RatePeriod;
  max_in_flight: number;
  ordered: boolean;
  headers: Record<string, string>;
  breaker_failures: number;
  breaker_minutes: number;
  state: DestinationState;
  paused_reason: string | null;
  /** Who paused it, when an operator did. */
  paused_by: string | null;
  consecutive_failures: number;
  failing_since: string | null;
  probe_at: string | null;
  has_secret: boolean;
  has_credentials: boolean;
  credentials_type: CredentialType | null;
  /** While a rotation's overlap lasts, the previous secret signs too, until then. */
  secret_rotating_until: string | null;
  created_at: string;
  updated_at: string;
  stats: DestinationStats;
}

/** The answer that carries a new signing secret: the only one that ever does. */
export type DestinationWithSecret = Destination & { secret: string };

export type Credentials =
  | { type: 'bearer'; token: string }
  | { type: 'basic'; username: string; password: string }
  | { type: 'header'; name: string; value: string };

export interface RuleSpec {
  connection_id?: string | null;
  provider?: string | null;
  event_types?: string[] | null;
  subject_prefix?: string | null;
  filter?: Record<string, unknown> | null;
  forward_only?: boolean;
}

export interface DestinationRule {
  id: number;
  workspace_id: number;
  destination_id: number;
  connection_id: number | null;
  provider: string | null;
  event_types: string[] | null;
  subject_prefix: string | null;
  filter: Record<string, unknown> | null;
  forward_only: boolean;
  /** Events its filter left out in the last hour (counted, not lost). */
  filtered_last_hour: number;
  created_at: string;
  updated_at: string;
}

export interface Delivery {
  id: number;
  event_id: number;
  destination_id: number;
  state: DeliveryState;
  attempt: number;
  failures: number;
  /** When it is due; null while it waits behind its (destination, scope) head, or once done. */
  next_attempt_at: string | null;
  /** An ordered delivery waiting for the one before it in its scope. */
  waiting_behind_head: boolean;
  error_class: string | null;
  outcome: string | null;
  last_status: number | null;
  handled_at: string | null;
  dead_at: string | null;
  replayed_by: string | null;
  replayed_at: string | null;
  provider: string;
  event_type: string;
  subject: string | null;
  received_at: string;
}

export interface DeliveryPage {
  deliveries: Delivery[];
  next_cursor: number | null;
}

export interface DeliveryAttempt {
  epoch: number;
  attempt: number;
  worker: string;
  started_at: string;
  ended_at: string | null;
  ended: string | null;
  error_class: string | null;
  status: number | null;
  duration_ms: number | null;
  /** At most 1 KB of the answer. */
  response: string | null;
}

/** One delivery with its attempts (show_delivery); the spec fixes its attempts, the rest is the delivery's row. */
export type DeliveryDetail = Delivery & { webhook_id: string; attempts: DeliveryAttempt[] };

/** A delivery of an event, on the event's page: with its destination's name. */
export type EventDelivery = Delivery & { destination_name: string };

/** Which DEAD deliveries a bulk replay takes; every field narrows, none means all. */
export interface DeliveryReplayFilter {
  event_type?: string;
  error_class?: string;
  /** ISO timestamps: dead at or after, and before. */
  dead_after?: string;
  dead_before?: string;
}

/** A new Standard Webhooks signing secret drawn by Wharf: `whsec_` and 24 random bytes in base64. */
export function generateDestinationSecret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(24));
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return `whsec_${btoa(binary)}`;
}

/** The key ring, or the answer that says the server has none (nothing is changed then). */
async function requireKeyRing(keyRing: Promise<KeyRing | undefined> | KeyRing | undefined): Promise<KeyRing> {
  const ring = await keyRing;
  if (!ring) {
    throw new ApiError(503, 'no_secret_keys',
      "a destination's signing secret and credentials are stored encrypted: set WHARF_SECRET_KEYS on the server (`wharf secrets generate-key`)");
  }
  return ring;
}

/**
 * Creates a destination and gives it a new signing secret, sealed under its
 * id, in one transaction: a destination without a secret is never left
 * behind (the forwarder does not claim for one), and a refused spec saves
 * nothing. The secret is in this answer only.
 */
export async function createDestination(
  db: Database, keyRing: Promise<KeyRing | undefined> | KeyRing | undefined, workspaceId: string, spec: DestinationSpec,
): Promise<DestinationWithSecret> {
  const ring = await requireKeyRing(keyRing);
  const secret = generateDestinationSecret();
  const created = await inTransaction(db, async (tx) => {
    const destination = await callWharf<Destination>(tx, 'wharf.create_destination($1, $2)', [workspaceId, JSON.stringify(spec)]);
    const sealed = await encryptSecret(ring, { destinationId: destination.id }, secret);
    return callWharf<Destination>(tx, 'wharf.set_destination_secret($1, $2, $3)', [workspaceId, destination.id, sealed]);
  });
  return { ...created, secret };
}

export function listDestinations(db: Database, workspaceId: string): Promise<Destination[]> {
  return callWharf(db, 'wharf.list_destinations($1)', [workspaceId]);
}

export function showDestination(db: Database, workspaceId: string, id: string): Promise<Destination | null> {
  return callWharf(db, 'wharf.show_destination($1, $2)', [workspaceId, id]);
}

/** Changes only the keys the spec gives; null when the workspace has no such destination. */
export function updateDestination(db: Database, workspaceId: string, id: string, spec: DestinationSpec): Promise<Destination | null> {
  return callWharf(db, 'wharf.update_destination($1, $2, $3)', [workspaceId, id, JSON.stringify(spec)]);
}

/** True when the workspace had it (its rules and deliveries go with it). */
export function deleteDestination(db: Database, workspaceId: string, id: string): Promise<boolean> {
  return callWharf(db, 'wharf.delete_destination($1, $2)', [workspaceId, id]);
}

/** PAUSED: its deliveries wait. ACTIVE: they go again, and an open breaker closes at once. */
export function setDestinationState(
  db: Database, workspaceId: string, id: string, state: 'ACTIVE' | 'PAUSED', account: string,
): Promise<Destination | null> {
  return callWharf(db, 'wharf.set_destination_state($1, $2, $3, $4)', [workspaceId, id, state, account]);
}

/**
 * A new signing secret for the destination, sealed under its id; the one it
 * replaces keeps signing beside it for the overlap (24 hours) unless
 * `overlap` is false (a leaked secret, cut off at once). Null when the
 * workspace has no such destination; the new secret is in this answer only.
 */
export async function rotateDestinationSecret(
  db: Database, keyRing: Promise<KeyRing | undefined> | KeyRing | undefined, workspaceId: string, id: string, overlap = true,
): Promise<DestinationWithSecret | null> {
  const ring = await requireKeyRing(keyRing);
  const secret = generateDestinationSecret();
  const sealed = await encryptSecret(ring, { destinationId: id }, secret);
  const rotated = await callWharf<Destination | null>(db, 'wharf.set_destination_secret($1, $2, $3, $4)', [workspaceId, id, sealed, overlap]);
  return rotated ? { ...rotated, secret } : null;
}

/** Stores the credentials sealed under the destination's id; they are never shown again. Null: no such destination. */
export async function setDestinationCredentials(
  db: Database, keyRing: Promise<KeyRing | undefined> | KeyRing | undefined, workspaceId: string, id: string, credentials: Credentials,
): Promise<Destination | null> {
  const ring = await requireKeyRing(keyRing);
  const sealed = await encryptSecret(ring, { destinationId: id }, JSON.stringify(credentials));
  return callWharf(db, 'wharf.set_destination_credentials($1, $2, $3, $4)', [workspaceId, id, sealed, credentials.type]);
}

export function clearDestinationCredentials(db: Database, workspaceId: string, id: string): Promise<Destination | null> {
  return callWharf(db, 'wharf.set_destination_credentials($1, $2, NULL, NULL)', [workspaceId, id]);
}

// ---- rules -----------------------------------------------------------------

/** A rule spec as the database reads it: ids as JSON numbers. */
function ruleJson(spec: RuleSpec & { destination_id?: string }): string {
  const ids = Object.fromEntries((['destination_id', 'connection_id'] as const)
    .filter((key) => typeof spec[key] === 'string').map((key) => [key, Number(spec[key])]));
  return JSON.stringify({ ...spec, ...ids });
}

/**
 * A rule routing events to the destination; every criterion given must
 * hold. The destination must be the workspace's (a 400 naming destination_id
 * otherwise: look it up first to answer 404).
 */
export function createDestinationRule(
  db: Database, workspaceId: string, destinationId: string, spec: RuleSpec,
): Promise<DestinationRule> {
  return callWharf(db, 'wharf.create_destination_rule($1, $2)', [workspaceId, ruleJson({ ...spec, destination_id: destinationId })]);
}

/** Changes the criteria given (null clears one); null when the workspace has no such rule. */
export function updateDestinationRule(db: Database, workspaceId: string, id: string, spec: RuleSpec): Promise<DestinationRule | null> {
  return callWharf(db, 'wharf.update_destination_rule($1, $2, $3)', [workspaceId, id, ruleJson(spec)]);
}

export function deleteDestinationRule(db: Database, workspaceId: string, id: string): Promise<boolean> {
  return callWharf(db, 'wharf.delete_destination_rule($1, $2)', [workspaceId, id]);
}

/** The workspace's rules, or one destination's. */
export function listDestinationRules(db: Database, workspaceId: string, destinationId?: string): Promise<DestinationRule[]> {
  return callWharf(db, 'wharf.list_destination_rules($1, $2)', [workspaceId, destinationId ?? null]);
}

/** Whether a stored event of the workspace matches the filter; null when the event is not the workspace's. */
export function testDestinationFilter(
  db: Database, workspaceId: string, filter: Record<string, unknown>, eventId: string,
): Promise<{ matched: boolean } | null> {
  return callWharf(db, 'wharf.test_destination_filter($1, $2, $3)', [workspaceId, JSON.stringify(filter), eventId]);
}

// ---- deliveries ------------------------------------------------------------

export interface DeliveryListOptions {
  state?: DeliveryState;
  limit: number;
  /** The previous page's next_cursor. */
  before?: string;
}

/**
 * A page of one destination's deliveries, newest first; null when the
 * workspace has no such destination. An empty first page is told apart from
 * another workspace's destination by looking the destination up.
 */
export async function listDeliveries(
  db: Database, workspaceId: string, destinationId: string, options: DeliveryListOptions,
): Promise<DeliveryPage | null> {
  const page = await callWharf<DeliveryPage | null>(db, 'wharf.list_deliveries($1, $2, $3, $4, $5)',
    [workspaceId, destinationId, options.state ?? null, options.limit, options.before ?? null]);
  if (page === null) return null;
  if (page.deliveries.length === 0 && !(await showDestination(db, workspaceId, destinationId))) return null;
  return page;
}

export function showDelivery(db: Database, workspaceId: string, id: string): Promise<DeliveryDetail | null> {
  return callWharf(db, 'wharf.show_delivery($1, $2)', [workspaceId, id]);
}

/** Every destination delivery of one event (none: []); null when the event is not the workspace's. */
export function eventDeliveries(db: Database, workspaceId: string, eventId: string): Promise<EventDelivery[] | null> {
  return callWharf(db, 'wharf.event_deliveries($1, $2)', [workspaceId, eventId]);
}

/** A DEAD delivery back to QUEUED, due now, keeping its id (so its webhook-id); false when it is not a DEAD one of the workspace. */
export function replayDelivery(db: Database, workspaceId: string, id: string, account: string): Promise<boolean> {
  return callWharf(db, 'wharf.replay_delivery($1, $2, $3)', [workspaceId, id, account]);
}

/** How many DEAD deliveries of the destination a bulk replay with this filter would take now. */
export async function countDeadDeliveries(
  db: Database, workspaceId: string, destinationId: string, filter: DeliveryReplayFilter,
): Promise<number> {
  return Number(await callWharf<string>(db, 'wharf.count_dead_deliveries($1, $2, $3)', [workspaceId, destinationId, JSON.stringify(filter)]));
}

export const defaultDeliveryReplayBatch = 500;

/** Replays at most `batch` matching DEAD deliveries, in id order, in one transaction; how many. */
export async function replayDeliveryBatch(
  db: Database, workspaceId: string, destinationId: string, filter: DeliveryReplayFilter, account: string,
  batch = defaultDeliveryReplayBatch,
): Promise<number> {
  return Number(await callWharf<string>(db, 'wharf.replay_deliveries($1, $2, $3, $4, $5)',
    [workspaceId, destinationId, JSON.stringify(filter), account, batch]));
}

/**
 * Replays every matching DEAD delivery, batch after batch, until a batch
 * replays none. Bounded by the count taken first (`upTo`): a delivery that
 * dies again while this runs is not replayed twice by it.
 */
export async function replayDeadDeliveries(
  db: Database, workspaceId: string, destinationId: string, filter: DeliveryReplayFilter, account: string,
  options: { upTo: number; batch?: number; onProgress?: (replayed: number) => void },
): Promise<number> {
  let replayed = 0;
  while (replayed < options.upTo) {
    const batch = Math.min(options.batch ?? defaultDeliveryReplayBatch, options.upTo - replayed);
    const step = await replayDeliveryBatch(db, workspaceId, destinationId, filter, account, batch);
    if (step === 0) break;
    replayed += step;
    options.onProgress?.(replayed);
  }
  return replayed;
}
