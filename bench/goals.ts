// The benchmark's goals, judged from one run's medians: issue 32's (the
// drain's cost per event, the HOT share, the queue history at scale), issue
// 40's month two (the same cost at any inbox size, bounded retention) and
// those of earlier issues that still apply. Ratios compare systems measured
// in the same run on the same machine.
import { judgeAdmissionGoals } from './admission-goals.js';
import { judgeForwardingGoals } from './forwarding-goals.js';
import type { BenchResults, Series, SizeSnapshot } from './results.js';
import { summarize } from './stats.js';

export type Verdict = 'met' | 'not met' | 'not measured';

export interface Goal {
  goal: string;
  verdict: Verdict;
  evidence: string;
}

export function medianOf(series: Series | undefined): number | undefined {
  return series && series.samples.length > 0 ? summarize(series.samples).median : undefined;
}

const fmt = (value: number, digits = 0) => value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

/**
 * Queue-side structures that must not bloat: the scope table, where the
 * queue's moving parts live (the event rows' own versions show in the heap
 * per row).
 */
export const hotRelations = ['scope', 'scope_pkey', 'ix_scope_claim'];

export function hotBytes(snapshot: SizeSnapshot): number {
  return snapshot.relations.filter((r) => hotRelations.includes(r.relation)).reduce((sum, r) => sum + r.bytes, 0);
}

export function heapBytesPerRow(snapshot: SizeSnapshot): number {
  const heap = snapshot.relations.find((r) => r.relation === 'provider_event')?.bytes ?? 0;
  return snapshot.rows === 0 ? 0 : heap / snapshot.rows;
}

const notMeasured = (goal: string, evidence = ''): Goal => ({ goal, verdict: 'not measured', evidence });

/** The concurrencies issue 32 judges the ordered drain at. */
export const orderedGoalConcurrencies = [8, 16];

/** The concurrency of a drain series (`ordered.wharf_lq.c8` and its `.cpu_postgres`, `.hot_share`). */
const concurrencyOf = (id: string) => /\.c(\d+)(\.|$)/.exec(id)?.[1];

/** The drains compared like for like: Wharf's local queue against graphile-worker's, per concurrency and unordered. */
function drainPairs(results: BenchResults): { name: string; wharf: string; rival: string }[] {
  const ordered = [...new Set(results.series.map((s) => s.id).filter((id) => id.startsWith('ordered.wharf_lq.c'))
    .map(concurrencyOf).filter((c): c is string => c !== undefined))]
    .sort((a, b) => Number(a) - Number(b))
    .map((c) => ({ name: `ordered, concurrency ${c}`, wharf: `ordered.wharf_lq.c${c}`, rival: `ordered.graphile_lq.c${c}` }));
  return [...ordered, { name: 'unordered', wharf: 'unordered.wharf_lq', rival: 'unordered.graphile_lq' }];
}

/** Ordered drain: Wharf's local queue against graphile-worker's at each of the concurrencies, and its integrity. */
function orderedGoal(results: BenchResults): Goal {
  const goal = `ordered drain ≥ 2× graphile-worker 0.18 (localQueue 100) at concurrency ${orderedGoalConcurrencies.join(' and ')}, ` +
    '0 order violations, 0 duplicates';
  const measured = orderedGoalConcurrencies
    .map((c) => ({ c, wharf: medianOf(results.get(`ordered.wharf_lq.c${c}`)), rival: medianOf(results.get(`ordered.graphile_lq.c${c}`)) }))
    .filter((pair): pair is { c: number; wharf: number; rival: number } => pair.wharf !== undefined && pair.rival !== undefined);
  if (measured.length === 0) return notMeasured(goal);
  const missing = orderedGoalConcurrencies.filter((c) => !measured.some((pair) => pair.c === c));
  const wharfSeries = results.series.filter((s) => s.id.startsWith('ordered.wharf') && s.integrity);
  const violations = wharfSeries.reduce((n, s) => n + (s.integrity?.orderViolations ?? 0), 0);
  const duplicates = wharfSeries.reduce((n, s) => n + (s.integrity?.duplicates ?? 0), 0);
  const failed = measured.some((pair) => pair.wharf < 2 * pair.rival) || violations > 0 || duplicates > 0;
  return {
    goal,
    // A concurrency not measured leaves the goal open unless a measured one already failed it.
    verdict: failed ? 'not met' : missing.length > 0 ? 'not measured' : 'met',
    evidence: measured.map((pair) => `concurrency ${pair.c}: ${fmt(pair.wharf)}/s vs ${fmt(pair.rival)}/s = ${fmt(pair.wharf / pair.rival, 2)}×`)
      .join('; ') +
      `; Wharf: ${violations} order violations, ${duplicates} duplicates` +
      (missing.length > 0 ? `; concurrency ${missing.join(' and ')} not measured` : ''),
  };
}

