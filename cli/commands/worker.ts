// `wharf worker`: runs one host's claim loop with the handlers of a module,
// serves /metrics, and shuts down gracefully on SIGTERM/SIGINT (a second
// signal exits at once).
import { Command, InvalidArgumentError, Option } from 'commander';
import pg from 'pg';
import { environment } from '../../db/environment.js';
import { startAlertSender } from '../../worker/alerts.js';
import { createCliLogger } from '../logger.js';
import { createWorker } from '../../worker/create-worker.js';
import { loadHandlers } from '../load-handlers.js';
import { defaultSweepEveryMs, defaultSweepLeaseMs, parseAppList, startRedeliverySweeps } from '../../recovery/index.js';
import { workerRegistry } from '../../worker/metrics.js';
import { startMetricsServer, type MetricsServer } from '../../worker/metrics-server.js';
import { hostSettingDefaults, type WorkerSettings } from '../../worker/settings.js';
import { baseUrl, durationOption, port, positiveInteger } from './option-parsers.js';
import { stopOnSignals } from './shutdown.js';
import { checkStartDurability } from './synchronous-standby.js';
import { parseAllowNetworks } from '../../worker/forwarding/address-guard.js';
import type { ForwardOptions } from '../../worker/create-worker.js';
import type { Logger } from 'pino';

interface WorkerCommandOptions {
  handlers?: string;
  concurrency: number;
  localQueue: number;
  databaseUrl?: string;
  metricsPort?: number;
  metricsHost: string;
  ignoreUnhandled?: boolean;
  workerId?: string;
  drainTimeout: number;
  reapEvery: number;
  retentionEvery: number;
  sweepApp?: string[];
  sweepEvery: number;
  sweepLease: number;
  alertEvery: number;
  alerts: boolean;
  consoleUrl?: string;
  forward: boolean;
  forwardConcurrency: number;
  forwardAllowPrivate?: boolean;
  forwardAllowNetworks?: string;
}

/** The forwarding options `wharf worker` and `wharf start` share. */
export function addForwardOptions(command: Command): Command {
  return command
    .option('--no-forward', 'do not forward destination deliveries from this host (forwarding is on by default)')
    .option('--forward-concurrency <n>', 'requests to destinations this host keeps open at once (each destination\'s own bound and rate limit hold across hosts)', positiveInteger, 32)
    .option('--forward-allow-private', 'let destinations resolve to loopback, private, link-local and unique-local addresses (for an application on the same network); metadata addresses stay refused')
    .addOption(new Option('--forward-allow-networks <cidrs>', 'comma-separated networks (CIDRs) destinations may resolve to whatever their range, e.g. 10.20.0.0/16,fd12::/64')
      .argParser((value: string) => {
        try {
          parseAllowNetworks(value);
        } catch (error) {
          throw new InvalidArgumentError((error as Error).message.replace(/^WHARF_FORWARD_ALLOW_NETWORKS: /, ''));
        }
        return value;
      }));
}

/**
 * createWorker's `forward` from the options: off with --no-forward. The key
 * ring is WHARF_SECRET_KEYS; without it the host still starts (a deployment
 * may have no destination), says so, and names the variable again when a
 * delivery it cannot sign turns up.
 */
export function forwardOptions(
  options: { forward: boolean; forwardConcurrency: number; forwardAllowPrivate?: boolean; forwardAllowNetworks?: string },
  logger: Logger,
): ForwardOptions | false {
  if (!options.forward) return false;
  const secretKeys = process.env.WHARF_SECRET_KEYS;
  if (!secretKeys) {
    // Said once here, at info: most deployments without the ring have no destination. A delivery
    // that turns up is logged as an error naming the variable (worker/forwarding/forward-loop.ts).
    logger.info('WHARF_SECRET_KEYS is not set: this host cannot sign requests to destinations, and leaves their deliveries to hosts that can (set it to the key ring the destinations\' secrets were sealed with, or pass --no-forward)');
  }
  // The flags win over the environment, read directly rather than with
  // commander's .env(), which takes `false` as set for a boolean flag.
  const allowNetworks = options.forwardAllowNetworks ?? process.env.WHARF_FORWARD_ALLOW_NETWORKS;
  return {
    ...(secretKeys ? { secretKeys } : {}),
    concurrency: options.forwardConcurrency,
    addresses: {
      allowPrivate: options.forwardAllowPrivate ?? process.env.WHARF_FORWARD_ALLOW_PRIVATE === 'true',
      ...(allowNetworks !== undefined ? { allowNetworks } : {}),
    },
  };
}

