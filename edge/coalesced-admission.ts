// Group commit for a receiver with many requests in one process (Node): while
// one batch is being admitted, the deliveries that arrive wait, and the next
// batch takes them all at once (up to a bound) in one wharf.admit_many call,
// one transaction. No timer holds a batch back: a delivery that finds nothing
// in flight is admitted at once, alone, by wharf.admit. Each delivery's
// promise resolves only after the transaction that holds it has committed
// (its receipt); it rejects when that transaction failed (the error its own
// admit would have raised, or the batch's) or at the delivery's deadline,
// counted from its arrival, whichever comes first. The deadline is the
// delivery's own because its wait is: behind a lock, a delivery that queued
// behind a batch would otherwise wait for that batch's deadline and then for
// its own batch's. A 503 for a delivery that its batch then commits is safe:
// the provider's retry is a duplicate.
import { classifyDatabaseError, DatabaseUnavailableError, type Database } from '../db/database.js';
import { sqlState } from '../db/error-codes.js';
import type { AdmitBatchBound } from './settings.js';
import { admit, admitMany, type Admission, type Receipt } from './sql/admission.js';
import type { EdgeLogger } from './telemetry.js';

/** How the receiver admits one delivery: resolves after the commit, rejects with an error that has a `code` where the database gave one. */
export type Admit = (admission: Admission) => Promise<Receipt>;

/** An element admit_many answered with an error receipt: what admit would have raised for it. */
export class AdmissionElementError extends Error {
  override readonly name = 'AdmissionElementError';
  /** The SQLSTATE; the message may quote the payload, so it is never logged. */
  constructor(readonly code: string, message: string) {
    super(message);
  }
}

export interface CoalescingOptions {
  /** Each call bounded by the deadline too (withDatabaseDeadline), so that a batch stuck behind a lock lets the next one go. */
  database: Database;
  bound: AdmitBatchBound;
  /** How long a delivery waits for its answer from its arrival (WHARF_DATABASE_TIMEOUT_MS) before it is answered unavailable. */
  deadlineMs: number;
  logger: EdgeLogger;
  /** Called with each batch's number of deliveries as it is sent. */
  observeBatch?: (deliveries: number) => void;
  /** Called with +n as deliveries start waiting for a batch and -n as a batch takes them. */
  changeWaiting?: (change: number) => void;
}

interface Waiting {
  admission: Admission;
  bytes: number;
  resolve: (receipt: Receipt) => void;
  reject: (error: unknown) => void;
  /** Fires deadlineMs after the delivery arrived. */
  deadline: ReturnType<typeof setTimeout>;
  /** In the queue, in a batch sent, or answered (by its batch or its deadline): a batch not yet sent leaves an answered delivery out. */
  state: 'waiting' | 'sent' | 'answered';
}

/** One coalescer per receiver (server instance): its queue is the deliveries of that receiver. */
export function coalesceAdmissions(options: CoalescingOptions): Admit {
  const { database, bound, deadlineMs, logger } = options;
  let waiting: Waiting[] = [];
  let flushing = false;

  function answer(delivery: Waiting): boolean {
    if (delivery.state === 'answered') return false;
    if (delivery.state === 'waiting') options.changeWaiting?.(-1);
    delivery.state = 'answered';
    clearTimeout(delivery.deadline);
    return true;
  }
  function resolve(delivery: Waiting, receipt: Receipt): void {
    if (answer(delivery)) delivery.resolve(receipt);
  }
  function reject(delivery: Waiting, error: unknown): void {
    if (answer(delivery)) delivery.reject(error);
  }

  /**
   * The next batch from the front: at most bound.deliveries, and bound.bytes
   * unless one delivery alone is larger; the deliveries whose deadline passed
   * while they waited are dropped from the queue, not sent. Empty when only those were left.
   */
  function takeBatch(): Waiting[] {
    const batch: Waiting[] = [];
    let bytes = 0;
    let taken = 0;
    for (const next of waiting) {
      if (next.state === 'waiting') {
        if (batch.length === bound.deliveries || (batch.length > 0 && bytes + next.bytes > bound.bytes)) break;
        next.state = 'sent';
        batch.push(next);
        bytes += next.bytes;
      }
      taken += 1;
    }
    waiting = taken === waiting.length ? [] : waiting.slice(taken);
    options.changeWaiting?.(-batch.length);
    return batch;
  }

  async function admitAlone(delivery: Waiting): Promise<void> {
    try {
      resolve(delivery, await admit(database, delivery.admission));
    } catch (error) {
      reject(delivery, error);
    }
  }

  async function admitBatch(batch: Waiting[]): Promise<void> {
    let receipts;
    try {
      receipts = await admitMany(database, batch.map((delivery) => delivery.admission));
    } catch (error) {
      if (classifyDatabaseError(error) === 'database-error') {
        // The call failed for what it was sent, not for the database's state:
        // a body PostgreSQL cannot parse or store makes the whole document
        // fail before any row is written. Each delivery then gets the answer
        // its own admit gives, so that no neighbour of a bad one is refused.
        const sqlstate = sqlState(error);
        logger.warn({ event: 'admit_batch_split', sqlstate, deliveries: batch.length }, 'admit_many failed; admitting its deliveries one by one');
        for (const delivery of batch) if (delivery.state !== 'answered') await admitAlone(delivery);
        return;
      }
      // Connection lost, WH409 of the transaction, a server that cannot serve:
      // nothing of the batch is known to be committed, so every delivery is retried.
      for (const delivery of batch) reject(delivery, error);
      return;
    }
    if (!Array.isArray(receipts) || receipts.length !== batch.length) {
      const error = new Error(`admit_many answered ${Array.isArray(receipts) ? receipts.length : 'no'} receipts for ${batch.length} deliveries`);
      for (const delivery of batch) reject(delivery, error);
      return;
    }
    batch.forEach((delivery, i) => {
      const receipt = receipts[i]!;
      if ('error' in receipt) reject(delivery, new AdmissionElementError(receipt.error.code, receipt.error.message));
      else resolve(delivery, receipt);
    });
  }

  async function flush(): Promise<void> {
    flushing = true;
    try {
      while (waiting.length > 0) {
        const batch = takeBatch();
        if (batch.length === 0) continue;
        options.observeBatch?.(batch.length);
        if (batch.length === 1) await admitAlone(batch[0]!);
        else await admitBatch(batch);
      }
    } finally {
      flushing = false;
    }
  }

  return (admission) => new Promise<Receipt>((resolvePromise, rejectPromise) => {
    const delivery: Waiting = {
      admission, bytes: admission.payloadText.length, resolve: resolvePromise, reject: rejectPromise, state: 'waiting',
      deadline: setTimeout(() => reject(delivery, new DatabaseUnavailableError(`no answer from the database within ${deadlineMs} ms of the delivery's arrival`)), deadlineMs),
    };
    waiting.push(delivery);
    options.changeWaiting?.(1);
    if (!flushing) void flush();
  });
}
