// Riding out a database that goes away: a write that failed for transport
// reasons (the connection dropped, the server restarting or not reachable)
// is tried again after a bounded, jittered backoff, until it goes through,
// `signal` aborts, or `giveUpAfter` passes. Anything else fails at once.
import { backoff, sleep } from '../db/backoff.js';
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

export async function retryOnConnectionTrouble<T>(work: () => Promise<T>, options: RetryOptions): Promise<T> {
  const deadline = Date.now() + options.giveUpAfter;
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await work();
    } catch (error) {
      const wait = backoff(attempt, firstBackoff, maxBackoff);
      if (!isConnectionTrouble(error) || options.signal?.aborted || Date.now() + wait > deadline) throw error;
      options.onRetry?.(error, attempt, wait);
      await sleep(wait, options.signal);
    }
  }
}
