// Counts what no-op handlers saw: how many events, how many handled twice,
// and how many started before an older event of the same key (an order
// violation). Every system's handler reports here, in the one Node process.

export interface HandlingCounts {
  handled: number;
  duplicates: number;
  orderViolations: number;
}

/** The wait ran out before every event was handled: a stalled consumer. */
export class DrainStalled extends Error {
  override name = 'DrainStalled';
}

export class HandlingTracker {
  private readonly seen = new Set<string>();
  private readonly lastSeqByKey = new Map<string, number>();
  private waiter: { target: number; resolve: () => void; reject: (error: unknown) => void } | undefined;
  private failure: unknown;
  handled = 0;
  duplicates = 0;
  orderViolations = 0;

  record(key: string, seq: number): void {
    const id = `${key}#${seq}`;
    if (this.seen.has(id)) {
      this.duplicates += 1;
      return;
    }
    this.seen.add(id);
    const last = this.lastSeqByKey.get(key);
    if (last !== undefined && seq < last) this.orderViolations += 1;
    else this.lastSeqByKey.set(key, seq);
    this.handled += 1;
    if (this.waiter && this.handled >= this.waiter.target) {
      this.waiter.resolve();
      this.waiter = undefined;
    }
  }

  /** Resolves once `target` distinct events were handled; rejects after `timeoutMs`. */
  async waitFor(target: number, timeoutMs: number): Promise<void> {
    if (this.handled >= target) return;
    if (this.failure !== undefined) throw this.failure;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiter = undefined;
        reject(new DrainStalled(`only ${this.handled} of ${target} events handled after ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiter = {
        target,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      };
    });
  }

  /** A consumer broke: the wait ends now with its error instead of timing out. */
  fail(error: unknown): void {
    this.failure ??= error;
    this.waiter?.reject(error);
    this.waiter = undefined;
  }

  counts(): HandlingCounts {
    return { handled: this.handled, duplicates: this.duplicates, orderViolations: this.orderViolations };
  }
}
