// What every provider adapter is: a signature check over the raw body and a
// reading of the verified body into admit's arguments.
import { constantTimeEqual } from '../../db/constant-time.js';
import { fromHex, hmacSha256, type Bytes } from '../crypto.js';
import type { JsonObject, ParsedBody } from '../request-body.js';
import type { ConnectionEndpoint } from '../connection-cache.js';
import type { Provider } from '../../db/providers.js';

/**
 * Where a delivery was posted: an app (secrets from the environment) or a
 * connection (from PostgreSQL). Secrets come current first, then the one a
 * rotation replaced, while its overlap lasts.
 */
export type Endpoint =
  | { kind: 'app'; app: string; source: string; secrets: string[] }
  | { kind: 'connection'; connection: ConnectionEndpoint };

export interface SignedRequest {
  headers: Headers;
  body: Bytes;
  endpoint: Endpoint;
  nowMs: number;
  /** The URL the request was posted to, as the edge received it (Twilio signs it). */
  url: string;
}

export type Verification =
  | { ok: true }
  | { ok: false; reason: 'missing-signature' | 'bad-signature' | 'stale-timestamp' };

export type Reading =
  | {
      kind: 'delivery';
      deliveryKey: string;
      eventType: string;
      route: Record<string, unknown>;
      subjects: string[];
      /**
       * Deduplicate by the body's SHA-256 too, whatever the adapter's
       * signsBodyOnly says: a configured source whose delivery id is a header.
       */
      dedupeByBody?: boolean;
      /**
       * Once stored, answer 200 with an empty body instead of the receipt:
       * Slack shows a slash command's or an interaction's answer to the user.
       */
      emptyAnswer?: boolean;
    }
  /** A provider handshake: answered 200 with `body`, nothing stored. */
  | { kind: 'handshake'; body: Record<string, unknown> }
  /** The provider's required fields are missing: 400. */
  | { kind: 'invalid'; message: string }
  /**
   * A timestamp signed inside the body (Linear's webhookTimestamp) is too far
   * from the receiver's clock: 401 stale-timestamp, as for a timestamp header.
   */
  | { kind: 'stale' };

export interface VerifiedBody {
  headers: Headers;
  text: string;
  payload: JsonObject;
  endpoint: Endpoint;
  /** The receiver's clock when the delivery was verified. */
  nowMs: number;
}

/**
 * A timestamp the provider signs with the body: where it is sent (a header,
 * or a field of the signed body), its unit, and how far from the receiver's
 * clock it may be before verify refuses it (stale-timestamp).
 */
export interface SignedTimestamp {
  in: string;
  unit: 'seconds' | 'milliseconds';
  toleranceMs: number;
}

export interface Adapter {
  provider: Provider;
  /** Which kind of endpoint the route's parameter names. */
  endpointKind: Endpoint['kind'];
  /**
   * The signature headers are there and well formed: checked before the body
   * is read, so that a request that cannot be authentic costs no buffering.
   */
  checkHeaders(headers: Headers): Verification;
  /**
   * The same, for a scheme the endpoint configures (provider `hmac`): once
   * the endpoint is known, still before the body is read.
   */
  checkEndpointHeaders?(headers: Headers, endpoint: Endpoint): Verification;
  /**
   * The provider signs the body alone, not its delivery id or event type
   * headers (GitHub, Forgejo): admit also deduplicates by the body's SHA-256.
   */
  signsBodyOnly: boolean;
  /**
   * The signature, over the raw bytes: nothing of the body is parsed before
   * it verifies, so that a signed body the edge cannot read is a 400 that
   * names the body's fault, never a signature failure.
   */
  verify(request: SignedRequest): Promise<Verification>;
  /**
   * The verified body as the object to store: JSON by default
   * (parseJsonBody); Twilio and Slack's form posts parse a form.
   */
  parseBody?(body: Bytes, headers: Headers): ParsedBody;
  read(body: VerifiedBody): Promise<Reading>;
  /** Non-secret request headers stored with the event (lower case). */
  keptHeaders: readonly string[];
  /** Further headers kept for this endpoint (a configured source's own). */
  keptHeadersOf?(endpoint: Endpoint): readonly string[];
  /**
   * The headers that carry its signature or secret (lower case): never kept,
   * and dropped by wharf.safe_headers whatever the edge sends
   * (test/edge/provider-registry.test.ts checks both).
   */
  signatureHeaders: readonly string[];
  /**
   * The timestamp it signs, as its check uses it; `configured` when each
   * connection's route says (provider hmac); absent when the provider signs
   * none. The docs' lists of tolerances are tested against it.
   */
  signedTimestamp?: SignedTimestamp | 'configured';
  /**
   * The status of a stored delivery's answer when the provider counts 202 as
   * a failure (Zoom wants 200 or 204); 202 otherwise.
   */
  acceptedStatus?: 200;
  /**
   * Where an operator gives the provider a connection's secret, for
   * `wharf connections rotate-secret` to say (connection endpoints only).
   */
  secretDestination?: string;
}

