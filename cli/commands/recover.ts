// `wharf recover --app <app> [--since <time|duration>]`: after an incident,
// asks GitHub to redeliver every delivery of a GitHub App that failed (the
// edge or the database was down) and that the inbox has not stored. It takes
// the App's sweep lease like the scheduled sweeps of `wharf worker
// --sweep-app`, so it never sweeps alongside them, and a sweep it does not
// finish (Ctrl-C, a crash, GitHub unavailable) is resumed by the next one.
// It names every delivery it gave up on, says what to fix (the App and the
// variable) or what happened at which URL, and exits with a code a script
// can act on (recoverExit).
import { hostname } from 'node:os';
import { Command, InvalidArgumentError, Option } from 'commander';
import type { Database } from '../../db/database.js';
import {
  checkAppName, createGitHubAppClient, defaultSweepLeaseMs, errorKind, GitHubApiError, notSwept, readGitHubAppConfig,
  RecoveryConfigError, sweepApp,
  type GaveUp, type GitHubAppConfig, type SweepProgress, type SweepResult,
} from '../../recovery/index.js';
import { formatDuration, parseDuration } from '../duration.js';
import { durationOption } from './option-parsers.js';
import { printJson, withDatabase, type OperatorOptions } from './operator-support.js';

interface RecoverOptions extends OperatorOptions {
  app: string;
  since?: Date;
  wait: number;
  lease: number;
}

/** An ISO time (`2025-01-31T09:00:00Z`) or how long ago, as a duration (`90m`, `6h`, `2d`). */
export function parseSince(text: string, now = Date.now()): Date {
  const time = Date.parse(text);
  if (/\d{4}-\d{2}-\d{2}/.test(text) && !Number.isNaN(time)) {
    if (time > now) throw new InvalidArgumentError(`${text} is in the future`);
    return new Date(time);
  }
  try {
    return new Date(now - parseDuration(text));
  } catch {
    throw new InvalidArgumentError(`expected an ISO time (2025-01-31T09:00:00Z) or a duration (90m, 6h, 2d), not ${JSON.stringify(text)}`);
  }
}

