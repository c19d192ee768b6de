// Reads one sample of the worker's Prometheus registry.
import { workerRegistry } from '../../worker/metrics.js';

export async function metricValue(name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = workerRegistry.getSingleMetric(name);
  if (!metric) throw new Error(`no metric ${name}`);
  const { values } = await metric.get();
  const sample = values.find((value) =>
    Object.entries(labels).every(([key, expected]) => String(value.labels[key]) === expected),
  );
  return sample?.value ?? 0;
}
