// The claim is a named statement, prepared once per connection: a host keeps
// claiming through migrations that add a column to the inbox or change the
// type of one it returns.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimEvents, completeEvents } from '../../worker/sql/claim-lease.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { admitEvents } from '../support/worker-inbox.js';

let db: TestDatabase;
let host: pg.Client;
beforeAll(async () => {
  db = await createTestDatabase();
  host = new pg.Client({ connectionString: db.url });
  await host.connect();
});
afterAll(async () => {
  await host?.end();
  await db?.drop();
});

async function preparedClaims(): Promise<string[]> {
  const { rows } = await host.query<{ name: string }>(
    `SELECT name FROM pg_prepared_statements WHERE statement LIKE '%wharf.claim(%' ORDER BY prepare_time`);
  return rows.map((row) => row.name);
}

async function claimAndComplete(scope: string): Promise<void> {
  await admitEvents(db.pool, [{ scope }]);
  const rows = await claimEvents(host, 'host-a', 10);
  expect(rows.map((row) => row.scope_key.endsWith(scope))).toEqual([true]);
  expect(rows[0]).not.toHaveProperty('body_sha256');
  expect(await completeEvents(host, rows.map((row) => ({ id: row.id, epoch: row.lease_epoch, outcome: 'handled' as const }))))
    .toEqual([true]);
}

describe('the prepared claim', () => {
  it('is prepared once on the connection and survives a migration that adds a column', async () => {
    await claimAndComplete('prepared-1');
    await claimAndComplete('prepared-2');
    const before = await preparedClaims();
    expect(before).toHaveLength(1);

    await db.pool.query('ALTER TABLE wharf.provider_event ADD COLUMN added_by_a_migration integer');
    await claimAndComplete('prepared-3');
    expect(await preparedClaims()).toEqual(before);
  });

  it('is prepared again when a migration changes the type of a column it returns', async () => {
    await claimAndComplete('retyped-1');
    const before = await preparedClaims();

    // The prepared claim now fails: its row type no longer matches the function's.
    await db.pool.query('ALTER TABLE wharf.provider_event ALTER COLUMN delivery_key TYPE varchar(300)');
    await claimAndComplete('retyped-2');
    const after = await preparedClaims();
    expect(after).toHaveLength(before.length + 1);
    expect(after.slice(0, -1)).toEqual(before);
  });
});