function unorderedGoal(results: BenchResults): Goal {
  const goal = 'unordered drain ≥ 1.0× graphile-worker 0.18 (localQueue 100)';
  const wharf = medianOf(results.get('unordered.wharf_lq'));
  const rival = medianOf(results.get('unordered.graphile_lq'));
  if (wharf === undefined || rival === undefined) return notMeasured(goal);
  const duplicates = results.series.filter((s) => s.id.startsWith('unordered.wharf') && s.integrity)
    .reduce((n, s) => n + (s.integrity?.duplicates ?? 0), 0);
  const plain = medianOf(results.get('unordered.plain'));
  return {
    goal,
    verdict: wharf >= rival && duplicates === 0 ? 'met' : 'not met',
    evidence: `${fmt(wharf)}/s vs ${fmt(rival)}/s = ${fmt(wharf / rival, 2)}×; Wharf: ${duplicates} duplicates` +
      (plain !== undefined ? ` (plain SKIP LOCKED loop ${fmt(plain)}/s)` : ''),
  };
}

/** PostgreSQL CPU per drained event, Wharf against graphile-worker, in every drain where both were metered. */
function drainCpuGoal(results: BenchResults): Goal {
  const goal = "PostgreSQL CPU per drained event ≤ 0.8× graphile-worker 0.18's (localQueue 100), in the ordered and unordered drains";
  const cpu = (id: string, where: 'postgres' | 'node') => medianOf(results.get(`${id}.cpu_${where}`));
  const pairs = drainPairs(results)
    .map((pair) => ({ ...pair, wharfCpu: cpu(pair.wharf, 'postgres'), rivalCpu: cpu(pair.rival, 'postgres') }))
    .filter((pair): pair is typeof pair & { wharfCpu: number; rivalCpu: number } =>
      pair.wharfCpu !== undefined && pair.rivalCpu !== undefined);
  if (pairs.length === 0) {
    return notMeasured(goal, results.get('unordered.wharf_lq.cpu_node') || results.get('ordered.wharf_lq.c8.cpu_node')
      ? "the PostgreSQL backends' CPU could not be read (server not on this machine)"
      : '');
  }
  const node = (id: string) => {
    const micros = cpu(id, 'node');
    return micros === undefined ? '' : ` + Node ${fmt(micros)} µs`;
  };
  return {
    goal,
    verdict: pairs.every((pair) => pair.wharfCpu <= 0.8 * pair.rivalCpu) ? 'met' : 'not met',
    evidence: pairs.map((pair) => `${pair.name}: Wharf ${fmt(pair.wharfCpu)} µs${node(pair.wharf)} vs graphile-worker ` +
      `${fmt(pair.rivalCpu)} µs${node(pair.rival)} = ${fmt(pair.wharfCpu / pair.rivalCpu, 2)}×`).join('; '),
  };
}

/** The HOT share of the event table's updates in every Wharf drain (bench/drains.ts counts them). */
function hotShareGoal(results: BenchResults): Goal {
  const goal = "HOT share of the event table's updates during each Wharf drain ≥ 90 %";
  const shares = results.series.filter((s) => /^(ordered|unordered)\.wharf/.test(s.id) && s.id.endsWith('.hot_share'))
    .map((series) => ({ series, share: medianOf(series) }))
    .filter((entry): entry is { series: Series; share: number } => entry.share !== undefined);
  if (shares.length === 0) return notMeasured(goal);
  return {
    goal,
    verdict: shares.every((entry) => entry.share >= 90) ? 'met' : 'not met',
    evidence: shares.map((entry) => `${entry.series.label.replace(/: HOT share.*$/, '')} (${entry.series.workload}): ${fmt(entry.share, 1)} %`)
      .join('; '),
  };
}

