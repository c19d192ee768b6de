// `wharf start` (npm start): the whole system in one process. Without
// DATABASE_URL it runs an embedded PostgreSQL whose data stays in
// <state-dir>/pg between runs, and sets up a demo GitHub App connection so
// that the printed curl delivers a correctly signed event at once. For a
// second terminal it writes <state-dir>/dev.env (what it generated, as
// `export` lines) and <state-dir>/sample-delivery.sh (the printed curl).
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { Command, Option } from 'commander';
import pg from 'pg';
import type { Logger } from 'pino';
import { createCliLogger } from '../logger.js';
import { Registry, register } from 'prom-client';
import { signGitHubBody } from '../../edge/adapters/github.js';
import { checkAdminToken } from '../../operator/api/auth.js';
import { startNodeServer } from '../../server/node.js';
import { startAlertSender } from '../../worker/alerts.js';
import { createWorker } from '../../worker/create-worker.js';
import { databaseUrlFor } from '../../db/database-url.js';
import { appVariable } from '../../db/environment.js';
import { generateKeyRingEntry } from '../../db/secret-box.js';
import { startEmbeddedPostgres, type EmbeddedPostgresServer } from '../embedded-postgres.js';
import { freeStablePort } from '../free-port.js';
import { exampleHandlers } from '../example-handlers.js';
import { loadHandlers } from '../load-handlers.js';
import { workerRegistry } from '../../worker/metrics.js';
import { startMetricsServer } from '../../worker/metrics-server.js';
import { migrate } from '../../db/migrate.js';
import { createPool } from '../../db/pool.js';
import { checkStartDurability } from './synchronous-standby.js';
import { baseUrl, port, positiveInteger } from './option-parsers.js';
import { stopOnSignals } from './shutdown.js';
import { addForwardOptions, forwardOptions } from './worker.js';

interface StartOptions {
  port: number;
  metricsPort: number;
  databaseUrl?: string;
  handlers?: string;
  concurrency: number;
  stateDir: string;
  consoleUrl?: string;
  forward: boolean;
  forwardConcurrency: number;
  forwardAllowPrivate?: boolean;
  forwardAllowNetworks?: string;
}

/** The demo's GitHub App: its route is /hooks/github/demo. */
const demo = {
  app: 'demo',
  source: 'https://github.com',
  workspaceId: 1,
  installationId: '1',
  subject: 'repo:acme/api',
} as const;

export function startCommand(): Command {
  const command = new Command('start')
    .description('migrate, then run the edge receiver, operator API and a worker (embedded PostgreSQL without DATABASE_URL)')
    .option('--port <port>', 'edge receiver port', port, 8787)
    .option('--metrics-port <port>', 'Prometheus /metrics port', port, 9187)
    .addOption(new Option('--database-url <url>', 'PostgreSQL connection string (default: embedded)').env('DATABASE_URL'))
    .option('--handlers <module>', 'handler module (default: example handlers that log each event)')
    .option('--concurrency <n>', 'handlers running at once', positiveInteger, 4)
    .option('--state-dir <dir>', 'where the embedded PostgreSQL and generated secrets live', '.wharf')
    .addOption(new Option('--console-url <url>', "the console's public URL: alerts link to their issue's or stuck scopes' page")
      .env('WHARF_CONSOLE_URL').argParser(baseUrl))
    .action((options: StartOptions) => runStart(options));
  return addForwardOptions(command);
}

interface DevSecrets {
  adminToken: string;
  githubWebhookSecret: string;
  /** WHARF_SECRET_KEYS for development: one key, which encrypts connections' signing keys. */
  secretKeys: string;
  /** The development database's port and password, chosen once: an exported DATABASE_URL keeps working. */
  postgresPort: number;
  postgresPassword: string;
}

