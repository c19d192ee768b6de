// The verdicts of bench/goals.ts, judged from made-up results: what each
// goal of issue 32 needs to be met, what makes it not met, and when it is
// not measured (a series missing, a scale too small to say anything).
import { describe, expect, it } from 'vitest';
import { judgeGoals, monthTwoFigures, type Goal } from '../../bench/goals.js';
import { BenchResults, type SizeSnapshot } from '../../bench/results.js';

const kib = 1024;

function snapshot(phase: string, queued: number, rows: number, queueKib: number, heapKib: number): SizeSnapshot {
  return {
    phase,
    queued,
    rows,
    relations: [
      { relation: 'ix_scope_claim', bytes: queueKib * kib },
      { relation: 'provider_event', bytes: heapKib * kib },
    ],
  };
}

function goalOf(results: BenchResults, prefix: string): Goal {
  const goal = judgeGoals(results).find((candidate) => candidate.goal.startsWith(prefix));
  if (!goal) throw new Error(`no goal starts with ${prefix}`);
  return goal;
}

function sizeVerdict(...sizes: SizeSnapshot[]) {
  const results = new BenchResults();
  results.sizes.push(...sizes);
  return goalOf(results, 'table size stable');
}

/** An ordered drain at `concurrency`: Wharf's and graphile-worker's rates, with integrity counts for Wharf. */
function ordered(results: BenchResults, concurrency: number, wharf: number, rival: number,
  integrity = { orderViolations: 0, duplicates: 0, errors: 0 }): void {
  results.add('ordered', `ordered.wharf.c${concurrency}`, `Wharf, concurrency ${concurrency}`, 'events/s', wharf, integrity);
  results.add('ordered', `ordered.wharf_lq.c${concurrency}`, `Wharf, localQueue 100, concurrency ${concurrency}`, 'events/s', wharf,
    { orderViolations: 0, duplicates: 0, errors: 0 });
  results.add('ordered', `ordered.graphile_lq.c${concurrency}`, `graphile-worker, concurrency ${concurrency}`, 'events/s', rival,
    { orderViolations: 0, duplicates: 0, errors: 0 });
}

function cpu(results: BenchResults, id: string, postgres: number, node = 50): void {
  const workload = id.startsWith('ordered') ? 'ordered' : 'unordered';
  results.add(workload, `${id}.cpu_postgres`, `${id}: PostgreSQL CPU per event`, 'µs CPU', postgres);
  results.add(workload, `${id}.cpu_node`, `${id}: Node CPU per event`, 'µs CPU', node);
}

function hot(results: BenchResults, id: string, percent: number): void {
  const workload = id.startsWith('ordered') ? 'ordered' : 'unordered';
  results.add(workload, `${id}.hot_share`, `Wharf ${id}: HOT share of the event table's updates`, '%', percent);
}

function queueHistory(results: BenchResults, figures: { ms: number; workspaces: number; window: number; own?: number; read?: number }): void {
  results.add('queue-history', 'queue_history.time', 'wharf.queue_history', 'ms', figures.ms);
  results.add('queue-history', 'queue_history.workspaces', 'workspaces', 'workspaces', figures.workspaces);
  results.add('queue-history', 'queue_history.window_rows', 'rows in the window', 'rows', figures.window);
  if (figures.own !== undefined) results.add('queue-history', 'queue_history.own_rows', 'own rows', 'rows', figures.own);
  if (figures.read !== undefined) results.add('queue-history', 'queue_history.rows_read', 'rows read', 'rows', figures.read);
}

