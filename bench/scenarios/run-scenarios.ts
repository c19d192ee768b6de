// Runs the chosen scenarios, each cell (a fault, a system) in turn on the same
// server: Wharf then graphile-worker under the same fault, so that the two
// sit side by side in the report. Shared by `npm run scenarios` (run.ts) and
// the CI test.
import { loadavg } from 'node:os';
import { cellFigures, type CellFigures } from './figures.js';
import { plansOf } from './plans.js';
import { runCell, type CellRun } from './rig.js';
import type { ScenarioSettings } from './settings.js';
import { systems } from './systems.js';

export interface Cell {
  run: CellRun;
  figures: CellFigures;
}

export interface ScenarioRun {
  settings: ScenarioSettings;
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
  for (const scenario of settings.scenarios) {
    for (const plan of plansOf(scenario, settings)) {
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
  return { settings, startedAt, finishedAt: new Date(), load: [loadAtStart, loadavg()[0] ?? Number.NaN], cells };
}
