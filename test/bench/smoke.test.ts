// A small run of the benchmark harness (bench/), so that it cannot rot: every
// workload completes against the real PostgreSQL, Wharf handles every event
// once and in scope order, and every figure is a positive number. Speed is
// never asserted here; `npm run bench` measures it.
import { describe, expect, inject, it } from 'vitest';
import { describeEnvironment } from '../../bench/environment.js';
import { runBenchmark, type BenchRun } from '../../bench/harness.js';
import { renderMarkdown } from '../../bench/report.js';
import { smokeSettings } from '../../bench/settings.js';

describe('bench smoke run', () => {
  it('runs every workload on a few hundred events and reports sane figures', { timeout: 180_000 }, async () => {
    const serverUrl = inject('postgresUrl');
    const run: BenchRun = await runBenchmark({
      ...smokeSettings,
      serverUrl,
      admissionEvents: 200,
      receiverRequests: 100,
      orderedEvents: 200,
      unorderedEvents: 200,
      drainConcurrencies: [8],
      latencySeconds: 1,
      growthSmallRows: 100,
      growthLargeRows: 400,
      growthMeasuredEvents: 50,
      sustainedSeconds: 2,
    });
    const { results } = run;

    // Every workload produced its series, each with one positive sample.
    for (const id of ['admission.wharf', 'admission.plain', 'admission.receiver', 'admission.receiver_direct',
      'admission.admit_many32', 'admission.routing_scale', 'admission.receiver_c64', 'admission.minimal_receiver',
      'admission.minimal_receiver_c64', 'admission.receiver_latency.coalesced.p99', 'admission.receiver_latency.uncoalesced.p99',
      'admission.graphile_add_job', 'admission.graphile_add_job_queue', 'admission.pgboss_send', 'admission.pgboss_send_fifo',
      'ordered.wharf.c8', 'ordered.wharf_lq.c8', 'ordered.graphile_lq.c8', 'ordered.graphile.c8', 'ordered.pgboss.c8',
      'unordered.wharf', 'unordered.wharf_lq', 'unordered.plain', 'unordered.graphile_lq', 'unordered.graphile', 'unordered.pgboss',
      'latency.wharf.p50', 'latency.wharf.p99', 'latency.graphile_lq.p50', 'latency.graphile_lq.p99',
      'latency.graphile.p50', 'latency.pgboss.p50',
      'growth.small', 'growth.large', 'growth.sustained_handled']) {
      const series = results.get(id);
      expect(series, id).toBeDefined();
      expect(series?.samples).toHaveLength(1);
    }
    for (const series of results.series) {
      for (const sample of series.samples) {
        expect(Number.isFinite(sample), series.id).toBe(true);
        // A stalled pg-boss drain is recorded, not fatal: it may handle nothing.
        if (series.unit === 'ms' || series.id.includes('pgboss')) expect(sample, series.id).toBeGreaterThanOrEqual(0);
        else expect(sample, series.id).toBeGreaterThan(0);
      }
    }

    // CPU per event and per delivery: this process's always; the receiver's
    // and the backends' where /proc shows them (the backends not when they
    // run in a container).
    const cpuSeries = ['unordered.wharf_lq.cpu_node', 'unordered.graphile_lq.cpu_node', 'unordered.plain.cpu_node',
      'admission.receiver_cpu.load', 'admission.direct_cpu.load',
      ...(process.platform === 'linux' ? ['admission.receiver_cpu.receiver'] : [])];
    for (const id of cpuSeries) expect(results.get(id)?.samples[0], id).toBeGreaterThan(0);

    // Wharf handled every event exactly once and in order within each scope,
    // and so did the rivals' per-key configurations (or their ordered figures mean nothing).
    for (const id of ['ordered.wharf.c8', 'ordered.wharf_lq.c8', 'unordered.wharf', 'unordered.wharf_lq', 'growth.sustained_handled',
      'ordered.graphile_lq.c8', 'ordered.graphile.c8', 'ordered.pgboss.c8']) {
      expect(results.get(id)?.integrity, id).toEqual({ orderViolations: 0, duplicates: 0, errors: 0 });
    }

    // The sustained period recorded sizes around it, and the report renders.
    expect(results.sizes.map((snapshot) => snapshot.phase)).toEqual(['before', 'halfway', 'after']);
    const markdown = renderMarkdown(run, await describeEnvironment(serverUrl));
    expect(markdown).toContain('## Goals');
    expect(markdown).toMatch(/ordered drain ≥ 2× graphile-worker.*\| \*\*(met|not met)\*\*/);
  });
});
