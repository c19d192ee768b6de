// One cell of the scenario table: one system under one fault, in a database
// of its own. It starts the system's worker processes and its way in, runs the
// fixed-rate load through a warm-up, a baseline, the fault and the recovery,
// stops the load, waits until every acknowledged event is handled, stops
// the processes, and checks what the issue asks of every scenario: nothing
// acknowledged lost, no step applied twice, scope order kept, every worker
// still running, every answer a 202 or a 503 with Retry-After in time.
import { fileURLToPath } from 'node:url';
import { createScratchDatabase } from '../../cli/scratch-database.js';
import { startScript, type ScenarioProcess } from './child-process.js';
import { countEffects, createEffectTable, handledPerSecond, unhandledOf } from './effects.js';
import { startFailoverPair } from './failover.js';
import { appNames, withApplicationName, type Fault } from './faults.js';
import { FixedRateLoad, sleep, type Answer } from './load.js';
import { Monitor, totalDead, type MonitorSample } from './monitor.js';
import type { ScenarioName, ScenarioSettings } from './settings.js';
import type { ScenarioSystem } from './systems.js';
import { subjectOf } from '../systems/wharf-inbox.js';

export interface CellPlan {
  /** 'capacity': the probe that sets the load of a run (plans.ts), not a fault. */
  scenario: ScenarioName | 'capacity';
  fault: Fault;
  /** How long the fault lasts once in place. */
  faultMs: number;
  /** The recovery the load runs on for; with `untilDeadTuplesBack`, at most this long. */
  afterMs: number;
  /** Run the recovery until dead tuples are back to their baseline level (held snapshot). */
  untilDeadTuplesBack: boolean;
  /** Every scope sends back to back instead of at the settings' rate (the capacity probe). */
  saturate?: boolean;
  /** Handled rows the system's database is given before its processes start (the pg_dump cell: history.ts). */
  historyRows?: number;
}

export interface Checks {
  acknowledged: number;
  /** 202s whose event has no row (Wharf; graphile-worker deletes a job when done). */
  missingRows?: number;
  /** Acknowledged events without their last step at the end. */
  unhandled: number;
  duplicateSteps: number;
  orderViolations: number;
  workers: number;
  /** Worker processes still running when the load was over. */
  workersAlive: number;
  /** Of those, the ones that exited 0 on SIGTERM. */
  workersStoppedCleanly: number;
  receiverAlive?: boolean;
  /** Lines the worker processes logged (warnings and worse) that name LISTEN or the listener, by message. */
  listenErrors: Record<string, number>;
  /** Deliveries offered but never acknowledged when the load stopped (not lost: never acknowledged). */
  unacknowledgedAtEnd: number;
}

export interface CellRun {
  scenario: ScenarioName | 'capacity';
  faultId: string;
  faultTitle: string;
  system: string;
  systemLabel: string;
  /** ms since the load started. */
  baseline: [number, number];
  /** From when the fault was in place to when it ended. */
  fault: [number, number];
  /** When the fault was asked for (a lock waits for the transactions before it). */
  faultAskedAt: number;
  after: [number, number];
  marks: Array<{ at: number; label: string }>;
  faultReport: Record<string, number | string>;
  answers: Answer[];
  offered: number[];
  handled: number[];
  /** [ms since the load started, claim duration ms]. */
  claims: Array<[number, number]>;
  samples: MonitorSample[];
  checks: Checks;
  /** stderr of processes that exited by themselves, and of the receiver. */
  diagnostics: string[];
}

const workerScript = fileURLToPath(new URL('./worker-process.ts', import.meta.url));

