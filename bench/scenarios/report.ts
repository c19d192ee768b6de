// Renders a scenario run as bench/SCENARIOS.md and one SVG chart per fault
// next to it: Wharf's figures beside graphile-worker's, the correctness checks
// of every cell, and the issue's goals judged at the run's scale.
import type { Environment } from '../environment.js';
import { graphileLocalQueuePreset } from '../systems/graphile.js';
import type { CellFigures } from './figures.js';
import { totalDead } from './monitor.js';
import { pgDumpArguments, pgDumpFaultId } from './pg-dump.js';
import type { Cell, ScenarioRun } from './run-scenarios.js';
import type { CellRun } from './rig.js';
import type { ScenarioName, ScenarioSettings } from './settings.js';
import { renderChart, type Line } from './svg.js';

const colors: Record<string, string> = { wharf: '#1f5fb4', graphile: '#e07b00' };
const titles: Record<CellRun['scenario'], string> = {
  capacity: 'Capacity probe',
  snapshot: 'Held snapshot',
  // Its cells are scenario `snapshot` (plans.ts): this names the family in types only.
  'pg-dump': 'Held snapshot',
  kills: 'Killed backends',
  slots: 'Connection slots full',
  lock: 'A long lock',
  switchover: 'Planned switchover',
  crash: 'Crash failover',
};

const num = (value: number | undefined | null, digits = 0): string =>
  value === undefined || value === null || !Number.isFinite(value)
    ? '—'
    : value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const ratio = (value: number): string => (Number.isFinite(value) ? `${num(value, 2)}×` : '—');
const mib = (bytes: number | undefined): string => (bytes === undefined ? '—' : `${num(bytes / 2 ** 20, 1)} MiB`);
const seconds = (ms: number): string => (ms % 60_000 === 0 && ms >= 60_000 ? `${ms / 60_000} min` : `${num(ms / 1000, ms % 1000 === 0 ? 0 : 1)} s`);

/** The chart file of a fault, relative to the report. */
export const chartName = (faultId: string): string => `scenarios-${faultId}.svg`;

function faultsOf(run: ScenarioRun): Array<{ faultId: string; scenario: CellRun['scenario']; title: string; cells: Cell[] }> {
  const out: Array<{ faultId: string; scenario: CellRun['scenario']; title: string; cells: Cell[] }> = [];
  for (const cell of run.cells) {
    let entry = out.find((candidate) => candidate.faultId === cell.run.faultId);
    if (!entry) {
      entry = { faultId: cell.run.faultId, scenario: cell.run.scenario, title: cell.run.faultTitle, cells: [] };
      out.push(entry);
    }
    entry.cells.push(cell);
  }
  return out;
}

/** Values per `step` seconds of `series`, at x = seconds since the fault began. */
function perSeconds(series: number[], origin: number, step = 1): Array<[number, number | null]> {
  const out: Array<[number, number | null]> = [];
  for (let s = 0; s + step <= series.length; s += step) {
    const slice = series.slice(s, s + step);
    out.push([s - origin / 1000, slice.reduce((a, b) => a + b, 0) / step]);
  }
  return out;
}

