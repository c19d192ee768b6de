// Sends one delivery request with undici's fetch through the guarded agent
// (guarded-agent.ts: a connection opens only to an address the guard
// checked), redirects never followed, the whole exchange
// bounded by the destination's timeout, and at most 1 KB of the answer read:
// the body's reader stops there and cancels the rest. An answer read to its
// end leaves its connection in undici's pool, so requests to one origin
// reuse a kept-alive connection (the agent keeps them per origin); one cut short costs its connection, never more than 1 KB of reading.
import { fetch, type Dispatcher, type Response } from 'undici';
import type { DeliveryRequest } from './delivery-request.js';

/** The most of an answer that is read, and recorded. */
export const responseLimitBytes = 1024;

export type SendResult =
  | { type: 'response'; status: number; retryAfter: string | null; response: string; durationMs: number }
  | { type: 'error'; error: unknown; durationMs: number }
  /** The forwarder is stopping: nothing is known of the request; the delivery is released. */
  | { type: 'stopped'; durationMs: number };

export interface SendOptions {
  /** The guarded agent (guarded-agent.ts), one per forwarder, whose connections are kept alive. */
  dispatcher: Dispatcher;
  /** Aborts the request when the forwarder stops. */
  signal?: AbortSignal;
  /** Texts scrubbed from the recorded answer (a receiver may echo the request's credentials). */
  secrets?: readonly string[];
}

export async function sendDelivery(request: DeliveryRequest, options: SendOptions): Promise<SendResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const timeout = AbortSignal.timeout(request.timeoutMs);
  const signal = options.signal ? AbortSignal.any([timeout, options.signal]) : timeout;
  try {
    const response = await fetch(request.url, {
      method: 'POST', headers: request.headers, body: request.body, redirect: 'manual', signal, dispatcher: options.dispatcher,
    });
    const text = await readLimited(response);
    return {
      type: 'response',
      status: response.status,
      retryAfter: response.headers.get('retry-after'),
      response: scrub(text, options.secrets ?? []),
      durationMs: elapsed(),
    };
  } catch (error) {
    if (options.signal?.aborted && !timeout.aborted) return { type: 'stopped', durationMs: elapsed() };
    return { type: 'error', error, durationMs: elapsed() };
  }
}

/** At most responseLimitBytes of the body as text; the rest is cancelled, never read. */
async function readLimited(response: Response): Promise<string> {
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let done = false;
  try {
    while (size < responseLimitBytes) {
      const next = await reader.read();
      if (next.done) {
        done = true;
        break;
      }
      chunks.push(next.value);
      size += next.value.byteLength;
    }
  } finally {
    if (!done) await reader.cancel().catch(() => {});
    else reader.releaseLock();
  }
  const bytes = Buffer.concat(chunks).subarray(0, responseLimitBytes);
  return new TextDecoder('utf-8', { fatal: false }).decode(bytes);
}

/** `text` with every secret (longest first) replaced: an attempt record never holds one. */
export function scrub(text: string, secrets: readonly string[]): string {
  let scrubbed = text;
  for (const secret of secrets) if (scrubbed.includes(secret)) scrubbed = scrubbed.split(secret).join('[redacted]');
  return scrubbed;
}
