// When each running handler's time is up (handler_timeout), kept by one timer
// for the whole host rather than one per event: a drain of short handlers
// would otherwise make and cancel a timer per event, which it pays for in
// timer-list upkeep and garbage (bench/worker-profile.ts). The timer is set
// for the earliest deadline; handlers start in order with the same timeout,
// so a new one rarely moves it, and one that ends leaves it where it is: the
// timer, when it fires early, looks at the few handlers still running and
// sets itself again.

export interface TimedHandler {
  /** Its time is up: the run ends as timed out. */
  timedOut(): void;
}

export class HandlerDeadlines {
  /** performance.now() by which each running handler must end. */
  private readonly deadlines = new Map<TimedHandler, number>();
  private timer: NodeJS.Timeout | undefined;
  /** When the timer fires (performance.now()); Infinity when none is set. */
  private firesAt = Infinity;

  /** The handler starts now and must end within `timeoutMs`. */
  watch(handler: TimedHandler, timeoutMs: number): void {
    const deadline = performance.now() + timeoutMs;
    this.deadlines.set(handler, deadline);
    if (deadline < this.firesAt) this.arm(deadline);
  }

  /** The handler ended (or its run did): no timeout for it any more. */
  forget(handler: TimedHandler): void {
    this.deadlines.delete(handler);
    if (this.deadlines.size === 0) this.disarm();
  }

  private arm(deadline: number): void {
    clearTimeout(this.timer);
    this.firesAt = deadline;
    this.timer = setTimeout(() => this.fire(), Math.max(0, deadline - performance.now()));
  }

  private disarm(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.firesAt = Infinity;
  }

  private fire(): void {
    this.timer = undefined;
    this.firesAt = Infinity;
    const now = performance.now();
    const due: TimedHandler[] = [];
    let next = Infinity;
    for (const [handler, deadline] of this.deadlines) {
      if (deadline <= now) due.push(handler);
      else next = Math.min(next, deadline);
    }
    for (const handler of due) this.deadlines.delete(handler);
    if (next < Infinity) this.arm(next);
    // Last: a handler's end may start the next run, which watches anew.
    // Every due handler is told even when telling one throws, as their
    // timers of their own did; the first fault is thrown after.
    let fault: { error: unknown } | undefined;
    for (const handler of due) {
      try {
        handler.timedOut();
      } catch (error) {
        fault ??= { error };
      }
    }
    if (fault) throw fault.error;
  }
}
