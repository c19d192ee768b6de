// An abort whose AbortController is made only when someone asks for its
// signal. Every run can be aborted (stop, lease lost, timeout), but most
// handlers never read ctx.signal: a controller and its signal, an
// EventTarget, cost a short run about 3 µs of CPU and garbage to collect.
export class LazyAbort {
  private controller: AbortController | undefined;
  private abortedWith: { reason: unknown } | undefined;

  /** The signal, aborted already when abort came first. */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.abortedWith) this.controller.abort(this.abortedWith.reason);
    }
    return this.controller.signal;
  }

  get aborted(): boolean {
    return this.abortedWith !== undefined;
  }

  /** Why it was aborted; undefined while it is not. */
  get reason(): unknown {
    return this.abortedWith?.reason;
  }

  /** The first reason wins, as with AbortController. */
  abort(reason: unknown): void {
    if (this.abortedWith) return;
    this.abortedWith = { reason };
    this.controller?.abort(reason);
  }
}
