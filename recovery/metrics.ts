// The sweeper's Prometheus metrics, by App, on the registry the host serves
// (the worker's, for `wharf worker --sweep-app`) or prom-client's default.
// Each registry gets one set, however many sweepers use it.
import { Counter, Gauge, register as defaultRegistry, type Registry } from 'prom-client';

export interface RedeliveryMetrics {
  /** Deliveries found failed in a sweep's window, once per GUID and sweep. */
  foundFailed: Counter<'app'>;
  /** Redeliveries GitHub accepted. */
  redelivered: Counter<'app'>;
  /** Failed deliveries that the inbox had stored all the same (a late original, or an earlier redelivery). */
  alreadyStored: Counter<'app'>;
  /** Errors, by kind: config, unauthorized, rate-limited, unavailable, unreachable, rejected, database, lease-lost, gave-up. */
  errors: Counter<'app' | 'kind'>;
  /** When the App's last sweep reached the end of its window (any host), in Unix seconds. */
  lastSuccess: Gauge<'app'>;
}

const names = {
  foundFailed: 'webhook_redelivery_found_failed_total',
  redelivered: 'webhook_redelivery_redelivered_total',
  alreadyStored: 'webhook_redelivery_already_stored_total',
  errors: 'webhook_redelivery_errors_total',
  lastSuccess: 'webhook_redelivery_last_success_timestamp_seconds',
} as const;

const byRegistry = new WeakMap<Registry, RedeliveryMetrics>();

export function redeliveryMetrics(registry: Registry = defaultRegistry): RedeliveryMetrics {
  const known = byRegistry.get(registry);
  if (known) return known;
  const registers = [registry];
  const metrics: RedeliveryMetrics = {
    foundFailed: new Counter({
      name: names.foundFailed, help: 'GitHub deliveries found failed by the redelivery sweeper', labelNames: ['app'], registers,
    }),
    redelivered: new Counter({
      name: names.redelivered, help: 'Redeliveries the sweeper asked for and GitHub accepted', labelNames: ['app'], registers,
    }),
    alreadyStored: new Counter({
      name: names.alreadyStored, help: 'Failed GitHub deliveries the inbox had stored all the same', labelNames: ['app'], registers,
    }),
    errors: new Counter({
      name: names.errors, help: 'Redelivery sweeper errors, by kind', labelNames: ['app', 'kind'], registers,
    }),
    lastSuccess: new Gauge({
      name: names.lastSuccess, help: 'When the last redelivery sweep of the App completed (any host), Unix seconds',
      labelNames: ['app'], registers,
    }),
  };
  byRegistry.set(registry, metrics);
  return metrics;
}
