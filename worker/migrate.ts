import { fileURLToPath } from 'node:url';
import { runner } from 'node-pg-migrate';

export const migrationsDirectory = fileURLToPath(new URL('../migrations/', import.meta.url));

export interface MigrateOptions {
  databaseUrl: string;
  direction?: 'up' | 'down';
  /** How many migrations to run; all pending ones (up) or one (down) by default. */
  count?: number;
  log?: (message: string) => void;
}

/** Brings a database up to date (or down) with migrations/. */
export async function migrate(options: MigrateOptions): Promise<void> {
  const direction = options.direction ?? 'up';
  await runner({
    databaseUrl: options.databaseUrl,
    dir: migrationsDirectory,
    direction,
    count: options.count ?? (direction === 'up' ? Infinity : 1),
    migrationsTable: 'pgmigrations',
    checkOrder: true,
    log: options.log ?? (() => {}),
  });
}
