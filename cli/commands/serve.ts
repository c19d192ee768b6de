// `wharf serve`: the edge receiver (/hooks) on Node, and the operator API
// (/api) when an operator token is configured, each on its own database role.
import { Command, Option } from 'commander';
import { createCliLogger } from '../logger.js';
import { checkAdminToken } from '../../operator/api/auth.js';
import { startNodeServer } from '../../server/node.js';
import { port } from './option-parsers.js';
import { stopOnSignals } from './shutdown.js';
import { checkStartDurability } from './synchronous-standby.js';

interface ServeOptions {
  port: number;
  host: string;
  databaseUrl?: string;
  operatorDatabaseUrl?: string;
}

export function serveCommand(): Command {
  return new Command('serve')
    .description('run the edge receiver, and the operator API when WHARF_ADMIN_TOKEN is set, until SIGTERM/SIGINT')
    .option('--port <port>', 'port to listen on', port, 8787)
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .addOption(new Option('--database-url <url>', 'PostgreSQL connection string, as the edge\'s role').env('DATABASE_URL'))
    .addOption(new Option('--operator-database-url <url>', 'the operator API\'s connection string, as its role (default: --database-url)')
      .env('WHARF_OPERATOR_DATABASE_URL'))
    .action(async (options: ServeOptions) => {
      if (!options.databaseUrl) throw new Error('set DATABASE_URL or pass --database-url');
      const weakness = process.env.WHARF_ADMIN_TOKEN ? checkAdminToken(process.env.WHARF_ADMIN_TOKEN) : undefined;
      if (weakness) throw new Error(weakness);
      const logger = createCliLogger('wharf-edge');
      await checkStartDurability(options.databaseUrl, logger);
      const server = await startNodeServer({
        databaseUrl: options.databaseUrl,
        ...(options.operatorDatabaseUrl ? { operatorDatabaseUrl: options.operatorDatabaseUrl } : {}),
        port: options.port,
        hostname: options.host,
        logger,
      });
      logger.info({ url: server.url, operator_api: Boolean(process.env.WHARF_ADMIN_TOKEN) }, 'listening');
      if (process.env.WHARF_ADMIN_TOKEN && !options.operatorDatabaseUrl) {
        logger.warn('the operator API uses the edge\'s database role: give it its own with WHARF_OPERATOR_DATABASE_URL (docs/sql.md, "Roles")');
      }
      stopOnSignals(logger, () => server.close());
    });
}
