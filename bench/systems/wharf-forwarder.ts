// Wharf's side of the forwarding workload: workspace 1 with its GitHub App
// installation (wharf-inbox.ts), one destination made through the SQL API
// as the operator surface makes it (create_destination, its signing secret
// sealed for it with db/secret-box.ts and set in the same transaction), one
// forward-only rule that routes every event of the workspace to it, and the
// real forwarder of worker/ started on the database.
//
// Where the destination SQL is missing (a database of before 0.4.0), ForwarderUnavailable
// says which, and the workload notes it instead of a figure.
import { pino } from 'pino';
import type pg from 'pg';
import { encryptSecret, generateKeyRingEntry, parseKeyRing } from '../../db/secret-box.js';
import { createWorker } from '../../worker/index.js';
import type { BenchDatabase } from '../databases.js';
import type { RunningConsumer } from './wharf-consumer.js';

/** A Standard Webhooks secret for the bench's destinations, as Wharf draws them: `whsec_` and random bytes in base64. */
export function benchSigningSecret(): string {
  return `whsec_${Buffer.from(crypto.getRandomValues(new Uint8Array(24))).toString('base64')}`;
}

/** The key ring the bench seals the destination's secret under, and the WHARF_SECRET_KEYS value the forwarder opens it with. */
export const benchSecretKeys = generateKeyRingEntry('bench');

export interface ForwardingDestination {
  id: number;
  ruleId: number;
}

/**
 * The destination every event of workspace 1 goes to: `url`, ordered or
 * not, at most `maxInFlight` requests at once, no rate limit, a forward-only
 * rule (the workspace's handlers get nothing: no handler runs in the bench).
 */
export async function createBenchDestination(pool: pg.Pool, options: {
  url: string; ordered: boolean; maxInFlight: number; signingSecret: string;
}): Promise<ForwardingDestination> {
  const ring = await parseKeyRing(benchSecretKeys);
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const { rows: [created] } = await client.query<{ d: { id: number } }>('SELECT wharf.create_destination(1, $1) AS d', [
      JSON.stringify({ name: 'bench', url: options.url, ordered: options.ordered, max_in_flight: options.maxInFlight, timeout_ms: 10_000 }),
    ]);
    const id = Number(created!.d.id);
    const sealed = await encryptSecret(ring!, { destinationId: id }, options.signingSecret);
    await client.query('SELECT wharf.set_destination_secret(1, $1, $2, false)', [id, sealed]);
    const { rows: [rule] } = await client.query<{ r: { id: number } }>('SELECT wharf.create_destination_rule(1, $1) AS r', [
      JSON.stringify({ destination_id: id, forward_only: true }),
    ]);
    await client.query('COMMIT');
    return { id, ruleId: Number(rule!.r.id) };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}

/** Why this database cannot forward (no destination SQL), or undefined when it can. */
export async function destinationSqlMissing(pool: pg.Pool): Promise<string | undefined> {
  const { rows } = await pool.query<{ missing: string[] }>(
    `SELECT array_agg(name) FILTER (WHERE to_regproc(name) IS NULL) AS missing
       FROM unnest(ARRAY['wharf.create_destination', 'wharf.set_destination_secret', 'wharf.create_destination_rule',
                         'wharf.claim_deliveries']) AS name`);
  const missing = rows[0]?.missing ?? [];
  return missing.length > 0 ? `the migrated database has no ${missing.join(', ')} (the destination SQL, sql/88, is not merged)` : undefined;
}

/** The forwarder is not on this branch: the run records why instead of a figure. */
export class ForwarderUnavailable extends Error {
  override name = 'ForwarderUnavailable';
}

/**
 * Wharf's forwarder on `db` as `wharf worker` runs it: createWorker with
 * forwarding on, at most `concurrency` requests in flight (the destination's
 * own bound is set to the same), the bench's key ring, private addresses
 * allowed (the receiver is on 127.0.0.1, as WHARF_FORWARD_ALLOW_PRIVATE=true
 * allows), no handler, logging nothing.
 */
export async function startWharfForwarder(db: BenchDatabase, concurrency: number): Promise<RunningConsumer> {
  const worker = createWorker({
    connectionString: db.url,
    handlers: {},
    concurrency: 1,
    logger: pino({ level: 'silent' }),
    forward: { secretKeys: benchSecretKeys, addresses: { allowPrivate: true }, concurrency },
  });
  await worker.start();
  return { stop: () => worker.stop() };
}
