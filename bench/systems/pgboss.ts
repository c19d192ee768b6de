// pg-boss 10 as users would run it: one queue, `work()` called once per
// concurrent slot. A work() loop waits pollingIntervalSeconds after every
// fetch, so batchSize 1 would cap a loop at 2 jobs/s: each loop fetches
// `batchSize` jobs and handles them in turn. Its per-key option is the `singleton`
// queue policy with `singletonKey` = the ordering key (at most one active job
// per key); it does not promise order, and concurrent fetches of one key
// collide on its unique index, which pg-boss reports as errors.
import PgBoss from 'pg-boss';
import { makePayload } from '../payload.js';
import type { RunningConsumer } from './wharf-consumer.js';

export interface PgBossQueue {
  boss: PgBoss;
  name: string;
  /** Errors pg-boss emitted (fetch collisions, deadlocks), for the report. */
  errors(): number;
  stop(): Promise<void>;
}

export async function startPgBoss(options: {
  connectionString: string;
  poolSize: number;
  perKeySingleton: boolean;
}): Promise<PgBossQueue> {
  const boss = new PgBoss({
    connectionString: options.connectionString,
    max: options.poolSize,
    schedule: false,
    supervise: false,
  });
  let errors = 0;
  boss.on('error', () => {
    errors += 1;
  });
  // pg-boss 10 calls complete() after a handler without awaiting it, so a
  // deadlock there (seen under concurrent batch completes) is an unhandled
  // rejection: count it with the other errors instead of crashing the run.
  const onUnhandled = () => {
    errors += 1;
  };
  process.on('unhandledRejection', onUnhandled);
  await boss.start();
  const name = 'bench';
  await boss.createQueue(name, { name, policy: options.perKeySingleton ? 'singleton' : 'standard' });
  return {
    boss,
    name,
    errors: () => errors,
    async stop() {
      await boss.stop({ graceful: false, wait: true, timeout: 5_000 });
      process.off('unhandledRejection', onUnhandled);
    },
  };
}

// pg-boss orders a fetch by created_on, then id; one insert shares created_on,
// so ids that grow with seq keep the queue in admission order.
function orderedUuid(seq: number): string {
  return `00000000-0000-4000-8000-${seq.toString(16).padStart(12, '0')}`;
}

export async function loadPgBossJobs(
  queue: PgBossQueue,
  jobs: readonly { key: string; seq: number }[],
  perKeySingleton: boolean,
): Promise<void> {
  const batch = 2_000;
  for (let start = 0; start < jobs.length; start += batch) {
    await queue.boss.insert(
      jobs.slice(start, start + batch).map((job) => ({
        id: orderedUuid(job.seq),
        name: queue.name,
        data: makePayload(job.key, job.seq),
        ...(perKeySingleton ? { singletonKey: job.key } : {}),
      })),
    );
  }
}

export const pgBossBatchSize = 100;

export async function startPgBossWorkers(
  queue: PgBossQueue,
  concurrency: number,
  handle: (data: unknown) => void | Promise<void>,
): Promise<RunningConsumer> {
  for (let slot = 0; slot < concurrency; slot += 1) {
    await queue.boss.work(queue.name, { batchSize: pgBossBatchSize, pollingIntervalSeconds: 0.5 }, async (jobs) => {
      for (const job of jobs) await handle(job.data);
    });
  }
  return {
    async stop() {
      await queue.boss.offWork(queue.name);
    },
  };
}
