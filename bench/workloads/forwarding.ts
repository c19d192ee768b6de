// Workload 8 (issue 53): forwarding to an application over HTTP. A receiver
// in a process of its own (systems/forward-receiver-process.ts) answers
// every request 204 at once. Measured, per repetition:
//   - Wharf's forwarder draining a backlog to an unordered destination at
//     each in-flight bound (8 and 32), against the minimal forwarder (a
//     SKIP LOCKED claim of a plain table, fetch, an UPDATE) at the same;
//   - the same backlog to an ordered destination (one request at a time per
//     scope, over forwardingScopes scopes);
//   - the latency added by forwarding: from the moment an admission's commit
//     was acknowledged to the moment its request reached the receiver, at
//     forwardingLatencyRate events/s into an idle forwarder (an ordered
//     destination, as destinations are by default);
//   - CPU per event of each drain (this process: the forwarder; the
//     database's backends), beside the workspace's handlers draining the
//     same number of events (createWorker, no-op handler, localQueue 100).
// Wharf's backlog is admitted with wharf.admit (untimed), so that each event
// gets its delivery as in production; a rate is the events forwarded over
// the time from the forwarder's start to the last request's arrival.
import { drainWharf, withApplicationName } from '../drains.js';
import { meterDatabaseBackends } from '../process-cpu.js';
import { withBenchDatabase } from '../databases.js';
import type { BenchResults, Log } from '../results.js';
import type { BenchSettings } from '../settings.js';
import { latencySummary, type LatencySummary } from '../stats.js';
import { startForwardReceiver, type ForwardReceiver } from '../systems/forward-receiver.js';
import { createForwardQueue, loadForwardQueue, startMinimalForwarder } from '../systems/minimal-forwarder.js';
import type { RunningConsumer } from '../systems/wharf-consumer.js';
import {
  benchSigningSecret, createBenchDestination, destinationSqlMissing, ForwarderUnavailable, startWharfForwarder,
} from '../systems/wharf-forwarder.js';
import { admitPush, setupWharfInstallation } from '../systems/wharf-inbox.js';

export interface ForwardSample {
  eventsPerSecond: number;
  /** µs per forwarded event: this process, and the database's backends where /proc shows them. */
  cpu: { node: number; postgres?: number };
  duplicates: number;
  orderViolations: number;
  /** Requests whose signature the receiver checked (one in 50), and those that failed. */
  verified: number;
  badSignatures: number;
}

interface ForwardShape {
  events: number;
  scopes: number;
  concurrency: number;
}

const forwarderApplicationName = 'wharf-bench-forwarder';
/** Clients admitting the backlog; each admits the events of its own scopes in order, so a scope's ids follow its seq. */
const admitClients = 8;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const now = () => performance.timeOrigin + performance.now();

/** Events 0 … events-1, event g in scope g mod scopes with delivery key `<prefix>-<g>`, admitted one by one. */
async function admitBacklog(pool: import('pg').Pool, events: number, scopes: number, prefix = 'fwd'): Promise<void> {
  await Promise.all(Array.from({ length: admitClients }, async (_, client) => {
    for (let seq = 0; seq < events; seq += 1) {
      if ((seq % scopes) % admitClients === client) await admitPush(pool, `${prefix}-${seq}`, seq % scopes, seq);
    }
  }));
  await pool.query('ANALYZE');
}

/** Times `start` until the receiver got `events` requests; CPU read at that moment. */
async function timeForwarding(
  db: { pool: import('pg').Pool },
  receiver: ForwardReceiver,
  events: number,
  timeoutMs: number,
  start: () => Promise<RunningConsumer>,
): Promise<ForwardSample> {
  await receiver.reset();
  const postgres = await meterDatabaseBackends(db.pool);
  const own = process.cpuUsage();
  const began = performance.now();
  const forwarder = await start();
  let seconds: number;
  let used: NodeJS.CpuUsage;
  let postgresMicros: number | undefined;
  try {
    await receiver.waitFor(events, timeoutMs);
    seconds = (performance.now() - began) / 1000;
    used = process.cpuUsage(own);
    postgresMicros = await postgres().catch(() => undefined);
  } finally {
    await forwarder.stop();
  }
  const figures = await receiver.figures();
  const perEvent = (micros: number) => micros / Math.max(1, figures.received);
  return {
    eventsPerSecond: events / seconds,
    cpu: { node: perEvent(used.user + used.system), ...(postgresMicros !== undefined ? { postgres: perEvent(postgresMicros) } : {}) },
    duplicates: figures.duplicates,
    orderViolations: figures.orderViolations,
    verified: figures.verified,
    badSignatures: figures.badSignatures,
  };
}

