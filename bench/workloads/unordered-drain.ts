// Workload 3: every event in its own scope, so nothing waits on order: Wharf
// against graphile-worker 0.18 (with its local queue, and without), pg-boss
// 12's standard queue and the plain SKIP LOCKED loop.
import { drainDetails, drainGraphile, drainPgBoss, drainPlain, drainWharf, recordDrainDetails, type DrainSample } from '../drains.js';
import type { BenchResults, Log } from '../results.js';
import type { BenchSettings } from '../settings.js';
import { pgBossDescription } from '../systems/pgboss.js';

/** The systems whose CPU per event the results show: Wharf and its strongest rival, beside the plain loop. */
const cpuShown = new Set(['unordered.wharf_lq', 'unordered.graphile_lq', 'unordered.plain']);

function record(results: BenchResults, id: string, label: string, sample: DrainSample, log: Log): void {
  results.add('unordered', id, label, 'events/s', sample.eventsPerSecond, { duplicates: sample.duplicates, errors: sample.errors });
  recordDrainDetails(results, 'unordered', id, label, sample, cpuShown.has(id));
  log(`  ${label}: ${sample.eventsPerSecond.toFixed(0)} events/s, ${sample.duplicates} duplicates` +
      drainDetails(sample, cpuShown.has(id)));
}

export async function runUnorderedDrain(settings: BenchSettings, results: BenchResults, log: Log): Promise<void> {
  const concurrency = settings.drainConcurrencies[0] ?? 8;
  const shape = { events: settings.unorderedEvents, scopes: settings.unorderedEvents, concurrency };
  for (let rep = 1; rep <= settings.repetitions; rep += 1) {
    log(`unordered drain, repetition ${rep}/${settings.repetitions} (concurrency ${concurrency})`);
    record(results, 'unordered.wharf', `Wharf, concurrency ${concurrency}`, await drainWharf(settings, shape), log);
    record(results, 'unordered.wharf_lq', `Wharf, localQueue 100, concurrency ${concurrency}`,
      await drainWharf(settings, shape, 100), log);
    record(results, 'unordered.plain', `plain SKIP LOCKED loop, concurrency ${concurrency}`, await drainPlain(settings, shape), log);
    record(results, 'unordered.graphile_lq', `graphile-worker localQueue 100, concurrency ${concurrency}`,
      await drainGraphile(settings, shape, false, true), log);
    record(results, 'unordered.graphile', `graphile-worker defaults (no localQueue), concurrency ${concurrency}`,
      await drainGraphile(settings, shape, false, false), log);
    record(results, 'unordered.pgboss', pgBossDescription('unordered', shape),
      await drainPgBoss(settings, shape, 'unordered'), log);
  }
}
