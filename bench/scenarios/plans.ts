// Which cells a scenario is: its fault (one per snapshot kind for the held
// snapshot), how long the fault lasts and how long the recovery runs.
import { failover } from './failover.js';
import { fullSlots, heldSnapshot, killedBackends, longLock, noFault, type SnapshotKind } from './faults.js';
import { pgDumpHold } from './pg-dump.js';
import type { CellPlan } from './rig.js';
import type { ScenarioName, ScenarioSettings } from './settings.js';

/**
 * The capacity probe: no fault, every scope sending its next delivery as soon
 * as the last was taken; the drain rate over the baseline is the system's
 * capacity on this machine.
 */
export function capacityPlan(): CellPlan {
  return { scenario: 'capacity', fault: noFault(), faultMs: 0, afterMs: 0, untilDeadTuplesBack: false, saturate: true };
}

/**
 * A held-snapshot cell. The pg_dump one is a held snapshot as the other two
 * are (scenario `snapshot`, judged and charted as they are), in a database
 * given its history first so that a dump lasts.
 */
function snapshotPlan(kind: SnapshotKind, settings: ScenarioSettings): CellPlan {
  return {
    scenario: 'snapshot',
    fault: kind === 'pg-dump' ? pgDumpHold(settings.dumpRows) : heldSnapshot(kind),
    faultMs: settings.snapshotHoldMs,
    afterMs: Math.max(settings.afterMs, settings.snapshotAfterMs),
    untilDeadTuplesBack: true,
    ...(kind === 'pg-dump' ? { historyRows: settings.dumpRows } : {}),
  };
}

export function plansOf(scenario: ScenarioName, settings: ScenarioSettings): CellPlan[] {
  const plain = { afterMs: settings.afterMs, untilDeadTuplesBack: false };
  switch (scenario) {
    case 'snapshot':
      return settings.snapshotKinds.map((kind) => snapshotPlan(kind, settings));
    case 'pg-dump':
      return [snapshotPlan('pg-dump', settings)];
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
