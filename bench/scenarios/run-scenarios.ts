// Runs the chosen scenarios, each cell (a fault, a system) in turn on the same
// server: Wharf then graphile-worker under the same fault, so that the two
// sit side by side in the report. With a load share, each system's capacity
// is measured first and the cells offer that share of the slower one's.
// Shared by `npm run scenarios` (run.ts) and the CI test.
import { loadavg } from 'node:os';
import { cellFigures, type CellFigures } from './figures.js';
import { capacityPlan, plansOf } from './plans.js';
import { runCell, type CellRun } from './rig.js';
import type { ScenarioSettings } from './settings.js';
import { systems } from './systems.js';

export interface Cell {
  run: CellRun;
  figures: CellFigures;
}

/** One system's capacity probe: its drain rate with every scope sending back to back, and what it checked. */
export interface CapacityProbe {
  system: string;
  systemLabel: string;
  /** Events handled per second over the probe. */
  rate: number;
  /** Deliveries acknowledged per second over the probe. */
  acknowledgedRate: number;
  checks: CellRun['checks'];
}

export interface ScenarioRun {
  /** As the cells ran: with a load share, `rate` is the share of the slower capacity. */
  settings: ScenarioSettings;
  capacity?: CapacityProbe[];
  startedAt: Date;
  finishedAt: Date;
  /** The machine's 1-minute load average when the run started and ended (it may be shared). */
  load: [number, number];
  cells: Cell[];
}

export async function runScenarios(
  settings: ScenarioSettings,
  serverUrl: string,
  log: (line: string) => void = () => {},
): Promise<ScenarioRun> {
  const startedAt = new Date();
  const loadAtStart = loadavg()[0] ?? Number.NaN;
  const cells: Cell[] = [];
  const planned = settings.scenarios.flatMap((scenario) => plansOf(scenario, settings));
  for (const fault of new Map(planned.map((plan) => [plan.fault.id, plan.fault])).values()) await fault.preflight?.(serverUrl);
  let capacity: CapacityProbe[] | undefined;
  if (settings.loadShare !== undefined) {
    capacity = [];
    for (const name of settings.systems) {
      log(`capacity: ${systems[name].label}, every scope sending back to back for ${settings.capacityProbeMs / 1000} s`);
      const run = await runCell(capacityPlan(), systems[name], { ...settings, baselineMs: settings.capacityProbeMs }, serverUrl, log);
      const { baselineRate, baselineAcceptedRate } = cellFigures(run, settings.receiverDeadlineMs);
      log(`  ${run.systemLabel}: ${baselineRate.toFixed(0)} handled/s, ${baselineAcceptedRate.toFixed(0)} acknowledged/s`);
      capacity.push({ system: name, systemLabel: run.systemLabel, rate: baselineRate, acknowledgedRate: baselineAcceptedRate, checks: run.checks });
    }
    const slowest = Math.min(...capacity.map((probe) => probe.rate));
    settings = { ...settings, rate: Math.max(1, Math.round(settings.loadShare * slowest)) };
    log(`offering ${settings.rate} deliveries/s: ${settings.loadShare} × the slower capacity, ${slowest.toFixed(0)}/s`);
  }
  // `--only snapshot,pg-dump --snapshot-kinds pg-dump` names the pg_dump cell twice: it runs once.
  const ran = new Set<string>();
  for (const scenario of settings.scenarios) {
    for (const plan of plansOf(scenario, settings)) {
      if (ran.has(plan.fault.id)) continue;
      ran.add(plan.fault.id);
      log(`${scenario}: ${plan.fault.title}`);
      for (const name of settings.systems) {
        const run = await runCell(plan, systems[name], settings, serverUrl, log);
        const figures = cellFigures(run, settings.receiverDeadlineMs);
        log(`  ${run.systemLabel}: ${figures.baselineRate.toFixed(0)}/s before, ${figures.faultRate.toFixed(0)}/s during; ` +
          `claim p99 ${figures.claimP99Baseline.toFixed(1)} → ${figures.claimP99Fault.toFixed(1)} ms; ` +
          `lost ${run.checks.missingRows ?? 0}, unhandled ${run.checks.unhandled}, twice ${run.checks.duplicateSteps}, ` +
          `out of order ${run.checks.orderViolations}, workers ${run.checks.workersAlive}/${run.checks.workers}`);
        cells.push({ run, figures });
      }
    }
  }
  return {
    settings, ...(capacity ? { capacity } : {}), startedAt, finishedAt: new Date(), load: [loadAtStart, loadavg()[0] ?? Number.NaN], cells,
  };
}
