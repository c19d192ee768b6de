// Rows for operator API and CLI tests, made through the real SQL API (admit,
// claim, fail, complete), so every event is in a state the system can reach.
// Connections and admissions are inbox-fixtures.ts's, with these tests'
// defaults (numeric ids, a generic webhook per connection).
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { admitDelivery, buildConnection, subscribe, type Db } from './inbox-fixtures.js';

export const fixtureSource = 'https://hooks.example.test';

let counter = 0;

export async function createWorkspace(pool: pg.Pool, id: number): Promise<number> {
  await pool.query('SELECT wharf.upsert_workspace($1)', [id]);
  return id;
}

/** A generic (Standard Webhooks) connection of the workspace; its id. */
export async function createConnection(pool: pg.Pool, workspaceId: number): Promise<number> {
  return buildConnection(pool, {
    workspace: workspaceId, provider: 'generic', source: fixtureSource, externalId: `fixture-${workspaceId}-${++counter}`,
  });
}

export interface AdmitOptions {
  /** Default: a subject of its own, so the event heads its own scope. */
  subject?: string;
  payload?: Record<string, unknown>;
  headers?: Record<string, string>;
}

/** Admits one QUEUED event through the connection; its id. */
export async function admitEvent(pool: pg.Pool, connectionId: number, options: AdmitOptions = {}): Promise<number> {
  const subject = options.subject ?? `repo:acme/r${++counter}-${randomUUID().slice(0, 8)}`;
  await subscribe(pool, connectionId, [subject]);
  const admitted = await admitDelivery(pool, {
    provider: 'generic', source: fixtureSource, deliveryKey: randomUUID(), eventType: 'ping',
    route: { connection_id: connectionId }, subjects: [subject],
    payload: options.payload ?? { hello: 'world' }, headers: options.headers ?? {},
  });
  return Number(admitted.id);
}

/**
 * Admits a GitHub installation control event (NULL workspace); its id. Each
 * comes from a GitHub Enterprise server of its own, so it heads its own
 * system scope.
 */
export async function admitInstallationEvent(pool: pg.Pool): Promise<number> {
  const installationId = String(1000 + ++counter);
  const admitted = await admitDelivery(pool, {
    provider: 'github', source: `https://ghe${counter}.example.test`, deliveryKey: randomUUID(), eventType: 'installation',
    route: { control: true, installation_id: installationId }, subjects: null,
    payload: { action: 'created', installation: { id: Number(installationId) } },
  });
  return Number(admitted.id);
}

export type Ending = 'LEASED' | 'DONE' | 'DEAD' | 'uncertain';

/**
 * Claims event `id` and ends it as asked: kept LEASED, completed (DONE),
 * failed permanent (DEAD) or failed uncertain (DEAD, outcome uncertain);
 * returns the lease's epoch. Every other row the claim hands out goes
 * straight back, so that a test's claim takes no other test's rows.
 */
export async function finishEvent(pool: pg.Pool, id: number | string, ending: Ending): Promise<string> {
  const { rows } = await pool.query<{ id: string; lease_epoch: string }>(
    `SELECT id, lease_epoch FROM wharf.claim('fixture', 10000)`,
  );
  let epoch: string | undefined;
  for (const row of rows) {
    if (Number(row.id) !== Number(id)) {
      await pool.query('SELECT wharf.release($1, $2)', [row.id, row.lease_epoch]);
      continue;
    }
    epoch = row.lease_epoch;
    if (ending === 'DONE') await pool.query('SELECT wharf.complete($1, $2)', [row.id, row.lease_epoch]);
    if (ending === 'DEAD') await pool.query(`SELECT wharf.fail($1, $2, 'permanent', 'SyntaxError')`, [row.id, row.lease_epoch]);
    if (ending === 'uncertain') await pool.query(`SELECT wharf.fail($1, $2, 'uncertain', 'OutcomeUncertain')`, [row.id, row.lease_epoch]);
  }
  if (epoch === undefined) throw new Error(`fixture: event ${id} was not claimable`);
  return epoch;
}

/** Admits an event and ends it DEAD (or as asked); its id. */
export async function deadEvent(pool: pg.Pool, connectionId: number, ending: Ending = 'DEAD'): Promise<number> {
  const id = await admitEvent(pool, connectionId);
  await finishEvent(pool, id, ending);
  return id;
}

export async function deadInstallationEvent(pool: pg.Pool): Promise<number> {
  const id = await admitInstallationEvent(pool);
  await finishEvent(pool, id, 'DEAD');
  return id;
}

/**
 * Makes the scope of event `id` look stuck for `seconds` more than it is:
 * its clocks of wharf.scopes_stuck_since (sql/30), failing_since and the
 * ready_at of a due head, moved back (a head not yet due stays so). Arrival times do not count (an old backlog served in
 * order is not stuck), so moving received_at back would change nothing.
 */
export async function ageScope(pool: Db, id: number | string, seconds: number): Promise<void> {
  await pool.query(
    `UPDATE wharf.scope s SET ready_at = CASE WHEN s.ready_at <= clock_timestamp() THEN s.ready_at - $2 * interval '1 second' ELSE s.ready_at END,
                              failing_since = s.failing_since - $2 * interval '1 second'
       FROM wharf.provider_event e WHERE e.id = $1 AND s.scope_key = e.scope_key`, [id, seconds]);
  // As a DBA who moves ready_at back by hand: claims read their lines from the start (sql/30).
  await pool.query('SELECT wharf.reset_claim_lines()');
}