/** Generated once per state directory, so tokens and curls keep working across restarts. */
async function loadDevSecrets(stateDir: string): Promise<DevSecrets> {
  const file = join(stateDir, 'dev-secrets.json');
  const saved = existsSync(file) ? (JSON.parse(await readFile(file, 'utf8')) as Partial<DevSecrets>) : {};
  const secrets: DevSecrets = {
    adminToken: saved.adminToken ?? randomBytes(24).toString('base64url'),
    githubWebhookSecret: saved.githubWebhookSecret ?? randomBytes(24).toString('base64url'),
    secretKeys: saved.secretKeys ?? generateKeyRingEntry('dev1'),
    // Below the ephemeral range: while the database is down, no outgoing
    // connection or listen(0) can take the port it comes back on.
    postgresPort: saved.postgresPort ?? (await freeStablePort()),
    // A cluster made by a release before 0.2.0 has the package's fixed password.
    postgresPassword: saved.postgresPassword
      ?? (existsSync(join(stateDir, 'pg', 'PG_VERSION')) ? 'postgres' : randomBytes(18).toString('base64url')),
  };
  await writeFile(file, JSON.stringify(secrets, null, 2), { mode: 0o600 });
  return secrets;
}

async function ensureDatabase(serverUrl: string, name: string): Promise<string> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  return databaseUrlFor(serverUrl, name);
}

async function setUpDemo(pool: pg.Pool): Promise<void> {
  await pool.query('SELECT wharf.upsert_workspace($1)', [demo.workspaceId]);
  const { rows } = await pool.query<{ id: string }>(
    `SELECT wharf.upsert_connection($1, 'github', $2, 'app_installation', $3) AS id`,
    [demo.workspaceId, demo.source, demo.installationId],
  );
  await pool.query('SELECT wharf.subscribe($1, $2)', [rows[0]!.id, demo.subject]);
}

async function sampleCurl(edgeUrl: string, secret: string): Promise<string> {
  const body = JSON.stringify({
    ref: 'refs/heads/main',
    // A commit of its own: GitHub signs the body alone, and a body stored
    // within replay_window is a duplicate, so each start's curl is news.
    after: randomBytes(20).toString('hex'),
    repository: { full_name: 'acme/api', name: 'api', owner: { login: 'acme' } },
    organization: { login: 'acme' },
    installation: { id: Number(demo.installationId) },
    sender: { id: 1, login: 'octocat' },
  });
  const signature = await signGitHubBody(secret, body);
  return [
    `curl -sS -i -X POST ${edgeUrl}/hooks/github/${demo.app} \\`,
    `  -H 'Content-Type: application/json' -H 'X-GitHub-Event: push' \\`,
    `  -H 'X-GitHub-Delivery: ${randomUUID()}' \\`,
    `  -H 'X-Hub-Signature-256: ${signature}' \\`,
    `  --data '${body}'`,
  ].join('\n');
}

/** A value as one single-quoted shell word. */
const shellQuoted = (value: string): string => `'${value.replace(/'/g, `'\\''`)}'`;

/** `path` as a user in the current directory types it. */
function shown(path: string): string {
  const fromHere = relative(process.cwd(), path);
  return fromHere === '' || fromHere.startsWith('..') || isAbsolute(fromHere) ? path : fromHere;
}

/**
 * What another terminal needs, written where `wharf start` keeps its
 * secrets (0600): the variables it generated itself, never one it was
 * given, and the sample delivery. Returns the names dev.env sets.
 */
async function writeSecondTerminalFiles(
  stateDir: string, generated: Record<string, string | undefined>, curl: string | undefined,
): Promise<string[]> {
  const set = Object.entries(generated).filter((entry): entry is [string, string] => entry[1] !== undefined);
  await writeFile(join(stateDir, 'dev.env'), [
    '# Written by `wharf start` for this development instance; `. <this file>` in another terminal.',
    ...set.map(([name, value]) => `export ${name}=${shellQuoted(value)}`),
    '',
  ].join('\n'), { mode: 0o600 });
  const sample = join(stateDir, 'sample-delivery.sh');
  if (curl) await writeFile(sample, `# Written by \`wharf start\`: the signed sample delivery it printed.\n${curl}\n`, { mode: 0o600 });
  else await rm(sample, { force: true });
  return set.map(([name]) => name);
}

