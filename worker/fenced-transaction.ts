// One business transaction of a handler, fenced by its lease. Lock contention
// (a reaper or an erasure holding the row, a serialization failure, a
// deadlock) rolls back and runs the same transaction again, in order, without
// touching the failure budget.
import type pg from 'pg';
import type { AttemptTransactions } from './attempt-transactions.js';
import { causeChain } from './causes.js';
import { errorCode } from '../db/error-codes.js';
import { busySqlStates } from './classify.js';
import { withPoolClient } from './pool-client.js';
import { backoff, sleep } from '../db/backoff.js';

export interface FencedTransactionOptions {
  pool: pg.Pool;
  /** The attempt's open transactions: none commits once the attempt has ended. */
  attempt: AttemptTransactions;
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
    const outcome = await withPoolClient(options.pool, async (tx, discard) => {
      options.attempt.begin(tx);
      try {
        await tx.query('BEGIN');
        const result = await body(tx);
        options.attempt.beforeCommit();
        await tx.query('COMMIT');
        return { committed: true as const, result };
      } catch (error) {
        await tx.query('ROLLBACK').catch(discard);
        if (!isBusy(error) || options.signal.aborted) throw error;
        return { committed: false as const };
      } finally {
        options.attempt.end(tx);
      }
    });
    if (outcome.committed) return outcome.result;
    options.onBusyRetry();
    await sleep(backoff(retry, firstBackoff, maxBackoff), options.signal);
  }
}

function isBusy(error: unknown): boolean {
  return causeChain(error).some((cause) => busySqlStates.has(errorCode(cause) ?? ''));
}
