// Migrating up from empty reproduces exactly what sql/ says, the migrations
// go down and up again cleanly, and one step down leaves a working inbox.
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../worker/migrate.js';
import { readSqlSources } from '../worker/sql-sources.js';
import { createTestDatabase, type TestDatabase } from './support/database.js';

/** Every function and trigger definition of schema wharf, in a stable order. */
async function definitions(client: pg.Client | pg.Pool): Promise<string[]> {
  const { rows } = await client.query<{ def: string }>(`
    SELECT pg_get_functiondef(p.oid) AS def
      FROM pg_proc p WHERE p.pronamespace = 'wharf'::regnamespace
    UNION ALL
    SELECT pg_get_triggerdef(t.oid)
      FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
     WHERE c.relnamespace = 'wharf'::regnamespace AND NOT t.tgisinternal
    ORDER BY 1`);
  return rows.map((row) => row.def);
}

describe('migrations', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('hold exactly the functions and triggers of sql/, nothing more or less', async () => {
    const migrated = await definitions(db.pool);
    expect(migrated.length).toBeGreaterThan(20);

    const client = await db.connect();
    await client.query('BEGIN');
    await client.query(`
      DO $$
      DECLARE f regprocedure;
      BEGIN
        FOR f IN SELECT oid::regprocedure FROM pg_proc WHERE pronamespace = 'wharf'::regnamespace LOOP
          EXECUTE format('DROP FUNCTION %s CASCADE', f);
        END LOOP;
      END $$`);
    expect(await definitions(client)).toEqual([]);
    for (const source of await readSqlSources()) await client.query(source.text);
    const fromSources = await definitions(client);
    await client.query('ROLLBACK');

    expect(fromSources).toEqual(migrated);
  });

  it('go down to an empty database and up again to the same definitions', async () => {
    const before = await definitions(db.pool);
    await migrate({ databaseUrl: db.url, direction: 'down', count: Infinity });
    const { rows } = await db.pool.query(`SELECT 1 FROM pg_namespace WHERE nspname = 'wharf'`);
    expect(rows).toEqual([]);
    await migrate({ databaseUrl: db.url });
    expect(await definitions(db.pool)).toEqual(before);
  });

  it('one step down leaves an inbox that still admits, claims and completes', async () => {
    await migrate({ databaseUrl: db.url, direction: 'down', count: 1 });
    await db.pool.query(`SELECT wharf.upsert_workspace(1)`);
    await db.pool.query(`
      INSERT INTO wharf.provider_event (workspace_id, provider, delivery_key, event_type, subject, scope_key, source, payload)
      VALUES (1, 'generic', 'one-step-down', 'test', 'repo:a', '1:generic:repo:a', 'https://hooks.example.test', '{}')`);
    const { rows } = await db.pool.query<{ id: string; lease_epoch: string }>(`SELECT id, lease_epoch FROM wharf.claim('migrations', 1)`);
    expect(rows).toHaveLength(1);
    const { rows: done } = await db.pool.query<{ ok: boolean }>(
      `SELECT wharf.complete($1, $2) AS ok`, [rows[0]!.id, rows[0]!.lease_epoch]);
    expect(done[0]!.ok).toBe(true);
    await migrate({ databaseUrl: db.url });
  });
});
