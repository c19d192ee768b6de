// Workload 2: a backlog over few scopes, drained in per-key order. Wharf (its
// claims sized to the free handlers, and with a local queue of 100) at
// each concurrency against graphile-worker 0.18 with one named queue per key
// (with its local queue, and without) and pg-boss 12's key_strict_fifo policy
// keyed by scope. Beside the rates: the CPU per event of Wharf and of its
// strongest rival, and the HOT share of Wharf's event-table updates (issue 32).
import { drainDetails, drainGraphile, drainPgBoss, drainWharf, recordDrainDetails, type DrainSample } from '../drains.js';
import type { BenchResults, Log } from '../results.js';
import type { BenchSettings } from '../settings.js';
import { pgBossDescription } from '../systems/pgboss.js';

/** The systems whose CPU per event the results show: Wharf and graphile-worker with their local queues. */
const cpuShown = /^ordered\.(wharf_lq|graphile_lq)\.c\d+$/;

function record(results: BenchResults, id: string, label: string, sample: DrainSample, log: Log): void {
  results.add('ordered', id, label, 'events/s', sample.eventsPerSecond, sample);
  recordDrainDetails(results, 'ordered', id, label, sample, cpuShown.test(id));
  log(`  ${label}: ${sample.eventsPerSecond.toFixed(0)} events/s, ${sample.orderViolations} order violations, ` +
      `${sample.duplicates} duplicates, ${sample.errors} errors` +
      (sample.unfinished ? `, STALLED with ${sample.unfinished} events unhandled` : '') +
      drainDetails(sample, cpuShown.test(id)));
}

export async function runOrderedDrain(settings: BenchSettings, results: BenchResults, log: Log): Promise<void> {
  const base = { events: settings.orderedEvents, scopes: settings.orderedScopes };
  for (let rep = 1; rep <= settings.repetitions; rep += 1) {
    log(`ordered drain, repetition ${rep}/${settings.repetitions}`);
    for (const concurrency of settings.drainConcurrencies) {
      const shape = { ...base, concurrency };
      record(results, `ordered.wharf.c${concurrency}`, `Wharf, concurrency ${concurrency}`,
        await drainWharf(settings, shape), log);
      record(results, `ordered.wharf_lq.c${concurrency}`, `Wharf, localQueue 100, concurrency ${concurrency}`,
        await drainWharf(settings, shape, 100), log);
      record(results, `ordered.graphile_lq.c${concurrency}`,
        `graphile-worker queueName per key, localQueue 100, concurrency ${concurrency}`,
        await drainGraphile(settings, shape, true, true), log);
      record(results, `ordered.graphile.c${concurrency}`, `graphile-worker queueName per key, no localQueue, concurrency ${concurrency}`,
        await drainGraphile(settings, shape, true, false), log);
      record(results, `ordered.pgboss.c${concurrency}`, pgBossDescription('ordered', shape),
        await drainPgBoss(settings, shape, 'ordered'), log);
    }
  }
}