export function renderCharts(run: ScenarioRun): Map<string, string> {
  const charts = new Map<string, string>();
  for (const fault of faultsOf(run)) {
    const handled: Line[] = [];
    const claims: Line[] = [];
    const dead: Line[] = [];
    const refused: Line[] = [];
    for (const { run: cell } of fault.cells) {
      const origin = cell.fault[0];
      const color = colors[cell.system] ?? '#555';
      handled.push({ label: cell.systemLabel, color, points: perSeconds(cell.handled, origin) });
      const step = 2;
      const buckets = new Map<number, number[]>();
      for (const [at, ms] of cell.claims) {
        // By when the claim began, as the figures place it.
        const bucket = Math.floor((at - ms) / 1000 / step);
        buckets.set(bucket, [...(buckets.get(bucket) ?? []), ms]);
      }
      // A stretch without a claim beginning (a lock) is a gap in the line, not a slope across it.
      const claimPoints: Array<[number, number | null]> = [];
      const firstBucket = Math.min(...buckets.keys());
      const lastBucket = Math.max(...buckets.keys());
      for (let bucket = firstBucket; bucket <= lastBucket; bucket += 1) {
        const sorted = (buckets.get(bucket) ?? []).sort((a, b) => a - b);
        claimPoints.push([bucket * step - origin / 1000, sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)] ?? null]);
      }
      claims.push({ label: cell.systemLabel, color, points: claimPoints });
      dead.push({ label: cell.systemLabel, color, points: cell.samples.map((s) => [(s.at - origin) / 1000, totalDead(s)]) });
      const refusals = new Array<number>(cell.handled.length).fill(0);
      for (const answer of cell.answers) {
        if (answer.outcome.kind !== 'accepted') refusals[Math.floor(answer.at / 1000)] = (refusals[Math.floor(answer.at / 1000)] ?? 0) + 1;
      }
      refused.push({ label: cell.systemLabel, color, points: perSeconds(refusals, origin) });
    }
    const first = fault.cells[0]!.run;
    handled.push({ label: 'offered', color: '#888', dashed: true, points: perSeconds(first.offered, first.fault[0]) });
    charts.set(chartName(fault.faultId), renderChart({
      title: `${titles[fault.scenario]}: ${fault.title}`,
      xLabel: 'seconds since the fault began',
      band: [0, (first.fault[1] - first.fault[0]) / 1000],
      bandLabel: 'fault',
      panels: [
        { title: 'Events handled per second (last step written)', lines: handled },
        { title: 'Claim statement p99 per 2 s (by when it began), ms, log scale', log: true, lines: claims },
        { title: 'Dead tuples in the system\'s tables (pg_stat_user_tables)', lines: dead },
        { title: 'Deliveries refused or unanswered per second (retried)', lines: refused },
      ],
    }));
  }
  return charts;
}

interface Goal {
  goal: string;
  verdict: 'met' | 'not met' | 'not shown';
  evidence: string;
}

function correctnessEvidence(cell: Cell): { ok: boolean; text: string } {
  const { checks } = cell.run;
  const answers = cell.figures.answers;
  const others = Object.entries(answers.otherRefusals).map(([status, n]) => `${n} × ${status}`).join(', ');
  const problems = [
    checks.missingRows ? `${checks.missingRows} acknowledged without a row` : '',
    checks.unhandled ? `${checks.unhandled} acknowledged not handled` : '',
    checks.duplicateSteps ? `${checks.duplicateSteps} steps applied twice` : '',
    checks.orderViolations ? `${checks.orderViolations} order violations` : '',
    checks.workersAlive < checks.workers ? `${checks.workers - checks.workersAlive} worker processes exited` : '',
    checks.receiverAlive === false ? 'the receiver exited' : '',
    others ? `answers ${others}` : '',
    answers.hangs ? `${answers.hangs} requests hung` : '',
    answers.transportErrors
      ? `${answers.transportErrors} connections failed (${Object.entries(answers.transportCodes).map(([code, n]) => `${n} × ${code}`).join(', ')})` : '',
    answers.overDeadline ? `${answers.overDeadline} answers slower than the deadline + 1 s` : '',
  ].filter(Boolean);
  return problems.length === 0
    ? { ok: true, text: `${num(checks.acknowledged)} acknowledged, all stored and handled once in order; ` +
        `${checks.workersAlive}/${checks.workers} workers running; ${num(answers.refusedWithRetryAfter)} × 503 with Retry-After, max answer ${num(answers.maxMs)} ms` }
    : { ok: false, text: problems.join('; ') };
}

