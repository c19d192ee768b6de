// `wharf migrate` as a DBA uses it: it brings an empty database up to date,
// prints what it would run with --dry-run and changes nothing then, and
// refuses a database migrated by a newer Wharf. `wharf worker` refuses to
// start without a handler module that exports a handler map.
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readMigrationFiles } from '../../db/migration-files.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { runWharf } from '../support/wharf-cli.js';

describe('wharf migrate', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false });
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('--dry-run prints every pending migration and writes nothing', async () => {
    const result = await runWharf(['migrate', '--dry-run'], { DATABASE_URL: db.url });
    expect(result.code, result.stderr).toBe(0);
    const files = await readMigrationFiles();
    for (const file of files) expect(result.stdout).toContain(`-- migrations/${file.file} (up)`);
    expect(result.stdout).toContain('CREATE TABLE wharf.provider_event');
    expect(result.stdout).toContain('CREATE OR REPLACE FUNCTION wharf.claim');
    const { rows } = await db.pool.query(`SELECT to_regclass('public.pgmigrations') AS t, to_regnamespace('wharf') AS s`);
    expect(rows).toEqual([{ t: null, s: null }]);
  }, 30_000);

  it('creates the schema with its settings', async () => {
    const result = await runWharf(['migrate'], { DATABASE_URL: db.url });
    expect(result.code).toBe(0);
    const { rows } = await db.pool.query(`SELECT value FROM wharf.setting WHERE key = 'poll_every'`);
    expect(rows).toEqual([{ value: '5 seconds' }]);
    const dryRun = await runWharf(['migrate', '--dry-run'], { DATABASE_URL: db.url });
    expect(dryRun.stdout.trim()).toBe('-- nothing to migrate');
  }, 30_000);

  it('refuses a database whose recorded migrations are newer than the code', async () => {
    await db.pool.query(`INSERT INTO pgmigrations (name, run_on) VALUES ('9999999999999_from-the-future', now())`);
    const result = await runWharf(['migrate'], { DATABASE_URL: db.url });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('this database was migrated by a newer Wharf');
    expect(result.stderr).toContain('9999999999999_from-the-future');
    expect(result.stderr).not.toMatch(/\n\s+at /);
    await db.pool.query(`DELETE FROM pgmigrations WHERE name = '9999999999999_from-the-future'`);
  }, 30_000);
});

describe('wharf worker', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('exits non-zero when the handler module exports no handler map', async () => {
    const handlers = fileURLToPath(new URL('../support/worker-inbox.ts', import.meta.url));
    const result = await runWharf(['worker', '--handlers', handlers], { DATABASE_URL: db.url });
    expect(result.code).not.toBe(0);
    expect(result.stdout + result.stderr).toContain('exports no handler map');
  }, 30_000);
});
