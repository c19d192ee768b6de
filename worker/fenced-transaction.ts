// One business transaction of a handler, fenced by its lease. Lock contention
// (a reaper or an erasure holding the row, a serialization failure, a
// deadlock) rolls back and runs the same transaction again, in order, without
// touching the failure budget.
import type pg from 'pg';
import { causeChain, errorCode } from './causes.js';
import { busySqlStates } from './classify.js';

export interface FencedTransactionOptions {
  pool: pg.Pool;
  /** Stops the retries (the thrown error is the signal's reason). */
  signal: AbortSignal;
  onBusyRetry: () => void;
}

const firstBackoff = 20;
const maxBackoff = 1_000;

export async function runFencedTransaction<T>(
  options: FencedTransactionOptions,
  body: (tx: pg.ClientBase) => Promise<T>,
): Promise<T> {
  for (let retry = 0; ; retry += 1) {
    const tx = await options.pool.connect();
    let broken: Error | undefined;
    try {
      await tx.query('BEGIN');
      const result = await body(tx);
      await tx.query('COMMIT');
      return result;
    } catch (error) {
      try {
        await tx.query('ROLLBACK');
      } catch (rollbackError) {
        broken = rollbackError instanceof Error ? rollbackError : new Error('rollback failed');
      }
      if (!isBusy(error) || options.signal.aborted) throw error;
    } finally {
      tx.release(broken);
    }
    options.onBusyRetry();
    const backoff = Math.min(maxBackoff, firstBackoff * 2 ** retry);
    await pause(backoff / 2 + Math.random() * (backoff / 2), options.signal);
  }
}

function isBusy(error: unknown): boolean {
  return causeChain(error).some((cause) => busySqlStates.has(errorCode(cause) ?? ''));
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
