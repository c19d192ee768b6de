// Waiting before trying again: one formula for every retry of every part
// (bounded exponential with equal jitter, as wharf.fail's delays), one sleep
// that an AbortSignal ends.

/**
 * The wait before try `attempt + 1` (attempt 0 is the first retry): d =
 * min(max, first * 2^attempt), then d/2 + random * d/2, so that clients that
 * failed together do not come back together, and none waits less than d/2.
 */
export function backoff(attempt: number, first: number, max: number): number {
  return equalJitter(Math.min(max, first * 2 ** attempt));
}

/** d/2 + random * d/2: between half of `ms` and all of it. */
export function equalJitter(ms: number): number {
  return ms / 2 + Math.random() * (ms / 2);
}

/** `ms` spread by a quarter either way, so hosts started together do not run a periodic task in step. */
export function spread(ms: number): number {
  return ms * (0.75 + Math.random() * 0.5);
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
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
