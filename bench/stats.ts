// Summaries of repeated measurements: medians with their spread, and
// percentiles of one latency sample.

export interface Summary {
  median: number;
  min: number;
  max: number;
  /** (max - min) / median: how far the repetitions disagree. */
  relativeSpread: number;
  samples: number[];
}

export function summarize(samples: readonly number[]): Summary {
  if (samples.length === 0) throw new Error('summarize: no samples');
  const sorted = [...samples].sort((a, b) => a - b);
  const median = percentile(sorted, 50);
  const min = sorted[0] ?? 0;
  const max = sorted[sorted.length - 1] ?? 0;
  return { median, min, max, relativeSpread: median === 0 ? 0 : (max - min) / median, samples: [...samples] };
}

/** Percentile by linear interpolation; `sorted` must be ascending. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = (p / 100) * (sorted.length - 1);
  const low = Math.floor(rank);
  const high = Math.ceil(rank);
  const lowValue = sorted[low] ?? 0;
  const highValue = sorted[high] ?? lowValue;
  return lowValue + (highValue - lowValue) * (rank - low);
}

export interface LatencySummary {
  p50: number;
  p90: number;
  p99: number;
  max: number;
  count: number;
}

export function latencySummary(values: readonly number[]): LatencySummary {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    max: sorted[sorted.length - 1] ?? Number.NaN,
    count: sorted.length,
  };
}
