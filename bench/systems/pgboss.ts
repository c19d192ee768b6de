// pg-boss 12 as users would run it: `createQueue` with the policy the
// workload needs, then one `work()` call whose `localConcurrency` workers each
// fetch a batch, hand it to the (batch) handler and complete it in one
// statement.
//
// Ordered per key: the `key_strict_fifo` policy with `singletonKey` = the
// ordering key. Its fetch takes only each key's head (oldest job, ties broken
// by id) and skips a key while one of its jobs is active, retrying or failed,
// so a batch holds at most one job per key and a key's jobs run one at a time
// in creation order; a unique index on (name, singleton_key) over the active
// states backs it. The `singleton` and `stately` policies cap a key at one
// active job but pick the next job by (priority, created_on) with no
// tie-breaker, so they do not promise order: `key_strict_fifo` is pg-boss's
// only per-key-order configuration.
//
// Unordered: the `standard` policy. Latency: `standard` with `notify: true`
// (and the instance's `useListenNotify`), which wakes idle workers by NOTIFY
// instead of their next poll.
//
// Speed: a worker waits `pollingIntervalSeconds` (minimum 0.5 s) after a fetch
// unless it runs in burst mode; `burstWhenBatchFull` re-fetches at once while
// fetches come back full. Batch sizes: see pgBossBatchSize.
import { PgBoss, type QueuePolicy } from 'pg-boss';
import { makePayload } from '../payload.js';
import type { RunningConsumer } from './wharf-consumer.js';

export type PgBossMode = 'ordered' | 'unordered' | 'latency';

export interface PgBossQueue {
  boss: PgBoss;
  name: string;
  mode: PgBossMode;
  /** Errors pg-boss emitted (fetch collisions, deadlocks), for the report. */
  errors(): number;
  stop(): Promise<void>;
}

export const pgBossPolicy: Record<PgBossMode, QueuePolicy> = {
  ordered: 'key_strict_fifo',
  unordered: 'standard',
  latency: 'standard',
};

/** Jobs fetched per worker per fetch, by workload. */
export function pgBossBatchSize(mode: PgBossMode, shape: { scopes: number; concurrency: number }): number {
  // For trying other sizes: BENCH_PGBOSS_BATCH_SIZE=100 npm run bench -- --only unordered
  const override = Number(process.env.BENCH_PGBOSS_BATCH_SIZE);
  if (mode !== 'latency' && Number.isInteger(override) && override > 0) return override;
  // key_strict_fifo hands out at most one job per key per fetch. 25 is the
  // ordered drain's 200 keys over 8 workers; 10, 50, 100 and 200 were no
  // faster at concurrency 8 or 16 (8,000-event drains), nor was 50 or 200
  // in the unordered drain than 100.
  if (mode === 'ordered') return Math.max(1, Math.min(25, shape.scopes));
  if (mode === 'unordered') return 100;
  return 1;
}

export function pgBossDescription(mode: PgBossMode, shape?: { scopes: number; concurrency: number }): string {
  const work = shape ? `, batchSize ${pgBossBatchSize(mode, shape)}, localConcurrency ${shape.concurrency}` +
    (pgBossBatchSize(mode, shape) > 1 ? ', burstWhenBatchFull' : '') : '';
  switch (mode) {
    case 'ordered': return `pg-boss key_strict_fifo + singletonKey per key${work}`;
    case 'unordered': return `pg-boss standard queue${work}`;
    case 'latency': return `pg-boss standard queue, notify${work}`;
  }
}

export async function startPgBoss(options: {
  connectionString: string;
  poolSize: number;
  mode: PgBossMode;
}): Promise<PgBossQueue> {
  const boss = new PgBoss({
    connectionString: options.connectionString,
    max: options.poolSize,
    schedule: false,
    supervise: false,
    useListenNotify: options.mode === 'latency',
  });
  let errors = 0;
  boss.on('error', () => {
    errors += 1;
  });
  // A completion that fails after a handler is reported as an error event,
  // but count a stray rejection too instead of crashing the run.
  const onUnhandled = () => {
    errors += 1;
  };
  process.on('unhandledRejection', onUnhandled);
  await boss.start();
  const name = 'bench';
  await boss.createQueue(name, { policy: pgBossPolicy[options.mode], ...(options.mode === 'latency' ? { notify: true } : {}) });
  return {
    boss,
    name,
    mode: options.mode,
    errors: () => errors,
    async stop() {
      await boss.stop({ graceful: false, timeout: 5_000 });
      process.off('unhandledRejection', onUnhandled);
    },
  };
}

// pg-boss orders a key's jobs by created_on, then id; one insert shares
// created_on, so ids that grow with seq keep each key in admission order.
function orderedUuid(seq: number): string {
  return `00000000-0000-4000-8000-${seq.toString(16).padStart(12, '0')}`;
}

export async function loadPgBossJobs(queue: PgBossQueue, jobs: readonly { key: string; seq: number }[]): Promise<void> {
  const batch = 2_000;
  for (let start = 0; start < jobs.length; start += batch) {
    await queue.boss.insert(
      queue.name,
      jobs.slice(start, start + batch).map((job) => ({
        id: orderedUuid(job.seq),
        data: makePayload(job.key, job.seq),
        ...(queue.mode === 'ordered' ? { singletonKey: job.key } : {}),
      })),
    );
  }
}

/** `send` one job now (admission and latency producers). */
export async function sendPgBossJob(queue: PgBossQueue, job: { key: string; seq: number }): Promise<void> {
  const id = await queue.boss.send(queue.name, makePayload(job.key, job.seq),
    queue.mode === 'ordered' ? { singletonKey: job.key } : {});
  if (id === null) throw new Error(`pg-boss send returned no id for ${job.key}#${job.seq}`);
}

export async function startPgBossWorkers(
  queue: PgBossQueue,
  shape: { scopes: number; concurrency: number },
  handle: (data: unknown) => void | Promise<void>,
): Promise<RunningConsumer> {
  const batchSize = pgBossBatchSize(queue.mode, shape);
  await queue.boss.work<Record<string, unknown>>(queue.name, {
    localConcurrency: shape.concurrency,
    batchSize,
    pollingIntervalSeconds: 0.5,
    ...(batchSize > 1 ? { burstWhenBatchFull: true } : {}),
  }, async (jobs) => {
    for (const job of jobs) await handle(job.data);
  });
  return {
    async stop() {
      await queue.boss.offWork(queue.name);
    },
  };
}
