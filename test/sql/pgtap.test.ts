// Every test/sql/*.sql pgTAP suite, one per sql/ file, each in its own fresh
// migrated database.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readSqlSources } from '../../db/sql-sources.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { pgtapSuites, runPgtapSuite, tapFailures } from '../support/pgtap.js';

const suites = await pgtapSuites();

describe('pgTAP suites', () => {
  it('has one suite per sql/ file, named after it', async () => {
    const sources = (await readSqlSources()).map((source) => source.name.replace(/^\d+-/, ''));
    expect(sources.filter((name) => !suites.includes(name))).toEqual([]);
  });

  for (const suite of suites) {
    describe(suite, () => {
      let db: TestDatabase;
      beforeAll(async () => {
        db = await createTestDatabase();
      });
      afterAll(async () => {
        await db?.drop();
      });

      it('passes every assertion it plans', async () => {
        const result = await runPgtapSuite(await db.connect(), suite);
        expect(tapFailures(result)).toBeUndefined();
      });
    });
  }
});