function growthGoal(results: BenchResults): Goal {
  const goal = 'claim+complete with 1,000,000 queued rows ≥ 0.8× the rate with 10,000 (the full run\'s growth backlogs)';
  const small = results.get('growth.small');
  const large = results.get('growth.large');
  const smallRate = medianOf(small);
  const largeRate = medianOf(large);
  if (smallRate === undefined || largeRate === undefined) return notMeasured(goal);
  return {
    goal,
    verdict: largeRate >= 0.8 * smallRate ? 'met' : 'not met',
    evidence: `${large?.label}: ${fmt(largeRate)}/s vs ${small?.label}: ${fmt(smallRate)}/s = ${fmt(largeRate / smallRate, 2)}×`,
  };
}

function latencyGoal(results: BenchResults): Goal {
  const goal = "latency at 200/s (the full run's rate) into idle workers: p50 and p99 no worse than graphile-worker 0.18 (localQueue 100)";
  const p50 = medianOf(results.get('latency.wharf.p50'));
  const p99 = medianOf(results.get('latency.wharf.p99'));
  const rivalP50 = medianOf(results.get('latency.graphile_lq.p50'));
  const rivalP99 = medianOf(results.get('latency.graphile_lq.p99'));
  if (p50 === undefined || p99 === undefined || rivalP50 === undefined || rivalP99 === undefined) return notMeasured(goal);
  return {
    goal,
    verdict: p50 <= rivalP50 && p99 <= rivalP99 ? 'met' : 'not met',
    evidence: `Wharf p50 ${fmt(p50, 2)} ms, p99 ${fmt(p99, 2)} ms vs graphile-worker p50 ${fmt(rivalP50, 2)} ms, ` +
      `p99 ${fmt(rivalP99, 2)} ms (ratios ${fmt(p50 / rivalP50, 2)}× and ${fmt(p99 / rivalP99, 2)}×)`,
  };
}

function tableSizeGoal(results: BenchResults): Goal {
  const goal = 'table size stable under sustained load (queue-side structures after ≤ 1.25× halfway; heap bytes per stored row after ≤ 1.1× before)';
  const [before, halfway, after] = ['before', 'halfway', 'after'].map((phase) => results.sizes.find((s) => s.phase === phase));
  if (!before || !halfway || !after) return notMeasured(goal);
  if (after.queued > halfway.queued + 1_000) {
    // The drain never caught up with the admissions: the queue's indexes
    // hold that backlog, and comparing them would measure it, not bloat.
    return notMeasured(goal, `the drain fell behind: ${fmt(after.queued)} queued after, ${fmt(halfway.queued)} halfway`);
  }
  const hotGrowth = hotBytes(after) / Math.max(1, hotBytes(halfway));
  const perRowGrowth = heapBytesPerRow(after) / Math.max(1, heapBytesPerRow(before));
  return {
    goal,
    verdict: hotGrowth <= 1.25 && perRowGrowth <= 1.1 ? 'met' : 'not met',
    evidence: `queue-side structures ${fmt(hotBytes(halfway) / 1024)} KiB → ${fmt(hotBytes(after) / 1024)} KiB (${fmt(hotGrowth, 2)}×); ` +
      `heap ${fmt(heapBytesPerRow(before))} → ${fmt(heapBytesPerRow(after))} bytes per row (${fmt(perRowGrowth, 2)}×)`,
  };
}

/**
 * The console's queue history for one workspace among many. 50 ms: the
 * console draws the chart on every page view and refresh, behind an HTTP
 * hop and the page's other calls, and a page feels immediate within about
 * 100 ms. Reading its own rows, the call visits about one heap page per row
 * (the workspaces' rows interleave), about a thousand pages for an
 * ordinary workspace's hour: 2.5 ms for 1,003 rows and 1,012 buffers in a
 * run of this workload on the loaded 2-core machine. Reading the window of
 * every tenant is a thousand times the rows, seconds at that pace. So the
 * budget leaves room for a busier workspace and a noisy machine, and breaks
 * when the query reads other tenants' rows again.
 */
