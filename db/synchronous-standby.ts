// Whether a 202 survives a crash failover. The edge answers 202 once admit's
// transaction has committed on the primary; the row survives the primary's
// loss only when a synchronous standby confirmed that commit before the
// primary reported it (synchronous_commit on/remote_write/remote_apply with
// synchronous_standby_names). An asynchronous standby may be promoted
// without the last commits: acknowledged deliveries gone.
import type { Database } from './database.js';
import { environment } from './environment.js';

export interface SynchronousStandbyStatus {
  synchronous: boolean;
  /** Why not, in words, when not. */
  reason?: string;
}

/** What the connected primary says about its synchronous replication. */
export async function readSynchronousStandby(db: Database): Promise<SynchronousStandbyStatus> {
  const { rows } = await db.query<{ names: string; commit: string; sync: number | null; visible: boolean }>(
    `SELECT current_setting('synchronous_standby_names') AS names,
            current_setting('synchronous_commit') AS commit,
            (SELECT count(*) FILTER (WHERE sync_state IN ('sync', 'quorum'))::int FROM pg_stat_replication) AS sync,
            -- sync_state is hidden (NULL) from a role without pg_read_all_stats: then the settings alone tell.
            NOT EXISTS (SELECT FROM pg_stat_replication WHERE sync_state IS NULL) AS visible`);
  const { names, commit, sync, visible } = rows[0]!;
  if (names.trim() === '') return { synchronous: false, reason: 'synchronous_standby_names is empty' };
  if (commit === 'off' || commit === 'local') return { synchronous: false, reason: `synchronous_commit is ${commit}` };
  if (visible && sync === 0) return { synchronous: false, reason: 'no standby is connected as synchronous now (pg_stat_replication)' };
  return { synchronous: true };
}

export type SynchronousStandbyPolicy = 'no' | 'yes' | 'skip';

/** WHARF_REQUIRE_SYNC_STANDBY read, or an error naming what it accepts. */
export function readSynchronousStandbyPolicy(value: string | undefined): SynchronousStandbyPolicy {
  const text = (value ?? String(environment.WHARF_REQUIRE_SYNC_STANDBY.default)).trim().toLowerCase();
  if (['no', 'false', '0', 'off', ''].includes(text)) return 'no';
  if (['yes', 'true', '1', 'on'].includes(text)) return 'yes';
  if (text === 'skip') return 'skip';
  throw new Error(`WHARF_REQUIRE_SYNC_STANDBY must be no, yes or skip, not ${JSON.stringify(value)}`);
}

/** The primary has no synchronous standby and WHARF_REQUIRE_SYNC_STANDBY=yes asks for one. */
export class NoSynchronousStandbyError extends Error {
  override name = 'NoSynchronousStandbyError';
}

export interface StartLogger {
  warn(fields: Record<string, unknown>, message: string): void;
}

/**
 * At a start against a configured database: warns when the primary has no
 * synchronous standby, or refuses (WHARF_REQUIRE_SYNC_STANDBY=yes).
 */
export async function checkSynchronousStandby(db: Database, policy: SynchronousStandbyPolicy, logger: StartLogger): Promise<void> {
  if (policy === 'skip') return;
  const status = await readSynchronousStandby(db);
  if (status.synchronous) return;
  const what = `the primary has no synchronous standby (${status.reason}): a crash failover can lose deliveries already answered 202`;
  if (policy === 'yes') {
    throw new NoSynchronousStandbyError(`${what}. WHARF_REQUIRE_SYNC_STANDBY=yes refuses to start; see docs/deploy-edge.md#failover`);
  }
  logger.warn({ event: 'no_synchronous_standby', reason: status.reason },
    `${what}; WHARF_REQUIRE_SYNC_STANDBY=yes refuses to start without one, =skip silences this where storage replicates synchronously (see docs/deploy-edge.md#failover)`);
}
