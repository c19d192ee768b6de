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

const fmt = (value: number, digits = 0) => value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

/**
 * Queue-side structures that must not bloat: the scope table, where the
 * queue's moving parts live (the event rows' own versions show in the heap
 * per row).
 */
export const hotRelations = ['scope', 'scope_pkey', 'ix_scope_claim'];

export function hotBytes(snapshot: SizeSnapshot): number {
  return snapshot.relations.filter((r) => hotRelations.includes(r.relation)).reduce((sum, r) => sum + r.bytes, 0);
}

export function heapBytesPerRow(snapshot: SizeSnapshot): number {
  const heap = snapshot.relations.find((r) => r.relation === 'provider_event')?.bytes ?? 0;
  return snapshot.rows === 0 ? 0 : heap / snapshot.rows;
}

const concurrencyOf = (series: Series) => /\.c(\d+)$/.exec(series.id)?.[1];

/** CPU per event of Wharf's unordered drain against graphile-worker's, where it was measured. */
function drainCpuEvidence(results: BenchResults): string {
  const split = (id: string) => {
    const postgres = medianOf(results.get(`${id}.cpu_postgres`));
    const node = medianOf(results.get(`${id}.cpu_node`));
    return postgres === undefined || node === undefined ? undefined : `PostgreSQL ${fmt(postgres)} µs + Node ${fmt(node)} µs`;
  };
  const [wharf, rival] = [split('unordered.wharf_lq'), split('unordered.graphile_lq')];
  return wharf && rival ? `; CPU per event: Wharf ${wharf}, graphile-worker ${rival}` : '';
}

/** The CPU split of the receiver's delivery against the direct call's, where it was measured. */
function receiverCpuEvidence(results: BenchResults): string {
  const micros = (id: string) => medianOf(results.get(`admission.${id}`));
  const [receiver, load, postgres] = ['receiver_cpu.receiver', 'receiver_cpu.load', 'receiver_cpu.postgres'].map(micros);
  const [directLoad, directPostgres] = ['direct_cpu.load', 'direct_cpu.postgres'].map(micros);
  if (receiver === undefined || postgres === undefined || directPostgres === undefined) return '';
  return `; CPU per delivery: receiver process ${fmt(receiver)} µs + autocannon ${fmt(load ?? 0)} µs + PostgreSQL ${fmt(postgres)} µs, ` +
    `against pg client ${fmt(directLoad ?? 0)} µs + PostgreSQL ${fmt(directPostgres)} µs for the direct call`;
}

function notMeasured(goal: string): Goal {
  return { goal, verdict: 'not measured', evidence: '' };
}

/**
 * Issue 18's goals: Wharf against graphile-worker 0.18 with its local queue
 * (the strongest rival that keeps per-key order), pg-boss 12 and plain SQL.
 */