/** A start of this state directory still running: its pid, else undefined. */
async function liveStart(lockFile: string): Promise<number | undefined> {
  const pid = Number((await readFile(lockFile, 'utf8').catch(() => '')).trim());
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) return undefined;
  try {
    process.kill(pid, 0);
  } catch {
    return undefined;
  }
  // After a reboot the pid may be some other program's: only a Node process counts.
  const command = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => undefined);
  return command === undefined || /node|wharf/.test(command) ? pid : undefined;
}

/** What a failed start says: one line with the cause and the fix, never a stack. */
function startFailure(error: unknown, options: StartOptions): Error {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'EADDRINUSE') {
    return new Error(`port ${options.port} of the edge receiver is in use by another program: choose another with --port`);
  }
  return error instanceof Error ? error : new Error(String(error));
}

async function runStart(options: StartOptions): Promise<void> {
  const logger: Logger = createCliLogger('wharf');
  const stateDir = resolve(options.stateDir);
  await mkdir(stateDir, { recursive: true });
  const lockFile = join(stateDir, 'start.pid');
  // Created exclusively: of two starts at once, one wins; a lock whose
  // process is gone (killed) is taken over.
  for (;;) {
    try {
      await writeFile(lockFile, `${process.pid}\n`, { flag: 'wx' });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const other = await liveStart(lockFile);
      if (other !== undefined) {
        throw new Error(`another \`wharf start\` (pid ${other}) runs with ${stateDir}: stop it first (kill ${other}), or pass another --state-dir`);
      }
      await rm(lockFile, { force: true });
    }
  }
  // What this start has started, stopped in reverse when it fails or ends.
  const started: (() => Promise<unknown>)[] = [async () => rm(lockFile, { force: true })];
  const stopAll = async () => {
    const failures: unknown[] = [];
    for (const stop of started.reverse()) {
      try {
        await stop();
      } catch (error) {
        failures.push(error);
      }
    }
    if (failures.length > 0) throw failures[0];
  };
  try {
    await startEverything(options, stateDir, logger, started, stopAll);
  } catch (error) {
    await stopAll().catch(() => {});
    throw startFailure(error, options);
  }
}