export const verified: Verification = { ok: true };
export const missingSignature: Verification = { ok: false, reason: 'missing-signature' };
export const badSignature: Verification = { ok: false, reason: 'bad-signature' };
export const staleTimestamp: Verification = { ok: false, reason: 'stale-timestamp' };

/** `missing` when `value` is absent, `bad` when it does not match `shape`, else verified. */
export function headerShape(value: string | null, shape: RegExp): Verification {
  if (value === null || value === '') return missingSignature;
  return shape.test(value) ? verified : badSignature;
}

/** The first answer of `checks` that is not verified, else verified. */
export function allOf(...checks: Verification[]): Verification {
  return checks.find((check) => !check.ok) ?? verified;
}

/** Timestamped schemes accept a signature this far from the receiver's clock. */
export const timestampToleranceMs = 5 * 60 * 1000;

export async function hmacMatches(key: Bytes | string, message: Bytes, provided: Bytes | undefined): Promise<Verification> {
  if (!provided) return badSignature;
  return constantTimeEqual(await hmacSha256(key, message), provided) ? verified : badSignature;
}

/**
 * Verified when `expected` equals one of `provided` (a sender rotating its
 * secret signs with each): one HMAC, compared with each candidate.
 */
export function matchesAny(expected: Bytes, provided: readonly (Bytes | undefined)[]): Verification {
  let matched = false;
  for (const candidate of provided) if (candidate && constantTimeEqual(expected, candidate)) matched = true;
  return matched ? verified : badSignature;
}

/** Signatures of one header looked at: a sender rotating its key sends two or three. */
export const maxSignatures = 8;

/** `key=value` pairs of a signature header split on `separator`, e.g. Stripe's `t=…,v1=…,v1=…`. */
export function headerPairs(header: string, separator: string): [string, string][] {
  const pairs: [string, string][] = [];
  for (const part of header.split(separator)) {
    const at = part.indexOf('=');
    if (at > 0) pairs.push([part.slice(0, at).trim(), part.slice(at + 1).trim()]);
  }
  return pairs;
}

/**
 * A header that carries a timestamp (seconds) and hex HMAC-SHA256 signatures
 * as `key=value` pairs (Stripe's `t=…,v1=…`, Paddle's `ts=…;h1=…`), each
 * signature over `signed(timestamp)`: verified when one matches and the
 * timestamp is within `toleranceMs`.
 */
export async function verifyTimestampedPairs(
  secret: string, header: string | null, nowMs: number,
  scheme: { separator: string; timestamp: string; signature: string; toleranceMs: number; signed: (timestamp: string) => Bytes },
): Promise<Verification> {
  if (!header) return missingSignature;
  const pairs = headerPairs(header, scheme.separator);
  const timestamp = pairs.find(([name]) => name === scheme.timestamp)?.[1];
  if (!timestamp || !/^\d{1,12}$/.test(timestamp)) return badSignature;
  const signatures = pairs.filter(([name]) => name === scheme.signature).slice(0, maxSignatures).map(([, value]) => fromHex(value));
  if (signatures.length === 0) return badSignature;
  if (!fresh(Number(timestamp) * 1000, nowMs, scheme.toleranceMs)) return staleTimestamp;
  return matchesAny(await hmacSha256(secret, scheme.signed(timestamp)), signatures);
}

/** Whether `timestampMs` is within `toleranceMs` of the receiver's clock. */
export function fresh(timestampMs: number, nowMs: number, toleranceMs: number): boolean {
  return Number.isFinite(timestampMs) && Math.abs(nowMs - timestampMs) <= toleranceMs;
}

/** The signing keys of an endpoint: the app's secrets, or the connection's HMAC keys. */
export function signingKeysOf(endpoint: Endpoint): string[] {
  return endpoint.kind === 'app' ? endpoint.secrets : endpoint.connection.signingKeys;
}

/**
 * Verifies with each key in turn (current, then previous): the first that
 * verifies wins; otherwise the current key's answer (e.g. a stale timestamp).
 */
export async function verifyWithAny(keys: string[], verifyWith: (key: string) => Promise<Verification>): Promise<Verification> {
  let first: Verification | undefined;
  for (const key of keys) {
    const verification = await verifyWith(key);
    if (verification.ok) return verification;
    first ??= verification;
  }
  return first ?? badSignature;
}

export function missingField(name: string): Reading {
  return { kind: 'invalid', message: `The delivery lacks ${name}.` };
}
