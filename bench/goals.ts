// The goals, judged from one run's medians. Ratios compare systems
// measured in the same run on the same machine.
import type { BenchResults, Series, SizeSnapshot } from './results.js';
import { summarize } from './stats.js';

export type Verdict = 'met' | 'not met' | 'not measured';

export interface Goal {
  goal: string;
  verdict: Verdict;
  evidence: string;
}

export function medianOf(series: Series | undefined): number | undefined {
  return series && series.samples.length > 0 ? summarize(series.samples).median : undefined;
}

function best(results: BenchResults, prefix: string): Series | undefined {
  return results.series
    .filter((series) => series.id.startsWith(prefix))
    .sort((a, b) => (medianOf(b) ?? 0) - (medianOf(a) ?? 0))[0];
}

const fmt = (value: number, digits = 0) => value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** Queue-side structures that must not bloat: the scope table and the partial indexes of live rows. */
export const hotRelations = ['scope', 'scope_pkey', 'ix_scope_claim', 'ix_scope_workspace',
  'ix_provider_event_scope_queue', 'uq_provider_event_leased_scope', 'ix_provider_event_reap'];

export function hotBytes(snapshot: SizeSnapshot): number {
  return snapshot.relations.filter((r) => hotRelations.includes(r.relation)).reduce((sum, r) => sum + r.bytes, 0);
}

export function heapBytesPerRow(snapshot: SizeSnapshot): number {
  const heap = snapshot.relations.find((r) => r.relation === 'provider_event')?.bytes ?? 0;
  return snapshot.rows === 0 ? 0 : heap / snapshot.rows;
}

