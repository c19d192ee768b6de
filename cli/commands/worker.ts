// `wharf worker`: runs one host's claim loop with the handlers of a module,
// serves /metrics, and shuts down gracefully on SIGTERM/SIGINT (a second
// signal exits at once).
import { Command, Option } from 'commander';
import { createCliLogger } from '../logger.js';
import { createWorker } from '../../worker/create-worker.js';
import { loadHandlers } from '../load-handlers.js';
import { workerRegistry } from '../../worker/metrics.js';
import { startMetricsServer, type MetricsServer } from '../../worker/metrics-server.js';
import type { WorkerSettings } from '../../worker/settings.js';
import { duration, port, positiveInteger } from './option-parsers.js';
import { stopOnSignals } from './shutdown.js';

interface WorkerCommandOptions {
  handlers: string;
  concurrency: number;
  databaseUrl?: string;
  metricsPort?: number;
  workerId?: string;
  drainTimeout?: number;
  reapEvery?: number;
  retentionEvery?: number;
}

export function workerCommand(): Command {
  return new Command('worker')
    .description('claim and handle inbox events until SIGTERM/SIGINT')
    .requiredOption('--handlers <module>', 'module exporting the handler map (keys provider:event_type or provider:*)')
    .option('--concurrency <n>', 'handlers running at once', positiveInteger, 4)
    .addOption(new Option('--database-url <url>', 'PostgreSQL connection string').env('DATABASE_URL'))
    .option('--metrics-port <port>', 'serve Prometheus metrics on /metrics of this port', port)
    .option('--worker-id <id>', 'name of this host in leases (default hostname:pid:random)')
    .option('--drain-timeout <duration>', 'how long shutdown lets handlers finish (default 10s)', duration)
    .option('--reap-every <duration>', 'how often this host reaps expired leases (default 30s)', duration)
    .option('--retention-every <duration>', 'how often this host tries retention (default 1h)', duration)
    .action(async (options: WorkerCommandOptions) => {
      if (!options.databaseUrl) throw new Error('set DATABASE_URL or pass --database-url');
      const logger = createCliLogger('wharf-worker');
      const settings: Partial<WorkerSettings> = {
        ...(options.drainTimeout !== undefined ? { drainTimeout: options.drainTimeout } : {}),
        ...(options.reapEvery !== undefined ? { reapEvery: options.reapEvery } : {}),
        ...(options.retentionEvery !== undefined ? { retentionEvery: options.retentionEvery } : {}),
      };
      const worker = createWorker({
        connectionString: options.databaseUrl,
        handlers: await loadHandlers(options.handlers),
        concurrency: options.concurrency,
        settings,
        logger,
        ...(options.workerId !== undefined ? { workerId: options.workerId } : {}),
      });
      let metrics: MetricsServer | undefined;
      stopOnSignals(logger, async () => {
        await worker.stop();
        await metrics?.close();
      });
      await worker.start();
      if (options.metricsPort !== undefined) {
        metrics = await startMetricsServer(workerRegistry, options.metricsPort);
        logger.info({ port: metrics.port }, 'metrics on /metrics');
      }
    });
}
