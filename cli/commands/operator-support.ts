// What every operator verb shares: the database option, --json, tables for
// people, and one way to report a failure (a line on stderr, exit code 1).
import { Command, InvalidArgumentError, Option } from 'commander';
import pg from 'pg';
import { ApiError, toApiError } from '../../operator/api/errors.js';
import { parseId } from '../../operator/api/params.js';
import type { EventOwner } from '../../operator/sql/operator.js';
import type { Database } from '../../db/database.js';

export interface OperatorOptions {
  databaseUrl?: string;
  json?: boolean;
}

/** A verb that talks to the database: --database-url (or DATABASE_URL) and --json. */
export function operatorCommand(name: string, description: string): Command {
  return new Command(name)
    .description(description)
    .addOption(new Option('--database-url <url>', 'PostgreSQL connection string').env('DATABASE_URL'))
    .option('--json', 'print JSON for scripts instead of a table');
}

/** A commander argument/option parser for a positive integer id. */
export function idParser(name: string): (value: string) => string {
  return (value) => {
    try {
      return parseId(value, name);
    } catch (error) {
      throw new InvalidArgumentError(error instanceof Error ? error.message : String(error));
    }
  };
}

/** A failure the user can fix, reported like a database refusal. */
export function usageError(message: string): ApiError {
  return new ApiError(400, 'bad_request', message);
}

/** Runs a verb against the database and turns any failure into a message on stderr and exit code 1. */
export async function withDatabase(options: OperatorOptions, work: (db: Database) => Promise<void>): Promise<void> {
  try {
    if (!options.databaseUrl) throw usageError('no database: set DATABASE_URL or pass --database-url');
    const pool = new pg.Pool({ connectionString: options.databaseUrl, max: 1, connectionTimeoutMillis: 10_000 });
    pool.on('error', () => {});
    try {
      await work(pool);
    } finally {
      await pool.end();
    }
  } catch (error) {
    const apiError = toApiError(error);
    // The operator runs the CLI next to the database: an unexpected error's
    // own message helps more than "internal error" and holds no secret.
    const cause = apiError.cause ?? error;
    const message = apiError.status === 500 && cause instanceof Error ? cause.message : apiError.message;
    process.stderr.write(`wharf: ${message}\n`);
    process.exitCode = 1;
  }
}

export interface OwnerOptions {
  workspace?: string;
  installation?: boolean;
}

/** --workspace <id> or --installation (instance admin: installation rows). */
export function withOwnerOptions(command: Command): Command {
  return command
    .option('-w, --workspace <id>', 'the workspace', idParser('workspace'))
    .option('--installation', 'installation rows (NULL workspace) instead of a workspace');
}

export function ownerOf(options: OwnerOptions): EventOwner {
  if (options.workspace !== undefined && options.installation) {
    throw usageError('give either --workspace or --installation, not both');
  }
  if (options.installation) return { installation: true };
  if (options.workspace !== undefined) return { workspaceId: options.workspace };
  throw usageError('give --workspace <id> or --installation');
}

export function describeOwner(owner: EventOwner): string {
  return 'workspaceId' in owner ? `workspace ${owner.workspaceId}` : 'the installation rows';
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

function cell(value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

/** Rows as an aligned text table, one column per name. */
export function printTable(rows: object[], columns: string[]): void {
  const cells = rows.map((row) => columns.map((column) => cell((row as Record<string, unknown>)[column])));
  const widths = columns.map((column, i) => Math.max(column.length, ...cells.map((line) => line[i]!.length)));
  const format = (line: string[]) => line.map((text, i) => text.padEnd(widths[i]!)).join('  ').trimEnd();
  const lines = [format(columns.map((column) => column.toUpperCase())), ...cells.map(format)];
  if (rows.length === 0) lines.push('(none)');
  process.stdout.write(`${lines.join('\n')}\n`);
}

/** One record as "name: value" lines. */
export function printFields(record: object, fields: string[]): void {
  const width = Math.max(...fields.map((field) => field.length));
  const lines = fields.map((field) => `${`${field}:`.padEnd(width + 1)} ${cell((record as Record<string, unknown>)[field])}`);
  process.stdout.write(`${lines.join('\n')}\n`);
}
