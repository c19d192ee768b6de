// Workload 4: a steady trickle into idle workers. Each event's latency is
// from the moment its admission's commit was acknowledged to the moment its
// handler started, for Wharf (admit + LISTEN wake-up), graphile-worker 0.18
// with and without its local queue (add_job + its LISTEN wake-up) and pg-boss
// 12 (send into a `notify` queue + its LISTEN wake-up).
import { withBenchDatabase } from '../databases.js';
import type { BenchResults, Log } from '../results.js';
import type { BenchSettings } from '../settings.js';
import { latencySummary, type LatencySummary } from '../stats.js';
import { addGraphileJob, migrateGraphile, startGraphileWorker } from '../systems/graphile.js';
import { pgBossDescription, sendPgBossJob, startPgBoss, startPgBossWorkers } from '../systems/pgboss.js';
import { startWharfConsumer, type RunningConsumer } from '../systems/wharf-consumer.js';
import { admitPush, setupWharfInstallation, subjectOf } from '../systems/wharf-inbox.js';
import { readMark } from '../payload.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const settleMs = 500;

interface Trickle {
  committedAt: Map<number, number>;
  startedAt: Map<number, number>;
}

const warmUpOffset = 1_000_000_000;

/**
 * One second of the same trickle, not measured: every system's pools open
 * their connections and PostgreSQL compiles its functions for them first, as
 * on any host that has been running for a while.
 */
async function warmUp(settings: BenchSettings, produce: (seq: number) => Promise<void>, timing: Trickle): Promise<void> {
  const events = Math.max(1, Math.round(settings.latencyRate));
  // Paced like the trickle and not awaited one by one, so the producer's pool
  // opens as many connections as the measured trickle will use.
  const produced: Promise<void>[] = [];
  for (let n = 0; n < events; n += 1) {
    produced.push(produce(warmUpOffset + n));
    await sleep(1000 / settings.latencyRate);
  }
  await Promise.all(produced);
  const deadline = performance.now() + settings.drainTimeoutMs;
  while (timing.startedAt.size < events && performance.now() < deadline) await sleep(20);
  timing.startedAt.clear();
  await sleep(settleMs);
}

/** Produces `rate` events/s for `seconds`, paced on a fixed schedule, and waits until all started. */
async function trickle(
  settings: BenchSettings,
  produce: (seq: number) => Promise<void>,
  timing: Trickle,
): Promise<LatencySummary> {
  const total = Math.round(settings.latencyRate * settings.latencySeconds);
  const interval = 1000 / settings.latencyRate;
  const began = performance.now();
  const inFlight: Promise<void>[] = [];
  for (let seq = 0; seq < total; seq += 1) {
    const due = began + seq * interval;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    inFlight.push(produce(seq).then(() => {
      timing.committedAt.set(seq, performance.now());
    }));
  }
  await Promise.all(inFlight);
  const deadline = performance.now() + settings.drainTimeoutMs;
  while (timing.startedAt.size < total && performance.now() < deadline) await sleep(20);
  if (timing.startedAt.size < total) throw new Error(`only ${timing.startedAt.size} of ${total} handlers started`);
  // A handler can start a hair before the producer hears its commit: count 0.
  const latencies = [...timing.committedAt].map(([seq, committed]) =>
    Math.max(0, (timing.startedAt.get(seq) ?? Number.NaN) - committed));
  return latencySummary(latencies);
}

function record(results: BenchResults, system: string, label: string, summary: LatencySummary, log: Log): void {
  for (const key of ['p50', 'p90', 'p99', 'max'] as const) {
    results.add('latency', `latency.${system}.${key}`, `${label} ${key}`, 'ms', summary[key]);
  }
  log(`  ${label}: p50 ${summary.p50.toFixed(2)} ms, p90 ${summary.p90.toFixed(2)}, ` +
      `p99 ${summary.p99.toFixed(2)}, max ${summary.max.toFixed(2)} (${summary.count} events)`);
}

async function withConsumer<T>(consumer: RunningConsumer, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } finally {
    await consumer.stop();
  }
}

export async function runLatency(settings: BenchSettings, results: BenchResults, log: Log): Promise<void> {
  const concurrency = settings.drainConcurrencies[0] ?? 8;
  const scopes = settings.orderedScopes;
  for (let rep = 1; rep <= settings.repetitions; rep += 1) {
    log(`latency, repetition ${rep}/${settings.repetitions} (${settings.latencyRate}/s for ${settings.latencySeconds} s)`);

    const wharf = await withBenchDatabase(settings.serverUrl, 'latency_wharf', { wharf: true, poolSize: concurrency + 4 }, async (db) => {
      await setupWharfInstallation(db.pool, scopes);
      const timing: Trickle = { committedAt: new Map(), startedAt: new Map() };
      const consumer = await startWharfConsumer(db, concurrency, (mark) => {
        timing.startedAt.set(mark.seq, performance.now());
      });
      return withConsumer(consumer, async () => {
        const produce = (seq: number) => admitPush(db.pool, `delivery-${seq}`, seq % scopes, seq);
        await sleep(settleMs);
        await warmUp(settings, produce, timing);
        return trickle(settings, produce, timing);
      });
    });
    record(results, 'wharf', 'Wharf', wharf, log);

    for (const localQueue of [true, false]) {
      const graphile = await withBenchDatabase(settings.serverUrl, 'latency_graphile', { wharf: false, poolSize: 4 }, async (db) => {
        await migrateGraphile(db.url);
        const timing: Trickle = { committedAt: new Map(), startedAt: new Map() };
        const consumer = await startGraphileWorker({
          connectionString: db.url,
          concurrency,
          localQueue,
          handle: (payload) => {
            timing.startedAt.set(readMark(payload).seq, performance.now());
          },
        });
        return withConsumer(consumer, async () => {
          const produce = (seq: number) => addGraphileJob(db.pool, { key: subjectOf(seq % scopes), seq });
          await sleep(settleMs);
          await warmUp(settings, produce, timing);
          return trickle(settings, produce, timing);
        });
      });
      if (localQueue) record(results, 'graphile_lq', 'graphile-worker localQueue 100', graphile, log);
      else record(results, 'graphile', 'graphile-worker defaults (no localQueue)', graphile, log);
    }

    const boss = await withBenchDatabase(settings.serverUrl, 'latency_pgboss', { wharf: false, poolSize: 2 }, async (db) => {
      const queue = await startPgBoss({ connectionString: db.url, poolSize: 4 + concurrency, mode: 'latency' });
      try {
        const timing: Trickle = { committedAt: new Map(), startedAt: new Map() };
        const consumer = await startPgBossWorkers(queue, { scopes, concurrency }, (data) => {
          timing.startedAt.set(readMark(data).seq, performance.now());
        });
        return await withConsumer(consumer, async () => {
          const produce = (seq: number) => sendPgBossJob(queue, { key: subjectOf(seq % scopes), seq });
          await sleep(settleMs);
          await warmUp(settings, produce, timing);
          return trickle(settings, produce, timing);
        });
      } finally {
        await queue.stop();
      }
    });
    record(results, 'pgboss', pgBossDescription('latency', { scopes, concurrency }), boss, log);
  }
}