export const queueHistoryBudgetMs = 50;
/** The scale the goal is stated at (issue 32). */
export const queueHistoryScale = { workspaces: 1_000, windowRows: 1_000_000 };

function queueHistoryGoal(results: BenchResults): Goal {
  const goal = `queue history of one workspace among ${fmt(queueHistoryScale.workspaces)} with ${fmt(queueHistoryScale.windowRows)} ` +
    `rows handled in the window ≤ ${queueHistoryBudgetMs} ms (median of warm calls)`;
  const time = medianOf(results.get('queue_history.time'));
  if (time === undefined) return notMeasured(goal);
  const workspaces = medianOf(results.get('queue_history.workspaces')) ?? 0;
  const window = medianOf(results.get('queue_history.window_rows')) ?? 0;
  const own = medianOf(results.get('queue_history.own_rows'));
  const read = medianOf(results.get('queue_history.rows_read'));
  const buffers = medianOf(results.get('queue_history.buffers'));
  const reads = read === undefined
    ? ''
    : `; read ${fmt(read)} rows of provider_event` +
      (own !== undefined ? ` (${fmt(read / Math.max(1, own), 2)}× its own ${fmt(own)} handled in the window` : ' (') +
      `; ${fmt((100 * read) / Math.max(1, window), 2)} % of the window's ${fmt(window)})` +
      (buffers !== undefined ? `, ${fmt(buffers)} buffers` : '');
  const evidence = `${fmt(time, 2)} ms = ${fmt(time / queueHistoryBudgetMs, 2)}× the ${queueHistoryBudgetMs} ms budget, ` +
    `${fmt(workspaces)} workspaces, ${fmt(window)} rows handled in the window${reads}`;
  // A smaller inbox says nothing about this scale.
  if (workspaces < queueHistoryScale.workspaces || window < queueHistoryScale.windowRows) {
    return notMeasured(goal, `measured at a smaller scale only: ${evidence}`);
  }
  return { goal, verdict: time <= queueHistoryBudgetMs ? 'met' : 'not met', evidence };
}

/**
 * Issue 40's month two: the statements on a hot or periodic path, timed on
 * an inbox of many handled rows and on one of a thousand
 * (bench/workloads/month-two.ts). Each must cost about the same at both
 * sizes: an index lookup or a bounded read, not a scan of the inbox.
 */
export const monthTwoFigures = [
  { id: 'admit_repeat', label: 'admit, repeated delivery', name: "a repeated delivery's wharf.admit (the same delivery key again: a duplicate)" },
  { id: 'admit_new', label: 'admit, new delivery', name: "a new delivery's wharf.admit" },
  { id: 'admit_many32_repeat', label: 'admit_many, 32 repeated deliveries', name: 'wharf.admit_many of 32 repeated deliveries' },
  { id: 'claim', label: "claim(…, 1, ['github:issues'])", name: "wharf.claim(…, 1, ['github:issues']) of a fresh event, past the due heads of a type it does not handle" },
  { id: 'complete', label: 'complete (complete_many)', name: "that event's completion (wharf.complete_many, as the worker's batcher calls it)" },
  { id: 'queue_stats', label: 'queue_stats()', name: 'wharf.queue_stats() (every host, every metrics refresh)' },
  { id: 'events_page', label: "console's first events page", name: "the console's first events page (wharf.list_events)" },
] as const;
export type MonthTwoFigure = (typeof monthTwoFigures)[number]['id'];

/** Each month-two figure on the large inbox ≤ this × its figure on the small one (issue 40). */
export const monthTwoSizeRatio = 1.5;
/** The retention loop's longest single purge transaction (issue 40, item 4: it must not hold the cleanup horizon). */
export const monthTwoPurgeTransactionBudgetMs = 1_000;
/** Admits' p99 while the retention loop purges ≤ this × their p99 without it. */
export const monthTwoPurgeP99Ratio = 2;
/** The scale the month-two goals are stated at (issue 40): a smaller large inbox says nothing about them. */
export const monthTwoScale = { rows: 1_000_000, refusals: 100_000, unhandledHeads: 10_000 };

