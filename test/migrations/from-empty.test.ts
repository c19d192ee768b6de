// A database migrated from empty holds exactly what sql/ says and what the
// committed schema snapshot shows; the migrations go down to nothing and up
// again to the same schema, and one step down leaves a working inbox.
import { readFile } from 'node:fs/promises';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropAllFunctions } from '../../cli/sql-release/catalog.js';
import { schemaSnapshot, schemaSnapshotFile } from '../../cli/sql-release/schema-snapshot.js';
import { migrate } from '../../db/migrate.js';
import { readSqlSources } from '../../db/sql-sources.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/** Every function and trigger definition of schema wharf, in a stable order. */
async function definitions(client: pg.ClientBase | pg.Pool): Promise<string[]> {
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

describe('migrations from empty', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false });
    await migrate({ databaseUrl: db.url });
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('hold exactly the functions and triggers of sql/, nothing more or less', async () => {
    const migrated = await definitions(db.pool);
    expect(migrated.length).toBeGreaterThan(20);

    const client = await db.connect();
    await client.query('BEGIN');
    await client.query(dropAllFunctions);
    expect(await definitions(client)).toEqual([]);
    for (const source of await readSqlSources()) await client.query(source.text);
    const fromSources = await definitions(client);
    await client.query('ROLLBACK');

    expect(fromSources).toEqual(migrated);
  });

  it('equal the committed schema snapshot (npm run sql:release rewrites it)', async () => {
    expect(await schemaSnapshot(db.url)).toBe(await readFile(schemaSnapshotFile, 'utf8'));
  });

  it('go down to an empty database and up again to the same schema', async () => {
    const before = await schemaSnapshot(db.url);
    await migrate({ databaseUrl: db.url, direction: 'down', count: Infinity });
    const { rows } = await db.pool.query(`SELECT 1 FROM pg_namespace WHERE nspname = 'wharf'`);
    expect(rows).toEqual([]);
    await migrate({ databaseUrl: db.url });
    expect(await schemaSnapshot(db.url)).toBe(before);
  });

  it('one step down leaves an inbox that still admits, claims and completes', async () => {
    await migrate({ databaseUrl: db.url, direction: 'down', count: 1 });
    await db.pool.query(`SELECT wharf.upsert_workspace(1)`);
    const { rows: [connection] } = await db.pool.query<{ id: string }>(
      `SELECT wharf.upsert_connection(1, 'generic', 'https://hooks.example.test', 'webhook', 'one') AS id`);
    await db.pool.query(`SELECT wharf.subscribe($1, 'repo:a')`, [connection!.id]);
    const { rows: [receipt] } = await db.pool.query<{ receipt: { events: { outcome: string }[] } }>(
      `SELECT wharf.admit('generic', 'https://hooks.example.test', 'one-step-down', 'test',
                          jsonb_build_object('connection_id', $1::bigint), ARRAY['repo:a'], '{}', '{}') AS receipt`,
      [connection!.id]);
    expect(receipt!.receipt.events).toEqual([expect.objectContaining({ outcome: 'stored' })]);
    const { rows } = await db.pool.query<{ id: string; lease_epoch: string }>(`SELECT id, lease_epoch FROM wharf.claim('migrations', 1)`);
    expect(rows).toHaveLength(1);
    const { rows: done } = await db.pool.query<{ ok: boolean }>(
      `SELECT wharf.complete($1, $2) AS ok`, [rows[0]!.id, rows[0]!.lease_epoch]);
    expect(done[0]!.ok).toBe(true);
    await migrate({ databaseUrl: db.url });
    expect(await schemaSnapshot(db.url)).toBe(await readFile(schemaSnapshotFile, 'utf8'));
  });
});
