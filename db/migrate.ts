// Runs the frozen migrations of migrations/ with node-pg-migrate, after two
// checks of our own: a database that recorded migrations this code does not
// have was migrated by a newer Wharf and is refused, and a dry run prints the
// SQL it would run without writing anything.
import { runner } from 'node-pg-migrate';
import { connectClient } from './pool.js';
import { migrationPart, migrationsDirectory, nonMigrationPattern, readMigrationFiles, type MigrationFile } from './migration-files.js';

export const migrationsTable = 'pgmigrations';

export interface MigrateOptions {
  databaseUrl: string;
  direction?: 'up' | 'down';
  /** How many migrations to run; all pending ones (up) or one (down) by default. */
  count?: number;
  /** Print the SQL that would run (through `log`), change nothing. */
  dryRun?: boolean;
  log?: (message: string) => void;
}

/** A database this code must not migrate; the message says why and what to do. */
export class MigrationRefused extends Error {
  override name = 'MigrationRefused';
}

/** The migrations a database has recorded, oldest first ([] before the first run). */
export async function recordedMigrations(databaseUrl: string): Promise<string[]> {
  const client = await connectClient(databaseUrl);
  try {
    const { rows } = await client.query<{ present: boolean }>(
      `SELECT to_regclass($1) IS NOT NULL AS present`, [`public.${migrationsTable}`]);
    if (!rows[0]?.present) return [];
    const recorded = await client.query<{ name: string }>(`SELECT name FROM public.${migrationsTable} ORDER BY run_on, id`);
    return recorded.rows.map((row) => row.name);
  } finally {
    await client.end();
  }
}

/** The migrations that `options` would run, in the order they would run. */
export function migrationsToRun(files: MigrationFile[], recorded: string[], options: Pick<MigrateOptions, 'direction' | 'count'>): MigrationFile[] {
  const unknown = recorded.filter((name) => !files.some((file) => file.name === name));
  if (unknown.length > 0) {
    throw new MigrationRefused(
      `this database was migrated by a newer Wharf: it has recorded ${unknown.join(', ')}, ` +
        `which this release does not have. Run the newer release's \`wharf migrate\`, or upgrade Wharf.`,
    );
  }
  if ((options.direction ?? 'up') === 'up') {
    return files.filter((file) => !recorded.includes(file.name)).slice(0, options.count ?? Infinity);
  }
  const count = options.count ?? 1;
  return recorded.slice(Math.max(recorded.length - count, 0)).reverse()
    .map((name) => files.find((file) => file.name === name)!);
}

/** Brings a database up to date (or down) with migrations/. */
export async function migrate(options: MigrateOptions): Promise<void> {
  const direction = options.direction ?? 'up';
  const log = options.log ?? (() => {});
  const files = await readMigrationFiles();
  const toRun = migrationsToRun(files, await recordedMigrations(options.databaseUrl), options);
  if (options.dryRun) {
    if (toRun.length === 0) log('-- nothing to migrate');
    for (const file of toRun) log(`-- migrations/${file.file} (${direction})\n${migrationPart(file.text, direction).trim()}\n`);
    return;
  }
  if (toRun.length === 0) return;
  // On the primary, also behind a multi-host URL, which node-pg-migrate cannot read.
  const client = await connectClient(options.databaseUrl);
  try {
    await runner({
      dbClient: client,
      dir: migrationsDirectory,
      ignorePattern: nonMigrationPattern,
      direction,
      count: toRun.length,
      migrationsTable,
      checkOrder: true,
      log,
    });
  } finally {
    await client.end();
  }
}