function judge(run: ScenarioRun, naptimeS: number): Goal[] {
  const goals: Goal[] = [];
  const wharfCells = run.cells.filter((cell) => cell.run.system === 'wharf');
  for (const cell of wharfCells) {
    const evidence = correctnessEvidence(cell);
    goals.push({
      goal: `${titles[cell.run.scenario]} (${cell.run.faultTitle}): 0 lost, 0 applied twice, 0 out of order, workers running, ` +
        'receiver 202 or 503 + Retry-After within its deadline',
      verdict: evidence.ok ? 'met' : 'not met',
      evidence: evidence.text,
    });
  }
  for (const cell of wharfCells) {
    const f = cell.figures;
    const rival = run.cells.find((other) => other.run.system === 'graphile' && other.run.faultId === cell.run.faultId);
    if (cell.run.scenario === 'snapshot') {
      const overall = f.faultRate / f.baselineRate;
      goals.push({
        goal: `Held snapshot (${cell.run.faultTitle}): drain rate ≥ 0.8× its rate without the snapshot over the whole hold`,
        verdict: Math.min(overall, f.lowestWindowRatio) >= 0.8 ? 'met' : 'not met',
        evidence: `${num(f.faultRate)}/s during vs ${num(f.baselineRate)}/s before = ${ratio(overall)}; lowest ${f.windowS} s window ${ratio(f.lowestWindowRatio)}`,
      });
      if (rival) {
        const offered = run.settings.rate;
        const bothKeptUp = f.faultRate >= 0.97 * offered && rival.figures.faultRate >= 0.97 * offered;
        goals.push({
          goal: `Held snapshot (${cell.run.faultTitle}): Wharf's drain rate ahead of graphile-worker's`,
          verdict: bothKeptUp ? 'not shown' : f.faultRate >= rival.figures.faultRate ? 'met' : 'not met',
          evidence: `${num(f.faultRate)}/s vs ${num(rival.figures.faultRate)}/s` +
            (bothKeptUp ? ` (both kept up with the ${offered}/s offered: this load does not rank them)` : ''),
        });
      }
      goals.push({
        goal: `Held snapshot (${cell.run.faultTitle}): p99 claim time ≤ 2× its baseline`,
        verdict: f.claimP99Fault <= 2 * f.claimP99Baseline ? 'met' : 'not met',
        evidence: `${num(f.claimP99Fault, 2)} ms vs ${num(f.claimP99Baseline, 2)} ms = ${ratio(f.claimP99Fault / f.claimP99Baseline)}` +
          (rival ? ` (graphile-worker ${num(rival.figures.claimP99Fault, 2)} vs ${num(rival.figures.claimP99Baseline, 2)} ms = ${ratio(rival.figures.claimP99Fault / rival.figures.claimP99Baseline)})` : ''),
      });
      const back = f.dead.backAfterMs;
      goals.push({
        goal: `Held snapshot (${cell.run.faultTitle}): sizes back within 2 autovacuum cycles (2 × ${naptimeS} s) of the release`,
        verdict: back !== null && back <= 2 * naptimeS * 1000 ? 'met' : 'not met',
        evidence: `dead tuples back to the baseline's level ${back === null ? 'not within the run' : `${num(back / 1000)} s after the release (${f.dead.autovacuumsUntilBack ?? '?'} autovacuum runs)`}; ` +
          `peak ${num(f.dead.peak)} vs baseline max ${num(f.dead.baselineMax)}; sizes ${mib(f.bytes.beforeFault)} → ${mib(f.bytes.atRelease)} at the release → ${mib(f.bytes.end)} at the end`,
      });
    }
    if (cell.run.scenario === 'kills' || cell.run.scenario === 'slots') {
      goals.push({
        goal: `${titles[cell.run.scenario]}: throughput back to ≥ 0.9× baseline within 5 s of the fault's end`,
        verdict: f.recoveryS !== null && f.recoveryS <= 5 ? 'met' : 'not met',
        evidence: `${f.recoveryS === null ? 'not back before the load stopped' : f.recoveryS === 0 ? 'never below 0.9× during the fault' : `back after ${num(f.recoveryS)} s`}` +
          (rival ? ` (graphile-worker: ${rival.figures.recoveryS === null ? 'not back' : rival.figures.recoveryS === 0 ? 'never below' : `${num(rival.figures.recoveryS)} s`})` : ''),
      });
    }
  }
  return goals;
}

