// `wharf serve`: the edge receiver (and operator API) on Node.
import { Command, Option } from 'commander';
import { createCliLogger } from '../logger.js';
import { startEdgeServer } from '../../server/node.js';
import { port } from './option-parsers.js';
import { stopOnSignals } from './shutdown.js';

interface ServeOptions {
  port: number;
  host: string;
  databaseUrl?: string;
}

export function serveCommand(): Command {
  return new Command('serve')
    .description('run the edge receiver and operator API on Node until SIGTERM/SIGINT')
    .option('--port <port>', 'port to listen on', port, 8787)
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .addOption(new Option('--database-url <url>', 'PostgreSQL connection string').env('DATABASE_URL'))
    .action(async (options: ServeOptions) => {
      if (!options.databaseUrl) throw new Error('set DATABASE_URL or pass --database-url');
      const logger = createCliLogger('wharf-edge');
      const edge = await startEdgeServer({
        databaseUrl: options.databaseUrl,
        port: options.port,
        hostname: options.host,
        logger,
      });
      logger.info({ url: edge.url }, 'edge receiver listening');
      stopOnSignals(logger, () => edge.close());
    });
}