export function workerCommand(): Command {
  const command = new Command('worker')
    .description('claim and handle inbox events until SIGTERM/SIGINT')
    .option('--handlers <module>', 'module exporting the handler map (keys provider:event_type or provider:*); without it the host only forwards to destinations')
    .option('--concurrency <n>', 'handlers running at once', positiveInteger, 4)
    .option('--local-queue <n>', 'claimed events that may wait for a free handler (claims take that many at once; 0: one per free handler)',
      (value: string) => (value === '0' ? 0 : positiveInteger(value)), 0)
    .addOption(new Option('--database-url <url>', 'PostgreSQL connection string').env('DATABASE_URL'))
    .option('--metrics-port <port>', 'serve Prometheus metrics on /metrics of this port', port)
    .option('--metrics-host <host>', 'address the metrics port listens on (0.0.0.0 for every interface)', '127.0.0.1')
    .option('--worker-id <id>', 'name of this host in leases (default hostname:pid:random)')
    .option('--ignore-unhandled', 'claim every event type, completing those without a handler as ignored (no host anywhere handles them)')
    .addOption(durationOption('--drain-timeout <duration>', 'how long shutdown lets handlers finish', hostSettingDefaults.drainTimeout))
    .addOption(durationOption('--reap-every <duration>', 'how often this host reaps expired leases', hostSettingDefaults.reapEvery))
    .addOption(durationOption('--retention-every <duration>', 'how often this host tries retention', hostSettingDefaults.retentionEvery))
    .addOption(new Option('--sweep-app <apps>', 'GitHub Apps (comma-separated, repeatable) whose failed deliveries this host sweeps and asks GitHub to redeliver (GITHUB_APP_<APP>_ID, _PRIVATE_KEY)')
      .env('WHARF_SWEEP_APPS').argParser((value: string, previous: string[] = []) => [...previous, ...parseAppList(value)]))
    .addOption(durationOption('--sweep-every <duration>', 'how often this host tries the redelivery sweep (one host at a time sweeps)',
      defaultSweepEveryMs).env('WHARF_SWEEP_EVERY'))
    .addOption(durationOption('--sweep-lease <duration>',
      'how long a sweep stays claimed without a sign of life (another host takes over the sweep of a host that died after)',
      defaultSweepLeaseMs).env('WHARF_SWEEP_LEASE'))
    .addOption(durationOption('--alert-every <duration>', 'how often this host tries to send alerts (one host at a time evaluates the rules and sends)',
      environment.WHARF_ALERT_EVERY.default).env('WHARF_ALERT_EVERY'))
    .option('--no-alerts', 'never evaluate alert rules or send alerts on this host')
    .addOption(new Option('--console-url <url>', "the console's public URL (e.g. https://wharf.example.com/console): alerts link to their issue's or stuck scopes' page")
      .env('WHARF_CONSOLE_URL').argParser(baseUrl))
    .action(async (options: WorkerCommandOptions) => {
      if (!options.databaseUrl) throw new Error('set DATABASE_URL or pass --database-url');
      const logger = createCliLogger('wharf-worker');
      if (options.handlers === undefined && !options.forward) throw new Error('pass --handlers, or let the host forward (no --no-forward): with neither it has nothing to do');
      await checkStartDurability(options.databaseUrl, logger);
      const settings: Partial<WorkerSettings> = {
        drainTimeout: options.drainTimeout, reapEvery: options.reapEvery, retentionEvery: options.retentionEvery,
      };
      const worker = createWorker({
        connectionString: options.databaseUrl,
        // No handler map: a host that only forwards claims none of the handlers' events.
        handlers: options.handlers === undefined ? {} : await loadHandlers(options.handlers),
        concurrency: options.concurrency,
        localQueue: options.localQueue,
        settings,
        logger,
        ...(options.workerId !== undefined ? { workerId: options.workerId } : {}),
        ignoreUnhandled: options.ignoreUnhandled ?? false,
        forward: forwardOptions(options, logger),
      });
      // A malformed App name fails the start here; an App whose id or key
      // cannot be read is logged at every turn while the handlers carry on.
      const sweeps = options.sweepApp?.length
        ? startRedeliverySweeps({
          connectionString: options.databaseUrl, apps: options.sweepApp, env: process.env, registry: workerRegistry, logger,
          everyMs: options.sweepEvery, sweep: { leaseMs: options.sweepLease },
        })
        : undefined;
      // Its own small pool: a slow receiver never holds a claim loop's connection.
      const alertPool = options.alerts ? new pg.Pool({ connectionString: options.databaseUrl, max: 1 }) : undefined;
      alertPool?.on('error', () => {});
      const alerts = alertPool
        ? startAlertSender({
          pool: alertPool, holder: worker.id, everyMs: options.alertEvery, logger,
          ...(options.consoleUrl !== undefined ? { consoleUrl: options.consoleUrl } : {}),
        })
        : undefined;
      const stopAll = async (): Promise<void> => {
        await alerts?.stop();
        await alertPool?.end();
        await sweeps?.stop();
        await worker.stop();
        await metrics?.close();
      };
      let metrics: MetricsServer | undefined;
      try {
        // The metrics port first: a busy port is a clean start failure, before
        // anything is claimed.
        if (options.metricsPort !== undefined) {
          metrics = await startMetricsServer(workerRegistry, options.metricsPort, { host: options.metricsHost, readiness: () => worker.readiness() });
          logger.info({ port: metrics.port }, 'metrics on /metrics, health on /healthz and /readyz');
        }
        stopOnSignals(logger, stopAll);
        await worker.start();
      } catch (error) {
        // A refused start (a busy port, a database that says no) leaves nothing running.
        await stopAll().catch(() => {});
        throw error;
      }
    });
  return addForwardOptions(command);
}
