// Renders a run as the console summary and as bench/RESULTS.md.
import type { Environment } from './environment.js';
import { heapBytesPerRow, hotBytes, judgeGoals, medianOf } from './goals.js';
import type { BenchRun } from './harness.js';
import type { Series } from './results.js';
import { summarize } from './stats.js';
import type { WorkloadName } from './settings.js';
import { graphileLocalQueuePreset } from './systems/graphile.js';
import { pgBossDescription } from './systems/pgboss.js';
import { wharfConsumerKind } from './systems/wharf-consumer.js';

const titles: Record<WorkloadName, string> = {
  admission: '1. Admission',
  'admission-cost': '1b. The cost of one admission, interleaved with a plain INSERT',
  ordered: '2. Ordered drain',
  unordered: '3. Unordered drain',
  latency: '4. Latency (admit commit → handler start)',
  growth: '5. Growth',
  'queue-history': '6. Queue history at scale',
  'month-two': '7. Month two: a large inbox against a small one',
  forwarding: '8. Forwarding to an application over HTTP',
};

/**
 * The series a workload's ratios are taken against: the plain INSERT for
 * admission, graphile-worker 0.18 with its local queue (issue 18's strongest
 * rival) for the drains, at the row's own concurrency in the ordered drain.
 */
function referenceOf(run: BenchRun, workload: WorkloadName, series?: Series): Series | undefined {
  const { results } = run;
  switch (workload) {
    case 'admission': return results.get('admission.plain');
    case 'admission-cost': return results.get('admission_cost.insert');
    case 'unordered': return results.get('unordered.graphile_lq');
    case 'growth': return results.get('growth.small');
    case 'ordered': {
      const concurrency = series ? /\.c(\d+)$/.exec(series.id)?.[1] : undefined;
      if (concurrency) return results.get(`ordered.graphile_lq.c${concurrency}`);
      return results.series.find((s) => s.id.startsWith('ordered.graphile_lq.'));
    }
    // Each figure on the large inbox against the same figure on the small one.
    case 'month-two': return series?.id.endsWith('.large') ? results.get(series.id.replace(/\.large$/, '.small')) : undefined;
    // Each forwarding rate against the minimal forwarder at the same in-flight bound.
    case 'forwarding': {
      // The handlers' drain is there for its CPU per event, not a rate to compare.
      const concurrency = series && !series.id.startsWith('forwarding.handlers.') ? /\.c(\d+)$/.exec(series.id)?.[1] : undefined;
      return concurrency ? results.get(`forwarding.minimal.c${concurrency}`) : undefined;
    }
    case 'latency':
    case 'queue-history': return undefined;
  }
}

function referenceText(run: BenchRun, workload: WorkloadName): string | undefined {
  if (workload === 'month-two') return 'the same statement on the small inbox';
  if (workload === 'forwarding') {
    return run.results.series.some((s) => s.id.startsWith('forwarding.minimal.'))
      ? 'the minimal forwarder (SKIP LOCKED claim, fetch, UPDATE) at the same in-flight bound'
      : undefined;
  }
  if (workload === 'ordered') {
    return run.results.series.some((s) => s.id.startsWith('ordered.graphile_lq.'))
      ? 'graphile-worker queueName per key, localQueue 100, at the same concurrency'
      : undefined;
  }
  return referenceOf(run, workload)?.label;
}

const num = (value: number, digits = 0) =>
  Number.isFinite(value) ? value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }) : '—';

/** Rates (events/s, requests/s) have ratios; times and CPU figures do not, except month two's large inbox against its small one. */
const hasRatio = (workload: WorkloadName, unit: string) => unit.endsWith('/s') || workload === 'month-two';

interface Row {
  label: string;
  unit: string;
  median: string;
  range: string;
  spread: string;
  ratio: string;
  integrity: string;
}

function rowsOf(run: BenchRun, workload: WorkloadName): Row[] {
  return run.results.series.filter((s) => s.workload === workload).map((series) => {
    const referenceMedian = medianOf(referenceOf(run, workload, series));
    const summary = summarize(series.samples);
    const digits = series.unit === 'ms' ? 2 : series.unit === '%' ? 1 : 0;
    const integrity = series.integrity;
    return {
      label: series.label,
      unit: series.unit,
      median: num(summary.median, digits),
      range: `${num(summary.min, digits)}–${num(summary.max, digits)}`,
      spread: `${num(summary.relativeSpread * 100, 0)} %`,
      ratio: referenceMedian && hasRatio(workload, series.unit) ? `${num(summary.median / referenceMedian, 2)}×` : '',
      integrity: integrity
        ? `${integrity.orderViolations} order violations, ${integrity.duplicates} duplicates` +
          (integrity.errors ? `, ${integrity.errors} errors` : '')
        : '',
    };
  });
}

