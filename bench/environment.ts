// Where and with what a run measured: versions, machine and server settings.
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { onServer } from '../cli/scratch-database.js';

export interface Environment {
  node: string;
  packages: Record<string, string>;
  postgres: string;
  serverSettings: Record<string, string>;
  cpus: string;
  memory: string;
  platform: string;
}

function packageVersion(name: string): string {
  const file = new URL(`../node_modules/${name}/package.json`, import.meta.url);
  return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
}

export async function describeEnvironment(serverUrl: string): Promise<Environment> {
  return onServer(serverUrl, async (client) => {
    const { rows } = await client.query<{ name: string; setting: string; unit: string | null }>(
      `SELECT name, setting, unit FROM pg_settings
        WHERE name IN ('server_version', 'shared_buffers', 'synchronous_commit', 'fsync', 'max_connections',
                       'wal_level', 'shared_preload_libraries', 'autovacuum')`);
    const serverSettings = Object.fromEntries(
      rows.map((row) => [row.name, row.unit ? `${row.setting} × ${row.unit}` : row.setting]));
    const cpus = os.cpus();
    return {
      node: process.version,
      packages: Object.fromEntries(['wharf', 'graphile-worker', 'pg-boss', 'pg', 'autocannon'].map((name) => [
        name,
        name === 'wharf'
          ? (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version
          : packageVersion(name),
      ])),
      postgres: serverSettings.server_version ?? 'unknown',
      serverSettings,
      cpus: `${cpus.length} × ${cpus[0]?.model ?? 'unknown'}`,
      memory: `${(os.totalmem() / 2 ** 30).toFixed(1)} GiB`,
      platform: `${os.type()} ${os.release()} ${os.arch()}`,
    };
  });
}
