// The benchmark's sizes. `fullSettings` is what `npm run bench` measures;
// `smokeSettings` is the few-hundred-event run that `npm test` makes so the
// harness cannot rot. Flags and BENCH_* variables override either (bench/run.ts).

export const workloadNames = [
  'admission', 'admission-cost', 'ordered', 'unordered', 'latency', 'growth', 'queue-history', 'month-two', 'forwarding',
] as const;
export type WorkloadName = (typeof workloadNames)[number];

export interface BenchSettings {
  /** A maintenance database URL; every workload creates and drops its own databases. */
  serverUrl: string;
  repetitions: number;
  workloads: WorkloadName[];
  /** Clients calling admit / INSERT at once. */
  admissionClients: number;
  admissionEvents: number;
  /**
   * Requests through the Node receiver and the minimal receiver, at
   * admissionClients autocannon connections and at 64; their latency is
   * measured at latencyRate for latencySeconds.
   */
  receiverRequests: number;
  /**
   * The routing-scale admission case: this many GitHub App installations on
   * one source, ten per workspace, each subscribed to ten repositories.
   */
  routingInstallations: number;
  orderedEvents: number;
  orderedScopes: number;
  unorderedEvents: number;
  /** Wharf worker concurrencies in the ordered drain; the unordered drain uses the first. */
  drainConcurrencies: number[];
  latencyRate: number;
  latencySeconds: number;
  growthScopes: number;
  growthSmallRows: number;
  growthLargeRows: number;
  /**
   * Claims+completes timed at each backlog size, worker start included: at
   * least a second and a half of draining, so that the start does not set
   * the rate; below growthSmallRows, which must stay queued behind them.
   */
  growthMeasuredEvents: number;
  sustainedSeconds: number;
  /** Admissions per second during the sustained period, below the drain rate so the backlog holds. */
  sustainedRate: number;
  /** Workspaces whose handled rows fill the queue-history window (bench/workloads/queue-history.ts). */
  queueHistoryWorkspaces: number;
  /** Rows handled (DONE) within the last hour, across all those workspaces. */
  queueHistoryRows: number;
  /** Timed calls of wharf.queue_history, after the warm-up; their median is the figure. */
  queueHistoryCalls: number;
  /**
   * The month-two inbox (bench/workloads/month-two.ts): handled (DONE) rows
   * past the replay window in the large inbox (BENCH_MONTH_TWO_ROWS) and in
   * the small one it is compared with.
   */
  monthTwoRows: number;
  monthTwoSmallRows: number;
  /** Refusals in the large inbox's admission_log, dated 400 days ago. */
  monthTwoRefusals: number;
  /** Due QUEUED heads, each in a scope of its own, of an event type the claiming host does not handle. */
  monthTwoUnhandledHeads: number;
  /** Timed calls of each statement per inbox and repetition, after the warm-up; their median is the figure. */
  monthTwoCalls: number;
  /** Admits timed one after another on the large inbox without a purge running: the p99 the purge's is held against. */
  monthTwoQuietAdmits: number;
  /**
   * Forwarding (bench/workloads/forwarding.ts, issue 53): events in each
   * forwarded backlog, over forwardingScopes scopes; the in-flight bounds
   * Wharf's forwarder and the minimal forwarder are measured at; the rate
   * and length of the latency trickle.
   */
  forwardingEvents: number;
  forwardingScopes: number;
  forwardingConcurrencies: number[];
  forwardingLatencyRate: number;
  forwardingLatencySeconds: number;
  /** Longest wait for a drain to finish before the run fails. */
  drainTimeoutMs: number;
}

export const fullSettings: Omit<BenchSettings, 'serverUrl'> = {
  repetitions: 3,
  workloads: [...workloadNames],
  admissionClients: 8,
  admissionEvents: 20_000,
  receiverRequests: 20_000,
  routingInstallations: 10_000,
  orderedEvents: 20_000,
  orderedScopes: 200,
  unorderedEvents: 20_000,
  drainConcurrencies: [8, 16],
  latencyRate: 200,
  latencySeconds: 10,
  growthScopes: 10_000,
  growthSmallRows: 10_000,
  growthLargeRows: 1_000_000,
  growthMeasuredEvents: 8_000,
  sustainedSeconds: 600,
  sustainedRate: 500,
  queueHistoryWorkspaces: 1_000,
  queueHistoryRows: 1_000_000,
  queueHistoryCalls: 15,
  monthTwoRows: 1_000_000,
  monthTwoSmallRows: 1_000,
  monthTwoRefusals: 100_000,
  monthTwoUnhandledHeads: 10_000,
  monthTwoCalls: 15,
  monthTwoQuietAdmits: 2_000,
  forwardingEvents: 10_000,
  forwardingScopes: 64,
  forwardingConcurrencies: [8, 32],
  forwardingLatencyRate: 200,
  forwardingLatencySeconds: 10,
  drainTimeoutMs: 600_000,
};

export const smokeSettings: Omit<BenchSettings, 'serverUrl'> = {
  repetitions: 1,
  workloads: [...workloadNames],
  admissionClients: 8,
  admissionEvents: 300,
  receiverRequests: 200,
  routingInstallations: 100,
  orderedEvents: 300,
  orderedScopes: 20,
  unorderedEvents: 300,
  drainConcurrencies: [8, 16],
  latencyRate: 50,
  latencySeconds: 2,
  growthScopes: 100,
  growthSmallRows: 200,
  growthLargeRows: 1_000,
  growthMeasuredEvents: 100,
  sustainedSeconds: 3,
  sustainedRate: 100,
  queueHistoryWorkspaces: 10,
  queueHistoryRows: 1_000,
  queueHistoryCalls: 3,
  monthTwoRows: 20_000,
  monthTwoSmallRows: 1_000,
  monthTwoRefusals: 2_000,
  monthTwoUnhandledHeads: 200,
  monthTwoCalls: 3,
  monthTwoQuietAdmits: 200,
  forwardingEvents: 200,
  forwardingScopes: 16,
  forwardingConcurrencies: [8],
  forwardingLatencyRate: 50,
  forwardingLatencySeconds: 1,
  drainTimeoutMs: 20_000,
};
