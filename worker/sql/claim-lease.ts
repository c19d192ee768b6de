// The calls of sql/30-claim-lease.sql a worker makes: claim, renew, complete,
// release, reap, and the idle marks of its listener.
import type pg from 'pg';
import type { Database } from '../../db/database.js';
import { claimedColumns, type Lease, type ProviderEventRow } from './event-row.js';
import { queryPrepared, type Queryable } from './prepared-statement.js';

/**
 * Leases up to `max` due scope heads for `worker` (wharf.claim), only of the
 * event types `handles` names (`provider:event_type`, `provider:*`); every
 * type when null.
 */
export function claimEvents(
  db: Queryable, worker: string, max: number, handles: readonly string[] | null = null,
): Promise<ProviderEventRow[]> {
  return queryPrepared<ProviderEventRow>(db, 'claim', `SELECT ${claimedColumns} FROM wharf.claim($1, $2, $3)`,
    [worker, max, handles]);
}

/**
 * Extends many leases in one statement (wharf.renew for each); the ids of
 * those no longer held.
 */
export async function renewLeases(db: Database, leases: readonly Lease[]): Promise<Set<string>> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT l.id FROM unnest($1::bigint[], $2::bigint[]) AS l(id, epoch) WHERE NOT wharf.renew(l.id, l.epoch)`,
    [leases.map((lease) => lease.id), leases.map((lease) => lease.epoch)]);
  return new Set(rows.map((row) => String(row.id)));
}

export interface Completion {
  id: string;
  epoch: string;
  outcome: 'handled' | 'ignored';
}

/**
 * Ends several leases as DONE in one statement and one commit
 * (wharf.complete_many); for each, false when it was no longer held. Callers
 * pass them in admission's lock order (workspace, then scope) so that the
 * scope rows the completions lock cannot form a cycle with an admission.
 */
export async function completeEvents(db: Queryable, completions: readonly Completion[]): Promise<boolean[]> {
  const rows = await queryPrepared<{ id: string }>(db, 'complete_many', 'SELECT id FROM wharf.complete_many($1, $2, $3) AS id', [
    completions.map((c) => c.id),
    completions.map((c) => c.epoch),
    completions.map((c) => c.outcome),
  ]);
  const completed = new Set(rows.map((row) => String(row.id)));
  return completions.map((c) => completed.has(c.id));
}

/** Gives an unfinished lease back, its attempt uncounted (wharf.release). */
export async function releaseEvent(db: Database, lease: Lease): Promise<boolean> {
  const { rows } = await db.query<{ released: boolean }>('SELECT wharf.release($1, $2) AS released', [
    lease.id,
    lease.epoch,
  ]);
  return rows[0]?.released === true;
}

/** Takes back every expired lease (wharf.reap); returns how many. */
export async function reapExpiredLeases(db: Database): Promise<number> {
  const { rows } = await db.query<{ reaped: number }>('SELECT wharf.reap() AS reaped');
  return rows[0]?.reaped ?? 0;
}

/**
 * Tells admissions to notify (wharf.mark_idle). Runs on the LISTEN connection
 * itself: the row names its backend, and the reaper forgets it when that
 * session ends. False while an admission is in flight: claim, then try again.
 * Once true, a claim made after it sees every row admitted before.
 */
export async function markListenerIdle(listenerConnection: pg.ClientBase, listener: string): Promise<boolean> {
  const { rows } = await listenerConnection.query<{ marked: boolean }>('SELECT wharf.mark_idle($1) AS marked', [listener]);
  return rows[0]?.marked === true;
}

/** Admissions may stop paying for pg_notify on this host's account (wharf.mark_busy). */
export async function markListenerBusy(db: Database, listener: string): Promise<void> {
  await db.query('SELECT wharf.mark_busy($1)', [listener]);
}

/**
 * Milliseconds until the earliest retry still to fall due (wharf.next_due_at),
 * measured on the database's clock so that the host's clock does not matter;
 * null when none waits.
 */
export async function readNextDueIn(db: Database): Promise<number | null> {
  const { rows } = await db.query<{ due_in_ms: number | null }>(
    'SELECT (extract(epoch FROM wharf.next_due_at() - clock_timestamp()) * 1000)::float8 AS due_in_ms');
  return rows[0]?.due_in_ms ?? null;
}

export interface QueueStats {
  /** Rows by state: counted on a small inbox, estimated from statistics on a large one (depthEstimated). */
  depthByState: Record<string, number>;
  depthEstimated: boolean;
  /** Seconds the scope first in the claim line has waited since it became claimable; 0 when none is. */
  oldestDueAge: number;
  /** Scopes whose head has been failing, or due and unclaimed, longer than stuck_after. */
  stuckScopes: number;
  /** Seconds the longest-stuck scope has been so; 0 when none is. */
  oldestStuckAge: number;
}

/** The worker's gauges, at a cost that does not grow with the inbox (wharf.queue_stats). */
export async function readQueueStats(db: Database): Promise<QueueStats> {
  const { rows } = await db.query<{
    depth_by_state: Record<string, number>; depth_estimated: boolean; oldest_due_age: number;
    stuck_scopes: string; oldest_stuck_age: number;
  }>('SELECT depth_by_state, depth_estimated, oldest_due_age, stuck_scopes, oldest_stuck_age FROM wharf.queue_stats()');
  const row = rows[0];
  return {
    depthByState: row?.depth_by_state ?? {},
    depthEstimated: row?.depth_estimated ?? false,
    oldestDueAge: row?.oldest_due_age ?? 0,
    stuckScopes: Number(row?.stuck_scopes ?? 0),
    oldestStuckAge: row?.oldest_stuck_age ?? 0,
  };
}
