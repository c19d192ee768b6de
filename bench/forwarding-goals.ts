// Issue 53's forwarding goals, judged from one run's medians
// (bench/workloads/forwarding.ts): Wharf's forwarder against the minimal
// forwarder, ordered against unordered, the latency forwarding adds, and its
// CPU per event beside the handlers' drain.
import { medianOf, type Goal } from './goals.js';
import type { BenchResults, Series } from './results.js';

/** The in-flight bounds the rate goals are stated at. */
export const forwardingGoalConcurrencies = [8, 32];
/** The scopes the ordered goal is stated over. */
export const forwardingGoalScopes = 64;
/** Unordered forwarding ≥ this × the minimal forwarder. */
export const forwardingMinimalRatio = 1.0;
/** Ordered forwarding ≥ this × Wharf's unordered forwarding. */
export const forwardingOrderedRatio = 0.8;
/** The trickle the latency goal is stated at, and its budgets. */
export const forwardingLatencyGoal = { rate: 200, p50Ms: 10, p99Ms: 50 };

const fmt = (value: number, digits = 0) => value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const notMeasured = (goal: string, evidence = ''): Goal => ({ goal, verdict: 'not measured', evidence });

/** Why Wharf's forwarder was not measured, when the run noted it. */
function unavailable(results: BenchResults): string {
  return results.notes.find((note) => note.startsWith("forwarding: Wharf's forwarder not measured"))?.replace(/^forwarding: /, '') ?? '';
}

const integrityOf = (results: BenchResults, prefix: string) => results.series
  .filter((s): s is Series & { integrity: NonNullable<Series['integrity']> } => s.id.startsWith(prefix) && s.integrity !== undefined)
  .reduce((sum, s) => ({
    duplicates: sum.duplicates + s.integrity.duplicates,
    orderViolations: sum.orderViolations + s.integrity.orderViolations,
    errors: sum.errors + s.integrity.errors,
  }), { duplicates: 0, orderViolations: 0, errors: 0 });

/** Pairs of medians at each goal concurrency; `missing` names those not measured. */
function pairs(results: BenchResults, left: string, right: string) {
  const measured = forwardingGoalConcurrencies
    .map((c) => ({ c, left: medianOf(results.get(`${left}.c${c}`)), right: medianOf(results.get(`${right}.c${c}`)) }))
    .filter((pair): pair is { c: number; left: number; right: number } => pair.left !== undefined && pair.right !== undefined);
  const missing = forwardingGoalConcurrencies.filter((c) => !measured.some((pair) => pair.c === c));
  return { measured, missing };
}

function verdictOf(failed: boolean, missing: number[]): Goal['verdict'] {
  // A bound not measured leaves the goal open unless a measured one already failed it.
  return failed ? 'not met' : missing.length > 0 ? 'not measured' : 'met';
}

function unorderedGoal(results: BenchResults): Goal {
  const goal = `unordered forwarding ≥ ${fmt(forwardingMinimalRatio, 1)}× the minimal forwarder (SKIP LOCKED claim, fetch, UPDATE) ` +
    `at ${forwardingGoalConcurrencies.join(' and ')} in flight, 0 duplicates, every checked signature valid`;
  const { measured, missing } = pairs(results, 'forwarding.wharf_unordered', 'forwarding.minimal');
  if (measured.length === 0) return notMeasured(goal, unavailable(results));
  const integrity = integrityOf(results, 'forwarding.wharf_unordered');
  const failed = measured.some((pair) => pair.left < forwardingMinimalRatio * pair.right) || integrity.duplicates > 0 || integrity.errors > 0;
  return {
    goal,
    verdict: verdictOf(failed, missing),
    evidence: measured.map((pair) => `${pair.c} in flight: ${fmt(pair.left)}/s vs ${fmt(pair.right)}/s = ${fmt(pair.left / pair.right, 2)}×`)
      .join('; ') +
      `; ${integrity.duplicates} duplicates, ${integrity.errors} bad signatures` +
      (missing.length > 0 ? `; ${missing.join(' and ')} in flight not measured` : ''),
  };
}

