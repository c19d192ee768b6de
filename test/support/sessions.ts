// Separate PostgreSQL sessions for tests that race transactions against each
// other: a session that cannot hang, one-value queries, a claim of one row,
// and waiting until a session blocks on another's lock.
import type pg from 'pg';
import type { ScratchDatabase } from '../../cli/scratch-database.js';
import { waitFor } from './worker-inbox.js';

type Database = Pick<pg.ClientBase | pg.Pool, 'query'>;

/** A row wharf.claim handed out, as SQL returns it (worker/sql/event-row's Lease calls the epoch `epoch`). */
export interface Lease {
  id: string;
  lease_epoch: string;
}

/** A new session whose statements give up after `statementTimeout`: a statement stuck on a lock fails (57014) instead of hanging the suite. */
export async function timedSession(db: Pick<ScratchDatabase, 'connect'>, statementTimeout = '5s'): Promise<pg.Client> {
  const client = await db.connect();
  await client.query(`SET statement_timeout = '${statementTimeout}'`);
  return client;
}

/** The column `value` of the first row: most race assertions look at one value. */
export async function scalar<T>(client: Database, sql: string, params: unknown[] = []): Promise<T> {
  const { rows } = await client.query<{ value: T }>(sql, params);
  return rows[0]!.value;
}

/** Claims at most one due row for `worker` in `client`'s session; undefined when none is due. */
export async function claimOne(client: Database, worker: string): Promise<Lease | undefined> {
  const { rows } = await client.query<Lease>('SELECT id, lease_epoch FROM wharf.claim($1)', [worker]);
  return rows[0];
}

/** The server process id of `client`'s session, to find it in pg_stat_activity. */
export async function backendPid(client: Database): Promise<number> {
  const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  return rows[0]!.pid;
}

/**
 * Resolves once backend `pid` waits for a lock held by another session, as
 * `observer` (another session) sees it. Without `timeout` it polls every 10 ms
 * for ever (callers race it against the waiting call settling); with one it
 * polls through waitFor and throws after `timeout` ms, naming `what`.
 */
export async function blockedOnLock(
  observer: Database,
  pid: number,
  bound?: { timeout: number; what?: string },
): Promise<void> {
  const waiting = async () =>
    (await scalar<string | null>(observer, 'SELECT wait_event_type AS value FROM pg_stat_activity WHERE pid = $1', [pid])) ===
    'Lock';
  if (bound) {
    await waitFor(waiting, bound.timeout, bound.what ?? `session ${pid} to wait for a lock`);
    return;
  }
  while (!(await waiting())) await new Promise((resolve) => setTimeout(resolve, 10));
}
