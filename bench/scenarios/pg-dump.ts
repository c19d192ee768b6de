// The snapshot a nightly backup holds: a real pg_dump of the system's whole
// database runs through the hold. pg_dump reads every table in one
// REPEATABLE READ transaction, so while it runs VACUUM can remove no row
// version that died after it began, as with the other held snapshots; unlike
// them it also reads the whole database meanwhile, as a backup does. The
// database holds a history of handled rows (history.ts) so that a dump has
// something to read. A dump of it here lasts a minute or two, not the hold:
// so a session exports one snapshot when the hold begins and every dump runs
// in it (--snapshot), a dump that ends before the hold does followed at once
// by another and the one running when the hold ends killed. The horizon then
// stays where the hold began, as under one dump lasting the whole hold.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import { appNames, session, withApplicationName, type Fault } from './faults.js';
import { sleep } from './load.js';

export const pgDumpFaultId = 'snapshot-pg-dump';

/**
 * What runs, as a nightly backup runs it, less the archive: its bytes are
 * counted (wc -c) and thrown away. --compress=0, because on this machine the
 * dump's client shares the cores with the systems: zlib in pg_dump would be
 * a CPU load of its own, not what a backup does to the database, which is
 * the fault (the server still reads, detoasts and sends every row). To a
 * file (--file=/dev/null) it would need --no-sync as well: pg_dump fsyncs
 * its output file at the end, and fsync of /dev/null fails the dump (EINVAL).
 */
export const pgDumpArguments = ['--format=custom', '--compress=0'] as const;

export interface PgDump {
  path: string;
  /** `pg_dump --version`'s line. */
  version: string;
  major: number;
}

const run = promisify(execFile);

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** pg_dump on PATH, then in the bin directory pg_config names (Debian keeps it off PATH when several versions are installed). */
async function candidates(): Promise<string[]> {
  const onPath = (process.env.PATH ?? '').split(delimiter).filter(Boolean).map((dir) => join(dir, 'pg_dump')).find(isExecutable);
  let fromPgConfig: string | undefined;
  try {
    const { stdout } = await run('pg_config', ['--bindir']);
    const path = join(stdout.trim(), 'pg_dump');
    if (isExecutable(path)) fromPgConfig = path;
  } catch {
    // No pg_config: PATH was the only place to look.
  }
  return [...new Set([onPath, fromPgConfig].filter((path): path is string => path !== undefined))];
}

async function describe(path: string): Promise<PgDump> {
  const { stdout } = await run(path, ['--version']);
  const version = stdout.trim();
  const major = Number(/\)\s*(\d+)/.exec(version)?.[1] ?? Number.NaN);
  return { path, version, major };
}

const resolved = new Map<string, Promise<PgDump>>();

/**
 * The pg_dump that can dump the server at `serverUrl`: pg_dump refuses a
 * server of a newer major version than its own, so the first found whose
 * major is at least the server's. Fails with what was found, and what to
 * install, when none fits.
 */
export function resolvePgDump(serverUrl: string): Promise<PgDump> {
  let found = resolved.get(serverUrl);
  if (!found) {
    found = (async () => {
      await run('wc', ['-c', '/dev/null']).catch(() => {
        throw new Error('the pg-dump scenario counts the bytes of each dump with wc -c, and wc did not run');
      });
      const paths = await candidates();
      if (paths.length === 0) {
        throw new Error('the pg-dump scenario runs pg_dump, and none was found: none on PATH, and no pg_config on PATH to name ' +
          'the bin directory of a PostgreSQL installation (on Debian: apt-get install -y postgresql-client-15)');
      }
      const client = await session(serverUrl);
      let serverMajor: number;
      try {
        const { rows } = await client.query<{ major: number }>(`SELECT current_setting('server_version_num')::int / 10000 AS major`);
        serverMajor = rows[0]!.major;
      } finally {
        await client.end();
      }
      const dumps = await Promise.all(paths.map(describe));
      const fit = dumps.find((dump) => dump.major >= serverMajor);
      if (!fit) {
        throw new Error(`the pg-dump scenario needs pg_dump ${serverMajor} or newer to dump this PostgreSQL ${serverMajor} server; ` +
          `found only ${dumps.map((dump) => `${dump.path} (${dump.version})`).join(', ')}`);
      }
      return fit;
    })();
    // A failed look is not kept: the next cell looks again.
    found.catch(() => resolved.delete(serverUrl));
    resolved.set(serverUrl, found);
  }
  return found;
}

/** The URL pg_dump is given, and its password apart, in the environment: an argument is visible to every user in ps. */
function dumpConnection(databaseUrl: string): { dbname: string; env: Record<string, string> } {
  const url = new URL(withApplicationName(databaseUrl, appNames.dump));
  const password = decodeURIComponent(url.password);
  url.password = '';
  return { dbname: url.toString(), env: password ? { PGPASSWORD: password } : {} };
}

