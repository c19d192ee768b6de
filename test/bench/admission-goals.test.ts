// The admission verdicts of issues 33, 44 and 52 (bench/admission-goals.ts), from figures made up for each case.
import { describe, expect, it } from 'vitest';
import { judgeAdmissionGoals } from '../../bench/admission-goals.js';
import { BenchResults } from '../../bench/results.js';

function results(figures: Record<string, number | readonly [number, string]>): BenchResults {
  const run = new BenchResults();
  for (const [id, figure] of Object.entries(figures)) {
    const [value, label] = Array.isArray(figure) ? figure : [figure, id];
    run.add('admission', id, label, id.includes('cpu') ? 'µs CPU' : 'events/s', value);
  }
  return run;
}

const verdictOf = (run: BenchResults, start: string) => judgeAdmissionGoals(run).find((goal) => goal.goal.startsWith(start));

describe('admission goals', () => {
  it('judges interleaved admit_many of 32 against twice the plain INSERT, with no deadlock', () => {
    const goal = 'wharf.admit_many of 32';
    expect(verdictOf(results({ 'admission_cost.insert': 4_000, 'admission_cost.admit_many32': 8_400, 'admission_cost.deadlocks': 0 }), goal))
      .toMatchObject({ verdict: 'met', evidence: '8,400/s vs 4,000/s = 2.10×, 0 deadlocks' });
    expect(verdictOf(results({ 'admission_cost.insert': 4_000, 'admission_cost.admit_many32': 7_900 }), goal)?.verdict).toBe('not met');
    expect(verdictOf(results({ 'admission_cost.insert': 4_000, 'admission_cost.admit_many32': 8_400, 'admission_cost.deadlocks': 1 }), goal)?.verdict)
      .toBe('not met');
    // The non-interleaved admission workload's figures do not count for it.
    expect(verdictOf(results({ 'admission.plain': 4_000, 'admission.admit_many32': 8_400 }), goal)?.verdict).toBe('not measured');
  });

  it("judges admit_many's fixed cost per call against 300 µs", () => {
    const goal = "wharf.admit_many's fixed";
    expect(verdictOf(results({ 'admission_cost.fixed_cpu': 280, 'admission_cost.per_delivery_cpu': 120 }), goal))
      .toMatchObject({ verdict: 'met', evidence: '280 µs per call + 120 µs per delivery' });
    expect(verdictOf(results({ 'admission_cost.fixed_cpu': 320, 'admission_cost.per_delivery_cpu': 120 }), goal)?.verdict).toBe('not met');
    expect(verdictOf(results({ 'admission_cost.fixed_cpu': 1_400, 'admission_cost.per_delivery_cpu': 120 }), goal)?.verdict).toBe('not met');
    expect(verdictOf(results({}), goal)?.verdict).toBe('not measured');
  });

  it('wants the Node receiver at least as fast as the minimal one at both numbers of connections', () => {
    const both = {
      'admission.receiver': [1_200, 'through the Node receiver, 8 connections'],
      'admission.minimal_receiver': [1_100, 'through the minimal receiver, 8 connections'],
      'admission.receiver_c64': [1_500, 'through the Node receiver, 64 connections'],
      'admission.minimal_receiver_c64': [1_400, 'through the minimal receiver, 64 connections'],
    } as const;
    const met = verdictOf(results({ ...both }), 'the Node receiver ≥ 1.0×');
    expect(met?.verdict).toBe('met');
    expect(met?.evidence).toContain('8 connections: 1,200 vs 1,100 req/s = 1.09×; 64 connections: 1,500 vs 1,400 req/s = 1.07×');
    expect(verdictOf(results({ ...both, 'admission.receiver_c64': [1_300, 'x, 64 connections'] }), 'the Node receiver ≥ 1.0×')?.verdict)
      .toBe('not met');
    // One number of connections is not both.
    expect(verdictOf(results({ 'admission.receiver': both['admission.receiver'], 'admission.minimal_receiver': both['admission.minimal_receiver'] }),
      'the Node receiver ≥ 1.0×')?.verdict).toBe('not met');
  });

  it('wants coalescing no slower at the trickle rate, at p50 and at p99', () => {
    const latency = (onP99: number) => results({
      'admission.receiver_latency.coalesced.p50': 1.1, 'admission.receiver_latency.coalesced.p99': onP99,
      'admission.receiver_latency.uncoalesced.p50': 1.2, 'admission.receiver_latency.uncoalesced.p99': 4,
    });
    expect(verdictOf(latency(3.9), 'the Node receiver at 200')?.verdict).toBe('met');
    expect(verdictOf(latency(4.1), 'the Node receiver at 200')?.verdict).toBe('not met');
  });

  it('compares routing at scale by PostgreSQL CPU per delivery where measured, else by rate', () => {
    expect(verdictOf(results({
      'admission.wharf': 3_000, 'admission.wharf.cpu_postgres': 300,
      'admission.routing_scale': 2_000, 'admission.routing_scale.cpu_postgres': 320,
    }), 'admission routing at scale')).toMatchObject({ verdict: 'met' });
    expect(verdictOf(results({ 'admission.wharf': 3_000, 'admission.routing_scale': 2_500 }), 'admission routing at scale'))
      .toMatchObject({ verdict: 'not met', evidence: expect.stringContaining('time per delivery 400 µs vs 333 µs = 1.20×') });
  });

  it("judges a direct admit's rate against 0.5× the interleaved INSERT's and its CPU against 2×", () => {
    const goal = 'a direct wharf.admit ≥ 0.5×';
    const figures = { 'admission_cost.insert': 5_000, 'admission_cost.insert.cpu_postgres': 200 };
    expect(verdictOf(results({ ...figures, 'admission_cost.admit': 2_600, 'admission_cost.admit.cpu_postgres': 380 }), goal))
      .toMatchObject({ verdict: 'met', evidence: '2,600/s vs 5,000/s = 0.52×; PostgreSQL CPU 380 µs vs 200 µs = 1.90×' });
    expect(verdictOf(results({ ...figures, 'admission_cost.admit': 2_400, 'admission_cost.admit.cpu_postgres': 380 }), goal)?.verdict)
      .toBe('not met');
    expect(verdictOf(results({ ...figures, 'admission_cost.admit': 2_600, 'admission_cost.admit.cpu_postgres': 420 }), goal)?.verdict)
      .toBe('not met');
    expect(verdictOf(results({ ...figures, 'admission_cost.admit': 2_600 }), goal)?.verdict).toBe('not measured');
  });
});
