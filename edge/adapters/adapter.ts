// What every provider adapter is: a signature check over the raw body and a
// reading of the verified body into admit's arguments.
import { constantTimeEqual, hmacSha256, type Bytes } from '../crypto.js';
import type { JsonObject } from '../request-body.js';
import type { ConnectionEndpoint } from '../sql/connection-secrets.js';
import type { Provider } from '../sql/admission.js';

/** Where a delivery was posted: an app (secret from the environment) or a connection (from PostgreSQL). */
export type Endpoint =
  | { kind: 'app'; app: string; source: string; secret: string }
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
  verify(request: SignedRequest): Promise<Verification>;
  read(body: VerifiedBody): Promise<Reading>;
  /** Non-secret request headers stored with the event (lower case). */
  keptHeaders: readonly string[];
}

export const verified: Verification = { ok: true };
export const missingSignature: Verification = { ok: false, reason: 'missing-signature' };
export const badSignature: Verification = { ok: false, reason: 'bad-signature' };
export const staleTimestamp: Verification = { ok: false, reason: 'stale-timestamp' };

/** Timestamped schemes accept a signature this far from the receiver's clock. */
export const timestampToleranceMs = 5 * 60 * 1000;

export async function hmacMatches(key: Bytes | string, message: Bytes, provided: Bytes | undefined): Promise<Verification> {
  if (!provided) return badSignature;
  return constantTimeEqual(await hmacSha256(key, message), provided) ? verified : badSignature;
}

/** The signing key of a connection endpoint (the app's secret for app endpoints). */
export function signingKeyOf(endpoint: Endpoint): string | undefined {
  return endpoint.kind === 'app' ? endpoint.secret : (endpoint.connection.signingKey ?? undefined);
}

export function missingField(name: string): Reading {
  return { kind: 'invalid', message: `The delivery lacks ${name}.` };
}
