// Issue 33's admission goals, judged from one run's medians like the others
// (bench/goals.ts): admit_many against the plain INSERT, the Node receiver
// against the minimal one and against itself without coalescing, routing at
// scale against one installation, and admit's PostgreSQL CPU against the
// INSERT's.
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
  const insert = medianOf(results.get('admission.plain'));

  const batchGoal = 'wharf.admit_many of 32 deliveries ≥ 2× the plain single-row INSERT in deliveries/s';
  const batched = medianOf(results.get('admission.admit_many32'));
  goals.push(batched !== undefined && insert !== undefined
    ? {
        goal: batchGoal,
        verdict: batched >= 2 * insert ? 'met' : 'not met',
        evidence: `${fmt(batched)}/s vs ${fmt(insert)}/s = ${fmt(batched / insert, 2)}×`,
      }
    : notMeasured(batchGoal));

  const cpuGoal = "a direct wharf.admit's PostgreSQL CPU per delivery ≤ 2× the plain single-row INSERT's";
  const [admitCpu, insertCpu] = ['admission.wharf', 'admission.plain'].map((id) => medianOf(results.get(`${id}.cpu_postgres`)));
  goals.push(admitCpu !== undefined && insertCpu !== undefined
    ? {
        goal: cpuGoal,
        verdict: admitCpu <= 2 * insertCpu ? 'met' : 'not met',
        evidence: `${fmt(admitCpu)} µs vs ${fmt(insertCpu)} µs = ${fmt(admitCpu / insertCpu, 2)}×`,
      }
    : notMeasured(cpuGoal));

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
