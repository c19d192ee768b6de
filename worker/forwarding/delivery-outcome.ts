// What one attempt's answer means for its delivery (DESIGN.md, "Destinations"):
// 2xx handled; a redirect is not followed and is permanent; 410 is `gone`
// (the destination pauses, an issue opens); 408, 429, 5xx, a timeout, a
// refused or reset connection, a TLS or DNS failure are transient, with the
// answer's Retry-After passed on; any other 4xx is permanent; an address the
// guard refused is permanent. The error class names what happened, never a
// message (messages can carry the URL and with it a credential).
import { causeChain } from '../causes.js';
import { classOf } from '../classify.js';
import { errorCode } from '../../db/error-codes.js';
import { AddressRefusedError } from './address-guard.js';
import type { SendResult } from './send-delivery.js';

export type FailureKind = 'transient' | 'permanent' | 'gone';

export type DeliveryOutcome =
  | { kind: 'handled'; status: number; durationMs: number; response: string }
  | {
    kind: FailureKind;
    errorClass: string;
    status: number | null;
    durationMs: number;
    response: string | null;
    /** From Retry-After; null without one (the database's backoff applies). */
    retryAfterMs: number | null;
  };

/** Seconds or an HTTP date, as milliseconds from `now`; null when absent or unreadable. */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | null {
  if (value === null) return null;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  if (!/[a-z]/i.test(text)) return null;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return null;
  return Math.max(0, at - now);
}

const transientStatuses = new Set([408, 429]);

const transportClasses: Record<string, string> = {
  ECONNREFUSED: 'ConnectionRefused',
  ECONNRESET: 'ConnectionReset',
  EPIPE: 'ConnectionReset',
  ECONNABORTED: 'ConnectionReset',
  UND_ERR_SOCKET: 'ConnectionReset',
  UND_ERR_CLOSED: 'ConnectionReset',
  ETIMEDOUT: 'Timeout',
  UND_ERR_CONNECT_TIMEOUT: 'Timeout',
  UND_ERR_HEADERS_TIMEOUT: 'Timeout',
  UND_ERR_BODY_TIMEOUT: 'Timeout',
  ENOTFOUND: 'DnsNotFound',
  EAI_AGAIN: 'DnsUnavailable',
  EAI_FAIL: 'DnsUnavailable',
  ENODATA: 'DnsNotFound',
  EHOSTUNREACH: 'HostUnreachable',
  ENETUNREACH: 'NetworkUnreachable',
  ENETDOWN: 'NetworkUnreachable',
  UND_ERR_RESPONSE_STATUS_CODE: 'InvalidResponse',
  HPE_INVALID_CONSTANT: 'InvalidResponse',
};

const tlsCode = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|ERR_OSSL_)/;

export function outcomeOf(result: Exclude<SendResult, { type: 'stopped' }>, now: number = Date.now()): DeliveryOutcome {
  const { durationMs } = result;
  if (result.type === 'response') {
    const { status, response } = result;
    if (status >= 200 && status <= 299) return { kind: 'handled', status, durationMs, response };
    const failed = (kind: FailureKind, errorClass: string, retryAfterMs: number | null = null): DeliveryOutcome =>
      ({ kind, errorClass, status, durationMs, response, retryAfterMs });
    if (status >= 300 && status <= 399) return failed('permanent', 'RedirectNotFollowed');
    if (status === 410) return failed('gone', 'HTTP:410');
    if (transientStatuses.has(status) || (status >= 500 && status <= 599)) {
      return failed('transient', `HTTP:${status}`, parseRetryAfter(result.retryAfter, now));
    }
    if (status >= 400 && status <= 499) return failed('permanent', `HTTP:${status}`);
    // 1xx as a final answer, or a code outside 100-599: the receiver misspoke.
    return failed('transient', 'InvalidResponse');
  }
  const { kind, errorClass } = classifyTransportError(result.error);
  return { kind, errorClass, status: null, durationMs, response: null, retryAfterMs: null };
}

/** A failure without an answer: what it was, and whether trying again can help. */
export function classifyTransportError(error: unknown): { kind: FailureKind; errorClass: string } {
  const chain = causeChain(error);
  if (chain.some((cause) => cause instanceof AddressRefusedError)) return { kind: 'permanent', errorClass: 'AddressRefused' };
  if (chain.some((cause) => cause instanceof Error && (cause.name === 'TimeoutError'))) return { kind: 'transient', errorClass: 'Timeout' };
  for (const cause of chain) {
    const code = errorCode(cause);
    if (code === undefined) continue;
    if (transportClasses[code]) return { kind: 'transient', errorClass: transportClasses[code] };
    if (tlsCode.test(code)) return { kind: 'transient', errorClass: 'TlsError' };
  }
  // A URL fetch cannot use, a header value it refuses: trying again cannot help.
  const innermost = chain.at(-1) ?? error;
  if (chain.length === 1 && error instanceof TypeError) return { kind: 'permanent', errorClass: 'InvalidRequest' };
  // fetch's "fetch failed" with an unnamed cause: the way there failed.
  return { kind: 'transient', errorClass: classOf(innermost) };
}
