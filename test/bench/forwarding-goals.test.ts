// The verdicts of bench/forwarding-goals.ts (issue 53), judged from made-up
// results: what each forwarding goal needs to be met, what makes it not
// met, and when it is not measured (a bound, a scale or a rate the goal is
// not stated at, or a branch without the forwarder).
import { describe, expect, it } from 'vitest';
import { judgeGoals, type Goal } from '../../bench/goals.js';
import { BenchResults } from '../../bench/results.js';

const clean = { orderViolations: 0, duplicates: 0, errors: 0 };

function goalOf(results: BenchResults, prefix: string): Goal {
  const goal = judgeGoals(results).find((candidate) => candidate.goal.startsWith(prefix));
  if (!goal) throw new Error(`no goal starts with ${prefix}`);
  return goal;
}

/** One in-flight bound's rates: Wharf unordered, the minimal forwarder, Wharf ordered. */
function rates(results: BenchResults, c: number, figures: { unordered: number; minimal: number; ordered: number },
  integrity = { unordered: clean, ordered: clean }): void {
  results.add('forwarding', `forwarding.wharf_unordered.c${c}`, `Wharf unordered ${c}`, 'events/s', figures.unordered, integrity.unordered);
  results.add('forwarding', `forwarding.minimal.c${c}`, `minimal ${c}`, 'events/s', figures.minimal, clean);
  results.add('forwarding', `forwarding.wharf_ordered.c${c}`, `Wharf ordered ${c}`, 'events/s', figures.ordered, integrity.ordered);
}

function cpu(results: BenchResults, id: string, node: number, postgres?: number): void {
  results.add('forwarding', `${id}.cpu_node`, `${id} Node`, 'µs CPU', node);
  if (postgres !== undefined) results.add('forwarding', `${id}.cpu_postgres`, `${id} PostgreSQL`, 'µs CPU', postgres);
}

function measuredRun(scopes = 64): BenchResults {
  const results = new BenchResults();
  rates(results, 8, { unordered: 2_400, minimal: 2_000, ordered: 2_200 });
  rates(results, 32, { unordered: 3_000, minimal: 2_900, ordered: 2_500 });
  results.add('forwarding', 'forwarding.scopes', 'scopes', 'scopes', scopes);
  return results;
}

const unorderedPrefix = 'unordered forwarding ≥ 1.0× the minimal forwarder';
const orderedPrefix = 'ordered forwarding over 64 scopes';
const latencyPrefix = 'latency added by forwarding';
const cpuPrefix = 'forwarding CPU per event';

describe('forwarding rate verdicts', () => {
  it('are met at 8 and 32 in flight with clean integrity, and say each ratio', () => {
    const results = measuredRun();
    const unordered = goalOf(results, unorderedPrefix);
    expect(unordered.verdict).toBe('met');
    expect(unordered.evidence).toBe('8 in flight: 2,400/s vs 2,000/s = 1.20×; 32 in flight: 3,000/s vs 2,900/s = 1.03×; ' +
      '0 duplicates, 0 bad signatures');
    const ordered = goalOf(results, orderedPrefix);
    expect(ordered.verdict).toBe('met');
    expect(ordered.evidence).toContain('32 in flight: 2,500/s vs 3,000/s = 0.83×');
  });

  it('are not met below the ratio at one bound, or with a duplicate, a bad signature or an order violation', () => {
    const slow = new BenchResults();
    rates(slow, 8, { unordered: 2_400, minimal: 2_000, ordered: 2_200 });
    rates(slow, 32, { unordered: 2_800, minimal: 2_900, ordered: 2_000 });
    slow.add('forwarding', 'forwarding.scopes', 'scopes', 'scopes', 64);
    expect(goalOf(slow, unorderedPrefix).verdict).toBe('not met');
    expect(goalOf(slow, orderedPrefix).verdict).toBe('not met');

    const dirty = new BenchResults();
    rates(dirty, 8, { unordered: 2_400, minimal: 2_000, ordered: 2_200 },
      { unordered: { ...clean, errors: 1 }, ordered: { ...clean, orderViolations: 2 } });
    rates(dirty, 32, { unordered: 3_000, minimal: 2_900, ordered: 2_500 });
    dirty.add('forwarding', 'forwarding.scopes', 'scopes', 'scopes', 64);
    expect(goalOf(dirty, unorderedPrefix).verdict).toBe('not met');
    expect(goalOf(dirty, unorderedPrefix).evidence).toContain('1 bad signatures');
    expect(goalOf(dirty, orderedPrefix).verdict).toBe('not met');
    expect(goalOf(dirty, orderedPrefix).evidence).toContain('2 order violations');
  });

  it('are not measured when a bound was not run, or the ordered backlog had fewer scopes', () => {
    const results = new BenchResults();
    rates(results, 8, { unordered: 2_400, minimal: 2_000, ordered: 2_200 });
    results.add('forwarding', 'forwarding.scopes', 'scopes', 'scopes', 16);
    const unordered = goalOf(results, unorderedPrefix);
    expect(unordered.verdict).toBe('not measured');
    expect(unordered.evidence).toContain('32 in flight not measured');
    const ordered = goalOf(results, orderedPrefix);
    expect(ordered.verdict).toBe('not measured');
    expect(ordered.evidence).toContain('measured over 16 scopes only');
  });

  it("say why when Wharf's forwarder could not run on this branch", () => {
    const results = new BenchResults();
    results.add('forwarding', 'forwarding.minimal.c8', 'minimal 8', 'events/s', 2_000, clean);
    results.note("forwarding: Wharf's forwarder not measured: no forward loop in worker/ on this branch");
    for (const prefix of [unorderedPrefix, orderedPrefix, latencyPrefix, cpuPrefix]) {
      const goal = goalOf(results, prefix);
      expect(goal.verdict, prefix).toBe('not measured');
      expect(goal.evidence, prefix).toContain('no forward loop in worker/');
    }
  });
});