function orderedGoal(results: BenchResults): Goal {
  const goal = `ordered forwarding over ${forwardingGoalScopes} scopes ≥ ${fmt(forwardingOrderedRatio, 1)}× Wharf's unordered forwarding ` +
    'at the same in-flight bound, 0 order violations, 0 duplicates';
  const { measured, missing } = pairs(results, 'forwarding.wharf_ordered', 'forwarding.wharf_unordered');
  if (measured.length === 0) return notMeasured(goal, unavailable(results));
  const integrity = integrityOf(results, 'forwarding.wharf_ordered');
  const scopes = medianOf(results.get('forwarding.scopes'));
  const evidence = measured.map((pair) => `${pair.c} in flight: ${fmt(pair.left)}/s vs ${fmt(pair.right)}/s = ${fmt(pair.left / pair.right, 2)}×`)
    .join('; ') +
    `; ${integrity.orderViolations} order violations, ${integrity.duplicates} duplicates, ${integrity.errors} bad signatures` +
    (missing.length > 0 ? `; ${missing.join(' and ')} in flight not measured` : '');
  // Over fewer scopes the ordered destination is held back more: a smaller run says nothing about 64.
  if (scopes !== forwardingGoalScopes) return notMeasured(goal, `measured over ${fmt(scopes ?? 0)} scopes only: ${evidence}`);
  const failed = measured.some((pair) => pair.left < forwardingOrderedRatio * pair.right)
    || integrity.orderViolations > 0 || integrity.duplicates > 0 || integrity.errors > 0;
  return { goal, verdict: verdictOf(failed, missing), evidence };
}

function latencyGoal(results: BenchResults): Goal {
  const { rate, p50Ms, p99Ms } = forwardingLatencyGoal;
  const goal = `latency added by forwarding (admission commit → request at the receiver) at ${rate} events/s: ` +
    `p50 ≤ ${p50Ms} ms, p99 ≤ ${p99Ms} ms`;
  const p50 = medianOf(results.get('forwarding.latency.p50'));
  const p99 = medianOf(results.get('forwarding.latency.p99'));
  if (p50 === undefined || p99 === undefined) return notMeasured(goal, unavailable(results));
  const measuredRate = medianOf(results.get('forwarding.latency.rate'));
  const evidence = `p50 ${fmt(p50, 2)} ms, p99 ${fmt(p99, 2)} ms` +
    (measuredRate !== undefined ? ` at ${fmt(measuredRate)}/s` : '');
  if (measuredRate !== rate) return notMeasured(goal, `measured at another rate only: ${evidence}`);
  return { goal, verdict: p50 <= p50Ms && p99 <= p99Ms ? 'met' : 'not met', evidence };
}

/** Recorded, not bounded: the forwarder's CPU per event at each bound, and the handlers' drain's beside it. */
function cpuGoal(results: BenchResults): Goal {
  const goal = "forwarding CPU per event (Node + PostgreSQL) recorded beside the handlers' drain";
  const cpu = (id: string) => {
    const node = medianOf(results.get(`${id}.cpu_node`));
    const postgres = medianOf(results.get(`${id}.cpu_postgres`));
    return node === undefined ? undefined : { node, postgres };
  };
  const text = (figures: { node: number; postgres?: number | undefined }) =>
    `Node ${fmt(figures.node)} µs + PostgreSQL ${figures.postgres === undefined ? '?' : `${fmt(figures.postgres)} µs`}`;
  const forwarders = results.series.map((s) => s.id)
    .filter((id) => /^forwarding\.(wharf_unordered|wharf_ordered|minimal)\.c\d+$/.test(id))
    .map((id) => ({ id, figures: cpu(id) }))
    .filter((entry): entry is { id: string; figures: { node: number; postgres: number | undefined } } => entry.figures !== undefined);
  const handlers = results.series.map((s) => s.id).filter((id) => /^forwarding\.handlers\.c\d+$/.test(id))
    .map((id) => ({ id, figures: cpu(id) }))
    .filter((entry): entry is { id: string; figures: { node: number; postgres: number | undefined } } => entry.figures !== undefined);
  const wharf = forwarders.filter((entry) => entry.id.includes('.wharf_'));
  if (wharf.length === 0 || handlers.length === 0) return notMeasured(goal, unavailable(results));
  const name = (id: string) => id.replace(/^forwarding\./, '').replace(/\.c(\d+)$/, ' at $1');
  const complete = [...wharf, ...handlers].every((entry) => entry.figures.postgres !== undefined);
  return {
    goal,
    verdict: complete ? 'met' : 'not measured',
    evidence: [...forwarders, ...handlers].map((entry) => `${name(entry.id)}: ${text(entry.figures)}`).join('; ') +
      (complete ? '' : "; the PostgreSQL backends' CPU could not be read (server not on this machine)"),
  };
}

export function judgeForwardingGoals(results: BenchResults): Goal[] {
  return [unorderedGoal(results), orderedGoal(results), latencyGoal(results), cpuGoal(results)];
}
