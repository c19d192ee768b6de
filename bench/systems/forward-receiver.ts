// The forwarding benchmark's side of its receiver (forward-receiver-process.ts):
// starts it with tsx, reads and resets its figures, waits until it received
// a number of requests, and stops it.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { DrainStalled } from '../handling-tracker.js';

const script = fileURLToPath(new URL('./forward-receiver-process.ts', import.meta.url));
const tsx = fileURLToPath(new URL('../../node_modules/.bin/tsx', import.meta.url));

export interface ReceiverFigures {
  received: number;
  duplicates: number;
  orderViolations: number;
  verified: number;
  badSignatures: number;
  unsigned: number;
}

export interface ForwardReceiver {
  /** Where to POST: `http://127.0.0.1:<port>/hook`. */
  url: string;
  pid: number;
  figures(): Promise<ReceiverFigures>;
  /** Delivery key → when its request arrived, in ms on performance.timeOrigin + now's clock. */
  arrivals(): Promise<Map<string, number>>;
  reset(): Promise<void>;
  /** Resolves once `count` distinct requests arrived; DrainStalled after `timeoutMs`. */
  waitFor(count: number, timeoutMs: number): Promise<ReceiverFigures>;
  close(): Promise<void>;
}

export async function startForwardReceiver(options: { signingSecret: string; verifyEvery?: number }): Promise<ForwardReceiver> {
  const child: ChildProcess = spawn(tsx, [script], {
    env: {
      ...process.env,
      BENCH_SIGNING_SECRET: options.signingSecret,
      BENCH_VERIFY_EVERY: String(options.verifyEvery ?? 50),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
  const { url: base, pid } = JSON.parse(line) as { url: string; pid: number };
  // The bench's own calls go on a connection of their own, not the forwarders'.
  const call = async <T>(path: string, method = 'GET'): Promise<T> => {
    const response = await fetch(`${base}${path}`, { method });
    return (await response.json()) as T;
  };
  const receiver: ForwardReceiver = {
    url: `${base}/hook`,
    pid,
    figures: () => call<ReceiverFigures>('/__stats'),
    arrivals: async () => new Map(Object.entries(await call<Record<string, number>>('/__arrivals'))),
    reset: async () => {
      await call('/__reset', 'POST');
    },
    async waitFor(count, timeoutMs) {
      // Waits of at most a minute each: fetch gives up on headers after five.
      const deadline = performance.now() + timeoutMs;
      for (;;) {
        const left = deadline - performance.now();
        try {
          const response = await fetch(`${base}/__wait?count=${count}`, { signal: AbortSignal.timeout(Math.max(1, Math.ceil(Math.min(left, 60_000)))) });
          return (await response.json()) as ReceiverFigures;
        } catch (error) {
          if (!(error instanceof Error && error.name === 'TimeoutError')) throw error;
        }
        if (performance.now() >= deadline) {
          const { received } = await receiver.figures();
          throw new DrainStalled(`only ${received} of ${count} requests arrived after ${timeoutMs} ms`);
        }
      }
    },
    async close() {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
  return receiver;
}
