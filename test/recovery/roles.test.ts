// The sweeper runs on worker hosts as the worker's role: with the GRANT that
// sql/85-redelivery.sql documents (and the README shows), read from there so
// that the grant a DBA reads is the one proved, a sweep works; without it, PUBLIC may call none of
// the sweeper's functions; and the role reads none of the sweeper's tables.
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import pg from 'pg';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { onServer } from '../../cli/scratch-database.js';
import { createGitHubAppClient, sweepApp } from '../../recovery/index.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createRig, notStoredOnce } from './rig.js';

const suffix = randomBytes(4).toString('hex');
const password = randomBytes(12).toString('hex');
const granted = `wharf_worker_${suffix}`;
const bare = `wharf_bare_${suffix}`;
let db: TestDatabase;
const pools: pg.Pool[] = [];

async function documentedGrant(): Promise<string> {
  const source = await readFile(new URL('../../sql/85-redelivery.sql', import.meta.url), 'utf8');
  const block = /^-- redelivery-grants:begin\n([\s\S]*?)^-- redelivery-grants:end$/m.exec(source);
  if (!block) throw new Error('sql/85-redelivery.sql has no block between -- redelivery-grants:begin and -- redelivery-grants:end');
  return block[1]!.replace(/^-- ?/gm, '');
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

async function sqlstate(promise: Promise<unknown>): Promise<string | undefined> {
  return promise.then(() => undefined, (error: { code?: string }) => error.code);
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
    expect(await sqlstate(worker.query('SELECT * FROM wharf.redelivery_seen'))).toBe('42501');
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
  expect(await sqlstate(other.query(`SELECT * FROM wharf.sweep_page(1, 'https://github.com', gen_random_uuid(), '[]', true)`)))
    .toBe('42501');
});
