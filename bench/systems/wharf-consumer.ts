// The Wharf consumer every workload drains with: the worker runtime
// (createWorker from worker/index.ts) with one no-op handler for GitHub
// pushes, at the given concurrency, logging nothing.
import { pino } from 'pino';
import { createWorker } from '../../worker/index.js';
import type { BenchDatabase } from '../databases.js';
import { readMark, type BenchMark } from '../payload.js';

export interface RunningConsumer {
  stop(): Promise<void>;
}

export const wharfConsumerKind = 'createWorker (worker/index.ts), one no-op `github:push` handler; the "localQueue 100" series '
  + "pass `localQueue: 100`, like graphile-worker's local queue of 100";

/** With localQueue > 0, claims take up to that many waiting events at once (WorkerOptions.localQueue). */
export async function startWharfConsumer(
  db: BenchDatabase,
  concurrency: number,
  handle: (mark: BenchMark) => void,
  onError?: (error: unknown) => void,
  localQueue = 0,
): Promise<RunningConsumer> {
  const worker = createWorker({
    connectionString: db.url,
    concurrency,
    localQueue,
    logger: pino({ level: 'silent' }),
    handlers: {
      'github:push': (ctx) => {
        try {
          handle(readMark(ctx.event.payload));
        } catch (error) {
          // A bench payload without its mark is a harness bug: fail the run, not the event.
          onError?.(error);
        }
      },
    },
  });
  await worker.start();
  return { stop: () => worker.stop() };
}
