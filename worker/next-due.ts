// When the earliest retry this host knows of falls due. A retry becomes due
// without any commit that could notify a listener, so an idle claim loop
// sleeps no longer than this. It is read from the database (wharf.next_due_at)
// only when it may have changed: after this host scheduled a retry, or once
// the known one is past.
export class NextDue {
  /** Date.now() milliseconds; null: no retry waits. */
  private at: number | null = null;
  /** Retries scheduled so far; the first read counts as one. */
  private scheduled = 1;
  /** How many of those the last finished read had seen committed. */
  private seen = 0;

  /** A retry was scheduled (its write has committed): read again before the next sleep. */
  retryScheduled(): void {
    this.scheduled += 1;
  }

  get needsReading(): boolean {
    return this.seen < this.scheduled || (this.at !== null && this.at <= Date.now());
  }

  /**
   * Reads wharf.next_due_at through `read` (milliseconds from now, null:
   * none). A retry scheduled while the read runs may have committed after
   * the read's snapshot, so it leaves needsReading set.
   */
  async refresh(read: () => Promise<number | null>): Promise<void> {
    const scheduled = this.scheduled;
    const dueInMs = await read();
    this.at = dueInMs === null ? null : Date.now() + Math.max(0, dueInMs);
    this.seen = scheduled;
  }

  /** How long to sleep: the poll interval, or less when a retry falls due sooner. */
  sleepMs(pollEvery: number): number {
    if (this.at === null) return pollEvery;
    return Math.max(0, Math.min(pollEvery, this.at - Date.now()));
  }
}
