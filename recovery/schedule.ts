// Redelivery sweeps on a schedule, on every worker host that is configured
// for them: each host tries every `every` (spread by a quarter either way, so
// hosts started together do not run in step), and the App's sweep lease in
// SQL lets one host at a time sweep; the others find it busy and wait for the
// next turn. After each turn the host reads when the App was last swept to
// the end (by any host), sets the gauge, and warns when that is too long ago.
import { hostname } from 'node:os';
import pg from 'pg';
import type { Registry } from 'prom-client';
import type { Database } from '../db/database.js';
import { environment } from '../db/environment.js';
import { readGitHubAppConfig, type GitHubAppConfig, type RecoveryEnv } from './config.js';
import { createGitHubAppClient, type GitHubAppClient } from './github.js';
import { redeliveryMetrics } from './metrics.js';
import { sweepStatus } from './sql.js';
import { silentLogger, sweepApp, type RecoveryLogger, type SweepOptions, type SweepResult } from './sweep.js';

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

export interface SweepSchedule {
  /** Runs one turn now (every App, one after the other), unless a turn is running. */
  runOnce(): Promise<SweepResult[]>;
  /** Stops the schedule: a sweep under way gives its lease back at once, keeping its cursor. */
  stop(): Promise<void>;
}

export function startRedeliverySweeps(options: SweepScheduleOptions): SweepSchedule {
  if (!options.database && !options.connectionString) throw new Error('the redelivery sweeper needs a database');
  // Read every App's configuration now: a missing id or key fails the start,
  // not a sweep an hour later.
  const apps = options.apps.map((app) => readGitHubAppConfig(options.env, app));
  const everyMs = options.everyMs ?? environment.WHARF_SWEEP_EVERY.default;
  const staleAfterMs = options.staleAfterMs ?? Math.max(4 * everyMs, 30 * 60_000);
  const logger = options.logger ?? silentLogger;
  const metrics = redeliveryMetrics(options.registry);
  const holder = options.holder ?? `${hostname()}:${process.pid}`;
  const pool = options.database ? undefined : new pg.Pool({ connectionString: options.connectionString, max: 2 });
  pool?.on('error', () => {});
  const db: Database = options.database ?? pool!;
  const clients = new Map(apps.map((config) => [config.app, (options.clientFor ?? createGitHubAppClient)(config)]));
  const startedAt = Date.now();
  const stopping = new AbortController();
  let running: Promise<SweepResult[]> | undefined;
  let timer: NodeJS.Timeout | undefined;

  async function turn(): Promise<SweepResult[]> {
    const results: SweepResult[] = [];
    for (const config of apps) {
      if (stopping.signal.aborted) break;
      const key = { appId: config.appId, source: config.source };
      const result = await sweepApp({
        db, github: clients.get(config.app)!, app: config.app, key, holder, signal: stopping.signal, logger, metrics,
        ...options.sweep,
      }).catch((error: unknown): SweepResult => {
        // beginSweep itself failed (the database is down): the next turn tries again.
        metrics.errors.inc({ app: config.app, kind: 'database' });
        logger.error({ app: config.app, error_kind: 'database' }, 'redelivery sweep could not start');
        return {
          outcome: 'failed', error: error as Error, since: undefined, resumed: false, pages: 0, deliveries: 0, failed: 0,
          redelivered: 0, alreadyStored: 0, alreadyRequested: 0, errors: 1, reachedBack: undefined,
        };
      });
      results.push(result);
      await checkFreshness(config.app, key).catch(() => {});
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
      void runOnce().finally(() => schedule(everyMs * (0.75 + Math.random() * 0.5)));
    }, delay);
    // The host's own work keeps the process alive, never this timer alone.
    timer.unref();
  };
  schedule(options.firstAfterMs ?? 1000 + Math.random() * Math.min(everyMs, 30_000));
  if (apps.length > 0) logger.info({ apps: apps.map((config) => config.app), every_s: Math.round(everyMs / 1000) }, 'redelivery sweeps scheduled');

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
