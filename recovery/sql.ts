// The calls of sql/85-redelivery.sql the sweeper makes. Intervals go to
// PostgreSQL as milliseconds, so no unit is lost on the way.
import type { Database } from '../db/database.js';
import type { HookDelivery } from './github.js';

export interface SweepKey {
  appId: string;
  source: string;
}

export interface HeldSweep {
  token: string;
  /** Deliveries after this time are in the window. */
  since: Date;
  until: Date;
  /** GitHub's cursor of the next page to do; undefined: the first page. */
  cursor: string | undefined;
  pagesDone: number;
  resumed: boolean;
}

export type BeganSweep =
  | ({ held: true } & HeldSweep)
  | { held: false; holder: string | null; leasedUntil: Date | null };

const interval = (ms: number): string => `${Math.max(1, Math.round(ms))} milliseconds`;

export async function beginSweep(
  db: Database, key: SweepKey, holder: string,
  options: { leaseMs: number; since?: Date; overlapMs: number; firstLookbackMs: number },
): Promise<BeganSweep> {
  const { rows } = await db.query<{ sweep: Record<string, unknown> }>(
    'SELECT wharf.begin_sweep($1, $2, $3, $4::interval, $5, $6::interval, $7::interval) AS sweep',
    [key.appId, key.source, holder, interval(options.leaseMs), options.since ?? null,
      `${Math.max(0, Math.round(options.overlapMs))} milliseconds`, interval(options.firstLookbackMs)],
  );
  const sweep = rows[0]!.sweep;
  if (typeof sweep.token !== 'string') {
    return {
      held: false,
      holder: typeof sweep.holder === 'string' ? sweep.holder : null,
      leasedUntil: typeof sweep.leased_until === 'string' ? new Date(sweep.leased_until) : null,
    };
  }
  return {
    held: true,
    token: sweep.token,
    since: new Date(String(sweep.since)),
    until: new Date(String(sweep.until)),
    cursor: typeof sweep.cursor === 'string' ? sweep.cursor : undefined,
    pagesDone: Number(sweep.pages_done),
    resumed: sweep.resumed === true,
  };
}

/** False when the token no longer holds the sweep. */
export async function renewSweep(db: Database, key: SweepKey, token: string, leaseMs: number): Promise<boolean> {
  const { rows } = await db.query<{ renewed: boolean }>(
    'SELECT wharf.renew_sweep($1, $2, $3, $4::interval) AS renewed', [key.appId, key.source, token, interval(leaseMs)]);
  return rows[0]?.renewed === true;
}

/** Raises WH412 when the token no longer holds the sweep. */
export async function advanceSweep(db: Database, key: SweepKey, token: string, cursor: string, leaseMs: number): Promise<void> {
  await db.query('SELECT wharf.advance_sweep($1, $2, $3, $4, $5::interval)', [key.appId, key.source, token, cursor, interval(leaseMs)]);
}

/** The new swept_until. Raises WH412 when the token no longer holds the sweep. */
export async function finishSweep(db: Database, key: SweepKey, token: string): Promise<Date | null> {
  const { rows } = await db.query<{ swept_until: Date | null }>(
    'SELECT wharf.finish_sweep($1, $2, $3) AS swept_until', [key.appId, key.source, token]);
  return rows[0]?.swept_until ?? null;
}

/** Gives the lease back, keeping the cursor; `error` is an error class (null: a deliberate stop). */
export async function abandonSweep(db: Database, key: SweepKey, token: string, error: string | null): Promise<boolean> {
  const { rows } = await db.query<{ abandoned: boolean }>(
    'SELECT wharf.abandon_sweep($1, $2, $3, $4) AS abandoned', [key.appId, key.source, token, error]);
  return rows[0]?.abandoned === true;
}

/** A delivery GUID found failed: its newest failed attempt in the window (GitHub's delivery id). */
export interface FailedDelivery {
  guid: string;
  deliveryId: string;
  event: string | null;
}