interface Dump {
  child: ChildProcess;
  /** Epoch ms. */
  began: number;
  done: boolean;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: string }>;
  /** The archive's bytes, once it ended (written until it was killed, for a killed one); undefined if uncounted. */
  bytes: Promise<number | undefined>;
  stderr(): string;
}

/** A dump of the database as of `snapshot` (pg_export_snapshot's id, its exporting transaction still open). */
function startDump(dump: PgDump, connection: { dbname: string; env: Record<string, string> }, snapshot: string): Dump {
  // The archive goes straight from pg_dump to wc through a pipe of their
  // own, never through this process: it also drives the load, and a whole
  // dump is gigabytes. Spawned first, so that pg_dump's stdout is wc's
  // stdin; this process's end of it is closed at once, so that wc sees the
  // end of the archive when pg_dump exits.
  const counter = spawn('wc', ['-c'], { stdio: ['pipe', 'pipe', 'ignore'] });
  const child = spawn(dump.path, [...pgDumpArguments, `--snapshot=${snapshot}`, `--dbname=${connection.dbname}`], {
    env: { ...process.env, ...connection.env },
    stdio: ['ignore', counter.stdin!, 'pipe'],
  });
  counter.stdin!.destroy();
  let counted = '';
  counter.stdout!.setEncoding('utf8');
  counter.stdout!.on('data', (chunk: string) => {
    counted += chunk;
  });
  const bytes = new Promise<number | undefined>((resolve) => {
    counter.once('close', () => {
      const n = Number.parseInt(counted.trim(), 10);
      resolve(Number.isFinite(n) ? n : undefined);
    });
    counter.once('error', () => resolve(undefined));
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-2_000);
  });
  const running: Dump = {
    child,
    began: Date.now(),
    done: false,
    // 'close' rather than 'exit': by then stderr is read to its end. A spawn
    // that failed emits 'error', and not necessarily 'close'.
    exited: new Promise((resolve) => {
      child.once('close', (code, signal) => resolve({ code, signal }));
      child.once('error', (error) => resolve({ code: null, signal: null, error: error.message }));
    }),
    bytes,
    stderr: () => stderr.trim(),
  };
  void running.exited.then(() => {
    running.done = true;
  });
  return running;
}

const describeExit = (exit: { code: number | null; signal: NodeJS.Signals | null; error?: string }, stderr: string): string =>
  `${exit.error ?? (exit.signal ? `killed by ${exit.signal}` : `exit ${exit.code}`)}${stderr ? `: ${stderr.replace(/\s+/g, ' ').slice(-500)}` : ''}`;

const secondsText = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
const mibText = (bytes: number | undefined): string =>
  bytes === undefined ? 'size not counted' : `${(bytes / 2 ** 20).toLocaleString('en-US', { maximumFractionDigits: 1 })} MiB`;

/**
 * pg_dump of the system's database through the hold. `historyRows`: the
 * handled rows the database was given before the cell (for the report).
 */
