import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { packageRoot } from './package-root.js';

/** The procedure sources of sql/: what a DBA reads, one file per concern. */
export const sqlDirectory = join(packageRoot, 'sql/');

export interface SqlSource {
  /** The file name, e.g. `30-claim-lease.sql`. */
  name: string;
  text: string;
}

/** Every source of sql/, in file-name order: the order a migration applies them in. */
export async function readSqlSources(): Promise<SqlSource[]> {
  const names = (await readdir(sqlDirectory)).filter((name) => /^\d+-[a-z0-9-]+\.sql$/.test(name)).sort();
  return Promise.all(names.map(async (name) => ({ name, text: await readFile(sqlDirectory + name, 'utf8') })));
}