export function judgeGoals(results: BenchResults): Goal[] {
  const goals: Goal[] = [];

  const wharfOrdered = best(results, 'ordered.wharf.');
  const graphileOrdered = best(results, 'ordered.graphile.');
  if (wharfOrdered && graphileOrdered) {
    const ratio = (medianOf(wharfOrdered) ?? 0) / (medianOf(graphileOrdered) ?? 1);
    const wharfSeries = results.series.filter((s) => s.id.startsWith('ordered.wharf.'));
    const violations = wharfSeries.reduce((n, s) => n + (s.integrity?.orderViolations ?? 0), 0);
    const duplicates = wharfSeries.reduce((n, s) => n + (s.integrity?.duplicates ?? 0), 0);
    goals.push({
      goal: 'ordered drain ≥ 2× graphile-worker\'s best per-key configuration, zero order violations, zero duplicates',
      verdict: ratio >= 2 && violations === 0 && duplicates === 0 ? 'met' : 'not met',
      evidence: `${wharfOrdered.label} ${fmt(medianOf(wharfOrdered) ?? 0)}/s vs ${graphileOrdered.label} ` +
        `${fmt(medianOf(graphileOrdered) ?? 0)}/s = ${fmt(ratio, 2)}×; Wharf: ${violations} order violations, ${duplicates} duplicates`,
    });
  } else {
    goals.push({ goal: 'ordered drain ≥ 2× graphile-worker per key', verdict: 'not measured', evidence: '' });
  }

  const wharfUnordered = medianOf(results.get('unordered.wharf'));
  const plainUnordered = medianOf(results.get('unordered.plain'));
  goals.push(wharfUnordered !== undefined && plainUnordered !== undefined
    ? {
        goal: 'unordered drain ≥ the plain SKIP LOCKED loop',
        verdict: wharfUnordered >= plainUnordered ? 'met' : 'not met',
        evidence: `${fmt(wharfUnordered)}/s vs ${fmt(plainUnordered)}/s = ${fmt(wharfUnordered / plainUnordered, 2)}×`,
      }
    : { goal: 'unordered drain ≥ the plain SKIP LOCKED loop', verdict: 'not measured', evidence: '' });

  const admit = medianOf(results.get('admission.wharf'));
  const insert = medianOf(results.get('admission.plain'));
  goals.push(admit !== undefined && insert !== undefined
    ? {
        goal: 'admission ≥ 0.8× the plain single-row INSERT',
        verdict: admit >= 0.8 * insert ? 'met' : 'not met',
        evidence: `${fmt(admit)}/s vs ${fmt(insert)}/s = ${fmt(admit / insert, 2)}×`,
      }
    : { goal: 'admission ≥ 0.8× the plain single-row INSERT', verdict: 'not measured', evidence: '' });

  const receiver = medianOf(results.get('admission.receiver'));
  const direct = medianOf(results.get('admission.receiver_direct'));
  goals.push(receiver !== undefined && direct !== undefined
    ? {
        goal: 'Node receiver ≥ 0.7× the direct admit call',
        verdict: receiver >= 0.7 * direct ? 'met' : 'not met',
        evidence: `${fmt(receiver)} req/s vs ${fmt(direct)}/s = ${fmt(receiver / direct, 2)}×`,
      }
    : { goal: 'Node receiver ≥ 0.7× the direct admit call', verdict: 'not measured', evidence: 'receiver not benchmarked in this run (see notes)' });

  const p50 = medianOf(results.get('latency.wharf.p50'));
  const p99 = medianOf(results.get('latency.wharf.p99'));
  goals.push(p50 !== undefined && p99 !== undefined
    ? {
        goal: 'latency p99 ≤ 10 ms and p50 ≤ 3 ms',
        verdict: p99 <= 10 && p50 <= 3 ? 'met' : 'not met',
        evidence: `Wharf p50 ${fmt(p50, 2)} ms, p99 ${fmt(p99, 2)} ms (graphile-worker p50 ` +
          `${fmt(medianOf(results.get('latency.graphile.p50')) ?? Number.NaN, 2)} ms, p99 ` +
          `${fmt(medianOf(results.get('latency.graphile.p99')) ?? Number.NaN, 2)} ms)`,
      }
    : { goal: 'latency p99 ≤ 10 ms and p50 ≤ 3 ms', verdict: 'not measured', evidence: '' });

  const small = results.get('growth.small');
  const large = results.get('growth.large');
  const smallRate = medianOf(small);
  const largeRate = medianOf(large);
  goals.push(smallRate !== undefined && largeRate !== undefined
    ? {
        goal: 'large backlog rate ≥ 0.8× the small-backlog rate',
        verdict: largeRate >= 0.8 * smallRate ? 'met' : 'not met',
        evidence: `${large?.label}: ${fmt(largeRate)}/s vs ${small?.label}: ${fmt(smallRate)}/s = ${fmt(largeRate / smallRate, 2)}×`,
      }
    : { goal: 'large backlog rate ≥ 0.8× the small-backlog rate', verdict: 'not measured', evidence: '' });

  const [before, halfway, after] = ['before', 'halfway', 'after'].map((phase) => results.sizes.find((s) => s.phase === phase));
  if (before && halfway && after) {
    const hotGrowth = hotBytes(after) / Math.max(1, hotBytes(halfway));
    const perRowGrowth = heapBytesPerRow(after) / Math.max(1, heapBytesPerRow(before));
    goals.push({
      goal: 'table size stable under sustained load (queue-side structures after ≤ 1.25× halfway; heap bytes per stored row after ≤ 1.1× before)',
      verdict: hotGrowth <= 1.25 && perRowGrowth <= 1.1 ? 'met' : 'not met',
      evidence: `queue-side structures ${fmt(hotBytes(halfway) / 1024)} KiB → ${fmt(hotBytes(after) / 1024)} KiB (${fmt(hotGrowth, 2)}×); ` +
        `heap ${fmt(heapBytesPerRow(before))} → ${fmt(heapBytesPerRow(after))} bytes per row (${fmt(perRowGrowth, 2)}×)`,
    });
  } else {
    goals.push({ goal: 'table size stable under sustained load', verdict: 'not measured', evidence: '' });
  }
  return goals;
}
