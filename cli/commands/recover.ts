// `wharf recover --app <app> [--since <time|duration>]`: after an incident,
// asks GitHub to redeliver every delivery of a GitHub App that failed (the
// edge or the database was down) and that the inbox has not stored. It takes
// the App's sweep lease like the scheduled sweeps of `wharf worker
// --sweep-app`, so it never sweeps alongside them, and a sweep it does not
// finish (Ctrl-C, a crash, GitHub unavailable) is resumed by the next one.
import { hostname } from 'node:os';
import { Command, InvalidArgumentError, Option } from 'commander';
import {
  createGitHubAppClient, defaultSweepLeaseMs, readGitHubAppConfig, sweepApp, type SweepProgress, type SweepResult,
} from '../../recovery/index.js';
import { parseDuration } from '../duration.js';
import { durationOption } from './option-parsers.js';
import { printJson, usageError, withDatabase, type OperatorOptions } from './operator-support.js';

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

export function recoverCommand(): Command {
  return new Command('recover')
    .description('ask GitHub to redeliver the failed deliveries of a GitHub App that the inbox has not stored')
    .requiredOption('--app <app>', 'the App, as in /hooks/github/<app> (GITHUB_APP_<APP>_ID and _PRIVATE_KEY in the environment)')
    .option('--since <when>', 'sweep back to this ISO time or this long ago (90m, 6h, 2d); default: since the last sweep', (value) => parseSince(value))
    .addOption(new Option('--database-url <url>', 'PostgreSQL connection string').env('DATABASE_URL'))
    .option('--json', 'print the result as JSON')
    .addOption(durationOption('--wait <duration>', 'how long to wait for another host\'s sweep of the App to end', 120_000))
    .addOption(durationOption('--lease <duration>',
      'how long the sweep stays claimed without a sign of life (another host takes it over after)', defaultSweepLeaseMs))
    .action((options: RecoverOptions) => withDatabase(options, async (db) => {
      let config;
      try {
        config = readGitHubAppConfig(process.env, options.app);
      } catch (error) {
        throw usageError((error as Error).message);
      }
      const progressLine = process.stderr.isTTY ? createProgressLine(options.app) : undefined;
      // An ask recorded by a process that died is asked again after staleMs:
      // longer than a request may take (30 s), so none is still in flight.
      const staleMs = Math.max(options.lease, 60_000);
      const github = createGitHubAppClient(config, {
        // A person waits at the terminal: sit out a rate limit of up to 15 minutes.
        maxWaitMs: 15 * 60_000,
        requestTimeoutMs: 30_000,
        onWait: ({ ms, reason }) => {
          if (reason === 'rate-limit') progressLine?.note(`GitHub rate limit: waiting ${Math.ceil(ms / 1000)} s`);
        },
      });
      const stop = new AbortController();
      const onSignal = (): void => {
        if (stop.signal.aborted) process.exit(130);
        stop.abort(new Error('interrupted'));
      };
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
      let result: SweepResult;
      try {
        result = await sweepApp({
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
      report(options, result);
    }));
}

function report(options: RecoverOptions, result: SweepResult): void {
  if (options.json) {
    printJson({
      app: options.app, outcome: result.outcome, since: result.since ?? null, resumed: result.resumed, pages: result.pages,
      deliveries: result.deliveries, failed: result.failed, redelivered: result.redelivered,
      already_stored: result.alreadyStored, already_requested: result.alreadyRequested, errors: result.errors,
      swept_until: result.sweptUntil ?? null, holder: result.holder ?? null, error: result.error?.message ?? null,
    });
  }
  switch (result.outcome) {
    case 'busy':
      throw usageError(`another host (${result.holder ?? 'unknown'}) is sweeping app ${options.app}` +
        `${result.leasedUntil ? ` (lease until ${result.leasedUntil.toISOString()})` : ''}; try again later or pass a longer --wait`);
    case 'failed':
      throw usageError(`the sweep of app ${options.app} stopped: ${result.error?.message ?? 'unknown error'} ` +
        `(${counts(result)}); the next sweep resumes where it stopped`);
    case 'stopped':
      if (!options.json) process.stdout.write(`stopped: ${counts(result)}; the next sweep resumes where this one stopped\n`);
      process.exitCode = 130;
      return;
    case 'done':
      if (!options.json) {
        process.stdout.write(`swept app ${options.app} back to ${result.since?.toISOString() ?? '-'}: ${counts(result)}\n`);
      }
  }
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
