// Readiness as a probe reports it (/readyz of the receiver and the worker):
// whether this process can do its work against the database it was given,
// now. A server that answers but is in recovery (a standby, or the old
// primary come back as one) or read-only cannot take a single admission or
// claim: with a single-host URL pointed at it the process is up but useless,
// and a load balancer should send traffic elsewhere. A multi-host URL with
// target_session_attrs never lands there (db/pool.ts picks a primary).
import type { Database } from './database.js';

export type Readiness = 'ready' | 'standby' | 'unavailable';

/** 'ready' on a writable primary, 'standby' on a server in recovery or read-only, 'unavailable' when it does not answer. */
export async function readReadiness(db: Database): Promise<Readiness> {
  try {
    const { rows } = await db.query<{ writable: boolean }>(
      `SELECT NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off' AS writable`);
    return rows[0]?.writable === true ? 'ready' : 'standby';
  } catch {
    return 'unavailable';
  }
}