describe('forwarding latency verdict', () => {
  function latency(p50: number, p99: number, rate = 200): BenchResults {
    const results = new BenchResults();
    results.add('forwarding', 'forwarding.latency.rate', 'rate', 'admits/s', rate);
    results.add('forwarding', 'forwarding.latency.p50', 'p50', 'ms', p50);
    results.add('forwarding', 'forwarding.latency.p99', 'p99', 'ms', p99);
    return results;
  }

  it('is met within 10 ms at p50 and 50 ms at p99 at 200/s', () => {
    const goal = goalOf(latency(3.2, 21.5), latencyPrefix);
    expect(goal.verdict).toBe('met');
    expect(goal.evidence).toBe('p50 3.20 ms, p99 21.50 ms at 200/s');
  });

  it('is not met past either budget', () => {
    expect(goalOf(latency(11, 20), latencyPrefix).verdict).toBe('not met');
    expect(goalOf(latency(4, 51), latencyPrefix).verdict).toBe('not met');
  });

  it('is not measured at another rate (a smoke run)', () => {
    const goal = goalOf(latency(2, 5, 50), latencyPrefix);
    expect(goal.verdict).toBe('not measured');
    expect(goal.evidence).toContain('measured at another rate only');
  });
});

describe('forwarding CPU verdict', () => {
  it("is met when Wharf's forwarding and the handlers' drain both have Node and PostgreSQL figures, and lists them", () => {
    const results = measuredRun();
    cpu(results, 'forwarding.wharf_unordered.c8', 120, 90);
    cpu(results, 'forwarding.minimal.c8', 60, 70);
    cpu(results, 'forwarding.handlers.c8', 70, 80);
    results.add('forwarding', 'forwarding.handlers.c8', 'handlers', 'events/s', 5_000, clean);
    const goal = goalOf(results, cpuPrefix);
    expect(goal.verdict).toBe('met');
    expect(goal.evidence).toContain('wharf_unordered at 8: Node 120 µs + PostgreSQL 90 µs');
    expect(goal.evidence).toContain('handlers at 8: Node 70 µs + PostgreSQL 80 µs');
  });

  it("is not measured without the backends' CPU", () => {
    const results = measuredRun();
    cpu(results, 'forwarding.wharf_unordered.c8', 120);
    cpu(results, 'forwarding.handlers.c8', 70);
    results.add('forwarding', 'forwarding.handlers.c8', 'handlers', 'events/s', 5_000, clean);
    const goal = goalOf(results, cpuPrefix);
    expect(goal.verdict).toBe('not measured');
    expect(goal.evidence).toContain('could not be read');
  });
});