/** One figure's row: its name, then Wharf's and graphile-worker's value (or — where it did not run). */
function figureRows(cells: Cell[], settings: ScenarioSettings, naptimeS: number): string[] {
  const of = (system: string) => cells.find((cell) => cell.run.system === system);
  const systems = settings.systems.map(of).filter((cell): cell is Cell => cell !== undefined);
  const rows: Array<[string, (f: CellFigures, cell: Cell) => string]> = [
    ['drain rate before the fault (events/s)', (f) => num(f.baselineRate)],
    ['drain rate during the fault (events/s)', (f) => `${num(f.faultRate)} (${ratio(f.faultRate / f.baselineRate)})`],
    ['lowest window during the fault, against before', (f) => `${ratio(f.lowestWindowRatio)} (${f.windowS} s)`],
    ['claim p50 before (ms)', (f) => num(f.claimP50Baseline, 2)],
    ['claim p99 before / during / after (ms)', (f) => `${num(f.claimP99Baseline, 2)} / ${num(f.claimP99Fault, 2)} / ${num(f.claimP99After, 2)}`],
    ['claim statements per second before', (f) => num(f.claimsPerSecond)],
    ['throughput back to ≥ 0.9× after the fault', (f) => (f.recoveryS === null ? 'not in the run' : f.recoveryS === 0 ? 'never below' : `${num(f.recoveryS)} s`)],
    ['deliveries acknowledged during the fault / offered', (f) => `${num(f.acceptedShareDuringFault * 100)} %`],
    ['answers: 202 / 503 + Retry-After / other / hung / connection failed', (f) => `${num(f.answers.accepted)} / ` +
      `${num(f.answers.refusedWithRetryAfter)} / ${Object.entries(f.answers.otherRefusals).map(([k, n]) => `${n} × ${k}`).join(', ') || '0'} / ` +
      `${num(f.answers.hangs)} / ${num(f.answers.transportErrors)}`],
    ['answer time p99 / max (ms)', (f) => `${num(f.answers.p99Ms)} / ${num(f.answers.maxMs)}`],
    ['dead tuples: baseline max / peak / at release / end', (f) => `${num(f.dead.baselineMax)} / ${num(f.dead.peak)} / ${num(f.dead.atRelease)} / ${num(f.dead.end)}`],
    [`dead tuples back after the fault (autovacuum_naptime ${naptimeS} s)`, (f) => (f.dead.backAfterMs === null ? 'not in the run' : `${num(f.dead.backAfterMs / 1000)} s, ${f.dead.autovacuumsUntilBack} autovacuum runs`)],
    ['table sizes: before / at release / peak / end', (f) => `${mib(f.bytes.beforeFault)} / ${mib(f.bytes.atRelease)} / ${mib(f.bytes.peak)} / ${mib(f.bytes.end)}`],
    ['the fault', (_f, cell) => Object.entries(cell.run.faultReport).map(([k, v]) => `${k}: ${typeof v === 'number' ? num(v) : v}`).join('; ')],
    ['acknowledged / lost (no row) / not handled', (_f, cell) => `${num(cell.run.checks.acknowledged)} / ${cell.run.checks.missingRows ?? 'n/a (rows leave when done)'} / ${cell.run.checks.unhandled}`],
    ['steps applied twice / order violations', (_f, cell) => `${cell.run.checks.duplicateSteps} / ${cell.run.checks.orderViolations}`],
    ['worker processes running at the end / stopped cleanly', (_f, cell) => `${cell.run.checks.workersAlive}/${cell.run.checks.workers} / ${cell.run.checks.workersStoppedCleanly}`],
    ['worker log lines naming LISTEN or the listener (warnings and errors)', (_f, cell) => {
      const lines = Object.entries(cell.run.checks.listenErrors ?? {});
      const total = lines.reduce((sum, [, n]) => sum + n, 0);
      return total === 0 ? '0' : `${num(total)}: ${lines.map(([message, n]) => `${num(n)} × "${message.replace(/\|/g, '\\|')}"`).join(', ')}`;
    }],
  ];
  const out = [`| figure | ${systems.map((cell) => cell.run.systemLabel).join(' | ')} |`, `|---|${systems.map(() => '---').join('|')}|`];
  for (const [name, value] of rows) out.push(`| ${name} | ${systems.map((cell) => value(cell.figures, cell)).join(' | ')} |`);
  return out;
}

