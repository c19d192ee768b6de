// Every test/sql/*.sql pgTAP suite, each in its own fresh migrated database.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { pgtapSuites, runPgtapSuite, tapFailures } from '../support/pgtap.js';

const suites = await pgtapSuites();

describe('pgTAP suites', () => {
  it('has suites to run', () => {
    expect(suites.length).toBeGreaterThan(0);
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
