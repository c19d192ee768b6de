// Runs the chosen workloads in order and collects what they measured. Shared
// by `npm run bench` (bench/run.ts) and the smoke test.
import { BenchResults, type Log } from './results.js';
import type { BenchSettings, WorkloadName } from './settings.js';
import { runAdmission } from './workloads/admission.js';
import { runAdmissionCost } from './workloads/admission-cost.js';
import { runForwarding } from './workloads/forwarding.js';
import { runGrowth } from './workloads/growth.js';
import { runLatency } from './workloads/latency.js';
import { runMonthTwo } from './workloads/month-two.js';
import { runOrderedDrain } from './workloads/ordered-drain.js';
import { runQueueHistory } from './workloads/queue-history.js';
import { runUnorderedDrain } from './workloads/unordered-drain.js';

const workloads: Record<WorkloadName, (settings: BenchSettings, results: BenchResults, log: Log) => Promise<void>> = {
  admission: runAdmission,
  'admission-cost': runAdmissionCost,
  ordered: runOrderedDrain,
  unordered: runUnorderedDrain,
  latency: runLatency,
  growth: runGrowth,
  'queue-history': runQueueHistory,
  'month-two': runMonthTwo,
  forwarding: runForwarding,
};

export interface BenchRun {
  settings: BenchSettings;
  startedAt: Date;
  finishedAt: Date;
  results: BenchResults;
}

export async function runBenchmark(settings: BenchSettings, log: Log = () => {}): Promise<BenchRun> {
  const startedAt = new Date();
  const results = new BenchResults();
  for (const name of settings.workloads) await workloads[name](settings, results, log);
  return { settings, startedAt, finishedAt: new Date(), results };
}