describe('table size verdict', () => {
  it('is met when the queue is back at its halfway depth and nothing grew', () => {
    const goal = sizeVerdict(snapshot('before', 10_000, 10_000, 600, 8_000),
      snapshot('halfway', 1, 85_000, 600, 70_000), snapshot('after', 0, 160_000, 640, 132_000));
    expect(goal.verdict).toBe('met');
  });

  it('is not met when the queue-side structures grew at the same depth', () => {
    const goal = sizeVerdict(snapshot('before', 10_000, 10_000, 600, 8_000),
      snapshot('halfway', 1, 85_000, 600, 70_000), snapshot('after', 0, 160_000, 1_600, 132_000));
    expect(goal.verdict).toBe('not met');
    expect(goal.evidence).toContain('2.67×');
  });

  it('is not measured when the drain fell behind, naming both depths', () => {
    const goal = sizeVerdict(snapshot('before', 10_000, 10_000, 600, 8_000),
      snapshot('halfway', 1, 85_000, 600, 70_000), snapshot('after', 16_057, 160_000, 1_656, 132_000));
    expect(goal.verdict).toBe('not measured');
    expect(goal.evidence).toBe('the drain fell behind: 16,057 queued after, 1 halfway');
  });
});

describe('ordered drain verdict', () => {
  const prefix = 'ordered drain ≥ 2×';

  it('is met at 2× or more at both concurrencies with a clean handling', () => {
    const results = new BenchResults();
    ordered(results, 8, 14_000, 7_000);
    ordered(results, 16, 16_000, 7_500);
    const goal = goalOf(results, prefix);
    expect(goal.verdict).toBe('met');
    expect(goal.evidence).toContain('concurrency 8: 14,000/s vs 7,000/s = 2.00×');
    expect(goal.evidence).toContain('concurrency 16: 16,000/s vs 7,500/s = 2.13×');
  });

  it('is not met when one concurrency falls short', () => {
    const results = new BenchResults();
    ordered(results, 8, 14_000, 7_000);
    ordered(results, 16, 14_000, 7_500);
    expect(goalOf(results, prefix).verdict).toBe('not met');
  });

  it('is not met with an order violation, however fast', () => {
    const results = new BenchResults();
    ordered(results, 8, 30_000, 7_000, { orderViolations: 1, duplicates: 0, errors: 0 });
    ordered(results, 16, 30_000, 7_000);
    const goal = goalOf(results, prefix);
    expect(goal.verdict).toBe('not met');
    expect(goal.evidence).toContain('1 order violations, 0 duplicates');
  });

  it('is not measured when a concurrency of the goal was not run, and says which', () => {
    const results = new BenchResults();
    ordered(results, 8, 30_000, 7_000);
    const goal = goalOf(results, prefix);
    expect(goal.verdict).toBe('not measured');
    expect(goal.evidence).toContain('concurrency 16 not measured');
  });

  it('is not met when the concurrency that was run already fails it', () => {
    const results = new BenchResults();
    ordered(results, 8, 8_000, 7_000);
    expect(goalOf(results, prefix).verdict).toBe('not met');
  });
});

describe('unordered drain verdict', () => {
  it('is met at 1.0× and not met below', () => {
    const results = new BenchResults();
    results.add('unordered', 'unordered.wharf_lq', 'Wharf', 'events/s', 8_000, { duplicates: 0 });
    results.add('unordered', 'unordered.graphile_lq', 'graphile-worker', 'events/s', 8_000);
    expect(goalOf(results, 'unordered drain').verdict).toBe('met');
    results.get('unordered.wharf_lq')!.samples[0] = 7_999;
    expect(goalOf(results, 'unordered drain').verdict).toBe('not met');
  });
});

