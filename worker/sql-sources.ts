import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { MigrationBuilder } from 'node-pg-migrate';

/** The procedure sources of sql/, in the order the migration applies them. */
export const sqlDirectory = fileURLToPath(new URL('../sql/', import.meta.url));

export interface SqlSource {
  name: string;
  text: string;
}

export async function readSqlSources(): Promise<SqlSource[]> {
  const names = (await readdir(sqlDirectory)).filter((name) => name.endsWith('.sql')).sort();
  return Promise.all(
    names.map(async (name) => ({ name, text: await readFile(sqlDirectory + name, 'utf8') })),
  );
}

/** Applies every source of sql/ as it is now: how a migration ships a changed function. */
export async function applySqlSources(pgm: MigrationBuilder): Promise<void> {
  for (const source of await readSqlSources()) pgm.sql(source.text);
}
