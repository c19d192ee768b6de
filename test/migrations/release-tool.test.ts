// npm run sql:release's plan, on a database whose functions differ from
// sql/: it writes the statements of sql/ that change them, DROP first where
// a signature changed, and gives the dropped function's grants to the new
// one of the same name (a DROP takes them with it).
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { planRelease } from '../../cli/sql-release/plan-release.js';
import { onServer } from '../../cli/scratch-database.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

let db: TestDatabase;
const role = `wharf_release_test_${randomBytes(4).toString('hex')}`;
beforeAll(async () => {
  db = await createTestDatabase();
  await db.pool.query(`CREATE ROLE ${role}`);
});
afterAll(async () => {
  await db?.drop();
  await onServer(inject('postgresUrl'), (client) => client.query(`DROP ROLE IF EXISTS ${role}`));
});

it('drops a function whose signature changed, creates it from sql/, and keeps its grants', async () => {
  const client = await db.connect();
  // As if released with claim's older signature, granted to a worker role.
  await client.query('DROP FUNCTION wharf.claim(text, integer, text[])');
  await client.query(`CREATE FUNCTION wharf.claim(p_worker text, p_max integer) RETURNS SETOF wharf.provider_event
                      LANGUAGE sql AS 'SELECT * FROM wharf.provider_event WHERE false'`);
  await client.query(`REVOKE ALL ON FUNCTION wharf.claim(text, integer) FROM PUBLIC`);
  await client.query(`GRANT EXECUTE ON FUNCTION wharf.claim(text, integer) TO ${role}`);

  const plan = await planRelease(client);
  expect(plan.removed).toEqual(['function wharf.claim(text,integer)']);
  expect(plan.added).toEqual(['function wharf.claim(text,integer,text[])']);
  expect(plan.up).toMatch(/DROP FUNCTION wharf\.claim\(text,integer\);[\s\S]*CREATE OR REPLACE FUNCTION wharf\.claim\(p_worker text/);

  await client.query('BEGIN');
  await client.query(plan.up);
  const { rows } = await client.query<{ granted: boolean; public: boolean }>(`
    SELECT has_function_privilege('${role}', 'wharf.claim(text, integer, text[])', 'EXECUTE') AS granted,
           has_function_privilege('public', 'wharf.claim(text, integer, text[])', 'EXECUTE') AS public`);
  await client.query('COMMIT');
  expect(rows).toEqual([{ granted: true, public: false }]);
});
