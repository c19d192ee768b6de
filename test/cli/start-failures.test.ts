// `wharf start` and `wharf worker` failing to start, as a user meets it: a
// busy edge port, a busy metrics port, a second start on the same state
// directory. Each is one line naming the cause and the fix, exit code 1, and
// nothing left running; the development database keeps its port across runs.
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { stopLeftoverPostgres } from '../../cli/embedded-postgres.js';
import { freePort } from '../../cli/free-port.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { releasePort, reservePort } from '../support/own-postgres.js';
import { waitFor } from '../support/worker-inbox.js';
import { fixtureHandlers } from '../support/worker-process.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
let stateDir: string;
let busy: Server;
let busyPort: number;
let databasePort: number | undefined;

function wharf(args: string[], env: NodeJS.ProcessEnv = {}) {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
  if (!('DATABASE_URL' in env)) delete childEnv.DATABASE_URL;
  const child = spawn(process.execPath, ['bin/wharf.js', ...args], { cwd: root, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { child, exited, stdout: () => stdout, stderr: () => stderr };
}

const start = (extra: string[]) => wharf(['start', '--state-dir', stateDir, ...extra]);

/** Waits for `run` to say it is up; a run that exits first fails at once, with what it printed. */
async function untilStarted(run: ReturnType<typeof start>, what: string): Promise<void> {
  let exited: number | null | undefined;
  void run.exited.then((code) => { exited = code; });
  try {
    await waitFor(async () => {
      if (run.stdout().includes('Ctrl-C stops everything.')) return true;
      if (exited !== undefined) throw new Error(`exited ${exited} before it was up`);
      return false;
    }, 90_000, what);
  } catch (error) {
    throw new Error(`${what}: ${(error as Error).message}; it printed:\n${run.stdout()}\n${run.stderr()}`);
  }
}

beforeAll(async () => {
  stateDir = await mkdtemp(join(tmpdir(), 'wharf-start-failures-'));
  // The development database's port, kept across this file's starts, is
  // reserved against the other test files' own servers, which take theirs
  // from the same range (cli/free-port.ts): down between two starts, it must
  // not become another server's.
  databasePort = await reservePort();
  await writeFile(join(stateDir, 'dev-secrets.json'), JSON.stringify({ postgresPort: databasePort }));
  busy = createServer().listen(0, '127.0.0.1');
  await new Promise((resolve) => busy.once('listening', resolve));
  busyPort = (busy.address() as { port: number }).port;
});
afterAll(async () => {
  busy?.close();
  await stopLeftoverPostgres(join(stateDir, 'pg'), { remove: true });
  await rm(stateDir, { recursive: true, force: true });
  if (databasePort !== undefined) releasePort(databasePort);
});

function expectOneLine(stderr: string, pattern: RegExp): void {
  const lines = stderr.split('\n').filter((line) => line.startsWith('wharf: '));
  expect(lines, stderr).toEqual([expect.stringMatching(pattern)]);
  expect(stderr).not.toMatch(/\n\s+at /);
}

it('a busy edge port: one line naming it, exit 1, and the database it started is stopped', async () => {
  const run = start(['--port', String(busyPort), '--metrics-port', String(await freePort())]);
  expect(await run.exited).toBe(1);
  expectOneLine(run.stderr(), new RegExp(`port ${busyPort} of the edge receiver is in use.*--port`));
  expect(await stopLeftoverPostgres(join(stateDir, 'pg'))).toBe(false);
}, 120_000);

it('a busy metrics port: one line naming it, exit 1, nothing left', async () => {
  const run = start(['--port', String(await freePort()), '--metrics-port', String(busyPort)]);
  expect(await run.exited).toBe(1);
  expectOneLine(run.stderr(), new RegExp(`metrics port 127.0.0.1:${busyPort} is in use.*--metrics-port`));
  expect(await stopLeftoverPostgres(join(stateDir, 'pg'))).toBe(false);
}, 120_000);

it('a second start on the same state directory names the first; the database port stays the same across runs', async () => {
  const first = start(['--port', String(await freePort()), '--metrics-port', String(await freePort())]);
  await untilStarted(first, 'the first start');
  const url = /export DATABASE_URL='([^']+)'/.exec(first.stdout())![1]!;
  expect(url).toContain(`@127.0.0.1:${databasePort}/`);
  const second = start(['--port', String(await freePort()), '--metrics-port', String(await freePort())]);
  expect(await second.exited).toBe(1);
  expectOneLine(second.stderr(), new RegExp(`another \`wharf start\` \\(pid ${first.child.pid}\\)`));
  first.child.kill('SIGTERM');
  expect(await first.exited).toBe(0);

  const third = start(['--port', String(await freePort()), '--metrics-port', String(await freePort())]);
  await untilStarted(third, 'the third start');
  expect(/export DATABASE_URL='([^']+)'/.exec(third.stdout())![1]).toBe(url);
  third.child.kill('SIGTERM');
  expect(await third.exited).toBe(0);
  expect(await stopLeftoverPostgres(join(stateDir, 'pg'))).toBe(false);
}, 200_000);

let db: TestDatabase | undefined;
it('wharf worker with a busy metrics port exits 1 with one line, claiming nothing', async () => {
  db = await createTestDatabase();
  const run = wharf(['worker', '--handlers', fixtureHandlers('record-order.ts'), '--metrics-port', String(busyPort)], { DATABASE_URL: db.url });
  expect(await run.exited).toBe(1);
  expectOneLine(run.stderr(), new RegExp(`metrics port 127.0.0.1:${busyPort} is in use`));
  await db.drop();
}, 60_000);