async function startEverything(
  options: StartOptions, stateDir: string, logger: Logger,
  started: (() => Promise<unknown>)[], stopAll: () => Promise<void>,
): Promise<void> {

  const secrets = await loadDevSecrets(stateDir);
  const given = { adminToken: process.env.WHARF_ADMIN_TOKEN, secretKeys: process.env.WHARF_SECRET_KEYS };
  const adminToken = process.env.WHARF_ADMIN_TOKEN || secrets.adminToken;
  const weakness = checkAdminToken(adminToken);
  if (weakness) throw new Error(weakness);
  // The CLI verbs run in this process's children read it from the environment too.
  process.env.WHARF_SECRET_KEYS ||= secrets.secretKeys;

  let embedded: EmbeddedPostgresServer | undefined;
  let databaseUrl = options.databaseUrl;
  if (!databaseUrl) {
    embedded = await startEmbeddedPostgres({
      dataDirectory: join(stateDir, 'pg'), persistent: true, port: secrets.postgresPort, password: secrets.postgresPassword,
    });
    started.push(() => embedded!.stop());
    if (embedded.reused) logger.warn({ port: embedded.port }, 'reusing the development database a stopped `wharf start` left running');
    databaseUrl = await ensureDatabase(embedded.url, 'wharf');
  } else {
    await checkStartDurability(databaseUrl, logger);
  }
  await migrate({ databaseUrl });

  const pool = createPool(databaseUrl, { max: options.concurrency + 6 });
  pool.on('error', () => {});
  started.push(() => pool.end());
  const githubSecretName = appVariable('GITHUB_APP_<APP>_WEBHOOK_SECRET', demo.app);
  const githubSecret = process.env[githubSecretName] || secrets.githubWebhookSecret;
  if (embedded) await setUpDemo(pool);

  const edge = await startNodeServer({
    pool,
    port: options.port,
    logger,
    env: { ...process.env, WHARF_ADMIN_TOKEN: adminToken, [githubSecretName]: githubSecret },
  });
  started.push(() => edge.close());
  const worker = createWorker({
    pool,
    handlers: options.handlers ? await loadHandlers(options.handlers) : exampleHandlers,
    concurrency: options.concurrency,
    logger,
    // WHARF_SECRET_KEYS is set above: the development ring when none was given.
    forward: forwardOptions(options, logger),
  });
  const metrics = await startMetricsServer(Registry.merge([register, workerRegistry]), options.metricsPort, {
    readiness: () => worker.readiness(),
  });
  started.push(() => metrics.close());
  await worker.start();
  // Stopped first: the worker drains and releases while the database still runs.
  started.push(() => worker.stop());
  const alerts = startAlertSender({ pool, holder: worker.id, logger, ...(options.consoleUrl !== undefined ? { consoleUrl: options.consoleUrl } : {}) });
  started.push(() => alerts.stop());

  const curl = embedded ? await sampleCurl(edge.url, githubSecret) : undefined;
  const devEnv = await writeSecondTerminalFiles(stateDir, {
    ...(embedded ? { DATABASE_URL: databaseUrl } : {}),
    WHARF_ADMIN_TOKEN: given.adminToken ? undefined : adminToken,
    WHARF_SECRET_KEYS: given.secretKeys ? undefined : secrets.secretKeys,
    [githubSecretName]: process.env[githubSecretName] ? undefined : githubSecret,
  }, curl);

  process.stdout.write(
    [
      '',
      'Wharf is running.',
      `  edge receiver   ${edge.url}/hooks/<provider>/<app or connection>`,
      `  operator API    ${edge.url}/api   (Authorization: Bearer <admin token>)`,
      `  console         ${edge.url}/console   (sign in with the admin token)`,
      `  metrics         http://127.0.0.1:${metrics.port}/metrics`,
      `  database        ${embedded ? `embedded, data in ${embedded.dataDirectory}, log in ${embedded.logFile}` : 'DATABASE_URL'}`,
      `  admin token     ${adminToken}`,
      '',
      ...(embedded ? ['For psql and the CLI in another terminal:', '', `  export DATABASE_URL='${databaseUrl}'`, ''] : []),
      ...(devEnv.length > 0
        ? [`${embedded ? 'Or, to set everything this start generated' : 'To set what this start generated'} (${devEnv.join(', ')}):`, '', `  . ${shown(join(stateDir, 'dev.env'))}`, '']
        : []),
      ...(curl
        ? [
            `Deliver a signed sample GitHub push (demo App "${demo.app}", workspace ${demo.workspaceId}; `
              + `the same curl is in ${shown(join(stateDir, 'sample-delivery.sh'))}):`,
            '',
            curl,
            '',
            `Then: curl -sS -H 'Authorization: Bearer ${adminToken}' ${edge.url}/api/workspaces/${demo.workspaceId}/events`,
            '',
          ]
        : []),
      'Ctrl-C stops everything.',
      '',
    ].join('\n'),
  );

  // npm and the shell above this process may report Ctrl-C as a signal: the
  // log says how this process itself ended.
  process.once('exit', (code) => logger.info({ code }, 'exited'));
  // PostgreSQL runs in a session of its own, so Ctrl-C and SIGHUP reach only
  // this process: the worker drains and releases, then the database stops.
  stopOnSignals(logger, stopAll);
}
