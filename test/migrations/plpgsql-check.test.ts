// plpgsql_check finds no error and no warning in any PL/pgSQL function of
// schema wharf, trigger functions checked against their table and the
// transition tables their triggers name. A deliberate
// exception would carry a pragma in the function with its reason.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

it('reports nothing on any PL/pgSQL function', async () => {
  const { rows: available } = await db.pool.query(`SELECT 1 FROM pg_available_extensions WHERE name = 'plpgsql_check'`);
  if (available.length === 0) {
    throw new Error('plpgsql_check is not installed on the test server. On Debian: apt-get install -y postgresql-15-plpgsql-check');
  }
  await db.pool.query('CREATE EXTENSION plpgsql_check');
  const { rows: checked } = await db.pool.query<{ count: string }>(`
    SELECT count(*) FROM pg_proc p
     WHERE p.pronamespace = 'wharf'::regnamespace AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'plpgsql')`);
  const { rows } = await db.pool.query<{ fn: string; lineno: number | null; level: string; message: string; detail: string | null }>(`
    SELECT p.oid::regprocedure::text AS fn, r.lineno, r.level, r.message, r.detail
      FROM pg_proc p
      JOIN pg_language l ON l.oid = p.prolang AND l.lanname = 'plpgsql'
      LEFT JOIN LATERAL (
        SELECT max(t.tgrelid) AS relid, max(t.tgoldtable) AS oldtable, max(t.tgnewtable) AS newtable
          FROM pg_trigger t WHERE t.tgfoid = p.oid
      ) t ON true
      CROSS JOIN LATERAL plpgsql_check_function_tb(
        p.oid, coalesce(t.relid, 0), oldtable => t.oldtable, newtable => t.newtable,
        fatal_errors => false, other_warnings => true, performance_warnings => true,
        extra_warnings => true, security_warnings => true) r
     WHERE p.pronamespace = 'wharf'::regnamespace
     ORDER BY 1, 2`);
  expect(Number(checked[0]!.count)).toBeGreaterThan(30);
  expect(rows).toEqual([]);
});