export async function runCell(
  plan: CellPlan,
  system: ScenarioSystem,
  settings: ScenarioSettings,
  serverUrl: string,
  log: (line: string) => void,
): Promise<CellRun> {
  // A failover cell runs on a pair of its own, reached through the proxy that follows its primary.
  const pair = plan.fault.needsPair ? await startFailoverPair() : undefined;
  const server = pair?.serverUrl ?? serverUrl;
  const db = await createScratchDatabase(server, {
    prefix: `scenario_${system.name}_${plan.fault.id}`.replace(/-/g, '_'), migrate: system.name === 'wharf', poolSize: 4,
  }).catch(async (error: unknown) => {
    await pair?.stop();
    throw error;
  });
  // What the system is given: the multi-host URL where it reads one (Wharf), else the rig's.
  const systemDb = pair && system.multiHost ? { ...db, url: pair.multiHostUrl(db.name) } : db;
  const cleanups: Array<() => Promise<unknown>> = [];
  try {
    await createEffectTable(db.pool);
    await system.setup(db, settings);
    if (plan.historyRows !== undefined && plan.historyRows > 0) {
      const began = Date.now();
      await system.loadHistory(db, plan.historyRows, settings);
      log(`  ${system.label}: ${plan.historyRows.toLocaleString('en-US')} handled rows of history loaded in ${((Date.now() - began) / 1000).toFixed(0)} s`);
    }

    const claims: Array<[number, number]> = [];
    // Set when the load starts: claims made before it (the workers' first) are not kept.
    let t0 = Number.POSITIVE_INFINITY;
    const workers: ScenarioProcess[] = await Promise.all(Array.from({ length: settings.workers }, () =>
      startScript<{ ready?: boolean; claims?: Array<[number, number]> }>(workerScript, {
        SCENARIO_SYSTEM: system.name,
        DATABASE_URL: withApplicationName(systemDb.url, appNames.worker),
        SCENARIO_CONCURRENCY: String(settings.concurrency),
        SCENARIO_LOCAL_QUEUE: String(settings.localQueue),
        SCENARIO_STEP_PAUSE_MS: String(settings.stepPauseMs),
      }, (line) => {
        for (const [at, ms] of line.claims ?? []) if (at >= t0) claims.push([at - t0, ms]);
      }, (line) => line.ready === true)));
    cleanups.push(() => Promise.all(workers.map((worker) => worker.stop(5_000))));
    const admission = await system.startAdmission(systemDb, settings);
    cleanups.push(() => admission.close());

    const marks: Array<{ at: number; label: string }> = [];
    const monitor = await Monitor.open(db.url, system.schemas);
    cleanups.push(() => monitor.stop());
    const prepared = await plan.fault.prepare({
      databaseUrl: db.url,
      serverUrl: server,
      database: db.name,
      surface: system.surface,
      ...(pair ? { pair } : {}),
      mark: (label) => marks.push({ at: Date.now() - t0, label }),
    });
    const load = new FixedRateLoad({ rate: plan.saturate ? 'saturate' : settings.rate, scopes: settings.scopes, retryCapMs: settings.retryCapMs, send: admission.send });
    cleanups.push(() => load.stop(0));

    t0 = Date.now();
    const now = () => Date.now() - t0;
    load.start(t0);
    monitor.start(t0);
    log(`  ${system.label}: warm-up and baseline (${(settings.warmupMs + settings.baselineMs) / 1000} s)`);
    await sleep(settings.warmupMs);
    const baselineStart = now();
    await sleep(settings.baselineMs);
    const baselineEnd = now();
    const baselineDead = monitor.samples.filter((s) => s.at >= baselineStart).map(totalDead);

    log(`  ${system.label}: ${plan.fault.title} for ${plan.faultMs / 1000} s`);
    const faultAskedAt = now();
    const running = await prepared.begin();
    const faultStart = now();
    await sleep(plan.faultMs);
    const faultReport = await running.end();
    const faultEnd = now();

    // The recovery. For a held snapshot: until the dead tuples are back to
    // the highest level the baseline saw, at most afterMs (and no shorter
    // than the recovery of the other faults).
    const backLevel = Math.max(0, ...baselineDead) * 1.1 + 100;
    const afterDeadline = faultEnd + plan.afterMs;
    const minimumAfter = faultEnd + Math.min(plan.afterMs, settings.afterMs);
    for (;;) {
      const latest = monitor.samples.at(-1);
      const back = latest !== undefined && latest.at > faultEnd && totalDead(latest) <= backLevel;
      if (now() >= afterDeadline || (now() >= minimumAfter && (!plan.untilDeadTuplesBack || back))) break;
      await sleep(500);
    }
    const afterEnd = now();
    log(`  ${system.label}: load stopped; draining what was acknowledged`);
    const unacknowledgedAtEnd = await load.stop(settings.drainTimeoutMs);
    const drainDeadline = Date.now() + settings.drainTimeoutMs;
    const acknowledged = load.acknowledged.map((a) => ({ scope: subjectOf(a.scope), seq: a.seq }));
    // Until every acknowledged event is handled, or no worker is left to handle it.
    while (Date.now() < drainDeadline && workers.some((worker) => worker.alive())) {
      // A pooled connection to a server that went (a failover) fails once: asked again.
      const rows = await db.pool.query<{ n: string }>(
        `SELECT count(DISTINCT (scope, seq)) AS n FROM public.scenario_effect WHERE step = 'second'`).then((r) => r.rows, () => []);
      if (Number(rows[0]?.n ?? 0) >= acknowledged.length) break;
      await sleep(500);
    }
    await monitor.sample(t0).catch(() => undefined);

    const workersAlive = workers.filter((worker) => worker.alive()).length;
    const diagnostics = workers.filter((worker) => !worker.alive())
      .map((worker) => `worker ${worker.pid} exited by itself: ${worker.stderrTail().slice(-2_000)}`);
    const receiverAlive = admission.receiver?.alive();
    const live = workers.filter((worker) => worker.alive());
    const exits = await Promise.all(live.map((worker) => worker.stop()));
    live.forEach((worker, i) => {
      if (exits[i]?.code !== 0) {
        diagnostics.push(`worker ${worker.pid} did not stop cleanly (${JSON.stringify(exits[i])}): ${worker.stderrTail().slice(-2_000)}`);
      }
    });
    const receiverErrors = admission.receiver?.stderrTail().trim();
    if (receiverErrors) diagnostics.push(`receiver stderr: ${receiverErrors.slice(-2_000)}`);

    const effects = await countEffects(db.pool);
    const missingRows = await system.missingRows(db, load.acknowledged);
    const checks: Checks = {
      acknowledged: acknowledged.length,
      ...(missingRows !== undefined ? { missingRows } : {}),
      unhandled: await unhandledOf(db.pool, acknowledged),
      duplicateSteps: effects.duplicateSteps,
      orderViolations: effects.orderViolations,
      workers: workers.length,
      workersAlive,
      workersStoppedCleanly: exits.filter((exit) => exit.code === 0).length,
      ...(receiverAlive !== undefined ? { receiverAlive } : {}),
      listenErrors: workers.reduce<Record<string, number>>((all, worker) => {
        for (const [message, n] of worker.listenLines()) all[message] = (all[message] ?? 0) + n;
        return all;
      }, {}),
      unacknowledgedAtEnd,
    };
    const perSecond = await handledPerSecond(db.pool, t0);
    // Something went wrong: what every worker said last explains it.
    if (checks.unhandled > 0 || checks.duplicateSteps > 0 || checks.orderViolations > 0 || (checks.missingRows ?? 0) > 0) {
      for (const worker of live) diagnostics.push(`worker ${worker.pid} said last: ${worker.stderrTail().slice(-1_500)}`);
    }
    const seconds = Math.ceil(now() / 1000);
    return {
      scenario: plan.scenario,
      faultId: plan.fault.id,
      faultTitle: plan.fault.title,
      system: system.name,
      systemLabel: system.label,
      baseline: [baselineStart, baselineEnd],
      fault: [faultStart, faultEnd],
      faultAskedAt,
      after: [faultEnd, afterEnd],
      marks,
      faultReport,
      answers: load.answers,
      offered: Array.from({ length: seconds }, (_, s) => load.offered[s] ?? 0),
      handled: Array.from({ length: seconds }, (_, s) => perSecond.get(s) ?? 0),
      claims,
      samples: monitor.samples,
      checks,
      diagnostics,
    };
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
    if (pair) {
      await db.drop().catch(() => undefined);
      await pair.stop();
    } else {
      await db.drop();
    }
  }
}
