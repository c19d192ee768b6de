// Redelivery sweeps on a schedule, on every worker host that is configured
// for them: each host tries every `every` (spread by a quarter either way, so
// hosts started together do not run in step), and the App's sweep lease in
// SQL lets one host at a time sweep; the others find it busy and wait for the
// next turn. After each turn the host reads when the App was last swept to
// the end (by any host), sets the gauge, and warns when that is too long ago.
//
// The sweeper is a side job of a worker host: an App whose credentials are
// wrong (a missing id or key, a key that does not decode, a JWT GitHub
// refuses) is said once a turn, naming the App and the variable to fix, and
// the host's handlers and other Apps carry on.
import { hostname } from 'node:os';
import type { Registry } from 'prom-client';
import type { Database } from '../db/database.js';
import { environment } from '../db/environment.js';
import { spread } from '../db/backoff.js';
import { createPool } from '../db/pool.js';
import { checkAppName, readGitHubAppConfig, RecoveryConfigError, type GitHubAppConfig, type RecoveryEnv } from './config.js';
import { createGitHubAppClient, type GitHubAppClient } from './github.js';
import { redeliveryMetrics } from './metrics.js';
import { sweepStatus } from './sql.js';
import { notSwept, silentLogger, sweepApp, type RecoveryLogger, type SweepOptions, type SweepResult } from './sweep.js';

/** How often a host tries the sweep of each App. */
export const defaultSweepEveryMs = environment.WHARF_SWEEP_EVERY.default;

export interface SweepScheduleOptions {
  /** The database, as a connection string (a small pool of its own, closed on stop) or a Database. */
  connectionString?: string;
  database?: Database;
  /** Wharf's names of the GitHub Apps to sweep (GITHUB_APP_<APP>_ID etc. in `env`). */
  apps: readonly string[];
  env: RecoveryEnv;
  /** How often a host tries (default 5 min). */
  everyMs?: number;
  /** Warn when an App's last complete sweep is older than this (default four turns, at least 30 min). */
  staleAfterMs?: number;
  /** When the first turn comes (default: within the first half minute). */
  firstAfterMs?: number;
  /** Default hostname:pid. */
  holder?: string;
  logger?: RecoveryLogger;
  /** Where the metrics are registered (default prom-client's registry). */
  registry?: Registry;
  /** Tunes each sweep (lease, overlap, first lookback, asks). */
  sweep?: Pick<SweepOptions, 'leaseMs' | 'staleMs' | 'overlapMs' | 'firstLookbackMs' | 'maxAsks'>;
  /** Builds the GitHub client of an App (default Octokit's, from its configuration). */
  clientFor?: (config: GitHubAppConfig) => GitHubAppClient;
}

/** An App of the schedule: its configuration, or why it cannot be read. */
type AppToSweep = { app: string; config: GitHubAppConfig; problem?: undefined } | { app: string; config?: undefined; problem: RecoveryConfigError };

export interface SweepSchedule {
  /** Runs one turn now (every App, one after the other), unless a turn is running. */
  runOnce(): Promise<SweepResult[]>;
  /** Stops the schedule: a sweep under way gives its lease back at once, keeping its cursor. */
  stop(): Promise<void>;
}

export function startRedeliverySweeps(options: SweepScheduleOptions): SweepSchedule {
  if (!options.database && !options.connectionString) throw new Error('the redelivery sweeper needs a database');
  // A name that is no App's is the command line's mistake: it fails the
  // start. An App's credentials are read now too, and one that cannot be
  // read is reported at every turn instead of sweeping.
  for (const app of options.apps) checkAppName(app);
  const apps = options.apps.map((app): AppToSweep => {
    try {
      return { app, config: readGitHubAppConfig(options.env, app) };
    } catch (error) {
      if (error instanceof RecoveryConfigError) return { app, problem: error };
      throw error;
    }
  });
  const everyMs = options.everyMs ?? defaultSweepEveryMs;
  const staleAfterMs = options.staleAfterMs ?? Math.max(4 * everyMs, 30 * 60_000);
  const logger = options.logger ?? silentLogger;
  const metrics = redeliveryMetrics(options.registry);
  const holder = options.holder ?? `${hostname()}:${process.pid}`;
  const pool = options.database ? undefined : createPool(options.connectionString!, { max: 2 });
  pool?.on('error', () => {});
  const db: Database = options.database ?? pool!;
  const clients = new Map(apps.flatMap(({ app, config }) => (config ? [[app, (options.clientFor ?? createGitHubAppClient)(config)]] : [])));
  const startedAt = Date.now();
  const stopping = new AbortController();
  let running: Promise<SweepResult[]> | undefined;
  let timer: NodeJS.Timeout | undefined;

  async function turn(): Promise<SweepResult[]> {
    const results: SweepResult[] = [];
    for (const { app, config, problem } of apps) {
      if (stopping.signal.aborted) break;
      if (!config) {
        metrics.errors.inc({ app, kind: 'config' });
        logger.error({ app, error_kind: 'config', variable: problem.variable }, problem.message);
        results.push(notSwept(problem));
        continue;
      }
      const key = { appId: config.appId, source: config.source };
      const result = await sweepApp({
        db, github: clients.get(app)!, app, key, holder, signal: stopping.signal, logger, metrics,
        ...options.sweep,
      }).catch((error: unknown): SweepResult => {
        // beginSweep itself failed (the database is down): the next turn tries again.
        metrics.errors.inc({ app, kind: 'database' });
        logger.error({ app, error_kind: 'database' }, 'redelivery sweep could not start');
        return notSwept(error as Error);
      });
      results.push(result);
      await checkFreshness(app, key).catch(() => {});
    }
    return results;
  }

  async function checkFreshness(app: string, key: { appId: string; source: string }): Promise<void> {
    const status = await sweepStatus(db, key);
    const last = status?.lastSuccessAt ?? null;
    if (last) metrics.lastSuccess.set({ app }, last.getTime() / 1000);
    const age = Date.now() - (last?.getTime() ?? startedAt);
    if (age > staleAfterMs) {
      logger.warn({
        app, last_success_at: last?.toISOString() ?? null, stale_after_s: Math.round(staleAfterMs / 1000),
        last_error: status?.lastError ?? null,
      }, last
        ? 'the last complete redelivery sweep of this GitHub App is too old: failed deliveries may be waiting'
        : 'no redelivery sweep of this GitHub App has completed yet');
    }
  }

  function runOnce(): Promise<SweepResult[]> {
    if (!running) running = turn().finally(() => (running = undefined));
    return running;
  }

  const schedule = (delay: number): void => {
    if (stopping.signal.aborted) return;
    timer = setTimeout(() => {
      void runOnce().finally(() => schedule(spread(everyMs)));
    }, delay);
    // The host's own work keeps the process alive, never this timer alone.
    timer.unref();
  };
  schedule(options.firstAfterMs ?? 1000 + Math.random() * Math.min(everyMs, 30_000));
  if (apps.length > 0) logger.info({ apps: apps.map(({ app }) => app), every_s: Math.round(everyMs / 1000) }, 'redelivery sweeps scheduled');

  return {
    runOnce,
    async stop() {
      stopping.abort(new Error('the redelivery sweeper is stopping'));
      clearTimeout(timer);
      await running?.catch(() => {});
      await pool?.end();
    },
  };
}
