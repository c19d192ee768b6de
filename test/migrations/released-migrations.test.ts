// A released migration never changes: migrations/migrations.lock holds the
// SHA-256 of each, and the tests fail, naming the file, when one was edited.
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { lockProblems, migrationsDirectory, readLock, readMigrationFiles } from '../../db/migration-files.js';

describe('released migrations', () => {
  it('are every one in the lock, unedited, in order', async () => {
    const files = await readMigrationFiles();
    expect(files.length).toBeGreaterThan(6);
    expect(lockProblems(files, await readLock())).toEqual([]);
  });

  it('release 0.1.0 is the six migrations that existed before releases', async () => {
    const lock = await readLock();
    expect(lock.filter((entry) => entry.release === '0.1.0').map((entry) => entry.file)).toEqual([
      '1764460800000_wharf-tables.sql',
      '1764460800001_wharf-functions.sql',
      '1764460800002_connection-secrets.sql',
      '1764460800003_operator-tokens.sql',
      '1764460800004_scope-ready-at.sql',
      '1764460800005_claim-generic-plan.sql',
    ]);
  });

  it('an edited released migration fails with a message that names the file', async () => {
    const copy = `${await mkdtemp(join(tmpdir(), 'wharf-migrations-'))}/`;
    try {
      await cp(migrationsDirectory, copy, { recursive: true });
      const edited = '1764460800002_connection-secrets.sql';
      await writeFile(copy + edited, (await readFile(copy + edited, 'utf8')).replace('updated_at', 'changed_at'));
      const problems = lockProblems(await readMigrationFiles(copy), await readLock(`${copy}migrations.lock`));
      expect(problems).toEqual([expect.stringContaining(`migrations/${edited} was edited after its release 0.1.0`)]);
    } finally {
      await rm(copy, { recursive: true, force: true });
    }
  });

  it('a migration that is not in the lock is not released', async () => {
    const files = await readMigrationFiles();
    const lock = (await readLock()).slice(0, -1);
    expect(lockProblems(files, lock)).toEqual([expect.stringContaining(`migrations/${files.at(-1)!.file} is not released`)]);
  });
});
