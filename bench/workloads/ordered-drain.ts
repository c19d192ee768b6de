// Workload 2: a backlog over few scopes, drained in per-key order. Wharf at
// each concurrency against graphile-worker with one named queue per key and
// pg-boss's singleton policy keyed by scope.
import { drainGraphile, drainPgBoss, drainWharf, type DrainSample } from '../drains.js';
import type { BenchResults, Log } from '../results.js';
import type { BenchSettings } from '../settings.js';

function record(results: BenchResults, id: string, label: string, sample: DrainSample, log: Log): void {
  results.add('ordered', id, label, 'events/s', sample.eventsPerSecond, sample);
  log(`  ${label}: ${sample.eventsPerSecond.toFixed(0)} events/s, ${sample.orderViolations} order violations, ` +
      `${sample.duplicates} duplicates, ${sample.errors} errors` +
      (sample.unfinished ? `, STALLED with ${sample.unfinished} events unhandled` : ''));
}

export async function runOrderedDrain(settings: BenchSettings, results: BenchResults, log: Log): Promise<void> {
  const base = { events: settings.orderedEvents, scopes: settings.orderedScopes };
  for (let rep = 1; rep <= settings.repetitions; rep += 1) {
    log(`ordered drain, repetition ${rep}/${settings.repetitions}`);
    for (const concurrency of settings.drainConcurrencies) {
      const shape = { ...base, concurrency };
      record(results, `ordered.wharf.c${concurrency}`, `Wharf, concurrency ${concurrency}`,
        await drainWharf(settings, shape), log);
      record(results, `ordered.graphile.c${concurrency}`, `graphile-worker queueName per key, concurrency ${concurrency}`,
        await drainGraphile(settings, shape, true), log);
      record(results, `ordered.pgboss.c${concurrency}`, `pg-boss singleton policy + singletonKey, concurrency ${concurrency}`,
        await drainPgBoss(settings, shape, true), log);
    }
  }
  results.note('graphile-worker 0.16.6 has no `localQueue` option (it first ships in 0.17), so its per-key ' +
    'figures are the defaults configuration; the issue\'s 5,100 jobs/s localQueue baseline cannot be reproduced here.');
}