function appName(value: string): string {
  try {
    checkAppName(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
  return value;
}

export function recoverCommand(): Command {
  return new Command('recover')
    .description('ask GitHub to redeliver the failed deliveries of a GitHub App that the inbox has not stored')
    .requiredOption('--app <app>', 'the App, as in /hooks/github/<app> (GITHUB_APP_<APP>_ID and _PRIVATE_KEY in the environment)',
      appName)
    .option('--since <when>', 'sweep back to this ISO time or this long ago (90m, 6h, 2d); default: since the last sweep', (value) => parseSince(value))
    .addOption(new Option('--database-url <url>', 'PostgreSQL connection string').env('DATABASE_URL'))
    .option('--json', 'print the result as JSON')
    .addOption(durationOption('--wait <duration>', 'how long to wait for another host\'s sweep of the App to end', 120_000))
    .addOption(durationOption('--lease <duration>',
      'how long the sweep stays claimed without a sign of life (another host takes it over after)', defaultSweepLeaseMs))
    .addHelpText('after', `
Exit codes:
  ${recoverExit.done}    swept to the end
  ${recoverExit.other}    anything else (bad arguments, the database, another host still sweeping after --wait)
  ${recoverExit.gaveUp}    swept to the end, but deliveries were given up on (each is named)
  ${recoverExit.config}    the App's configuration: its id or key missing or unreadable, or GitHub refused its JWT
  ${recoverExit.github}    GitHub or the network failed (no answer, 5xx, a long rate limit); the next sweep resumes
  ${recoverExit.interrupted}  interrupted (Ctrl-C); the next sweep resumes`)
    .action(async (options: RecoverOptions) => {
      let config: GitHubAppConfig;
      try {
        config = readGitHubAppConfig(process.env, options.app);
      } catch (error) {
        if (!(error instanceof RecoveryConfigError)) throw error;
        // Before any database or GitHub: what to fix in the environment.
        report(options, notSwept(error));
        return;
      }
      await withDatabase(options, async (db) => report(options, await sweep(options, db, config)));
    });
}

async function sweep(options: RecoverOptions, db: Database, config: GitHubAppConfig): Promise<SweepResult> {
  const progressLine = process.stderr.isTTY ? createProgressLine(options.app) : undefined;
  // An ask recorded by a process that died is asked again after staleMs:
  // longer than a request may take (30 s), so none is still in flight.
  const staleMs = Math.max(options.lease, 60_000);
  const github = createGitHubAppClient(config, {
    // A person waits at the terminal: sit out a rate limit of up to 15 minutes.
    maxWaitMs: 15 * 60_000,
    requestTimeoutMs: 30_000,
    onWait: ({ ms, reason }) => {
      if (reason === 'rate-limit') progressLine?.note(`GitHub rate limit: waiting ${formatDuration(Math.ceil(ms / 1000) * 1000)}`);
    },
  });
  const stop = new AbortController();
  const onSignal = (): void => {
    if (stop.signal.aborted) process.exit(recoverExit.interrupted);
    stop.abort(new Error('interrupted'));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    return await sweepApp({
      db, github, app: options.app, key: { appId: config.appId, source: config.source },
      holder: `cli:${hostname()}:${process.pid}`,
      ...(options.since ? { since: options.since } : {}),
      leaseMs: options.lease,
      staleMs,
      waitForLeaseMs: options.wait,
      signal: stop.signal,
      onProgress: (progress) => progressLine?.update(progress),
    });
  } finally {
    progressLine?.end();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

/**
 * `wharf recover`'s exit codes (README, "The GitHub redelivery sweeper"): a
 * script tells "all done" from "done, but some deliveries need a person"
 * from "fix the configuration" from "try again later".
 */
export const recoverExit = {
  /** The window was swept to its end, and nothing was given up. */
  done: 0,
  /** Anything else: bad arguments, the database, another host still sweeping after --wait, this sweep taken over. */
  other: 1,
  /** The window was swept to its end, but deliveries were given up on (each is named). */
  gaveUp: 2,
  /** The App's configuration: an id or key missing or unreadable, or GitHub refusing the App's JWT. */
  config: 3,
  /** GitHub or the network: no answer, a 5xx, a rate limit longer than 15 minutes. The next sweep resumes. */
  github: 4,
  /** Stopped by Ctrl-C or SIGTERM. The next sweep resumes. */
  interrupted: 130,
} as const;

export function recoverExitCode(result: SweepResult): number {
  switch (result.outcome) {
    case 'done':
      return result.gaveUp.length > 0 ? recoverExit.gaveUp : recoverExit.done;
    case 'stopped':
      return recoverExit.interrupted;
    case 'busy':
      return recoverExit.other;
    case 'failed':
      switch (errorKind(result.error)) {
        case 'config':
        case 'unauthorized':
          return recoverExit.config;
        case 'rate-limited':
        case 'unavailable':
        case 'unreachable':
        case 'rejected':
          return recoverExit.github;
        default:
          return recoverExit.other;
      }
  }
}

function report(options: RecoverOptions, result: SweepResult): void {
  const exitCode = recoverExitCode(result);
  const error = result.error;
  if (options.json) {
    printJson({
      app: options.app, outcome: result.outcome, exit_code: exitCode, since: result.since ?? null, resumed: result.resumed,
      pages: result.pages, deliveries: result.deliveries, failed: result.failed, redelivered: result.redelivered,
      already_stored: result.alreadyStored, already_requested: result.alreadyRequested, errors: result.errors,
      gave_up: result.gaveUp.map((given) => ({
        guid: given.guid, delivery_id: given.deliveryId, event: given.event, reason: given.reason,
        ...(given.asks !== undefined ? { asks: given.asks } : {}), ...(given.status !== undefined ? { status: given.status } : {}),
      })),
      swept_until: result.sweptUntil ?? null, holder: result.holder ?? null,
      error: error?.message ?? null,
      error_kind: error ? errorKind(error) : null,
      error_status: error instanceof GitHubApiError ? error.status ?? null : null,
      error_url: error instanceof GitHubApiError ? error.url ?? null : null,
      error_cause: error instanceof GitHubApiError ? error.noAnswer ?? null : null,
      error_variable: error instanceof RecoveryConfigError ? error.variable ?? null : null,
    });
  }
  const problem = (message: string): void => {
    process.stderr.write(`wharf: ${message}\n`);
  };
  if (!options.json && result.outcome === 'done') {
    process.stdout.write(`swept app ${options.app} back to ${result.since?.toISOString() ?? '-'}: ${counts(result)}\n`);
  }
  if (!options.json && result.gaveUp.length > 0) process.stdout.write(gaveUpLines(result.gaveUp));
  switch (result.outcome) {
    case 'busy':
      problem(`another host (${result.holder ?? 'unknown'}) is sweeping app ${options.app}` +
        `${result.leasedUntil ? ` (lease until ${result.leasedUntil.toISOString()})` : ''}; try again later or pass a longer --wait`);
      break;
    case 'failed':
      // An App never swept (its configuration) is said as it is; a sweep that stopped says where it stands.
      problem(result.since === undefined && error instanceof RecoveryConfigError ? error.message
        : `the sweep of app ${options.app} stopped: ${error?.message ?? 'unknown error'} ` +
          `(${counts(result)}); the next sweep resumes where it stopped`);
      break;
    case 'stopped':
      if (!options.json) process.stdout.write(`stopped: ${counts(result)}; the next sweep resumes where this one stopped\n`);
      break;
    case 'done':
      break;
  }
  process.exitCode = exitCode;
}

/** The deliveries given up on, one a line, for a person to redeliver by hand. */
function gaveUpLines(gaveUp: readonly GaveUp[]): string {
  const lines = gaveUp.map((given) => `  ${given.guid} ${given.event ?? '-'}: ${given.reason === 'max-asks'
    ? `still not stored after ${given.asks ?? 'the most'} redeliveries`
    : `GitHub refused to redeliver it${given.status !== undefined ? ` (${given.status})` : ''}`}`);
  const count = gaveUp.length === 1 ? '1 delivery' : `${gaveUp.length} deliveries`;
  return `gave up on ${count} (redeliver by hand from the App's settings, Advanced, once Wharf stores deliveries):\n` +
    `${lines.join('\n')}\n`;
}

function counts(progress: SweepProgress): string {
  return `${progress.pages} pages, ${progress.deliveries} deliveries, ${progress.failed} failed, ` +
    `${progress.redelivered} redelivered, ${progress.alreadyStored} already stored, ` +
    `${progress.alreadyRequested} already requested, ${progress.errors} errors`;
}

/**
 * One line on the terminal, redrawn in place: how far back from the newest
 * delivery the sweep has reached, as a share of its window, and the counts.
 */
function createProgressLine(app: string): { update(progress: SweepProgress): void; note(text: string): void; end(): void } {
  const startedAt = Date.now();
  let last: SweepProgress | undefined;
  let note = '';
  const draw = (): void => {
    if (!last) return;
    const width = 24;
    const span = last.since ? startedAt - last.since.getTime() : 0;
    const covered = last.reachedBack && span > 0 ? (startedAt - last.reachedBack.getTime()) / span : 0;
    const share = Math.min(1, Math.max(0, covered));
    const filled = Math.round(share * width);
    const bar = `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${String(Math.round(share * 100)).padStart(3)}%`;
    process.stderr.write(`\r\x1b[K${app} ${bar} ${counts(last)}${note ? ` · ${note}` : ''}`);
  };
  return {
    update(progress) {
      last = progress;
      note = '';
      draw();
    },
    note(text) {
      note = text;
      draw();
    },
    end() {
      if (last) process.stderr.write('\n');
    },
  };
}
