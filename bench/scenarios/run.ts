// `npm run scenarios`: Wharf and graphile-worker under database faults on one
// PostgreSQL (by default one of the run's own), written to bench/SCENARIOS.md
// with one SVG chart per fault next to it.
//   npm run scenarios                                the issue's full scale
//   npm run scenarios -- --scale reduced             the same, shorter
//   npm run scenarios -- --only kills,lock --systems wharf --kill-for 2m
//   npm run scenarios -- --only snapshot,pg-dump     the three held snapshots, a pg_dump's among them
//   npm run scenarios -- --only pg-dump --dump-rows 20000 --snapshot-hold 20s   a small pg_dump cell
//   npm run scenarios -- --save run.json       keep what was measured; --render run.json writes the report again from it
import { readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command, Option } from 'commander';
import { parseDuration } from '../../cli/duration.js';
import { positiveInteger } from '../../cli/commands/option-parsers.js';
import { describeEnvironment } from '../environment.js';
import type { SnapshotKind } from './faults.js';
import { cellFigures } from './figures.js';
import { renderCharts, renderMarkdown } from './report.js';
import { runScenarios, type ScenarioRun } from './run-scenarios.js';
import { scales, scenarioNames, systemNames, type ScenarioSettings } from './settings.js';
import { startScenarioServer } from './server.js';

function listOf<T extends string>(allowed: readonly T[], what: string) {
  return (text: string): T[] => {
    const names = text.split(',').map((name) => name.trim()).filter(Boolean);
    for (const name of names) {
      if (!(allowed as readonly string[]).includes(name)) throw new Error(`unknown ${what} ${name}; choose from ${allowed.join(', ')}`);
    }
    return names as T[];
  };
}

type DurationKey = { [K in keyof ScenarioSettings]-?: K extends `${string}Ms` ? K : never }[keyof ScenarioSettings];
const durations: Record<string, DurationKey> = {
  warmup: 'warmupMs', baseline: 'baselineMs', after: 'afterMs', 'snapshot-hold': 'snapshotHoldMs', 'snapshot-after': 'snapshotAfterMs',
  'kill-every': 'killEveryMs', 'kill-for': 'killForMs', 'slots-for': 'slotsForMs', 'lock-for': 'lockForMs',
  'failover-for': 'failoverForMs', 'capacity-probe': 'capacityProbeMs',
  'receiver-deadline': 'receiverDeadlineMs', 'retry-cap': 'retryCapMs', 'drain-timeout': 'drainTimeoutMs', hang: 'hangMs',
};
const integers = {
  rate: 'rate', scopes: 'scopes', workers: 'workers', concurrency: 'concurrency', 'local-queue': 'localQueue', 'dump-rows': 'dumpRows',
} as const;
const snapshotKinds: readonly SnapshotKind[] = ['idle-in-transaction', 'repeatable-read', 'pg-dump'];

const program = new Command('scenarios')
  .description('Wharf beside graphile-worker under database faults: a held snapshot (a pg_dump\'s among them), killed backends, ' +
    'full connection slots, a long lock, a planned switchover and a crash failover to a synchronous standby')
  .addOption(new Option('--scale <scale>', 'sizes to start from').choices(Object.keys(scales)).default('full'))
  .option('--only <scenarios>', `comma-separated subset of ${scenarioNames.join(',')}`, listOf(scenarioNames, 'scenario'))
  .option('--systems <systems>', `comma-separated subset of ${systemNames.join(',')}`, listOf(systemNames, 'system'))
  .option('--snapshot-kinds <kinds>', `comma-separated subset of ${snapshotKinds.join(',')}`, listOf(snapshotKinds, 'snapshot kind'))
  .option('--server-url <url>', 'run on this PostgreSQL (a superuser\'s URL) instead of one of the run\'s own; its free slots get filled')
  .option('--out <file>', 'where to write the report (the charts go next to it)', fileURLToPath(new URL('../SCENARIOS.md', import.meta.url)))
  .option('--no-write', 'print only, write no report')
  .option('--save <file>', 'also write what was measured as JSON (large: every answer and claim)')
  .option('--render <file>', 'run nothing: write the report from a file --save wrote')
  .addOption(new Option('--load-share <fraction>', 'offer this share of the slower system\'s capacity, measured first (0 < share ≤ 1)')
    .argParser((text: string) => {
      const share = Number(text);
      if (!(share > 0 && share <= 1)) throw new Error(`--load-share takes a fraction in (0, 1], not ${text}`);
      return share;
    }))
  .option('--note <text>', 'a line for the report\'s notes (repeatable; kept by --save)', (text: string, previous: string[] = []) => [...previous, text]);
