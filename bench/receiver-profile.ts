// Where a receiver's own CPU goes, per delivery (issue 33):
//   npx tsx bench/receiver-profile.ts [wharf|minimal] [requests] [connections]
// (DATABASE_URL = a maintenance database URL; extra environment, such as
// WHARF_ADMIT_BATCH, reaches the receiver.) Starts the receiver in a process
// of its own under `node --cpu-prof`, sends it signed GitHub pushes with
// autocannon after a warm-up, and prints its self time per delivery by
// function and by where the code lives (this project, hono, pg, Node's
// internals, V8's collector), from V8's sampling profile of the measured part.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { withBenchDatabase } from './databases.js';
import { meterProcesses } from './process-cpu.js';
import { signDeliveries } from './systems/edge-receiver.js';
import { createPlainInbox } from './systems/minimal-receiver.js';
import { setupWharfInstallation } from './systems/wharf-inbox.js';

const kind = process.argv[2] === 'minimal' ? 'minimal' : 'wharf';
const requests = Number(process.argv[3] ?? 20_000);
const connections = Number(process.argv[4] ?? 8);
const warmup = Math.ceil(requests / 10);
const serverUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const scopes = 200;

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

function placeOf(url: string, name: string): string {
  if (name === '(garbage collector)') return 'V8: garbage collector';
  if (name === '(program)' || name === '(idle)') return `V8: ${name}`;
  if (url === '') return 'V8/native builtins';
  if (url.startsWith('node:')) return 'Node internals';
  const module = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1];
  if (module) return module;
  const own = /\/(edge|server|db|bench)\//.exec(url)?.[1];
  return own ? `wharf ${own}/` : url;
}

const profiler = fileURLToPath(new URL('./systems/edge-server-process.ts', import.meta.url));
const tsx = fileURLToPath(new URL('../node_modules/.bin/tsx', import.meta.url));
const secret = randomBytes(16).toString('hex');
const deliveries = await signDeliveries(secret, warmup + requests, scopes);
const directory = await mkdtemp(join(tmpdir(), 'wharf-receiver-profile-'));

await withBenchDatabase(serverUrl, `profile_${kind}`, { wharf: kind === 'wharf', poolSize: 2 }, async (db) => {
  if (kind === 'wharf') await setupWharfInstallation(db.pool, scopes);
  else await createPlainInbox(db.pool);
  const child = spawn(tsx, ['--cpu-prof', `--cpu-prof-dir=${directory}`, '--cpu-prof-interval=200', profiler, kind], {
    env: { ...process.env, DATABASE_URL: db.url, GITHUB_APP_BENCH_WEBHOOK_SECRET: secret },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [line] = (await once(createInterface({ input: child.stdout }), 'line')) as [string];
  const { url, pid } = JSON.parse(line) as { url: string; pid: number };
  let next = 0;
  const post = (amount: number) => autocannon({
    url: `${url}/hooks/github/bench`, connections, amount, sampleInt: 10,
    requests: [{ method: 'POST', setupRequest: (request) => ({ ...request, ...deliveries[next++ % deliveries.length]! }) }],
  });
  await post(warmup);
  const cpu = await meterProcesses([pid]);
  const began = Date.now() * 1000;
  const result = await post(requests);
  const ended = Date.now() * 1000;
  const cpuMicros = await cpu?.();
  child.kill('SIGTERM');
  await once(child, 'exit');
  const exited = Date.now() * 1000;
  console.log(`${kind}: ${(requests / result.duration).toFixed(0)} requests/s at ${connections} connections, ${result.non2xx} non-2xx; ` +
    `CPU per delivery (/proc): ${cpuMicros === undefined ? 'unknown' : `${(cpuMicros / requests).toFixed(0)} µs`}`);

  // Where tsx's own process wrote one too, the server's is the larger.
  const files = await Promise.all((await readdir(directory)).map(async (name) => ({ name, size: (await stat(join(directory, name))).size })));
  const largest = files.sort((a, b) => b.size - a.size)[0]!;
  const profile = JSON.parse(await readFile(join(directory, largest.name), 'utf8')) as Profile;
  report(profile, began, ended, exited, cpuMicros === undefined ? undefined : cpuMicros / requests);
});
await rm(directory, { recursive: true, force: true });

/**
 * Self time of the samples taken between `from` and `to` (µs since the
 * epoch), placed on the profile's monotonic clock by its end, which is the
 * process's exit at `exited`.
 */
function report(profile: Profile, from: number, to: number, exited: number, cpuPerDelivery: number | undefined): void {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const offset = profile.endTime - exited;
  const [start, end] = [from + offset, to + offset];
  const functions = new Map<string, number>();
  const places = new Map<string, number>();
  let time = profile.startTime;
  let total = 0;
  profile.samples.forEach((id, i) => {
    time += profile.timeDeltas[i] ?? 0;
    if (time < start || time > end) return;
    const node = byId.get(id)!;
    const { functionName, url, lineNumber } = node.callFrame;
    if (functionName === '(idle)') return;
    const delta = profile.timeDeltas[i + 1] ?? 0;
    const place = placeOf(url, functionName);
    const name = `${functionName || '(anonymous)'} ${place}${url && !url.startsWith('node:') ? `:${lineNumber + 1}` : ` ${url}`}`;
    functions.set(name, (functions.get(name) ?? 0) + delta);
    places.set(place, (places.get(place) ?? 0) + delta);
    total += delta;
  });
  // On a busy machine a sample's interval also holds the time the process
  // waited for a core: the samples give shares, and the shares are applied
  // to the CPU per delivery that /proc measured.
  const line = (micros: number, what: string) => {
    const share = micros / total;
    const scaled = cpuPerDelivery === undefined ? '' : `${(share * cpuPerDelivery).toFixed(1).padStart(7)} µs  `;
    return `${(share * 100).toFixed(1).padStart(5)} %  ${scaled}${what}`;
  };
  console.log(`\n${(total / requests).toFixed(0)} µs sampled per delivery (idle excluded)\n\nby where the code lives:`);
  for (const [place, micros] of [...places].sort((a, b) => b[1] - a[1])) console.log(line(micros, place));
  console.log('\nby function (self time), the top 40:');
  for (const [name, micros] of [...functions].sort((a, b) => b[1] - a[1]).slice(0, 40)) console.log(line(micros, name));
}
