// The committed schema snapshot: pg_dump --schema-only of a migrated database,
// without the lines that change from one dump to the next, so that a
// reviewer sees in one diff what a change does to tables, indexes and functions.
import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

export const schemaSnapshotFile = fileURLToPath(new URL('../../migrations/schema.snapshot.sql', import.meta.url));

/** pg_dump on PATH, else the newest one Debian's packages installed. */
export function findPgDump(): string {
  const onPath = (process.env.PATH ?? '').split(':').map((dir) => `${dir}/pg_dump`).find((path) => existsSync(path));
  if (onPath) return onPath;
  const versions = existsSync('/usr/lib/postgresql') ? readdirSync('/usr/lib/postgresql').sort((a, b) => Number(b) - Number(a)) : [];
  const installed = versions.map((version) => `/usr/lib/postgresql/${version}/bin/pg_dump`).find((path) => existsSync(path));
  if (!installed) {
    throw new Error('pg_dump is needed for the schema snapshot: on Debian, apt-get install -y postgresql-client-15');
  }
  return installed;
}

export function normaliseSchemaDump(dump: string): string {
  return `${dump
    .split('\n')
    .filter((line) => !/^-- Dumped (from|by) /.test(line) && !/^\\(un)?restrict /.test(line))
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim()}\n`;
}

export async function schemaSnapshot(databaseUrl: string): Promise<string> {
  const { stdout } = await promisify(execFile)(
    findPgDump(),
    ['--schema-only', '--no-owner', '--schema=wharf', '--dbname', databaseUrl],
    { maxBuffer: 64 * 1024 * 1024 },
  );
  return normaliseSchemaDump(stdout);
}