describe('PostgreSQL CPU per drained event verdict', () => {
  const prefix = 'PostgreSQL CPU per drained event';

  it('is met when every drain uses at most 0.8× graphile-worker, and prints both figures', () => {
    const results = new BenchResults();
    ordered(results, 8, 14_000, 7_000);
    cpu(results, 'ordered.wharf_lq.c8', 80, 40);
    cpu(results, 'ordered.graphile_lq.c8', 100, 60);
    cpu(results, 'unordered.wharf_lq', 70);
    cpu(results, 'unordered.graphile_lq', 94);
    const goal = goalOf(results, prefix);
    expect(goal.verdict).toBe('met');
    expect(goal.evidence).toContain('ordered, concurrency 8: Wharf 80 µs + Node 40 µs vs graphile-worker 100 µs + Node 60 µs = 0.80×');
    expect(goal.evidence).toContain('unordered: Wharf 70 µs');
  });

  it('is not met when one drain uses more', () => {
    const results = new BenchResults();
    ordered(results, 8, 14_000, 7_000);
    cpu(results, 'ordered.wharf_lq.c8', 80);
    cpu(results, 'ordered.graphile_lq.c8', 100);
    cpu(results, 'unordered.wharf_lq', 122);
    cpu(results, 'unordered.graphile_lq', 94);
    const goal = goalOf(results, prefix);
    expect(goal.verdict).toBe('not met');
    expect(goal.evidence).toContain('1.30×');
  });

  it("is not measured when the backends' CPU could not be read", () => {
    const results = new BenchResults();
    results.add('unordered', 'unordered.wharf_lq.cpu_node', 'Node', 'µs CPU', 40);
    const goal = goalOf(results, prefix);
    expect(goal.verdict).toBe('not measured');
    expect(goal.evidence).toContain('could not be read');
  });
});

describe('HOT share verdict', () => {
  const prefix = 'HOT share';

  it('is met when every Wharf drain had at least 90 % of its updates HOT', () => {
    const results = new BenchResults();
    hot(results, 'ordered.wharf.c8', 96.5);
    hot(results, 'ordered.wharf_lq.c8', 90);
    hot(results, 'unordered.wharf_lq', 99.1);
    const goal = goalOf(results, prefix);
    expect(goal.verdict).toBe('met');
    expect(goal.evidence).toContain('96.5 %');
  });

  it('is not met when one drain fell below', () => {
    const results = new BenchResults();
    hot(results, 'ordered.wharf.c8', 96.5);
    hot(results, 'unordered.wharf_lq', 89.9);
    expect(goalOf(results, prefix).verdict).toBe('not met');
  });

  it('is not measured without a Wharf drain', () => {
    expect(goalOf(new BenchResults(), prefix).verdict).toBe('not measured');
  });
});

describe('growth and latency verdicts', () => {
  it('judges the large backlog against 0.8× the small one', () => {
    const results = new BenchResults();
    results.add('growth', 'growth.small', 'claim+complete with 10,000 queued rows', 'events/s', 3_000);
    results.add('growth', 'growth.large', 'claim+complete with 1,000,000 queued rows', 'events/s', 2_400);
    expect(goalOf(results, 'claim+complete').verdict).toBe('met');
    results.get('growth.large')!.samples[0] = 2_399;
    expect(goalOf(results, 'claim+complete').verdict).toBe('not met');
  });

  it('wants both p50 and p99 no worse than graphile-worker', () => {
    const results = new BenchResults();
    for (const [id, value] of [['wharf.p50', 2], ['wharf.p99', 9], ['graphile_lq.p50', 3], ['graphile_lq.p99', 8]] as const) {
      results.add('latency', `latency.${id}`, id, 'ms', value);
    }
    const goal = goalOf(results, 'latency');
    expect(goal.verdict).toBe('not met');
    expect(goal.evidence).toContain('1.13×');
  });
});

describe('queue history verdict', () => {
  const prefix = 'queue history of one workspace';

  it('is met within the budget at the stated scale, with the rows read against its own', () => {
    const results = new BenchResults();
    queueHistory(results, { ms: 6.5, workspaces: 1_000, window: 1_000_000, own: 1_000, read: 1_002 });
    const goal = goalOf(results, prefix);
    expect(goal.verdict).toBe('met');
    expect(goal.evidence).toContain('6.50 ms = 0.13× the 50 ms budget');
    expect(goal.evidence).toContain('read 1,002 rows of provider_event (1.00× its own 1,000');
  });

  it('is not met over the budget', () => {
    const results = new BenchResults();
    queueHistory(results, { ms: 420, workspaces: 1_000, window: 1_000_000 });
    expect(goalOf(results, prefix).verdict).toBe('not met');
  });

  it('is not measured at a smaller scale, whatever the time', () => {
    const results = new BenchResults();
    queueHistory(results, { ms: 0.9, workspaces: 10, window: 1_000 });
    const goal = goalOf(results, prefix);
    expect(goal.verdict).toBe('not measured');
    expect(goal.evidence).toContain('smaller scale');
  });
});

