// What every provider adapter is: a signature check over the raw body and a
// reading of the verified body into admit's arguments.
import { constantTimeEqual, hmacSha256, type Bytes } from '../crypto.js';
import type { JsonObject } from '../request-body.js';
import type { ConnectionEndpoint } from '../connection-cache.js';
import type { Provider } from '../sql/admission.js';

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
    }
  /** A provider handshake: answered 200 with `body`, nothing stored. */
  | { kind: 'handshake'; body: Record<string, unknown> }
  /** The provider's required fields are missing: 400. */
  | { kind: 'invalid'; message: string };

export interface VerifiedBody {
  headers: Headers;
  text: string;
  payload: JsonObject;
  endpoint: Endpoint;
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
   * The provider signs the body alone, not its delivery id or event type
   * headers (GitHub, Forgejo): admit also deduplicates by the body's SHA-256.
   */
  signsBodyOnly: boolean;
  verify(request: SignedRequest): Promise<Verification>;
  read(body: VerifiedBody): Promise<Reading>;
  /** Non-secret request headers stored with the event (lower case). */
  keptHeaders: readonly string[];
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
