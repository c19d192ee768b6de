// Rows for operator API and CLI tests, made through the real SQL API (admit,
// claim, fail, complete), so every event is in a state the system can reach.
import { randomUUID } from 'node:crypto';
import type pg from 'pg';

export const fixtureSource = 'https://hooks.example.test';

let counter = 0;

export async function createWorkspace(pool: pg.Pool, id: number): Promise<number> {
  await pool.query('SELECT wharf.upsert_workspace($1)', [id]);
  return id;
}

/** A generic (Standard Webhooks) connection of the workspace; its id. */
export async function createConnection(pool: pg.Pool, workspaceId: number): Promise<number> {
  const { rows } = await pool.query<{ id: string }>(
    `SELECT wharf.upsert_connection($1, 'generic', $2, 'webhook', $3) AS id`,
    [workspaceId, fixtureSource, `fixture-${workspaceId}-${++counter}`],
  );
  return Number(rows[0]!.id);
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
  await pool.query('SELECT wharf.subscribe($1, $2)', [connectionId, subject]);
  const { rows } = await pool.query<{ receipt: { events: { event_id: number }[] } }>(
    `SELECT wharf.admit('generic', $1, $2, 'ping', $3, $4, $5, $6) AS receipt`,
    [fixtureSource, randomUUID(), { connection_id: connectionId }, [subject],
     options.payload ?? { hello: 'world' }, options.headers ?? {}],
  );
  const event = rows[0]!.receipt.events[0];
  if (!event) throw new Error(`fixture: admission stored nothing: ${JSON.stringify(rows[0]!.receipt)}`);
  return event.event_id;
}

/**
 * Admits a GitHub installation control event (NULL workspace); its id. Each
 * comes from a GitHub Enterprise server of its own, so it heads its own
 * system scope.
 */
export async function admitInstallationEvent(pool: pg.Pool): Promise<number> {
  const installationId = String(1000 + ++counter);
  const { rows } = await pool.query<{ receipt: { events: { event_id: number }[] } }>(
    `SELECT wharf.admit('github', $1, $2, 'installation', $3, NULL, $4, '{}') AS receipt`,
    [`https://ghe${counter}.example.test`, randomUUID(), { control: true, installation_id: installationId },
     { action: 'created', installation: { id: Number(installationId) } }],
  );
  return rows[0]!.receipt.events[0]!.event_id;
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
