// Issue 33's admission verdicts (bench/admission-goals.ts), from figures made up for each case.
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
  it('judges admit_many against twice the plain INSERT', () => {
    expect(verdictOf(results({ 'admission.plain': 4_000, 'admission.admit_many32': 8_400 }), 'wharf.admit_many')).toMatchObject(
      { verdict: 'met', evidence: '8,400/s vs 4,000/s = 2.10×' });
    expect(verdictOf(results({ 'admission.plain': 4_000, 'admission.admit_many32': 7_900 }), 'wharf.admit_many')?.verdict).toBe('not met');
    expect(verdictOf(results({ 'admission.plain': 4_000 }), 'wharf.admit_many')?.verdict).toBe('not measured');
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

  it("judges admit's PostgreSQL CPU against twice the INSERT's", () => {
    expect(verdictOf(results({ 'admission.wharf.cpu_postgres': 270, 'admission.plain.cpu_postgres': 140 }), "a direct wharf.admit's")?.verdict)
      .toBe('met');
    expect(verdictOf(results({ 'admission.wharf.cpu_postgres': 290, 'admission.plain.cpu_postgres': 140 }), "a direct wharf.admit's")?.verdict)
      .toBe('not met');
  });
});