function monthTwoGoals(results: BenchResults): Goal[] {
  const rows = medianOf(results.get('month_two.large_rows'));
  const smallRows = medianOf(results.get('month_two.small_rows'));
  const atScale = rows !== undefined && rows >= monthTwoScale.rows;
  const scaled = (goal: string, evidence: string, met: boolean): Goal => atScale
    ? { goal, verdict: met ? 'met' : 'not met', evidence }
    : notMeasured(goal, `measured at a smaller scale only (${fmt(rows ?? 0)} rows): ${evidence}`);
  const inboxes = `an inbox of ${fmt(monthTwoScale.rows)} handled rows (${fmt(monthTwoScale.refusals)} old refusals, ` +
    `${fmt(monthTwoScale.unhandledHeads)} due heads of an unhandled type) against one of ${fmt(smallRows ?? 1_000)}`;
  const goals: Goal[] = monthTwoFigures.map(({ id, name }) => {
    const goal = `${name}: on ${inboxes}, ≤ ${monthTwoSizeRatio}× (median)`;
    const large = medianOf(results.get(`month_two.${id}.large`));
    const small = medianOf(results.get(`month_two.${id}.small`));
    if (large === undefined || small === undefined) return notMeasured(goal);
    return scaled(goal, `${fmt(large, 2)} ms vs ${fmt(small, 2)} ms = ${fmt(large / small, 2)}×`, large <= monthTwoSizeRatio * small);
  });

  const purgeGoal = `the retention loop's longest purge transaction with ${fmt(monthTwoScale.rows)} rows past the replay window ` +
    `≤ ${fmt(monthTwoPurgeTransactionBudgetMs)} ms`;
  const longest = medianOf(results.get('month_two.purge.longest'));
  if (longest === undefined) {
    goals.push(notMeasured(purgeGoal));
  } else {
    const calls = medianOf(results.get('month_two.purge.calls')) ?? 0;
    const transactions = medianOf(results.get('month_two.purge.transactions')) ?? 0;
    const total = medianOf(results.get('month_two.purge.total')) ?? 0;
    const deleted = medianOf(results.get('month_two.purge.events_deleted')) ?? 0;
    goals.push(scaled(purgeGoal, `longest ${fmt(longest)} ms; ${fmt(calls)} calls, ${fmt(transactions)} transactions, in ${fmt(total)} ms ` +
      `deleted ${fmt(deleted)} event rows`,
      longest <= monthTwoPurgeTransactionBudgetMs));
  }

  const p99Goal = `admits' p99 on another connection while the retention loop purges ≤ ${monthTwoPurgeP99Ratio}× their p99 without it`;
  const beside = medianOf(results.get('month_two.admit_p99.beside_purge'));
  const quiet = medianOf(results.get('month_two.admit_p99.quiet'));
  if (beside === undefined || quiet === undefined) {
    goals.push(notMeasured(p99Goal));
  } else {
    const count = medianOf(results.get('month_two.admits_beside_purge')) ?? 0;
    goals.push(scaled(p99Goal, `${fmt(beside, 2)} ms (${fmt(count)} admits) vs ${fmt(quiet, 2)} ms = ${fmt(beside / quiet, 2)}×`,
      beside <= monthTwoPurgeP99Ratio * quiet));
  }

  // Any scale: a refusal 400 days old is past any retention the log can have.
  const logGoal = 'admission_log has a retention: the retention loop leaves none of the refusals dated 400 days ago (item 4)';
  const left = medianOf(results.get('month_two.old_refusals_left'));
  const loaded = medianOf(results.get('month_two.old_refusals'));
  goals.push(left === undefined
    ? notMeasured(logGoal)
    : { goal: logGoal, verdict: left === 0 ? 'met' : 'not met', evidence: `${fmt(left)} of ${fmt(loaded ?? 0)} left` });
  return goals;
}

