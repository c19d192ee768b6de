// Every test/sql/*.sql pgTAP suite, each in its own fresh migrated database.
// pgTAP missing is a failure, never a skip: CI must not pass without it.
import { readdir, readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './support/database.js';
import { pgtapAvailable, runPgtapFile } from './support/pgtap.js';

const suiteDirectory = new URL('./sql/', import.meta.url);
const suites = (await readdir(suiteDirectory)).filter((name) => name.endsWith('.sql')).sort();

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
        const client = await db.connect();
        if (!(await pgtapAvailable(client))) {
          throw new Error(
            'pgTAP is not installed on the test PostgreSQL server. On Debian: ' +
              'apt-get install -y postgresql-15-pgtap (see README.md, "Tests").',
          );
        }
        await client.query('CREATE EXTENSION IF NOT EXISTS pgtap');
        // Session-local helpers the suites share (pg_temp functions).
        await client.query(await readFile(new URL('fixtures/inbox-rows.sql', suiteDirectory), 'utf8'));
        const sql = await readFile(new URL(suite, suiteDirectory), 'utf8');
        const result = await runPgtapFile(client, sql);
        const report = result.lines.join('\n');
        expect(result.failed, report).toEqual([]);
        expect(result.planned, report).toBeGreaterThan(0);
        expect(result.passed.length, report).toBe(result.planned);
      });
    });
  }
});
