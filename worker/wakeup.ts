// The claim loop's alarm clock: it sleeps until a notification, a free slot,
// a stop, or the poll interval. A wake-up that arrives while the loop is busy
// claiming is remembered, so the loop does not sleep through it.
export class Wakeup {
  private woken = false;
  private resolveSleep: (() => void) | undefined;

  wake(): void {
    this.woken = true;
    this.resolveSleep?.();
  }

  /** Forget earlier wake-ups: call right before looking for work. */
  reset(): void {
    this.woken = false;
  }

  /** Sleeps up to `ms`, or not at all when woken since the last reset. */
  sleep(ms: number): Promise<void> {
    if (this.woken) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      const self = this;
      function done(): void {
        clearTimeout(timer);
        self.resolveSleep = undefined;
        resolve();
      }
      this.resolveSleep = done;
    });
  }
}
