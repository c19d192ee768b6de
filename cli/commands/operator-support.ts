// What every operator verb shares: the way to the operator API, --json,
// tables for people, and one way to report a failure (a line on stderr, exit
// code 1). Every verb goes through the API's typed client: to a running
// `wharf serve` with --api (and WHARF_TOKEN), or, next to the database with
// DATABASE_URL, to the same API run in this process as the instance admin,
// so the CLI validates, authorises and answers exactly as the API does.
import { randomBytes } from 'node:crypto';
import { userInfo } from 'node:os';
import { Command, InvalidArgumentError, Option } from 'commander';
import { createPool } from '../../db/pool.js';
import { parseKeyRing } from '../../db/secret-box.js';
import { operatorApi } from '../../operator/api/app.js';
import { checkAdminToken } from '../../operator/api/auth.js';
import { operatorApiClient, type OperatorApiClient } from '../../operator/api/client.js';
import { ApiError, toApiError } from '../../operator/api/errors.js';
import { parseId } from '../../operator/api/params.js';
import type { EventOwner } from '../../operator/sql/operator.js';
import type { Database } from '../../db/database.js';

export interface OperatorOptions {
  databaseUrl?: string;
  api?: string;
  json?: boolean;
}

/** A verb of the operator API: --api or --database-url, and --json. */
export function operatorCommand(name: string, description: string): Command {
  return new Command(name)
    .description(description)
    .addOption(new Option('--api <url>', 'a running `wharf serve` (its base URL; the token from WHARF_TOKEN)')
      .env('WHARF_API_URL'))
    .addOption(new Option('--database-url <url>', 'PostgreSQL connection string, when not using --api').env('DATABASE_URL'))
    .option('--json', 'print JSON for scripts instead of a table');
}

/** Who the CLI's user is, recorded on what the in-process API does as admin (replays). */
export function cliAccount(): string {
  try {
    return `cli:${userInfo().username}`;
  } catch {
    // A container user without a passwd entry.
    return 'cli';
  }
}

/** A throwaway admin token for the in-process API: good for this process only. */
function processAdminToken(): string {
  for (;;) {
    const token = randomBytes(32).toString('base64url');
    if (checkAdminToken(token) === undefined) return token;
  }
}

/**
 * Runs a verb against the operator API (see the top of this file) and turns
 * any failure into a message on stderr and exit code 1.
 */
export async function withApi(
  options: OperatorOptions & { account?: string },
  work: (api: OperatorApiClient) => Promise<void>,
): Promise<void> {
  await reportFailure(async () => {
    if (options.api !== undefined && options.api !== '') {
      const token = process.env.WHARF_TOKEN;
      if (!token) throw usageError('--api needs a token: set WHARF_TOKEN (an admin or workspace token)');
      await work(operatorApiClient(`${options.api.replace(/\/+$/, '')}/api`, { token }));
      return;
    }
    await withPool(options, async (db) => {
      const adminToken = processAdminToken();
      const app = operatorApi({
        db, adminToken, adminAccount: options.account ?? cliAccount(),
        keyRing: parseKeyRing(process.env.WHARF_SECRET_KEYS),
        // The API answers a bug with "internal error" only; the operator next
        // to the database is better served by its own message, which holds no secret.
        onUnexpectedError: (error) => process.stderr.write(`wharf: ${error instanceof Error ? error.message : String(error)}\n`),
      });
      await work(operatorApiClient('http://wharf.cli', {
        token: adminToken,
        fetch: async (input, init) => app.request(input instanceof Request ? input : String(input), init),
      }));
    });
  });
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

/** Runs a verb against the database itself and turns any failure into a message on stderr and exit code 1. */
export async function withDatabase(options: OperatorOptions, work: (db: Database) => Promise<void>): Promise<void> {
  await reportFailure(() => withPool(options, work));
}

async function withPool(options: OperatorOptions, work: (db: Database) => Promise<void>): Promise<void> {
  if (!options.databaseUrl) throw usageError('no database: set DATABASE_URL or pass --database-url (or --api)');
  const pool = createPool(options.databaseUrl, { max: 2, connectionTimeoutMillis: 10_000 });
  pool.on('error', () => {});
  try {
    await work(pool);
  } finally {
    await pool.end();
  }
}

async function reportFailure(run: () => Promise<void>): Promise<void> {
  try {
    await run();
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
