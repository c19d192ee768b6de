// The sweeper runs on worker hosts as the worker's role: with the GRANT that
// docs/sql.md ("Roles") gives, read from there so the two cannot
// drift, a sweep works; without it, PUBLIC may call none of the sweeper's
// functions; and the role reads none of the sweeper's tables.
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import pg from 'pg';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { onServer } from '../../cli/scratch-database.js';
import { createGitHubAppClient, sweepApp } from '../../recovery/index.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createRig, notStoredOnce } from './rig.js';
import { sqlstate } from '../support/sqlstate.js';

const suffix = randomBytes(4).toString('hex');
const password = randomBytes(12).toString('hex');
const granted = `wharf_worker_${suffix}`;
const bare = `wharf_bare_${suffix}`;
let db: TestDatabase;
const pools: pg.Pool[] = [];

async function documentedGrant(): Promise<string> {
  const guide = await readFile(new URL('../../docs/sql.md', import.meta.url), 'utf8');
  const block = /<!-- redelivery-grants:begin -->\s*```sql\n([\s\S]*?)```\s*<!-- redelivery-grants:end -->/.exec(guide);
  if (!block) throw new Error('docs/sql.md has no block between <!-- redelivery-grants:begin --> and <!-- redelivery-grants:end -->');
  return block[1]!;
}

function poolAs(role: string): pg.Pool {
  const url = new URL(db.url);
  url.username = role;
  url.password = password;
  const pool = new pg.Pool({ connectionString: url.toString(), max: 2 });
  pool.on('error', () => {});
  pools.push(pool);
  return pool;
}

beforeAll(async () => {
  db = await createTestDatabase();
  for (const role of [granted, bare]) {
    await db.pool.query(`CREATE ROLE ${role} LOGIN PASSWORD '${password}'`);
    await db.pool.query(`GRANT USAGE ON SCHEMA wharf TO ${role}`);
  }
  await db.pool.query((await documentedGrant()).replaceAll(/\bwharf_worker\b/g, granted));
});

afterAll(async () => {
  await Promise.all(pools.map((pool) => pool.end()));
  await db?.drop();
  await onServer(inject('postgresUrl'), async (client) => {
    for (const role of [granted, bare]) await client.query(`DROP ROLE IF EXISTS ${role}`);
  });
});

it('sweeps as the worker\'s role with the documented grant, and reads none of the tables', async () => {
  const rig = await createRig(db);
  try {
    rig.outage = true;
    const failed = await rig.send(3);
    rig.outage = false;
    const worker = poolAs(granted);
    const result = await sweepApp({
      db: worker, github: createGitHubAppClient(rig.config), app: rig.app,
      key: { appId: rig.appId, source: rig.config.source }, holder: 'worker-role',
    });
    expect(result).toMatchObject({ outcome: 'done', redelivered: 3 });
    await rig.fake.settled();
    expect(notStoredOnce(await rig.stored(failed))).toEqual({});
    expect(await sqlstate(worker.query('SELECT * FROM wharf.redelivery_sweep'))).toBe('42501');
    expect(await sqlstate(worker.query('SELECT * FROM wharf.redelivery_request'))).toBe('42501');
    expect(await sqlstate(worker.query('SELECT wharf.held_sweep(1, $1, gen_random_uuid())', ['https://github.com']))).toBe('42501');
  } finally {
    await rig.close();
  }
});

it('lets a role without the grant call none of the sweeper\'s functions', async () => {
  const other = poolAs(bare);
  expect(await sqlstate(other.query(`SELECT wharf.begin_sweep(1, 'https://github.com', 'x', '1 minute')`))).toBe('42501');
  expect(await sqlstate(other.query(`SELECT * FROM wharf.missing_deliveries('github', 'https://github.com', ARRAY['x'])`))).toBe('42501');
  expect(await sqlstate(other.query(`SELECT wharf.sweep_status(1, 'https://github.com')`))).toBe('42501');
});
