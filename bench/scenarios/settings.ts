// The scenarios' sizes. `full` is the issue's (#36): a snapshot held 10
// minutes, kills every 2 s for 5 minutes, slots full 60 s, a lock held 30 s;
// and issue 54's pg_dump through the hold of a database of 1,000,000 handled rows.
// `reduced` is the same set in about a third of the time; `short` is what the
// CI test runs (seconds; correctness only, never speed). Flags of
// `npm run scenarios` override any of them (bench/scenarios/run.ts).
import type { SnapshotKind } from './faults.js';

// `pg-dump`: the held snapshot's pg_dump cell alone (snapshot kind `pg-dump`),
// so that `--only snapshot,pg-dump` runs the three held-snapshot cells.
export const scenarioNames = ['snapshot', 'pg-dump', 'kills', 'slots', 'lock', 'switchover', 'crash'] as const;
export type ScenarioName = (typeof scenarioNames)[number];
export const systemNames = ['wharf', 'graphile'] as const;
export type SystemName = (typeof systemNames)[number];

export interface ScenarioSettings {
  scale: string;
  scenarios: ScenarioName[];
  systems: SystemName[];
  snapshotKinds: SnapshotKind[];
  /** Deliveries offered per second, round-robin over `scopes`. */
  rate: number;
  /**
   * When set, the run first measures each system's capacity (every scope
   * sending back to back for `capacityProbeMs`, no fault) and offers this
   * share of the slower one's instead of `rate`: a load near capacity, which
   * a fault can push a system below, so that the faults rank the systems.
   */
  loadShare?: number;
  capacityProbeMs: number;
  scopes: number;
  /** Worker processes per system, and handlers each. */
  workers: number;
  concurrency: number;
  /** Claimed events that may wait for a handler (Wharf's localQueue; graphile-worker runs its local queue of 100). */
  localQueue: number;
  /** A pause before each step of the handler, ms (0: the steps are the work). */
  stepPauseMs: number;
  /** Load before the baseline is measured: pools open, plans cached. */
  warmupMs: number;
  /** The load without a fault: the figures the fault is compared with. */
  baselineMs: number;
  /** After the fault, before the load stops: the recovery. */
  afterMs: number;
  snapshotHoldMs: number;
  /**
   * Handled rows each system's database holds before the pg_dump cell
   * (history.ts), so that a dump of it lasts as a nightly backup's does.
   */
  dumpRows: number;
  /** After the snapshot's release: the load runs on until dead tuples are back, at most this long. */
  snapshotAfterMs: number;
  killEveryMs: number;
  killForMs: number;
  slotsForMs: number;
  lockForMs: number;
  /** A failover (switchover, crash): how long the load runs from the fault on before the recovery is counted. */
  failoverForMs: number;
  /** The receiver's database deadline (WHARF_DATABASE_TIMEOUT_MS). */
  receiverDeadlineMs: number;
  /** A request unanswered after this long is a hang. */
  hangMs: number;
  /** A refused delivery is retried after min(Retry-After, this). */
  retryCapMs: number;
  /** After the load stops: how long every acknowledged event may take to be handled. */
  drainTimeoutMs: number;
}

const minute = 60_000;

export const fullScale: ScenarioSettings = {
  scale: 'full',
  scenarios: [...scenarioNames],
  systems: [...systemNames],
  snapshotKinds: ['idle-in-transaction', 'repeatable-read'],
  // 70 % of the slower system's capacity measured at the start of the run
  // (issue 44): below it, so that the faults, not the load, set what the
  // figures show, but near enough that a fault which slows a system shows as
  // a backlog. `rate` is what `--rate` or a scale without a share offers.
  rate: 100,
  loadShare: 0.7,
  capacityProbeMs: 30_000,
  scopes: 200,
  workers: 2,
  concurrency: 8,
  localQueue: 100,
  stepPauseMs: 0,
  warmupMs: 15_000,
  baselineMs: 60_000,
  afterMs: 60_000,
  snapshotHoldMs: 10 * minute,
  dumpRows: 1_000_000,
  // Two autovacuum cycles of a stock server (autovacuum_naptime = 1 min), and room.
  snapshotAfterMs: 3 * minute,
  killEveryMs: 2_000,
  killForMs: 5 * minute,
  slotsForMs: minute,
  lockForMs: 30_000,
  failoverForMs: 60_000,
  receiverDeadlineMs: 5_000,
  hangMs: 30_000,
  retryCapMs: 1_000,
  drainTimeoutMs: 5 * minute,
};

export const reducedScale: ScenarioSettings = {
  ...fullScale,
  scale: 'reduced',
  rate: 50,
  capacityProbeMs: 20_000,
  warmupMs: 10_000,
  baselineMs: 30_000,
  afterMs: 30_000,
  snapshotHoldMs: 2 * minute,
  killForMs: minute,
  slotsForMs: 30_000,
  lockForMs: 30_000,
  failoverForMs: 30_000,
};

/** The CI test's: seconds each, on a server of its own with a 1 s autovacuum nap. */
export const shortScale: ScenarioSettings = {
  ...fullScale,
  scale: 'short',
  systems: ['wharf'],
  rate: 50,
  loadShare: undefined,
  capacityProbeMs: 2_000,
  scopes: 20,
  workers: 2,
  concurrency: 4,
  warmupMs: 1_000,
  baselineMs: 2_000,
  afterMs: 2_000,
  snapshotHoldMs: 5_000,
  dumpRows: 20_000,
  snapshotAfterMs: 3_000,
  killEveryMs: 500,
  killForMs: 5_000,
  slotsForMs: 3_000,
  lockForMs: 3_000,
  failoverForMs: 10_000,
  receiverDeadlineMs: 1_000,
  hangMs: 15_000,
  retryCapMs: 500,
  drainTimeoutMs: 60_000,
};

export const scales = { full: fullScale, reduced: reducedScale, short: shortScale } as const;
