// Times a system's claim statement from the worker's side: every query a pg
// Client of this process sends whose text is the claim is timed from the call
// to its answer (a wait for a lock, a slow scan over dead tuples and a
// reconnect queue all count, as the worker feels them). Patched on
// pg.Client's prototype because both systems make their own clients (Wharf's
// createWorker its own pool, graphile-worker the pool we give it), and so the
// worker runs exactly as its users run it.
import pg from 'pg';

/** How each system's claim statement reads. */
export const claimStatement: Record<'wharf' | 'graphile', (text: string) => boolean> = {
  // wharf.claim is the contract's name (DESIGN.md, "Claim and lease").
  wharf: (text) => /\bwharf\.claim\s*\(/.test(text),
  // graphile-worker 0.18's batchGetJobs (dist/sql/getJobs.js): the one
  // statement that locks jobs FOR UPDATE SKIP LOCKED and sets locked_by.
  graphile: (text) => /_private_jobs/.test(text) && /skip\s+locked/i.test(text) && /locked_by/.test(text),
};

type LooseQuery = (this: pg.Client, config: unknown, values?: unknown, callback?: unknown) => unknown;
type Callback = (error: unknown, result: unknown) => void;

/**
 * Calls `record(ms)` for every claim statement any client of this process
 * runs from now on. Callback and promise forms alike (pg-pool's `query`
 * passes a callback; a checked-out client's caller awaits the promise).
 */
export function timeClaims(isClaim: (text: string) => boolean, record: (ms: number) => void): void {
  const prototype = pg.Client.prototype as unknown as { query: LooseQuery };
  const original = prototype.query;
  prototype.query = function timedQuery(this: pg.Client, config: unknown, values?: unknown, callback?: unknown): unknown {
    const text = typeof config === 'string' ? config : (config as { text?: unknown } | null)?.text;
    if (typeof text !== 'string' || !isClaim(text)) return original.call(this, config, values, callback);
    const began = performance.now();
    const done = (): void => record(performance.now() - began);
    const timed = (inner: unknown): Callback => (error, result) => {
      done();
      (inner as Callback)(error, result);
    };
    if (typeof values === 'function') return original.call(this, config, timed(values));
    if (typeof callback === 'function') return original.call(this, config, values, timed(callback));
    const result = original.call(this, config, values);
    if (result && typeof (result as Promise<unknown>).then === 'function') {
      (result as Promise<unknown>).then(done, done);
    }
    return result;
  };
}