export function pgDumpHold(historyRows: number): Fault {
  return {
    id: pgDumpFaultId,
    title: 'a pg_dump of the database',
    async preflight(serverUrl) {
      await resolvePgDump(serverUrl);
    },
    async prepare(context) {
      const dump = await resolvePgDump(context.serverUrl);
      const connection = dumpConnection(context.databaseUrl);
      const client = await session(context.databaseUrl);
      /** The dumps' backends in this database: (pid, snapshot's xmin). */
      const dumpBackends = async () => (await client.query<{ pid: number; xmin: string | null }>(
        `SELECT pid, backend_xmin::text AS xmin FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`,
        [appNames.dump])).rows;
      return {
        async begin() {
          const { rows: [size] } = await client.query<{ bytes: string }>('SELECT pg_database_size(current_database()) AS bytes');
          // The hold's one snapshot, exported by a session of its own (the
          // other one reads pg_stat_activity, which a transaction would cache).
          const exporter = await session(context.databaseUrl);
          await exporter.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
          const { rows: [exported] } = await exporter.query<{ id: string; xmin: string }>(
            'SELECT pg_export_snapshot() AS id, txid_snapshot_xmin(txid_current_snapshot())::text AS xmin');
          const snapshot = exported!.id;
          const horizon = exported!.xmin;
          let current = startDump(dump, connection, snapshot);
          // Were the rig to fail before end(), no dump goes on reading after the run.
          const killOnExit = () => current.child.kill('SIGKILL');
          process.once('exit', killOnExit);
          let begun = 1;
          /** Whole dumps: how long each took and its archive's bytes. */
          const completed: Array<{ ms: number; bytes: number | undefined }> = [];
          // Until the first dump is reading (its backend shows an xmin).
          // A dump quicker than the look is followed by another, as in the hold.
          const deadline = Date.now() + 30_000;
          for (;;) {
            if ((await dumpBackends()).some((backend) => backend.xmin !== null)) break;
            if (current.done) {
              const exit = await current.exited;
              if (exit.code !== 0) {
                process.removeListener('exit', killOnExit);
                await exporter.end();
                await client.end();
                throw new Error(`pg_dump of ${context.database} failed at its start (${dump.path}, ${describeExit(exit, current.stderr())})`);
              }
              completed.push({ ms: Date.now() - current.began, bytes: await current.bytes });
              current = startDump(dump, connection, snapshot);
              begun += 1;
            }
            if (Date.now() > deadline) {
              current.child.kill('SIGKILL');
              process.removeListener('exit', killOnExit);
              await exporter.end();
              await client.end();
              throw new Error(`pg_dump of ${context.database} showed no snapshot within 30 s`);
            }
            await sleep(20);
          }
          context.mark('pg_dump began in the hold\'s snapshot');

          let stopped = false;
          const failures: string[] = [];
          /** ms from a dump's end to the next one's start (the snapshot stays held meanwhile). */
          let between = 0;
          const loop = (async () => {
            while (!stopped) {
              const exit = await current.exited;
              if (stopped) break;
              const ended = Date.now();
              const finished = current;
              if (exit.code === 0) {
                context.mark(`pg_dump ${begun} done after ${secondsText(ended - finished.began)}; another begins`);
              } else {
                failures.push(describeExit(exit, finished.stderr()));
                context.mark(`pg_dump ${begun} failed; another begins in 1 s`);
                // Not at once: a dump that cannot run would otherwise be restarted in a tight loop.
                await sleep(1_000);
                if (stopped) break;
              }
              current = startDump(dump, connection, snapshot);
              begun += 1;
              between += Date.now() - ended;
              // Counted once the next dump is under way: wc's answer is no reason to leave the database unread.
              if (exit.code === 0) completed.push({ ms: ended - finished.began, bytes: await finished.bytes });
            }
          })();
          return {
            async end() {
              stopped = true;
              const last = current;
              const runningAtEnd = !last.done;
              const endedAt = Date.now();
              if (runningAtEnd) {
                last.child.kill('SIGTERM');
                const killer = setTimeout(() => last.child.kill('SIGKILL'), 5_000);
                await last.exited;
                clearTimeout(killer);
              }
              const writtenAtEnd = await last.bytes;
              await loop;
              process.removeListener('exit', killOnExit);
              // pg_dump's backend ends when it next writes to the socket of a
              // client that went; one idle between statements could hold the
              // snapshot on, so the hold ends when no dump's backend is left:
              // given a second to go by itself (one on its way out is not
              // counted as terminated), then terminated.
              let terminated = 0;
              const graceEnd = Date.now() + 1_000;
              for (const deadline = Date.now() + 10_000; ;) {
                const left = await dumpBackends();
                if (left.length === 0) break;
                if (Date.now() > deadline) throw new Error(`pg_dump's backends ${left.map((b) => b.pid).join(', ')} outlived the hold`);
                if (Date.now() > graceEnd) {
                  const { rows } = await client.query<{ n: string }>(
                    'SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) AS n FROM unnest($1::int[]) AS pid', [left.map((b) => b.pid)]);
                  terminated += Number(rows[0]?.n ?? 0);
                }
                await sleep(20);
              }
              await exporter.query('COMMIT');
              await exporter.end();
              await client.end();
              context.mark(runningAtEnd ? 'pg_dump killed: snapshot released' : 'snapshot released');
              const longest = completed.reduce<{ ms: number; bytes: number | undefined } | undefined>(
                (a, b) => (a === undefined || b.ms > a.ms ? b : a), undefined);
              return {
                'pg_dump': `${dump.version}, ${pgDumpArguments.join(' ')}`,
                'handled rows of history in the database': historyRows,
                'database size when the hold began (MiB)': Math.round(Number(size?.bytes ?? Number.NaN) / 2 ** 20),
                'horizon held at xid': horizon,
                'dumps begun': begun,
                // A dump shorter than the hold: the one after it began at once, in the same snapshot.
                'dumps that ended within the hold, another beginning at once': completed.length,
                ...(longest ? {
                  'longest dump that ended': `${secondsText(longest.ms)}, ${mibText(longest.bytes)}`,
                  // From a dump's exit to the next one's spawn: the database was not being read.
                  'time between dumps, summed': `${between} ms`,
                } : {}),
                'the dump running when the hold ended': runningAtEnd
                  ? `killed after ${secondsText(endedAt - last.began)}, ${mibText(writtenAtEnd)} written` : 'none',
                ...(failures.length > 0 ? { 'dumps that failed': failures.length, 'last failure': failures.at(-1)! } : {}),
                ...(terminated > 0 ? { 'dump backends terminated after pg_dump was killed': terminated } : {}),
              };
            },
          };
        },
      };
    },
  };
}
