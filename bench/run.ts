// `npm run bench`: runs the workloads against DATABASE_URL's server, prints
// the figures with ratios and writes bench/RESULTS.md.
//   npm run bench -- --smoke                    a small run (seconds)
//   npm run bench -- --only ordered,latency --repetitions 5
//   npm run bench -- --only queue-history --queue-history-rows 200000   the queue history at a smaller scale
//   BENCH_MONTH_TWO_ROWS=200000 npm run bench -- --only month-two         month two's large inbox at a smaller scale
//   BENCH_ORDERED_EVENTS=5000 npm run bench     any setting, by flag or BENCH_<NAME>
//   npm run bench -- --edge-round-trips         only the Worker's round trips to PostgreSQL (issue 19),
//                                               written to their own section of RESULTS.md
import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { Command, Option } from 'commander';
import { describeEnvironment } from './environment.js';
import { runBenchmark } from './harness.js';
import { renderConsole, renderMarkdown } from './report.js';
import { fullSettings, smokeSettings, workloadNames, type BenchSettings, type WorkloadName } from './settings.js';
import {
  edgeRoundTripDefaults, edgeRoundTripSmoke, edgeRoundTripsSection, renderEdgeRoundTrips, runEdgeRoundTrips, withEdgeRoundTrips,
} from './workloads/edge-round-trips.js';

type NumericKey = { [K in keyof BenchSettings]: BenchSettings[K] extends number ? K : never }[keyof BenchSettings];

const numericKeys = Object.keys(fullSettings).filter(
  (key): key is NumericKey => typeof fullSettings[key as keyof typeof fullSettings] === 'number');

const kebab = (key: string) => key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
const envName = (key: string) => `BENCH_${kebab(key).replace(/-/g, '_').toUpperCase()}`;

function positiveInteger(text: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value <= 0) throw new Error(`expected a positive integer, not ${text}`);
  return value;
}

function parseWorkloads(text: string): WorkloadName[] {
  const names = text.split(',').map((name) => name.trim()).filter(Boolean);
  for (const name of names) {
    if (!(workloadNames as readonly string[]).includes(name)) {
      throw new Error(`unknown workload ${name}; choose from ${workloadNames.join(', ')}`);
    }
  }
  return names as WorkloadName[];
}

const program = new Command('bench')
  .description('Wharf against graphile-worker, pg-boss and plain SQL, on one PostgreSQL, in one run')
  .option('--smoke', 'small sizes, one repetition')
  .option('--only <workloads>', `comma-separated subset of ${workloadNames.join(',')}`)
  .option('--concurrencies <list>', 'Wharf worker concurrencies for the drains, e.g. 8,16')
  .option('--out <file>', 'where to write the markdown results',
    fileURLToPath(new URL('./RESULTS.md', import.meta.url)))
  .option('--no-write', 'print only, do not write the results file')
  .option('--edge-round-trips', "run only the Worker's round trips to PostgreSQL (issue 19); writes only its section");
for (const key of numericKeys) {
  program.addOption(new Option(`--${kebab(key)} <n>`, `override ${key}`).env(envName(key)).argParser(positiveInteger));
}
program.parse();
const flags = program.opts<Record<string, unknown>>();

const settings: BenchSettings = {
  ...(flags.smoke ? smokeSettings : fullSettings),
  serverUrl: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
};
for (const key of numericKeys) {
  if (typeof flags[key] === 'number') settings[key] = flags[key];
}
const only = typeof flags.only === 'string' ? flags.only : process.env.BENCH_ONLY;
if (only) settings.workloads = parseWorkloads(only);
const concurrencies = typeof flags.concurrencies === 'string' ? flags.concurrencies : process.env.BENCH_CONCURRENCIES;
if (concurrencies) settings.drainConcurrencies = concurrencies.split(',').map(positiveInteger);

const readResults = (file: string) => readFile(file, 'utf8').catch(() => '');

if (flags.edgeRoundTrips) {
  const report = await runEdgeRoundTrips(
    { serverUrl: settings.serverUrl, ...(flags.smoke ? edgeRoundTripSmoke : edgeRoundTripDefaults) }, (line) => console.log(line));
  const section = renderEdgeRoundTrips(report);
  console.log(`\n${section}`);
  if (flags.write !== false && typeof flags.out === 'string') {
    await writeFile(flags.out, withEdgeRoundTrips(await readResults(flags.out), section));
    console.log(`wrote its section of ${flags.out}`);
  }
  process.exit(0);
}

const environment = await describeEnvironment(settings.serverUrl);
console.log(`Wharf benchmark on PostgreSQL ${environment.postgres}, ${environment.cpus}, ${settings.repetitions} repetition(s)`);
const run = await runBenchmark(settings, (line) => console.log(line));
console.log(renderConsole(run));
if (flags.write !== false && typeof flags.out === 'string') {
  // The edge round trips are measured by their own run: keep their section.
  const edgeSection = edgeRoundTripsSection(await readResults(flags.out));
  const markdown = renderMarkdown(run, environment);
  await writeFile(flags.out, edgeSection ? withEdgeRoundTrips(markdown, edgeSection) : markdown);
  console.log(`\nwrote ${flags.out}`);
}
