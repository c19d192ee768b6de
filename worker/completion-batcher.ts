// Completes leases in batches that form by themselves, like group commit:
// the completions of one turn of the event loop go together, and while one
// batch is being written, the completions that arrive wait and go together
// in the next statement. An idle host therefore writes each at once, a busy
// one pays one commit for many. Each completion is answered on the object
// that asked for it (a CompletionWaiter: the event's run), not through a
// promise: completions are one per event, and the promise and closures per
// event are garbage a drain pays for (bench/worker-profile.ts).
//
// The handlers' events (wharf.complete_many) and the forwarder's deliveries
// (wharf.complete_deliveries) each have one; what a batch is written with is
// the statement's module, handed in.
import type pg from 'pg';
import type { Logger } from 'pino';
import { classOf } from './classify.js';
import type { Queryable } from './sql/prepared-statement.js';
import { isConnectionTrouble, retryOnConnectionTrouble } from './transient.js';

/** Hears how its completion went. */
export interface CompletionWaiter<Item> {
  /** Written: `done` is true when the row is DONE, false when its lease was no longer held. */
  completed(done: boolean, item: Item): void;
  /** Not written: the database stayed unreachable past the retries. */
  completionFailed(error: unknown): void;
}

/** Writes a batch in one statement; answers, in the batch's order, whether each row is DONE. */
export type CompleteBatch<Item> = (db: Queryable, items: readonly Item[]) => Promise<boolean[]>;

interface Pending<Item> {
  item: Item;
  waiter: CompletionWaiter<Item>;
}

/** Most completions in one statement. */
const maxBatch = 64;

export class CompletionBatcher<Item> {
  private queue: Pending<Item>[] = [];
  /** A write is scheduled or running: it takes whatever the queue holds. */
  private writing = false;

  constructor(
    private readonly pool: pg.Pool,
    private readonly write: CompleteBatch<Item>,
    private readonly logger: Logger,
    /** Aborts retries while the database is unreachable (worker/transient.ts). */
    private readonly signal: AbortSignal,
    /** How long a batch is retried while the database is unreachable (as the caller's other closing writes). */
    private readonly giveUpAfter: number,
  ) {}

  /** Ends the lease as DONE, in the next statement; `waiter` hears how it went. */
  complete(item: Item, waiter: CompletionWaiter<Item>): void {
    this.queue.push({ item, waiter });
    if (this.writing) return;
    // Wait out the current turn of the event loop: the other handlers of
    // the same claim end in it, and their completions join this one.
    this.writing = true;
    setImmediate(() => void this.drain());
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      // In any order: each statement locks its rows in the database's one lock order.
      const batch = this.queue.splice(0, maxBatch);
      const items = batch.map((pending) => pending.item);
      let completed: boolean[];
      try {
        completed = await retryOnConnectionTrouble(
          () => this.write(this.pool, items),
          { giveUpAfter: this.giveUpAfter, signal: this.signal },
        );
      } catch (error) {
        this.writeFailed(batch, error);
        continue;
      }
      // Outside the try: what a waiter does with its answer is not the batch's failure.
      batch.forEach((pending, n) => this.answer(pending, completed[n] === true));
    }
    this.writing = false;
  }

  /**
   * Tells a waiter how its completion went. A waiter that throws while
   * hearing it (the host's `settled` listener, say) is logged, and the
   * batch's other waiters and the batches after it still hear theirs; what
   * was written stays written.
   */
  private answer(pending: Pending<Item>, done: boolean): void {
    try {
      pending.waiter.completed(done, pending.item);
    } catch (fault) {
      this.waiterThrew(fault);
    }
  }

  /** Tells a waiter its completion was not written, as answer does. */
  private answerFailed(pending: Pending<Item>, error: unknown): void {
    try {
      pending.waiter.completionFailed(error);
    } catch (fault) {
      this.waiterThrew(fault);
    }
  }

  private waiterThrew(fault: unknown): void {
    this.logger.error({ error_class: classOf(fault) }, 'a completion\'s waiter failed to take its answer');
  }

  private writeFailed(batch: readonly Pending<Item>[], error: unknown): void {
    if (isConnectionTrouble(error)) {
      // Still unreachable after retrying: the leases expire and the reaper hands the rows out again.
      for (const pending of batch) this.answerFailed(pending, error);
      return;
    }
    // Whatever failed the batch (a bad element, a lock wait past its
    // bound that outlasted the retries), nothing of it committed: each
    // completion is tried alone.
    this.logger.debug({ error_class: classOf(error), size: batch.length }, 'batched completion failed; completing one by one');
    for (const pending of batch) {
      this.write(this.pool, [pending.item]).then(
        ([completed]) => this.answer(pending, completed === true),
        (alone: unknown) => this.answerFailed(pending, alone),
      );
    }
  }
}
