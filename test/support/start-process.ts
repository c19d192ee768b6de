// Runs `npm start` the way a new user does: from the repository root, on the
// embedded PostgreSQL (no DATABASE_URL), in its own process group, so that a
// test can press Ctrl-C (SIGINT to the whole group, as a terminal does) and
// can always clean up with one SIGKILL to the group.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stopLeftoverPostgres } from '../../cli/embedded-postgres.js';
import { freePort } from '../../cli/postgres-server.js';
import { waitFor } from './worker-inbox.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** What the banner of `wharf start` tells a user. */
export interface Banner {
  edgeUrl: string;
  databaseUrl: string;
  adminToken: string;
  /** Where the embedded cluster's files are (under /var/tmp when run as root). */
  dataDirectory: string;
  /** The pid of the wharf process itself (npm, sh and tsx sit above it). */
  wharfPid: number;
}

export interface StartProcess {
  child: ChildProcess;
  stateDir: string;
  /** Everything written to stdout and stderr so far. */
  output(): string;
  exited: Promise<Exit>;
  hasExited(): boolean;
  /** Ctrl-C in a terminal: SIGINT to every process of the group. */
  interrupt(): void;
  /** SIGKILL to the group if anything of it is still alive, then removes the state dir. */
  destroy(): Promise<void>;
}

export async function spawnStart(env: Record<string, string>): Promise<StartProcess> {
  // mkdtemp makes it 0700, as a root user's home often is: as root, the
  // embedded PostgreSQL (run as `postgres`) must start all the same.
  const stateDir = await mkdtemp(join(tmpdir(), 'wharf-start-e2e-'));
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
  delete childEnv.DATABASE_URL;
  const args = ['start', '--', '--state-dir', stateDir, '--port', String(await freePort()),
    '--metrics-port', String(await freePort())];
  const child = spawn('npm', args, { cwd: root, env: childEnv, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  let exit: Exit | undefined;
  const exited = new Promise<Exit>((resolve) => {
    child.once('exit', (code, signal) => resolve((exit = { code, signal })));
  });
  const signalGroup = (signal: NodeJS.Signals): void => {
    try {
      process.kill(-child.pid!, signal);
    } catch (error) {
      // ESRCH: the whole group is gone already.
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
    }
  };
  return {
    child,
    stateDir,
    output: () => output,
    exited,
    hasExited: () => exit !== undefined,
    interrupt: () => signalGroup('SIGINT'),
    async destroy() {
      signalGroup('SIGKILL');
      if (!exit) await exited;
      // PostgreSQL runs in a session of its own: a killed start leaves it.
      await stopLeftoverPostgres(join(stateDir, 'pg'), { remove: true });
      await rm(stateDir, { recursive: true, force: true });
    },
  };
}

/** Waits for the banner (initdb and migrations take seconds on a loaded machine) and reads it. */
export async function waitForBanner(start: StartProcess, timeout: number): Promise<Banner> {
  await waitFor(async () => {
    if (start.hasExited()) throw new Error(`wharf start exited before its banner:\n${start.output()}`);
    // The worker's "worker started" line goes out through pino's asynchronous
    // stream, the banner through process.stdout: either may arrive first.
    const text = start.output();
    return text.includes('Ctrl-C stops everything.') && text.includes('"msg":"worker started"');
  }, timeout, 'the banner of wharf start and its worker\'s first log line');
  const text = start.output();
  const read = (pattern: RegExp, what: string): string => {
    const match = pattern.exec(text);
    if (!match?.[1]) throw new Error(`no ${what} in the banner:\n${text}`);
    return match[1];
  };
  return {
    edgeUrl: read(/operator API\s+(http:\/\/\S+)\/api/, 'operator API URL'),
    databaseUrl: read(/export DATABASE_URL='(postgres:\/\/[^']+)'/, 'database URL'),
    adminToken: read(/admin token\s+(\S+)/, 'admin token'),
    dataDirectory: read(/embedded, data in (\S+),/, 'data directory'),
    wharfPid: Number(read(/"pid":(\d+)[^\n]*"msg":"worker started"/, 'worker pid')),
  };
}

export interface ProcessLine {
  pid: number;
  pgid: number;
  args: string;
}

/** Every process on the machine, as `ps` sees it now. */
export function listProcesses(): Promise<ProcessLine[]> {
  return new Promise((resolve, reject) => {
    execFile('ps', ['-eo', 'pid=,pgid=,args='], { maxBuffer: 16 * 1024 * 1024 }, (error, stdout) => {
      if (error) return reject(error);
      resolve(stdout.split('\n').flatMap((line) => {
        const match = /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(line);
        return match ? [{ pid: Number(match[1]), pgid: Number(match[2]), args: match[3]! }] : [];
      }));
    });
  });
}