export function judgeGoals(results: BenchResults): Goal[] {
  const goals: Goal[] = [];

  // Ordered: like for like, Wharf's local queue against graphile-worker's, at every concurrency measured.
  const orderedGoal = 'ordered drain ≥ 2× graphile-worker 0.18 with localQueue at the same concurrency, 0 order violations, 0 duplicates';
  const pairs = results.series
    .filter((s) => s.id.startsWith('ordered.wharf_lq.c'))
    .map((wharf) => ({ wharf, rival: results.get(`ordered.graphile_lq.c${concurrencyOf(wharf)}`) }))
    .filter((pair): pair is { wharf: Series; rival: Series } => pair.rival !== undefined);
  if (pairs.length > 0) {
    const ratios = pairs.map(({ wharf, rival }) => (medianOf(wharf) ?? 0) / (medianOf(rival) ?? 1));
    const wharfSeries = results.series.filter((s) => s.id.startsWith('ordered.wharf'));
    const violations = wharfSeries.reduce((n, s) => n + (s.integrity?.orderViolations ?? 0), 0);
    const duplicates = wharfSeries.reduce((n, s) => n + (s.integrity?.duplicates ?? 0), 0);
    goals.push({
      goal: orderedGoal,
      verdict: Math.min(...ratios) >= 2 && violations === 0 && duplicates === 0 ? 'met' : 'not met',
      evidence: pairs.map(({ wharf, rival }, n) => `concurrency ${concurrencyOf(wharf)}: ` +
        `${fmt(medianOf(wharf) ?? 0)}/s vs ${fmt(medianOf(rival) ?? 0)}/s = ${fmt(ratios[n] ?? 0, 2)}×`).join('; ') +
        `; Wharf: ${violations} order violations, ${duplicates} duplicates`,
    });
  } else {
    goals.push(notMeasured(orderedGoal));
  }

  const unorderedGoal = 'unordered drain ≥ 1× graphile-worker 0.18 with localQueue';
  const wharfUnordered = medianOf(results.get('unordered.wharf_lq'));
  const rivalUnordered = medianOf(results.get('unordered.graphile_lq'));
  goals.push(wharfUnordered !== undefined && rivalUnordered !== undefined
    ? {
        goal: unorderedGoal,
        verdict: wharfUnordered >= rivalUnordered ? 'met' : 'not met',
        evidence: `${fmt(wharfUnordered)}/s vs ${fmt(rivalUnordered)}/s = ${fmt(wharfUnordered / rivalUnordered, 2)}×` +
          ` (plain SKIP LOCKED loop ${fmt(medianOf(results.get('unordered.plain')) ?? Number.NaN)}/s)` + drainCpuEvidence(results),
      }
    : notMeasured(unorderedGoal));

  const latencyGoal = 'latency at the trickle rate into idle workers: p50 and p99 no worse than graphile-worker 0.18 with localQueue';
  const p50 = medianOf(results.get('latency.wharf.p50'));
  const p99 = medianOf(results.get('latency.wharf.p99'));
  const rivalP50 = medianOf(results.get('latency.graphile_lq.p50'));
  const rivalP99 = medianOf(results.get('latency.graphile_lq.p99'));
  goals.push(p50 !== undefined && p99 !== undefined && rivalP50 !== undefined && rivalP99 !== undefined
    ? {
        goal: latencyGoal,
        verdict: p50 <= rivalP50 && p99 <= rivalP99 ? 'met' : 'not met',
        evidence: `Wharf p50 ${fmt(p50, 2)} ms, p99 ${fmt(p99, 2)} ms vs graphile-worker localQueue p50 ${fmt(rivalP50, 2)} ms, ` +
          `p99 ${fmt(rivalP99, 2)} ms (ratios ${fmt(p50 / rivalP50, 2)}× and ${fmt(p99 / rivalP99, 2)}×)`,
      }
    : notMeasured(latencyGoal));

  const admissionGoal = 'admission ≥ 0.5× the plain single-row INSERT';
  const admit = medianOf(results.get('admission.wharf'));
  const insert = medianOf(results.get('admission.plain'));
  goals.push(admit !== undefined && insert !== undefined
    ? {
        goal: admissionGoal,
        verdict: admit >= 0.5 * insert ? 'met' : 'not met',
        evidence: `${fmt(admit)}/s vs ${fmt(insert)}/s = ${fmt(admit / insert, 2)}×`,
      }
    : notMeasured(admissionGoal));

  const rivalsGoal = "admission ahead of graphile-worker's add_job and pg-boss's send with the same clients";
  const rivalEnqueues = ['admission.graphile_add_job', 'admission.graphile_add_job_queue', 'admission.pgboss_send', 'admission.pgboss_send_fifo']
    .map((id) => results.get(id))
    .filter((series): series is Series => series !== undefined && series.samples.length > 0);
  if (admit !== undefined && rivalEnqueues.length > 0) {
    const fastest = Math.max(...rivalEnqueues.map((series) => medianOf(series) ?? 0));
    goals.push({
      goal: rivalsGoal,
      verdict: admit > fastest ? 'met' : 'not met',
      evidence: `wharf.admit ${fmt(admit)}/s vs ` +
        rivalEnqueues.map((series) => `${series.label} ${fmt(medianOf(series) ?? 0)}/s (${fmt(admit / (medianOf(series) ?? 1), 2)}×)`).join(', '),
    });
  } else {
    goals.push(notMeasured(rivalsGoal));
  }

  const receiver = medianOf(results.get('admission.receiver'));
  const direct = medianOf(results.get('admission.receiver_direct'));
  goals.push(receiver !== undefined && direct !== undefined
    ? {
        goal: 'Node receiver ≥ 0.7× the direct admit call',
        verdict: receiver >= 0.7 * direct ? 'met' : 'not met',
        evidence: `${fmt(receiver)} req/s vs ${fmt(direct)}/s = ${fmt(receiver / direct, 2)}×` + receiverCpuEvidence(results),
      }
    : { goal: 'Node receiver ≥ 0.7× the direct admit call', verdict: 'not measured', evidence: 'receiver not benchmarked in this run (see notes)' });

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
  if (before && halfway && after && after.queued > halfway.queued + 1_000) {
    // The drain never caught up with the admissions: the queue's indexes
    // hold that backlog, and comparing them would measure it, not bloat.
    goals.push({
      goal: 'table size stable under sustained load',
      verdict: 'not measured',
      evidence: `the drain fell behind: ${fmt(after.queued)} queued after, ${fmt(halfway.queued)} halfway`,
    });
  } else if (before && halfway && after) {
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
