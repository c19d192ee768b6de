import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

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