export function renderConsole(run: BenchRun): string {
  const lines: string[] = [];
  for (const workload of run.settings.workloads) {
    const reference = referenceText(run, workload);
    lines.push('', `${titles[workload]}${reference ? ` (ratios against: ${reference})` : ''}`);
    for (const row of rowsOf(run, workload)) {
      lines.push(`  ${row.label.padEnd(72)} ${row.median.padStart(9)} ${row.unit.padEnd(10)} ` +
        `[${row.range}] ${row.ratio.padStart(7)} ${row.integrity}`);
    }
  }
  lines.push('', 'Goals');
  for (const goal of judgeGoals(run.results)) lines.push(`  [${goal.verdict}] ${goal.goal}: ${goal.evidence}`);
  for (const note of run.results.notes) lines.push(`  note: ${note}`);
  return lines.join('\n');
}

export function renderMarkdown(run: BenchRun, environment: Environment): string {
  const { settings, results } = run;
  const out: string[] = [];
  out.push('# Wharf benchmark results', '');
  out.push(`Run ${run.startedAt.toISOString()} → ${run.finishedAt.toISOString()} with \`npm run bench\`.`, '');
  out.push('## Setup', '');
  out.push(`- Machine: ${environment.cpus}, ${environment.memory} RAM, ${environment.platform}`);
  out.push(`- Node ${environment.node}; PostgreSQL ${environment.postgres} on the same machine ` +
    `(${Object.entries(environment.serverSettings).filter(([k]) => k !== 'server_version').map(([k, v]) => `${k}=${v || '(empty)'}`).join(', ')})`);
  out.push(`- Packages: ${Object.entries(environment.packages).map(([k, v]) => `${k} ${v}`).join(', ')}`);
  out.push(`- Wharf consumer: ${wharfConsumerKind}`);
  out.push(`- graphile-worker ${environment.packages['graphile-worker'] ?? '?'}: \`run()\` with a task list and our own \`pg.Pool\`, ` +
    `\`concurrency\` = the workload's concurrency; jobs loaded with \`graphile_worker.add_jobs\` (a \`run_at\` per job in seq order), ` +
    `ordered = one \`queue_name\` per key. Two configurations: **localQueue** = \`preset: ${JSON.stringify(graphileLocalQueuePreset)}\` ` +
    '(its fastest configuration that keeps per-queue order; the strongest rival, which the ratios use), and **no localQueue** (the defaults).');
  out.push(`- pg-boss ${environment.packages['pg-boss'] ?? '?'}: one \`work()\` per queue with \`localConcurrency\` = the workload's concurrency, ` +
    '`pollingIntervalSeconds: 0.5` (its minimum), batch handlers; jobs loaded with `insert` (ids increasing with seq). ' +
    `Ordered: ${pgBossDescription('ordered', { scopes: settings.orderedScopes, concurrency: settings.drainConcurrencies[0] ?? 8 })} ` +
    '(its only policy that promises per-key order); ' +
    `unordered: ${pgBossDescription('unordered', { scopes: settings.unorderedEvents, concurrency: settings.drainConcurrencies[0] ?? 8 })}; ` +
    `latency: ${pgBossDescription('latency', { scopes: settings.orderedScopes, concurrency: settings.drainConcurrencies[0] ?? 8 })} ` +
    '(`useListenNotify: true`). Admission calls `send` from the same number of clients as `wharf.admit`, and graphile-worker\'s ' +
    '`graphile_worker.add_job` likewise.');
  out.push('- Payload: a GitHub-push-shaped JSON object of about 2 KB; handlers are no-ops that record key and sequence.');
  out.push("- HOT share of a Wharf drain: `n_tup_hot_upd / n_tup_upd` of `wharf.provider_event` (pg_stat_user_tables), the " +
    "difference between before the consumer started and after every one of its sessions had left pg_stat_activity (a backend " +
    'flushes its statistics as it exits), so every claim and completion of the drain is counted. CPU per event: the database\'s ' +
    'backends (from /proc) and this process, over the timed drain.');
  out.push(`- Queue history: ${settings.queueHistoryWorkspaces.toLocaleString('en-US')} workspaces with ` +
    `${settings.queueHistoryRows.toLocaleString('en-US')} rows handled (DONE) in the last hour between them, loaded set-based into ` +
    '`wharf.provider_event` in arrival order with the workspaces taking turns (plus one DEAD row in 1,001 and two QUEUED rows per ' +
    'workspace), vacuumed and analyzed; `wharf.queue_history(<one workspace>, 1)` timed warm from one session, the median of ' +
    `${settings.queueHistoryCalls} calls; the rows it read from its plan (auto_explain, ANALYZE, BUFFERS).`);
  out.push(`- Month two (issue 40): two inboxes, each in a database of its own on the same server, loaded set-based: a small one of ` +
    `${settings.monthTwoSmallRows.toLocaleString('en-US')} handled rows and a large one of ${settings.monthTwoRows.toLocaleString('en-US')} ` +
    '(DONE, arrived over the 26 days before the replay window, in turn over four workspaces and up to 10,000 repositories), ' +
    `${settings.monthTwoRefusals.toLocaleString('en-US')} admission_log refusals dated 400 days ago and ` +
    `${settings.monthTwoUnhandledHeads.toLocaleString('en-US')} due \`push\` heads, each in a scope of its own, that the claiming host ` +
    "(`['github:issues']`) does not handle; vacuumed and analyzed. Each statement is timed warm from one session, the median of " +
    `${settings.monthTwoCalls} calls per inbox and repetition, the inboxes taking turns. The purge runs as the worker's retention ` +
    "loop runs it (`purgeExpiredEvents`, again until a call does nothing), each call timed, while another connection admits one " +
    `delivery after another; their p99 is held against that of ${settings.monthTwoQuietAdmits.toLocaleString('en-US')} admits ` +
    'just before, without the purge. The purge runs once: it consumes its rows.');
  out.push(`- Settings: ${Object.entries(settings).filter(([k]) => k !== 'serverUrl')
    .map(([k, v]) => `${k}=${Array.isArray(v) ? v.join('/') : String(v)}`).join(', ')}`);
  out.push('- Each system runs in a database of its own, created and dropped per repetition, on the same server in the same run. ' +
    'Figures are medians over the repetitions; the range is min–max; spread = (max − min) / median. ' +
    'Order violations and duplicates are summed over every repetition.', '');

  out.push('## Goals', '', '| goal | verdict | evidence |', '|---|---|---|');
  for (const goal of judgeGoals(results)) out.push(`| ${goal.goal} | **${goal.verdict}** | ${goal.evidence} |`);
  out.push('');

  for (const workload of settings.workloads) {
    const reference = referenceText(run, workload);
    out.push(`## ${titles[workload]}`, '');
    if (reference) out.push(`Ratios against ${reference}.`, '');
    out.push('| system | median | unit | range | spread | ratio | integrity |', '|---|---:|---|---|---:|---:|---|');
    for (const row of rowsOf(run, workload)) {
      out.push(`| ${row.label} | ${row.median} | ${row.unit} | ${row.range} | ${row.spread} | ${row.ratio} | ${row.integrity} |`);
    }
    out.push('');
    if (workload === 'growth' && results.sizes.length > 0) {
      out.push('Relation sizes around the sustained admit+drain period (KiB; heap sizes include TOAST):', '');
      const names = [...new Set(results.sizes.flatMap((s) => s.relations.map((r) => r.relation)))];
      out.push(`| relation | ${results.sizes.map((s) => s.phase).join(' | ')} |`, `|---|${results.sizes.map(() => '---:').join('|')}|`);
      for (const name of names) {
        out.push(`| ${name} | ${results.sizes.map((s) => num((s.relations.find((r) => r.relation === name)?.bytes ?? 0) / 1024)).join(' | ')} |`);
      }
      out.push(`| rows (queued) | ${results.sizes.map((s) => `${s.rows} (${s.queued})`).join(' | ')} |`);
      out.push(`| queue-side structures | ${results.sizes.map((s) => num(hotBytes(s) / 1024)).join(' | ')} |`);
      out.push(`| heap bytes per row | ${results.sizes.map((s) => num(heapBytesPerRow(s))).join(' | ')} |`, '');
    }
  }

  if (results.evidence.length > 0) {
    out.push('## What limits Wharf', '');
    for (const item of results.evidence) out.push(`### ${item.title}`, '', '```', item.text, '```', '');
  }
  if (results.notes.length > 0) {
    out.push('## Notes', '');
    for (const note of results.notes) out.push(`- ${note}`);
    out.push('');
  }
  return out.join('\n');
}
