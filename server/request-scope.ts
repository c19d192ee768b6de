// The request a piece of work belongs to, for work that must outlive the
// response: workerd cancels what a request started once its response is
// sent, unless the request hands it to ctx.waitUntil. The Database is made
// once per isolate, so it finds the current request through
// AsyncLocalStorage (nodejs_compat) rather than being handed it.
import { AsyncLocalStorage } from 'node:async_hooks';

export interface WaitUntil {
  waitUntil(work: Promise<unknown>): void;
}

const current = new AsyncLocalStorage<WaitUntil>();

/** Runs `serve` as the request `ctx` belongs to. */
export function inRequest<T>(ctx: WaitUntil, serve: () => T): T {
  return current.run(ctx, serve);
}

/**
 * Lets `work` finish after the response: within a request, through its
 * waitUntil; outside one (Node, tests), it simply runs on. Its failure is
 * nobody's answer any more, so it is dropped here.
 */
export function afterResponse(work: Promise<unknown>): void {
  const settled = work.catch(() => {});
  current.getStore()?.waitUntil(settled);
}
