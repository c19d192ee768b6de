// When the earliest retry this host knows of falls due. A retry becomes due
// without any commit that could notify a listener, so an idle claim loop
// sleeps no longer than this. It is read from the database (wharf.next_due_at)
// only when it may have changed: after this host scheduled a retry, or once
// the known one is past.
export class NextDue {
  /** Date.now() milliseconds; null: no retry waits. */
  private at: number | null = null;
  private stale = true;

  /** A retry was scheduled: read again before the next sleep. */
  retryScheduled(): void {
    this.stale = true;
  }

  get needsReading(): boolean {
    return this.stale || (this.at !== null && this.at <= Date.now());
  }

  /** What wharf.next_due_at said, as milliseconds from now (null: none). */
  read(dueInMs: number | null): void {
    this.at = dueInMs === null ? null : Date.now() + Math.max(0, dueInMs);
    this.stale = false;
  }

  /** How long to sleep: the poll interval, or less when a retry falls due sooner. */
  sleepMs(pollEvery: number): number {
    if (this.at === null) return pollEvery;
    return Math.max(0, Math.min(pollEvery, this.at - Date.now()));
  }
}
