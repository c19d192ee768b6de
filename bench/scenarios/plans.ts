// Which cells a scenario is: its fault (one per snapshot kind for the held
// snapshot), how long the fault lasts and how long the recovery runs.
import { failover } from './failover.js';
import { fullSlots, heldSnapshot, killedBackends, longLock } from './faults.js';
import type { CellPlan } from './rig.js';
import type { ScenarioName, ScenarioSettings } from './settings.js';

export function plansOf(scenario: ScenarioName, settings: ScenarioSettings): CellPlan[] {
  const plain = { afterMs: settings.afterMs, untilDeadTuplesBack: false };
  switch (scenario) {
    case 'snapshot':
      return settings.snapshotKinds.map((kind) => ({
        scenario, fault: heldSnapshot(kind), faultMs: settings.snapshotHoldMs,
        afterMs: Math.max(settings.afterMs, settings.snapshotAfterMs), untilDeadTuplesBack: true,
      }));
    case 'kills':
      return [{ scenario, fault: killedBackends(settings.killEveryMs), faultMs: settings.killForMs, ...plain }];
    case 'slots':
      return [{ scenario, fault: fullSlots(), faultMs: settings.slotsForMs, ...plain }];
    case 'lock':
      return [{ scenario, fault: longLock(), faultMs: settings.lockForMs, ...plain }];
    case 'switchover':
      return [{ scenario, fault: failover('planned'), faultMs: settings.failoverForMs, ...plain }];
    case 'crash':
      return [{ scenario, fault: failover('crash'), faultMs: settings.failoverForMs, ...plain }];
  }
}
