// Inbox rows for worker tests: settings, admissions through wharf.admit, and
// polling. Connections and admissions are inbox-fixtures.ts's, with the
// worker tests' defaults (one workspace, one source, a generic webhook).
import type pg from 'pg';
import { admitDelivery, buildConnection, type Db } from './inbox-fixtures.js';

export const testWorkspace = 1;
export const testSource = 'https://hooks.example.test';

/** Sets wharf.setting values, e.g. { lease: '1 second' }. */
export async function setSettings(db: Db, settings: Record<string, string>): Promise<void> {
  for (const [key, value] of Object.entries(settings)) {
    await db.query('SELECT wharf.set_setting($1, $2)', [key, value]);
  }
}

export interface NewEvent {
  scope: string;
  eventType?: string;
  provider?: string;
  payload?: unknown;
}

let deliveries = 0;

/**
 * Admits events through wharf.admit, one delivery per statement in the given
 * order (so ids follow it), into the test workspace; returns their ids. Only
 * admission inserts into the inbox: it takes the scope and lifecycle locks in
 * the product's order, so it can race workers' completions without deadlock.
 */
export async function admitEvents(db: Db, events: NewEvent[]): Promise<string[]> {
  const connections = new Map<string, string>();
  for (const event of events) {
    const provider = event.provider ?? 'generic';
    const key = `${provider} ${event.scope}`;
    if (!connections.has(key)) connections.set(key, await subscribedConnection(db, event.scope, provider));
  }
  const ids: string[] = [];
  for (const event of events) {
    const provider = event.provider ?? 'generic';
    ids.push(await admitEvent(db, connections.get(`${provider} ${event.scope}`)!, event.scope, event.eventType, {
      provider,
      payload: event.payload ?? {},
    }));
  }
  return ids;
}

/** A connection of the test workspace subscribed to `subject`; returns its id for route.connection_id. */
export async function subscribedConnection(db: Db, subject: string, provider = 'generic'): Promise<string> {
  return String(await buildConnection(db, { workspace: testWorkspace, provider, source: testSource, subjects: [subject] }));
}

/** Admits one delivery through wharf.admit; returns the stored event id. */
export async function admitEvent(
  db: Db, connectionId: string, subject: string, eventType = 'test',
  options: { provider?: string; payload?: unknown } = {},
): Promise<string> {
  const admitted = await admitDelivery(db, {
    provider: options.provider ?? 'generic', source: testSource, deliveryKey: `admitted-${process.pid}-${(deliveries += 1)}`,
    eventType, route: { connection_id: Number(connectionId) }, subjects: [subject], payload: options.payload ?? {},
  });
  return admitted.id;
}

/**
 * Admits one delivery as admitEvent does, but announced to nobody: in one
 * transaction it sets every listener's idle mark (wharf.idle_listener) aside,
 * admits, so that wharf.admit's notify_idle_claimers finds none to notify,
 * and puts the marks back, so that the workers' belief that they are marked
 * stays true for the next admission. Only a worker's poll can find the row
 * (and a listener's reconnect, which looks once).
 */
export async function admitUnannounced(
  pool: pg.Pool, connectionId: string, subject: string, eventType = 'test',
): Promise<string> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('CREATE TEMPORARY TABLE set_aside ON COMMIT DROP AS SELECT * FROM wharf.idle_listener');
    await client.query('DELETE FROM wharf.idle_listener');
    const id = await admitEvent(client, connectionId, subject, eventType);
    await client.query('INSERT INTO wharf.idle_listener SELECT * FROM set_aside');
    await client.query('COMMIT');
    return id;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}

export interface EventState {
  state: string;
  attempt: number;
  failures: number;
  error_class: string | null;
  outcome: string | null;
  lease_epoch: string;
}

export async function eventState(db: Db, id: string): Promise<EventState | undefined> {
  const { rows } = await db.query<EventState>(
    'SELECT state, attempt, failures, error_class, outcome, lease_epoch FROM wharf.provider_event WHERE id = $1',
    [id],
  );
  return rows[0];
}

/** Names of the steps event `id` has recorded, in name order. */
export async function stepNames(db: Db, id: string): Promise<string[]> {
  const { rows } = await db.query<{ step_name: string }>(
    'SELECT step_name FROM wharf.provider_event_step WHERE event_id = $1 ORDER BY step_name',
    [id],
  );
  return rows.map((row) => row.step_name);
}

/** Polls `probe` until it returns something other than undefined/false, or throws after `timeout` ms. */
export async function waitFor<T>(probe: () => Promise<T | undefined | false>, timeout = 10_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeout;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Waits until event `id` is in `state`, and returns its row. */
export function waitForState(db: Db, id: string, state: string, timeout = 10_000): Promise<EventState> {
  return waitFor(async () => {
    const row = await eventState(db, id);
    return row?.state === state ? row : undefined;
  }, timeout, `event ${id} to be ${state}`);
}