async function forwardWharf(
  settings: BenchSettings, receiver: ForwardReceiver, secret: string, shape: ForwardShape, ordered: boolean,
): Promise<ForwardSample> {
  return withBenchDatabase(settings.serverUrl, 'fwd_wharf', { wharf: true, poolSize: admitClients + 2 }, async (db) => {
    const missing = await destinationSqlMissing(db.pool);
    if (missing) throw new ForwarderUnavailable(missing);
    await setupWharfInstallation(db.pool, shape.scopes);
    // The destination's own bound does not bind, as the minimal forwarder has none: the host's
    // concurrency bounds the requests open (a bound at it would also cap what a claim keeps ahead).
    await createBenchDestination(db.pool, { url: receiver.url, ordered, maxInFlight: 1000, signingSecret: secret });
    await admitBacklog(db.pool, shape.events, shape.scopes);
    await db.pool.query('CHECKPOINT');
    const forwarderDb = withApplicationName(db, forwarderApplicationName);
    return timeForwarding(db, receiver, shape.events, settings.drainTimeoutMs,
      () => startWharfForwarder(forwarderDb, shape.concurrency));
  });
}

async function forwardMinimal(settings: BenchSettings, receiver: ForwardReceiver, shape: ForwardShape): Promise<ForwardSample> {
  return withBenchDatabase(settings.serverUrl, 'fwd_minimal', { wharf: false, poolSize: shape.concurrency + 2 }, async (db) => {
    await createForwardQueue(db.pool);
    await loadForwardQueue(db.pool, shape.events, shape.scopes);
    await db.pool.query('CHECKPOINT');
    let failure: unknown;
    const sample = await timeForwarding(db, receiver, shape.events, settings.drainTimeoutMs, async () =>
      startMinimalForwarder({ pool: db.pool, url: receiver.url, concurrency: shape.concurrency, onError: (error) => { failure = error; } }));
    if (failure !== undefined) throw failure;
    return sample;
  });
}

/**
 * forwardingLatencyRate admissions a second for forwardingLatencySeconds
 * (after a second of the same, not measured) into an idle forwarder; each
 * event's latency is from its admit's acknowledged commit to its request's
 * arrival, on the clock both processes share.
 */
async function forwardLatency(settings: BenchSettings, receiver: ForwardReceiver, secret: string, concurrency: number): Promise<LatencySummary> {
  const scopes = settings.forwardingScopes;
  return withBenchDatabase(settings.serverUrl, 'fwd_latency', { wharf: true, poolSize: 8 }, async (db) => {
    const missing = await destinationSqlMissing(db.pool);
    if (missing) throw new ForwarderUnavailable(missing);
    await setupWharfInstallation(db.pool, scopes);
    await createBenchDestination(db.pool, { url: receiver.url, ordered: true, maxInFlight: concurrency, signingSecret: secret });
    const forwarder = await startWharfForwarder(withApplicationName(db, forwarderApplicationName), concurrency);
    try {
      const rate = settings.forwardingLatencyRate;
      const paced = async (count: number, prefix: string, first: number, committed?: Map<string, number>) => {
        const began = performance.now();
        const admits: Promise<void>[] = [];
        for (let n = 0; n < count; n += 1) {
          const wait = began + (n * 1000) / rate - performance.now();
          if (wait > 0) await sleep(wait);
          const seq = first + n;
          const key = `${prefix}-${seq}`;
          admits.push(admitPush(db.pool, key, seq % scopes, seq).then(() => {
            committed?.set(key, now());
          }));
        }
        await Promise.all(admits);
        await receiver.waitFor(count, settings.drainTimeoutMs);
      };
      await receiver.reset();
      await paced(Math.max(1, Math.round(rate)), 'warm', 0);
      await sleep(500);
      await receiver.reset();
      const committed = new Map<string, number>();
      const total = Math.round(rate * settings.forwardingLatencySeconds);
      await paced(total, 'lat', 0, committed);
      const arrivals = await receiver.arrivals();
      // A request can arrive a hair before the admitting client hears its commit: count 0.
      return latencySummary([...committed].map(([key, at]) => Math.max(0, (arrivals.get(key) ?? Number.NaN) - at)));
    } finally {
      await forwarder.stop();
    }
  });
}

function recordRate(results: BenchResults, id: string, label: string, sample: ForwardSample, ordered: boolean, log: Log): void {
  results.add('forwarding', id, label, 'events/s', sample.eventsPerSecond, {
    duplicates: sample.duplicates,
    // The receiver checks order per subject; only an ordered destination promises it.
    orderViolations: ordered ? sample.orderViolations : 0,
    errors: sample.badSignatures,
  });
  results.add('forwarding', `${id}.cpu_node`, `${label}: Node CPU per event`, 'µs CPU', sample.cpu.node);
  if (sample.cpu.postgres !== undefined) {
    results.add('forwarding', `${id}.cpu_postgres`, `${label}: PostgreSQL CPU per event`, 'µs CPU', sample.cpu.postgres);
  }
  log(`  ${label}: ${sample.eventsPerSecond.toFixed(0)} events/s, ${sample.duplicates} duplicates` +
      (ordered ? `, ${sample.orderViolations} order violations` : '') +
      (sample.verified + sample.badSignatures > 0 ? `, ${sample.verified} signatures checked, ${sample.badSignatures} bad` : '') +
      `; CPU per event Node ${sample.cpu.node.toFixed(0)} µs, PostgreSQL ${sample.cpu.postgres?.toFixed(0) ?? '?'} µs`);
}