function describeScale(settings: ScenarioSettings, dumped: boolean): string {
  return `snapshot held ${seconds(settings.snapshotHoldMs)} (${settings.snapshotKinds.join(', ')})` +
    `${dumped ? `, a pg_dump through the hold of a database of ${num(settings.dumpRows)} handled rows` : ''}, ` +
    `kills every ${seconds(settings.killEveryMs)} for ${seconds(settings.killForMs)}, slots full ${seconds(settings.slotsForMs)}, ` +
    `lock held ${seconds(settings.lockForMs)}, load after a failover ${seconds(settings.failoverForMs)}; warm-up ${seconds(settings.warmupMs)}, baseline ${seconds(settings.baselineMs)}, ` +
    `recovery ${seconds(settings.afterMs)} (after a snapshot: until dead tuples are back, at most ${seconds(Math.max(settings.afterMs, settings.snapshotAfterMs))})`;
}

export function renderMarkdown(
  run: ScenarioRun,
  environment: Environment,
  server: { description: string; settings: Record<string, string> },
  command: string,
  notes: readonly string[] = [],
): string {
  const { settings } = run;
  const naptimeS = Number.parseFloat(server.settings.autovacuum_naptime ?? '60') || 60;
  const dumped = run.cells.some((cell) => cell.run.faultId === pgDumpFaultId);
  const out: string[] = [];
  out.push('# Wharf under database faults, beside graphile-worker', '');
  out.push(`Run ${run.startedAt.toISOString()} → ${run.finishedAt.toISOString()} with \`${command}\`.`, '');
  out.push(`**Scale: ${settings.scale}** — ${describeScale(settings, dumped)}.` +
    (settings.scale === 'full' ? '' : ' The issue\'s full scale (snapshot held 10 min, kills every 2 s for 5 min, slots full 60 s, ' +
      'lock 30 s) is `npm run scenarios -- --scale full`; figures at this scale are not the full run\'s.'), '');

  out.push('## What runs', '');
  out.push(`- Machine: ${environment.cpus}, ${environment.memory} RAM, ${environment.platform}; Node ${environment.node}; ` +
    `packages: ${Object.entries(environment.packages).filter(([k]) => k !== 'pg-boss' && k !== 'autocannon').map(([k, v]) => `${k} ${v}`).join(', ')}. ` +
    `Load average (1 min) at the start and the end: ${num(run.load[0], 1)} and ${num(run.load[1], 1)}: the machine is shared, and every figure of speed moves with what else runs on it.`);
  out.push(`- PostgreSQL: ${server.description} (${Object.entries(server.settings).map(([k, v]) => `${k}=${v}`).join(', ')}). ` +
    'Each cell (one system under one fault) runs in a database of its own, created and dropped around it; the cells run one after another.');
  const capacity = run.capacity && run.capacity.length > 0 && settings.loadShare !== undefined
    ? ` (${num(settings.loadShare * 100)} % of the slower system's capacity, measured at the start of this run with no fault and every ` +
      `scope sending its next delivery as soon as the last was taken, for ${seconds(settings.capacityProbeMs)} after a ` +
      `${seconds(settings.warmupMs)} warm-up: ${run.capacity.map((probe) => `${probe.systemLabel} ${num(probe.rate)} handled/s ` +
        `(${num(probe.acknowledgedRate)} acknowledged/s; ${probe.checks.missingRows ?? 0} lost, ${probe.checks.unhandled} unhandled, ` +
        `${probe.checks.duplicateSteps} twice, ${probe.checks.orderViolations} out of order)`).join('; ')})`
    : '';
  out.push(`- Load: ${settings.rate} deliveries/s${capacity} offered at a fixed rate, round-robin over ${settings.scopes} scopes, each carrying ` +
    'its scope\'s sequence number. A scope sends its next delivery only once the previous one was acknowledged; a refusal or ' +
    `no answer is retried after min(Retry-After, ${seconds(settings.retryCapMs)}). At a fixed rate below capacity a system that keeps ` +
    'up drains exactly what is offered, so a fault shows as a dip and a catch-up, a longer claim, and a backlog.');
  out.push(`- Wharf: signed GitHub push deliveries over HTTP to the Node receiver (server/node.ts, in a process of its own, ` +
    `WHARF_DATABASE_TIMEOUT_MS=${settings.receiverDeadlineMs}), and ${settings.workers} worker processes of the worker library ` +
    `(createWorker, concurrency ${settings.concurrency}, localQueue ${settings.localQueue}). The handler writes two business rows, each in a \`ctx.step\`.`);
  out.push(`- graphile-worker: ${settings.workers} processes of \`run()\`, concurrency ${settings.concurrency}, ` +
    `\`preset: ${JSON.stringify(graphileLocalQueuePreset)}\`; the producer calls \`graphile_worker.add_job\` with a \`queue_name\` per scope ` +
    '(its per-key order) from a pool of 16; the task writes the same two rows, one after the other (it has no steps).');
  if (run.cells.some((cell) => cell.run.scenario === 'switchover' || cell.run.scenario === 'crash')) {
    out.push('- Failover cells (planned switchover, crash failover): each on a pair of its own, not on the server above: a primary ' +
      'and a streaming standby made with `pg_basebackup -R` (Debian\'s PostgreSQL 15, stock settings), synchronous ' +
      '(`synchronous_standby_names = \'*\'`, `synchronous_commit = on`). Wharf\'s receiver and workers get libpq\'s multi-host URL, ' +
      'both hosts, the old primary first, `target_session_attrs=read-write`. graphile-worker takes one host (node-postgres reads one): ' +
      'its workers and producer connect through a TCP proxy that the scenario points at the new primary the moment the promotion ' +
      'ends, as HAProxy with a primary check does at its best; the rig\'s own sessions go through the same proxy. graphile-worker ' +
      'has no receiver: its "answers" are its producer\'s `add_job` calls, a failed call counted under "other" (as status 0) and retried. ' +
      '"Lost" for graphile-worker: acknowledged, and neither its business row nor its job row exists at the end. ' +
      'The time to the first event handled on the new primary is from the fault to the first last-step row written after the old ' +
      'primary was down; the promotion\'s own time is in it, and is shown beside it.');
  }
  if (dumped) {
    out.push(`- The pg_dump cell (a held snapshot as a nightly backup holds one): before it, each system's database is given ` +
      `${num(settings.dumpRows)} handled deliveries of the run's scopes with the run's payload, set-based (INSERT … SELECT over ` +
      'generate_series), then VACUUM (ANALYZE) and a CHECKPOINT. Wharf keeps them as it keeps what it handled, DONE rows of ' +
      '`wharf.provider_event` within the replay window (its retention purges none during the run); graphile-worker deletes a job ' +
      'once done, so its history is where an application keeps one, a table of its own beside graphile-worker\'s schema ' +
      '(`public.scenario_job_history`, one row per completed job, the same payload): the two databases dump about the same bytes ' +
      '(the dumps\' sizes are in the fault row; the databases\' sizes beside them count indexes too, which a dump does not read). ' +
      'The table sizes and dead tuples below are of each system\'s own schema: Wharf\'s include its history, graphile-worker\'s ' +
      `do not. Through the hold runs \`pg_dump ${pgDumpArguments.join(' ')}\` of the system's whole database, its archive ` +
      'counted (`wc -c`) and thrown away (uncompressed, so that zlib in the client, which shares these cores, is not part of the ' +
      'fault). A session exports one snapshot when the hold begins and every dump runs in it (`--snapshot`): a dump that ends ' +
      'before the hold does is followed at once by another in the same snapshot (the fault row counts them), and the one running ' +
      'when the hold ends is killed, so the horizon stays where the hold began, as under one dump lasting the whole hold.');
  }
  out.push('- Claim time: each worker process times its system\'s claim statement from the call to the answer ' +
    '(`wharf.claim`; graphile-worker\'s `get_job` batch, `FOR UPDATE SKIP LOCKED`), lock waits included. ' +
    'Dead tuples and sizes: `pg_stat_user_tables.n_dead_tup` and `pg_total_relation_size` of the system\'s schema, once a second.');
  out.push('- Checks, from the business rows: every acknowledged delivery has its row (Wharf: the event id its 202 named) and its ' +
    'last step; no (event, step) written twice; per scope, the handled sequence numbers never go back; every worker process ' +
    `still running when the load ends, and exiting 0 on SIGTERM; every answer of the receiver a 202, or a 503 with Retry-After, within ` +
    `its deadline + 1 s; a request unanswered after ${seconds(settings.hangMs)} is a hang.`, '');

  out.push('## Goals', '', '| goal | verdict | evidence |', '|---|---|---|');
  for (const goal of judge(run, naptimeS)) out.push(`| ${goal.goal} | **${goal.verdict}** | ${goal.evidence} |`);
  out.push('');

  for (const fault of faultsOf(run)) {
    out.push(`## ${titles[fault.scenario]}: ${fault.title}`, '');
    const first = fault.cells[0]!.run;
    out.push(`Fault for ${seconds(first.fault[1] - first.fault[0])}. Figures of each system beside the other's:`, '');
    out.push(...figureRows(fault.cells, settings, naptimeS), '');
    out.push(`![${titles[fault.scenario]}](${chartName(fault.faultId)})`, '');
    const diagnostics = fault.cells.flatMap((cell) => cell.run.diagnostics.map((text) => `${cell.run.systemLabel}: ${text}`));
    if (diagnostics.length > 0) {
      out.push('What the processes said:', '', '```', ...diagnostics.map((text) => text.slice(0, 1_500)), '```', '');
    }
  }

  if (notes.length > 0) {
    out.push('## Notes', '');
    for (const note of notes) out.push(`- ${note}`);
    out.push('');
  }

  out.push('## How to run', '');
  out.push('```');
  out.push('npm run scenarios                          # the issue\'s full scale (about 80 minutes for both systems, and about ' +
    'half an hour more for the pg_dump cell)');
  out.push('npm run scenarios -- --scale reduced       # the same faults, shorter (about 30 minutes)');
  out.push('npm run scenarios -- --scale short         # seconds each: what the CI test runs');
  out.push('npm run scenarios -- --only snapshot --snapshot-hold 10m --systems wharf');
  out.push('npm run scenarios -- --only snapshot,pg-dump            # the three held snapshots, a pg_dump through the hold among them');
  out.push('npm run scenarios -- --only pg-dump --dump-rows 20000   # the pg_dump cell on a small database');
  out.push('npm run scenarios -- --only switchover,crash   # each cell on a primary and synchronous standby of its own');
  out.push('npm run scenarios -- --server-url postgres://…   # run on that server (its every free slot gets taken)');
  out.push('```');
  out.push('');
  return out.join('\n');
}
