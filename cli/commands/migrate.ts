// `wharf migrate`: brings the database up to date with migrations/, prints
// what it would run with --dry-run, and refuses a database migrated by a
// newer Wharf.
import { Command, InvalidArgumentError, Option } from 'commander';
import { migrate } from '../../db/migrate.js';

export function migrateCommand(): Command {
  return new Command('migrate')
    .description('apply pending migrations (or roll back with --down)')
    .addOption(new Option('--database-url <url>', 'PostgreSQL connection string').env('DATABASE_URL'))
    .option('--down', 'roll back instead of applying')
    .option('--dry-run', 'print the SQL that would run, change nothing')
    .option('--count <n>', 'how many migrations to run (default: all pending up, one down)', (value) => {
      const count = Number(value);
      if (!Number.isInteger(count) || count < 1) throw new InvalidArgumentError('--count takes a positive integer');
      return count;
    })
    .action(async (options: { databaseUrl?: string; down?: boolean; dryRun?: boolean; count?: number }) => {
      if (!options.databaseUrl) throw new Error('set DATABASE_URL or pass --database-url');
      await migrate({
        databaseUrl: options.databaseUrl,
        direction: options.down ? 'down' : 'up',
        ...(options.count !== undefined ? { count: options.count } : {}),
        dryRun: options.dryRun ?? false,
        // The SQL of a dry run is the command's output; progress goes to stderr.
        log: options.dryRun
          ? (message) => process.stdout.write(`${message}\n`)
          : (message) => process.stderr.write(`${message}\n`),
      });
    });
}