export async function runForwarding(settings: BenchSettings, results: BenchResults, log: Log): Promise<void> {
  const secret = benchSigningSecret();
  const receiver = await startForwardReceiver({ signingSecret: secret });
  let unavailable: string | undefined;
  /** Runs a measurement of Wharf's forwarder, unless it was found missing: then notes why, once. */
  const wharf = async <T>(work: () => Promise<T>): Promise<T | undefined> => {
    if (unavailable !== undefined) return undefined;
    try {
      return await work();
    } catch (error) {
      if (!(error instanceof ForwarderUnavailable)) throw error;
      unavailable = error.message;
      results.note(`forwarding: Wharf's forwarder not measured: ${unavailable}`);
      log(`  Wharf's forwarder not measured: ${unavailable}`);
      return undefined;
    }
  };
  try {
    const base = { events: settings.forwardingEvents, scopes: settings.forwardingScopes };
    for (let rep = 1; rep <= settings.repetitions; rep += 1) {
      log(`forwarding, repetition ${rep}/${settings.repetitions} (${base.events} events over ${base.scopes} scopes)`);
      for (const concurrency of settings.forwardingConcurrencies) {
        const shape = { ...base, concurrency };
        const unordered = await wharf(() => forwardWharf(settings, receiver, secret, shape, false));
        if (unordered) {
          recordRate(results, `forwarding.wharf_unordered.c${concurrency}`, `Wharf forwarder, unordered, ${concurrency} in flight`,
            unordered, false, log);
        }
        recordRate(results, `forwarding.minimal.c${concurrency}`,
          `minimal forwarder (SKIP LOCKED claim, fetch, UPDATE), ${concurrency} in flight`,
          await forwardMinimal(settings, receiver, shape), false, log);
        const ordered = await wharf(() => forwardWharf(settings, receiver, secret, shape, true));
        if (ordered) {
          if (concurrency === settings.forwardingConcurrencies[0]) {
            results.add('forwarding', 'forwarding.scopes', 'scopes of the ordered backlog', 'scopes', base.scopes);
          }
          recordRate(results, `forwarding.wharf_ordered.c${concurrency}`,
            `Wharf forwarder, ordered over ${base.scopes} scopes, ${concurrency} in flight`, ordered, true, log);
        }
      }
      const concurrency = settings.forwardingConcurrencies[0] ?? 8;
      const latency = await wharf(() => forwardLatency(settings, receiver, secret, concurrency));
      if (latency) {
        const label = `Wharf forwarder, admit commit → request at the receiver, ${settings.forwardingLatencyRate}/s`;
        results.add('forwarding', 'forwarding.latency.rate', 'admissions per second of the latency trickle', 'admits/s',
          settings.forwardingLatencyRate);
        for (const key of ['p50', 'p90', 'p99', 'max'] as const) {
          results.add('forwarding', `forwarding.latency.${key}`, `${label} ${key}`, 'ms', latency[key]);
        }
        log(`  ${label}: p50 ${latency.p50.toFixed(2)} ms, p90 ${latency.p90.toFixed(2)}, p99 ${latency.p99.toFixed(2)}, ` +
            `max ${latency.max.toFixed(2)} (${latency.count} events)`);
      }
      // The handlers' drain of as many events, for the CPU per event beside forwarding's.
      const handlers = await drainWharf(settings, { events: base.events, scopes: base.events, concurrency }, 100);
      const id = `forwarding.handlers.c${concurrency}`;
      const label = `Wharf handlers (createWorker, no-op handler, localQueue 100), ${concurrency} at once`;
      results.add('forwarding', id, label, 'events/s', handlers.eventsPerSecond,
        { duplicates: handlers.duplicates, orderViolations: 0, errors: 0 });
      results.add('forwarding', `${id}.cpu_node`, `${label}: Node CPU per event`, 'µs CPU', handlers.cpu.node);
      if (handlers.cpu.postgres !== undefined) {
        results.add('forwarding', `${id}.cpu_postgres`, `${label}: PostgreSQL CPU per event`, 'µs CPU', handlers.cpu.postgres);
      }
      log(`  ${label}: ${handlers.eventsPerSecond.toFixed(0)} events/s; CPU per event Node ${handlers.cpu.node.toFixed(0)} µs, ` +
          `PostgreSQL ${handlers.cpu.postgres?.toFixed(0) ?? '?'} µs`);
    }
  } finally {
    await receiver.close();
  }
}
