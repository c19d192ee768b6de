// The admission goals of issues 33, 44 and 52, judged from one run's medians
// like the others (bench/goals.ts): admit and admit_many against the plain
// INSERT, interleaved (issue 52's thresholds, which replace issue 44's and
// 33's), admit_many's fixed cost per call, the Node receiver against the minimal one and
// against itself without coalescing, routing at scale against one
// installation.
import { medianOf, type Goal } from './goals.js';
import type { BenchResults } from './results.js';

const fmt = (value: number, digits = 0) => value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

const notMeasured = (goal: string): Goal => ({ goal, verdict: 'not measured', evidence: '' });

/**
 * An admission's cost per delivery in series `id`: its PostgreSQL CPU where
 * /proc showed it, else the time per delivery its rate implies.
 */
function costPerDelivery(results: BenchResults, id: string): { micros: number; what: 'PostgreSQL CPU' | 'time' } | undefined {
  const cpu = medianOf(results.get(`${id}.cpu_postgres`));
  if (cpu !== undefined) return { micros: cpu, what: 'PostgreSQL CPU' };
  const rate = medianOf(results.get(id));
  return rate === undefined ? undefined : { micros: 1e6 / rate, what: 'time' };
}

export function judgeAdmissionGoals(results: BenchResults): Goal[] {
  const goals: Goal[] = [];

  // Issue 52's, judged from the interleaved workload (bench/workloads/admission-cost.ts).
  const cost = (id: string) => medianOf(results.get(`admission_cost.${id}`));
  const [admit, insert, batched] = [cost('admit'), cost('insert'), cost('admit_many32')];
  const [admitCpu, insertCpu] = [cost('admit.cpu_postgres'), cost('insert.cpu_postgres')];

  const directGoal = "a direct wharf.admit ≥ 0.5× the plain single-row INSERT's rate, its PostgreSQL CPU ≤ 2× the INSERT's (interleaved)";
  goals.push(admit !== undefined && insert !== undefined && admitCpu !== undefined && insertCpu !== undefined
    ? {
        goal: directGoal,
        verdict: admit >= 0.5 * insert && admitCpu <= 2 * insertCpu ? 'met' : 'not met',
        evidence: `${fmt(admit)}/s vs ${fmt(insert)}/s = ${fmt(admit / insert, 2)}×; ` +
          `PostgreSQL CPU ${fmt(admitCpu)} µs vs ${fmt(insertCpu)} µs = ${fmt(admitCpu / insertCpu, 2)}×`,
      }
    : notMeasured(directGoal));

  const batchGoal = 'wharf.admit_many of 32, 8 callers whose batches share scopes in random order, ≥ 2× the INSERT in deliveries/s, 0 deadlocks';
  const deadlocks = results.get('admission_cost.deadlocks')?.samples.reduce((sum, n) => sum + n, 0) ?? 0;
  goals.push(batched !== undefined && insert !== undefined
    ? {
        goal: batchGoal,
        verdict: batched >= 2 * insert && deadlocks === 0 ? 'met' : 'not met',
        evidence: `${fmt(batched)}/s vs ${fmt(insert)}/s = ${fmt(batched / insert, 2)}×, ${fmt(deadlocks)} deadlocks`,
      }
    : notMeasured(batchGoal));

  const fixedGoal = "wharf.admit_many's fixed PostgreSQL CPU per call ≤ 300 µs (a line through 1, 2, 4 … 64 deliveries per call)";
  const [fixed, perDelivery] = [cost('fixed_cpu'), cost('per_delivery_cpu')];
  goals.push(fixed !== undefined && perDelivery !== undefined
    ? {
        goal: fixedGoal,
        verdict: fixed <= 300 ? 'met' : 'not met',
        evidence: `${fmt(fixed)} µs per call + ${fmt(perDelivery)} µs per delivery`,
      }
    : notMeasured(fixedGoal));

  const receiverGoal = 'the Node receiver ≥ 1.0× the minimal receiver (one plain INSERT per request) at 8 and at 64 connections';
  const pairs = results.series
    .filter((series) => /^admission\.receiver(_c\d+)?$/.test(series.id))
    .map((wharf) => ({ wharf, minimal: results.get(wharf.id.replace('receiver', 'minimal_receiver')) }))
    .filter((pair) => medianOf(pair.wharf) !== undefined && medianOf(pair.minimal) !== undefined);
  if (pairs.length > 0) {
    const ratios = pairs.map(({ wharf, minimal }) => medianOf(wharf)! / medianOf(minimal)!);
    goals.push({
      goal: receiverGoal,
      verdict: pairs.length >= 2 && Math.min(...ratios) >= 1 ? 'met' : 'not met',
      evidence: pairs.map(({ wharf, minimal }, n) => {
        const connections = /(\d+) connections/.exec(wharf.label)?.[1] ?? '?';
        const cpu = (id: string) => medianOf(results.get(id));
        const suffix = wharf.id.slice('admission.receiver'.length);
        const [ownCpu, minimalCpu] = [cpu(`admission.receiver${suffix}_cpu.receiver`), cpu(`admission.minimal_receiver${suffix}_cpu.receiver`)];
        return `${connections} connections: ${fmt(medianOf(wharf)!)} vs ${fmt(medianOf(minimal)!)} req/s = ${fmt(ratios[n]!, 2)}×` +
          (ownCpu !== undefined && minimalCpu !== undefined ? ` (receiver CPU ${fmt(ownCpu)} vs ${fmt(minimalCpu)} µs per delivery)` : '');
      }).join('; ') + (pairs.length < 2 ? '; only one number of connections measured' : ''),
    });
  } else {
    goals.push(notMeasured(receiverGoal));
  }

  const latencyGoal = 'the Node receiver at 200 requests/s: p50 and p99 with coalescing on no worse than with it off';
  const latency = (mode: string, key: string) => medianOf(results.get(`admission.receiver_latency.${mode}.${key}`));
  const [onP50, onP99, offP50, offP99] = [latency('coalesced', 'p50'), latency('coalesced', 'p99'), latency('uncoalesced', 'p50'), latency('uncoalesced', 'p99')];
  goals.push(onP50 !== undefined && onP99 !== undefined && offP50 !== undefined && offP99 !== undefined
    ? {
        goal: latencyGoal,
        verdict: onP50 <= offP50 && onP99 <= offP99 ? 'met' : 'not met',
        evidence: `on: p50 ${fmt(onP50, 2)} ms, p99 ${fmt(onP99, 2)} ms; off: p50 ${fmt(offP50, 2)} ms, p99 ${fmt(offP99, 2)} ms`,
      }
    : notMeasured(latencyGoal));

  const routingGoal = "admission routing at scale (10,000 installations, 100,000 subscriptions on one source) ≤ 1.1× the one-installation cost per delivery";
  const [routed, single] = [costPerDelivery(results, 'admission.routing_scale'), costPerDelivery(results, 'admission.wharf')];
  goals.push(routed !== undefined && single !== undefined && routed.what === single.what
    ? {
        goal: routingGoal,
        verdict: routed.micros <= 1.1 * single.micros ? 'met' : 'not met',
        evidence: `${routed.what} per delivery ${fmt(routed.micros)} µs vs ${fmt(single.micros)} µs = ${fmt(routed.micros / single.micros, 2)}×` +
          ` (${results.get('admission.routing_scale')?.label ?? ''})`,
      }
    : notMeasured(routingGoal));

  return goals;
}