/** The CPU split of the receiver's delivery against the direct call's, where it was measured. */
function receiverCpuEvidence(results: BenchResults): string {
  const micros = (id: string) => medianOf(results.get(`admission.${id}`));
  const [receiver, load, postgres] = ['receiver_cpu.receiver', 'receiver_cpu.load', 'receiver_cpu.postgres'].map(micros);
  const [directLoad, directPostgres] = ['direct_cpu.load', 'direct_cpu.postgres'].map(micros);
  if (receiver === undefined || postgres === undefined || directPostgres === undefined) return '';
  return `; CPU per delivery: receiver process ${fmt(receiver)} µs + autocannon ${fmt(load ?? 0)} µs + PostgreSQL ${fmt(postgres)} µs, ` +
    `against pg client ${fmt(directLoad ?? 0)} µs + PostgreSQL ${fmt(directPostgres)} µs for the direct call`;
}

/**
 * Issue 18's admission goals, which issue 32 does not touch: wharf.admit
 * against the plain INSERT and the rivals' enqueue calls, the Node receiver
 * against the direct call.
 */
export function judgeAdmissionRateGoals(results: BenchResults): Goal[] {
  const goals: Goal[] = [];
  const admissionGoal = 'admission ≥ 0.5× the plain single-row INSERT';
  const admit = medianOf(results.get('admission.wharf'));
  const insert = medianOf(results.get('admission.plain'));
  goals.push(admit !== undefined && insert !== undefined
    ? {
        goal: admissionGoal,
        verdict: admit >= 0.5 * insert ? 'met' : 'not met',
        evidence: `${fmt(admit)}/s vs ${fmt(insert)}/s = ${fmt(admit / insert, 2)}×`,
      }
    : notMeasured(admissionGoal));

  const rivalsGoal = "admission ahead of graphile-worker's add_job and pg-boss's send with the same clients";
  const rivalEnqueues = ['admission.graphile_add_job', 'admission.graphile_add_job_queue', 'admission.pgboss_send', 'admission.pgboss_send_fifo']
    .map((id) => results.get(id))
    .filter((series): series is Series => series !== undefined && series.samples.length > 0);
  if (admit !== undefined && rivalEnqueues.length > 0) {
    const fastest = Math.max(...rivalEnqueues.map((series) => medianOf(series) ?? 0));
    goals.push({
      goal: rivalsGoal,
      verdict: admit > fastest ? 'met' : 'not met',
      evidence: `wharf.admit ${fmt(admit)}/s vs ` +
        rivalEnqueues.map((series) => `${series.label} ${fmt(medianOf(series) ?? 0)}/s (${fmt(admit / (medianOf(series) ?? 1), 2)}×)`).join(', '),
    });
  } else {
    goals.push(notMeasured(rivalsGoal));
  }

  const receiverGoal = 'Node receiver ≥ 0.7× the direct admit call';
  const receiver = medianOf(results.get('admission.receiver'));
  const direct = medianOf(results.get('admission.receiver_direct'));
  goals.push(receiver !== undefined && direct !== undefined
    ? {
        goal: receiverGoal,
        verdict: receiver >= 0.7 * direct ? 'met' : 'not met',
        evidence: `${fmt(receiver)} req/s vs ${fmt(direct)}/s = ${fmt(receiver / direct, 2)}×` + receiverCpuEvidence(results),
      }
    : notMeasured(receiverGoal, 'receiver not benchmarked in this run (see notes)'));
  return goals;
}

/**
 * The admission goals, the one place they are chosen: the direct call's rate
 * against the plain INSERT and the rivals' enqueue calls (here), then
 * admit_many, the coalescing receiver and routing at scale
 * (bench/admission-goals.ts).
 */
const judgeAdmission = (results: BenchResults): Goal[] =>
  [...judgeAdmissionRateGoals(results), ...judgeAdmissionGoals(results)];

/** Every goal of the run: issue 32's first, then issue 40's month two, then the admission goals, then issue 53's forwarding. */
export function judgeGoals(results: BenchResults): Goal[] {
  return [
    orderedGoal(results),
    unorderedGoal(results),
    drainCpuGoal(results),
    hotShareGoal(results),
    growthGoal(results),
    latencyGoal(results),
    tableSizeGoal(results),
    queueHistoryGoal(results),
    ...monthTwoGoals(results),
    ...judgeAdmission(results),
    ...judgeForwardingGoals(results),
  ];
}
