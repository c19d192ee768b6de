// Once per test run: the PostgreSQL server, and one database migrated from
// empty that every test database is copied from.
import type { TestProject } from 'vitest/node';
import { startPostgresServer } from '../../cli/postgres-server.js';
import { createScratchDatabase } from '../../cli/scratch-database.js';

declare module 'vitest' {
  export interface ProvidedContext {
    postgresUrl: string;
    /** The migrated database that createTestDatabase copies. */
    templateDatabase: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startPostgresServer();
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
