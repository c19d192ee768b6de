// Riding out a database that goes away: a write that failed for transport
// reasons (the connection dropped, the server restarting or not reachable)
// is tried again after a bounded, jittered backoff, until it goes through,
// `signal` aborts, or `giveUpAfter` passes. Anything else fails at once.
import { classifyFailure } from './classify.js';

export interface RetryOptions {
  signal?: AbortSignal;
  /** Stop trying after this long (ms). */
  giveUpAfter: number;
  /** Told before each wait, e.g. to log once. */
  onRetry?: (error: unknown, attempt: number, waitMs: number) => void;
}

const firstBackoff = 100;
const maxBackoff = 5_000;

/** Whether `error` is the database (or the way to it) being unavailable, not a refusal. */
export function isConnectionTrouble(error: unknown): boolean {
  const classification = classifyFailure(error);
  return classification.action === 'fail' && classification.kind === 'transient';
}

/** A bounded exponential backoff with equal jitter: d/2 + random * d/2. */
export function backoff(attempt: number, first = firstBackoff, max = maxBackoff): number {
  const delay = Math.min(max, first * 2 ** attempt);
  return delay / 2 + Math.random() * (delay / 2);
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export async function retryOnConnectionTrouble<T>(work: () => Promise<T>, options: RetryOptions): Promise<T> {
  const deadline = Date.now() + options.giveUpAfter;
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await work();
    } catch (error) {
      const wait = backoff(attempt);
      if (!isConnectionTrouble(error) || options.signal?.aborted || Date.now() + wait > deadline) throw error;
      options.onRetry?.(error, attempt, wait);
      await sleep(wait, options.signal);
    }
  }
}