for (const [flag, key] of Object.entries(durations)) {
  program.addOption(new Option(`--${flag} <duration>`, `override ${key} (e.g. 500ms, 30s, 10m)`).argParser(parseDuration));
}
for (const [flag, key] of Object.entries(integers)) {
  const description = key === 'dumpRows'
    ? `handled rows each system's database holds before the pg_dump cell (${scales.full.dumpRows} at full scale)` : `override ${key}`;
  program.addOption(new Option(`--${flag} <n>`, description).argParser(key === 'localQueue'
    ? (value: string) => (value === '0' ? 0 : positiveInteger(value)) : positiveInteger));
}
program.parse();
const flags = program.opts<Record<string, unknown>>();

const settings: ScenarioSettings = { ...scales[flags.scale as keyof typeof scales] };
const camel = (flag: string) => flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
for (const [flag, key] of [...Object.entries(durations), ...Object.entries(integers)]) {
  const value = flags[camel(flag)];
  if (typeof value === 'number') (settings as unknown as Record<string, number>)[key] = value;
}
// A rate given is the rate offered; a share given is measured against the capacities.
if (typeof flags.rate === 'number') delete settings.loadShare;
if (typeof flags.loadShare === 'number') settings.loadShare = flags.loadShare;
if (Array.isArray(flags.only)) settings.scenarios = flags.only as ScenarioSettings['scenarios'];
if (Array.isArray(flags.systems)) settings.systems = flags.systems as ScenarioSettings['systems'];
if (Array.isArray(flags.snapshotKinds)) settings.snapshotKinds = flags.snapshotKinds as SnapshotKind[];

/** What a report is made from; --save writes it, --render reads it back. */
interface Saved {
  run: ScenarioRun;
  environment: Awaited<ReturnType<typeof describeEnvironment>>;
  server: { description: string; settings: Record<string, string> };
  command: string;
  notes?: string[];
}

async function measure(): Promise<Saved> {
  const server = await startScenarioServer(typeof flags.serverUrl === 'string' ? flags.serverUrl : undefined);
  try {
    const environment = await describeEnvironment(server.url);
    console.log(`Scenarios at ${settings.scale} scale on ${server.description}, PostgreSQL ${environment.postgres}`);
    const run = await runScenarios(settings, server.url, (line) => console.log(line));
    // The arguments as given, less any URL (it may hold a password).
    const args = process.argv.slice(2).filter((arg) => !arg.includes('://'));
    return {
      run, environment, server: { description: server.description, settings: server.settings },
      command: `npm run scenarios${args.length > 0 ? ` -- ${args.join(' ')}` : ''}`,
    };
  } finally {
    await server.stop();
  }
}

/** A saved run, its figures computed again from what was measured (as this version computes them). */
async function load(file: string): Promise<Saved> {
  const saved = JSON.parse(await readFile(file, 'utf8'), (key, value: unknown) =>
    (key === 'startedAt' || key === 'finishedAt') && typeof value === 'string' ? new Date(value) : value) as Saved;
  const { settings: measured } = saved.run;
  saved.run.cells = saved.run.cells.map(({ run }) => ({ run, figures: cellFigures(run, measured.receiverDeadlineMs) }));
  return saved;
}

const saved: Saved = typeof flags.render === 'string' ? await load(flags.render) : await measure();
if (Array.isArray(flags.note)) saved.notes = [...(saved.notes ?? []), ...(flags.note as string[])];
if (typeof flags.save === 'string') await writeFile(flags.save, JSON.stringify(saved));
const markdown = renderMarkdown(saved.run, saved.environment, saved.server, saved.command, saved.notes);
if (flags.write !== false && typeof flags.out === 'string') {
  await writeFile(flags.out, markdown);
  for (const [name, svg] of renderCharts(saved.run)) await writeFile(join(dirname(flags.out), name), svg);
  console.log(`\nwrote ${flags.out} and its charts`);
} else {
  console.log(markdown);
}