/**
 * Records one page of GitHub's list in what the sweep has seen, and returns
 * the GUIDs it now finds failed over every attempt of theirs in the window
 * (`last`: the window's last page, where every GUID still open is decided).
 * WH412 when the token no longer holds the sweep.
 */
export async function sweepPage(
  db: Database, key: SweepKey, token: string, deliveries: readonly HookDelivery[], last: boolean,
): Promise<FailedDelivery[]> {
  const page = deliveries.map((delivery) => ({
    id: delivery.id, guid: delivery.guid, delivered_at: delivery.deliveredAt.toISOString(), redelivery: delivery.redelivery,
    status_code: delivery.statusCode, event: delivery.event,
  }));
  const { rows } = await db.query<{ guid: string; delivery_id: string; event: string | null }>(
    'SELECT guid, delivery_id::text AS delivery_id, event FROM wharf.sweep_page($1, $2, $3, $4::jsonb, $5)',
    [key.appId, key.source, token, JSON.stringify(page), last]);
  return rows.map((row) => ({ guid: row.guid, deliveryId: row.delivery_id, event: row.event }));
}

/** The GUIDs of `guids` that the inbox has not stored from this GitHub source, in the order given. */
export async function missingDeliveries(db: Database, source: string, guids: readonly string[]): Promise<string[]> {
  if (guids.length === 0) return [];
  const { rows } = await db.query<{ guid: string }>(
    `SELECT guid FROM wharf.missing_deliveries('github', $1, $2::text[]) AS guid`, [source, guids]);
  return rows.map((row) => row.guid);
}

export type AskDecision = 'ask' | 'asked' | 'wait' | 'exhausted' | 'refused';

/** Records an ask for attempt `deliveryId` of `guid` before it is sent; WH412 when the token lost the sweep. */
export async function requestRedelivery(
  db: Database, key: SweepKey, token: string, guid: string, deliveryId: string, staleMs: number, maxAsks: number,
): Promise<AskDecision> {
  const { rows } = await db.query<{ decision: AskDecision }>(
    'SELECT wharf.request_redelivery($1, $2, $3, $4, $5, $6::interval, $7) AS decision',
    [key.appId, key.source, token, guid, deliveryId, interval(staleMs), maxAsks]);
  return rows[0]!.decision;
}

export async function settleRedelivery(
  db: Database, key: SweepKey, token: string, guid: string, deliveryId: string, outcome: 'accepted' | 'failed' | 'rejected',
): Promise<void> {
  await db.query('SELECT wharf.settle_redelivery($1, $2, $3, $4, $5, $6)', [key.appId, key.source, token, guid, deliveryId, outcome]);
}

export interface SweepStatus {
  sweptUntil: Date | null;
  lastSuccessAt: Date | null;
  lastError: string | null;
  lastErrorAt: Date | null;
  sweeping: { since: Date; until: Date; pagesDone: number; holder: string | null; leasedUntil: Date | null } | null;
}

/** Where the sweeps of an App stand; undefined when it was never swept. */
export async function sweepStatus(db: Database, key: SweepKey): Promise<SweepStatus | undefined> {
  const { rows } = await db.query<{ status: Record<string, unknown> | null }>(
    'SELECT wharf.sweep_status($1, $2) AS status', [key.appId, key.source]);
  const status = rows[0]?.status;
  if (!status) return undefined;
  const date = (value: unknown): Date | null => (typeof value === 'string' ? new Date(value) : null);
  const sweeping = status.sweeping as Record<string, unknown> | null;
  return {
    sweptUntil: date(status.swept_until),
    lastSuccessAt: date(status.last_success_at),
    lastError: typeof status.last_error === 'string' ? status.last_error : null,
    lastErrorAt: date(status.last_error_at),
    sweeping: sweeping ? {
      since: new Date(String(sweeping.since)),
      until: new Date(String(sweeping.until)),
      pagesDone: Number(sweeping.pages_done),
      holder: typeof sweeping.holder === 'string' ? sweeping.holder : null,
      leasedUntil: date(sweeping.leased_until),
    } : null,
  };
}
