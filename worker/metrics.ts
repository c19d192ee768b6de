// The worker's Prometheus metrics, in one registry that any HTTP server can
// serve (the `wharf worker` metrics port, or the all-in-one `start`).
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { QueueStats } from './sql/claim-lease.js';

export const workerRegistry = new Registry();

const registers = [workerRegistry];

export const claimedTotal = new Counter({
  name: 'integration_consumer_claimed_total',
  help: 'Events leased by this host',
  registers,
});

export const completedTotal = new Counter({
  name: 'integration_consumer_completed_total',
  help: 'Events completed, by outcome (handled, ignored: no handler)',
  labelNames: ['outcome'] as const,
  registers,
});

export const handledAttemptsTotal = new Counter({
  name: 'integration_consumer_handled_attempts_total',
  help: 'Attempts the events handled by this host took, all told: divided by completed_total{outcome="handled"}, the attempts per handled event',
  registers,
});

export const retryTotal = new Counter({
  name: 'integration_consumer_retry_total',
  help: 'Retries, by outcome: retried (a busy fenced transaction run again in order), transient, unknown (a failed row queued again)',
  labelNames: ['outcome'] as const,
  registers,
});

export const deadTotal = new Counter({
  name: 'integration_consumer_dead_total',
  help: 'Events that became DEAD letters, by failure kind',
  labelNames: ['kind'] as const,
  registers,
});

export const releasedTotal = new Counter({
  name: 'integration_consumer_released_total',
  help: 'Leases given back unfinished by a stopping worker',
  registers,
});

export const reapedTotal = new Counter({
  name: 'integration_consumer_reaped_total',
  help: 'Expired leases taken back by this host\'s reaper',
  registers,
});

export const leaseLostTotal = new Counter({
  name: 'integration_consumer_lease_lost_total',
  help: 'Events whose lease was gone when the worker meant to write',
  registers,
});

export const droppedTotal = new Counter({
  name: 'integration_consumer_dropped_total',
  help: 'Events dropped without a retry, by reason',
  labelNames: ['reason'] as const,
  registers,
});

export const retentionFailuresTotal = new Counter({
  name: 'integration_consumer_inbox_retention_failures_total',
  help: 'Retention runs that failed and left their rows in place',
  registers,
});

export const retentionDeletedTotal = new Counter({
  name: 'integration_consumer_inbox_retention_deleted_total',
  help: 'Rows deleted by retention: events by state, and LOG for admission log, replay audit and finished bulk replay rows',
  labelNames: ['state'] as const,
  registers,
});

export const handlerDuration = new Histogram({
  name: 'integration_consumer_handler_duration_seconds',
  help: 'Handler run time, by how the attempt ended',
  labelNames: ['outcome'] as const,
  buckets: [0.005, 0.025, 0.1, 0.25, 1, 2.5, 10, 30, 120, 600],
  registers,
});

// The queue gauges read the database when scraped, through the pool of a
// running worker of this process.
const queueStatsSources: Array<() => Promise<QueueStats>> = [];

/** Lets scrapes read queue stats through `source` until the returned function is called. */
export function addQueueStatsSource(source: () => Promise<QueueStats>): () => void {
  queueStatsSources.push(source);
  return () => {
    const index = queueStatsSources.indexOf(source);
    if (index >= 0) queueStatsSources.splice(index, 1);
  };
}

const states = ['QUEUED', 'LEASED', 'DONE', 'DEAD'] as const;
let lastStats: Promise<QueueStats | undefined> | undefined;

// Both gauges collect in the same scrape: read the database once for them.
function currentStats(): Promise<QueueStats | undefined> {
  if (!lastStats) {
    const source = queueStatsSources[0];
    lastStats = (source ? source().catch(() => undefined) : Promise.resolve(undefined)).finally(() => {
      setTimeout(() => {
        lastStats = undefined;
      }, 100).unref();
    });
  }
  return lastStats;
}

export const queueDepth = new Gauge({
  name: 'integration_consumer_queue_depth',
  help: 'Events in the inbox, by state',
  labelNames: ['state'] as const,
  registers,
  async collect() {
    const stats = await currentStats();
    if (!stats) return;
    for (const state of states) this.set({ state }, stats.depthByState[state] ?? 0);
  },
});

export const oldestDueAge = new Gauge({
  name: 'integration_consumer_oldest_due_age_seconds',
  help: 'How long the oldest claimable event has been due',
  registers,
  async collect() {
    const stats = await currentStats();
    if (stats) this.set(stats.oldestDueAge);
  },
});

export const stuckScopes = new Gauge({
  name: 'integration_consumer_stuck_scopes',
  help: 'Scopes whose head has been failing, or due and unclaimed, for longer than the stuck_after setting',
  registers,
  async collect() {
    const stats = await currentStats();
    if (stats) this.set(stats.stuckScopes);
  },
});

export const oldestStuckAge = new Gauge({
  name: 'integration_consumer_oldest_stuck_scope_age_seconds',
  help: 'How long the longest-stuck scope has been failing or waiting (0 when none is stuck)',
  registers,
  async collect() {
    const stats = await currentStats();
    if (stats) this.set(stats.oldestStuckAge);
  },
});

export const abandonedHandlers = new Gauge({
  name: 'integration_consumer_abandoned_handlers',
  help: 'Handlers past handler_timeout that have not returned yet (their attempts are closed; they hold no lease)',
  registers,
});

// Forwarding to destinations (worker/forwarding/), by destination id.

export const destinationDeliveriesTotal = new Counter({
  name: 'integration_consumer_destination_deliveries_total',
  help: 'Delivery attempts to destinations ended by this host, by destination id and outcome: handled (2xx), retried (transient: queued again), dead (permanent, or transient past transient_max_age), gone (410: the destination paused), released (given back unsent or unfinished), lease_lost (the lease was gone when the attempt was recorded)',
  labelNames: ['destination_id', 'outcome'] as const,
  registers,
});

export const destinationRequestSeconds = new Histogram({
  name: 'integration_consumer_destination_request_seconds',
  help: 'Time of one request to a destination, from the address check to the end of the (at most 1 KB) answer read, by destination id',
  labelNames: ['destination_id'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  registers,
});

export const destinationInFlight = new Gauge({
  name: 'integration_consumer_destination_in_flight',
  help: 'Deliveries this host is sending now, by destination id',
  labelNames: ['destination_id'] as const,
  registers,
});
