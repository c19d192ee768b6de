// What a run measured: one series per (workload, system, configuration) with
// one sample per repetition, integrity counts for the drains, relation sizes
// for the growth workload, and notes on what was skipped or why.
import type { WorkloadName } from './settings.js';

export interface Integrity {
  orderViolations: number;
  duplicates: number;
  /** Errors the system reported (pg-boss fetch collisions, deadlocks). */
  errors: number;
}

export interface Series {
  workload: WorkloadName;
  /** Stable id the goals refer to, e.g. `ordered.wharf.c8`. */
  id: string;
  label: string;
  unit: string;
  samples: number[];
  /** Summed over repetitions; only for systems whose handlers were counted. */
  integrity?: Integrity;
}

export interface SizeSnapshot {
  phase: string;
  queued: number;
  rows: number;
  relations: { relation: string; bytes: number }[];
}

export class BenchResults {
  readonly series: Series[] = [];
  readonly notes: string[] = [];
  readonly sizes: SizeSnapshot[] = [];
  /** Plans and function timings that explain a figure (EXPLAIN, pg_stat_user_functions). */
  readonly evidence: { title: string; text: string }[] = [];

  add(
    workload: WorkloadName,
    id: string,
    label: string,
    unit: string,
    sample: number,
    integrity?: Partial<Integrity>,
  ): void {
    let series = this.series.find((candidate) => candidate.id === id);
    if (!series) {
      series = { workload, id, label, unit, samples: [] };
      this.series.push(series);
    }
    series.samples.push(sample);
    if (integrity) {
      const total = series.integrity ?? { orderViolations: 0, duplicates: 0, errors: 0 };
      total.orderViolations += integrity.orderViolations ?? 0;
      total.duplicates += integrity.duplicates ?? 0;
      total.errors += integrity.errors ?? 0;
      series.integrity = total;
    }
  }

  get(id: string): Series | undefined {
    return this.series.find((series) => series.id === id);
  }

  note(text: string): void {
    this.notes.push(text);
  }
}

export type Log = (line: string) => void;
