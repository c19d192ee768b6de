// A database created at every earlier release, and two created before
// releases existed, upgrade with a plain `wharf migrate` to exactly the
// schema of a new one, and then pass every pgTAP suite.
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { schemaSnapshot, schemaSnapshotFile } from '../../cli/sql-release/schema-snapshot.js';
import { migrate } from '../../db/migrate.js';
import { readLock } from '../../db/migration-files.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { pgtapSuites, runPgtapSuite, tapFailures } from '../support/pgtap.js';
import { createScratchDatabase } from '../../cli/scratch-database.js';
import { runWharf } from '../support/wharf-cli.js';

interface StartingPoint {
  name: string;
  /** Brings an empty database to the starting point. */
  create(db: TestDatabase): Promise<void>;
}

const lock = await readLock();
const releases = [...new Set(lock.map((entry) => entry.release))];
const startingPoints: StartingPoint[] = [
  // Every release but the newest, from its own frozen migrations.
  ...releases.slice(0, -1).map((release) => ({
    name: `release ${release}`,
    create: (db: TestDatabase) => migrate({
      databaseUrl: db.url,
      count: lock.findLastIndex((entry) => entry.release === release) + 1,
    }),
  })),
  // Databases made by `wharf migrate` at two commits before 0.1.0 (pg_dump of each).
  ...['1f39599', 'a541772'].map((commit) => ({
    name: `a database created at ${commit}`,
    create: async (db: TestDatabase) => {
      const client = await db.connect();
      await client.query(await readFile(new URL(`fixtures/created-at-${commit}.sql`, import.meta.url), 'utf8'));
      await client.end();
    },
  })),
];
const suites = await pgtapSuites();

for (const start of startingPoints) {
  describe(`${start.name}, upgraded by wharf migrate`, () => {
    let db: TestDatabase;
    beforeAll(async () => {
      db = await createTestDatabase({ migrate: false });
      await start.create(db);
    });
    afterAll(async () => {
      await db?.drop();
    });

    it('migrates without a manual step to the schema of a new database', async () => {
      const result = await runWharf(['migrate'], { DATABASE_URL: db.url });
      expect(result.stderr).not.toMatch(/error/i);
      expect(result.code).toBe(0);
      expect(await schemaSnapshot(db.url)).toBe(await readFile(schemaSnapshotFile, 'utf8'));
      // A template for the suites below: nothing may stay connected to it.
      await db.pool.end();
    });

    for (const suite of suites) {
      it(`then passes ${suite}`, async () => {
        const copy = await createScratchDatabase(inject('postgresUrl'), { prefix: 'wharf_upgraded', template: db.name });
        try {
          expect(tapFailures(await runPgtapSuite(await copy.connect(), suite))).toBeUndefined();
        } finally {
          await copy.drop();
        }
      });
    }
  });
}