/** A month-two run: the large inbox's size, each figure small → large (ms), the purge and the admits beside it. */
function monthTwo(results: BenchResults, figures: {
  rows: number; small: number; large: number; longest: number; quietP99: number; besideP99: number; refusalsLeft: number;
}): void {
  results.add('month-two', 'month_two.small_rows', 'small', 'rows', 1_000);
  results.add('month-two', 'month_two.large_rows', 'large', 'rows', figures.rows);
  for (const { id } of monthTwoFigures) {
    results.add('month-two', `month_two.${id}.small`, `${id} small`, 'ms', figures.small);
    results.add('month-two', `month_two.${id}.large`, `${id} large`, 'ms', figures.large);
  }
  results.add('month-two', 'month_two.purge.longest', 'longest', 'ms', figures.longest);
  results.add('month-two', 'month_two.purge.calls', 'calls', 'calls', 101);
  results.add('month-two', 'month_two.purge.transactions', 'transactions', 'transactions', 101);
  results.add('month-two', 'month_two.admit_p99.quiet', 'quiet', 'ms', figures.quietP99);
  results.add('month-two', 'month_two.admit_p99.beside_purge', 'beside', 'ms', figures.besideP99);
  results.add('month-two', 'month_two.old_refusals', 'refusals', 'rows', 100_000);
  results.add('month-two', 'month_two.old_refusals_left', 'left', 'rows', figures.refusalsLeft);
}

describe('month two verdicts', () => {
  const atScale = { rows: 1_000_000, small: 0.8, large: 1.1, longest: 240, quietP99: 2, besideP99: 3.5, refusalsLeft: 0 };
  const verdicts = (results: BenchResults) => Object.fromEntries(
    judgeGoals(results).filter((goal) => monthTwoFigures.some(({ name }) => goal.goal.startsWith(name))
      || /purge|admission_log has a retention/.test(goal.goal))
      .map((goal) => [goal.goal.slice(0, 40), goal.verdict]));

  it('are met at a million rows within 1.5× the small inbox, a purge transaction within 1 s and admits within 2×', () => {
    const results = new BenchResults();
    monthTwo(results, atScale);
    const all = verdicts(results);
    expect(Object.keys(all)).toHaveLength(monthTwoFigures.length + 3);
    expect(new Set(Object.values(all))).toEqual(new Set(['met']));
    expect(goalOf(results, "wharf.queue_stats()").evidence).toBe('1.10 ms vs 0.80 ms = 1.38×');
  });

  it('are not met by a figure past 1.5×, a purge transaction past 1 s, admits past 2× or a refusal left', () => {
    const results = new BenchResults();
    monthTwo(results, { ...atScale, large: 1.3, longest: 16_400, besideP99: 4.5, refusalsLeft: 100_000 });
    expect(new Set(Object.values(verdicts(results)))).toEqual(new Set(['not met']));
    expect(goalOf(results, "the retention loop's longest purge transaction").evidence).toContain('longest 16,400 ms; 101 calls');
  });

  it('are not measured below a million rows, except the admission log\'s retention', () => {
    const results = new BenchResults();
    monthTwo(results, { ...atScale, rows: 20_000, refusalsLeft: 2_000 });
    const goal = goalOf(results, "wharf.queue_stats()");
    expect(goal.verdict).toBe('not measured');
    expect(goal.evidence).toContain('smaller scale only (20,000 rows)');
    expect(goalOf(results, "admits' p99").verdict).toBe('not measured');
    expect(goalOf(results, 'admission_log has a retention').verdict).toBe('not met');
  });
});

describe('goals of an empty run', () => {
  it('are all not measured', () => {
    expect(judgeGoals(new BenchResults()).map((goal) => goal.verdict)).toEqual(
      judgeGoals(new BenchResults()).map(() => 'not measured'));
  });
});
