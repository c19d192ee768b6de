// The table-size verdict of bench/goals.ts: sizes judged only at equal queue
// depth, since the queue's indexes hold a backlog that is not bloat.
import { describe, expect, it } from 'vitest';
import { judgeGoals } from '../../bench/goals.js';
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

function sizeVerdict(...sizes: SizeSnapshot[]) {
  const results = new BenchResults();
  results.sizes.push(...sizes);
  return judgeGoals(results).find((goal) => goal.goal.startsWith('table size stable'));
}

describe('table size verdict', () => {
  it('is met when the queue is back at its halfway depth and nothing grew', () => {
    const goal = sizeVerdict(snapshot('before', 10_000, 10_000, 600, 8_000),
      snapshot('halfway', 1, 85_000, 600, 70_000), snapshot('after', 0, 160_000, 640, 132_000));
    expect(goal?.verdict).toBe('met');
  });

  it('is not met when the queue-side structures grew at the same depth', () => {
    const goal = sizeVerdict(snapshot('before', 10_000, 10_000, 600, 8_000),
      snapshot('halfway', 1, 85_000, 600, 70_000), snapshot('after', 0, 160_000, 1_600, 132_000));
    expect(goal?.verdict).toBe('not met');
    expect(goal?.evidence).toContain('2.67×');
  });

  it('is not measured when the drain fell behind, naming both depths', () => {
    const goal = sizeVerdict(snapshot('before', 10_000, 10_000, 600, 8_000),
      snapshot('halfway', 1, 85_000, 600, 70_000), snapshot('after', 16_057, 160_000, 1_656, 132_000));
    expect(goal?.verdict).toBe('not measured');
    expect(goal?.evidence).toBe('the drain fell behind: 16,057 queued after, 1 halfway');
  });
});
