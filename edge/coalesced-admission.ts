// Group commit for a receiver with many requests in one process (Node): while
// one batch is being admitted, the deliveries that arrive wait, and the next
// batch takes them all at once (up to a bound) in one wharf.admit_many call,
// one transaction. No timer: a delivery that finds nothing in flight is
// admitted at once, alone, by wharf.admit. Each delivery's promise settles
// only after the transaction that holds it has committed (its receipt) or
// failed (the error its own admit would have raised, or the batch's).
import { classifyDatabaseError, type Database } from '../db/database.js';
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
  database: Database;
  bound: AdmitBatchBound;
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
}

/** One coalescer per receiver (server instance): its queue is the deliveries of that receiver. */
export function coalesceAdmissions(options: CoalescingOptions): Admit {
  const { database, bound, logger } = options;
  let waiting: Waiting[] = [];
  let flushing = false;

  /** The next batch from the front: at most bound.deliveries, and bound.bytes unless one delivery alone is larger. */
  function takeBatch(): Waiting[] {
    let count = 0;
    let bytes = 0;
    for (const next of waiting) {
      if (count === bound.deliveries || (count > 0 && bytes + next.bytes > bound.bytes)) break;
      count += 1;
      bytes += next.bytes;
    }
    const batch = count === waiting.length ? waiting : waiting.slice(0, count);
    waiting = count === waiting.length ? [] : waiting.slice(count);
    options.changeWaiting?.(-batch.length);
    return batch;
  }

  async function admitAlone(delivery: Waiting): Promise<void> {
    try {
      delivery.resolve(await admit(database, delivery.admission));
    } catch (error) {
      delivery.reject(error);
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
        for (const delivery of batch) await admitAlone(delivery);
        return;
      }
      // Connection lost, WH409 of the transaction, a server that cannot serve:
      // nothing of the batch is known to be committed, so every delivery is retried.
      for (const delivery of batch) delivery.reject(error);
      return;
    }
    if (!Array.isArray(receipts) || receipts.length !== batch.length) {
      const error = new Error(`admit_many answered ${Array.isArray(receipts) ? receipts.length : 'no'} receipts for ${batch.length} deliveries`);
      for (const delivery of batch) delivery.reject(error);
      return;
    }
    batch.forEach((delivery, i) => {
      const receipt = receipts[i]!;
      if ('error' in receipt) delivery.reject(new AdmissionElementError(receipt.error.code, receipt.error.message));
      else delivery.resolve(receipt);
    });
  }

  async function flush(): Promise<void> {
    flushing = true;
    try {
      while (waiting.length > 0) {
        const batch = takeBatch();
        options.observeBatch?.(batch.length);
        if (batch.length === 1) await admitAlone(batch[0]!);
        else await admitBatch(batch);
      }
    } finally {
      flushing = false;
    }
  }

  return (admission) => new Promise<Receipt>((resolve, reject) => {
    waiting.push({ admission, bytes: admission.payloadText.length, resolve, reject });
    options.changeWaiting?.(1);
    if (!flushing) void flush();
  });
}
