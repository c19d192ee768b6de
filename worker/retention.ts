// Forgets DONE rows past the replay window and DEAD rows past retention.
// Every host schedules it; the advisory lock lets one purge at a time.
import type pg from 'pg';
import type { Logger } from 'pino';
import { classOf } from './classify.js';
import { retentionDeletedTotal, retentionFailuresTotal } from './metrics.js';
import { runPeriodically, type Periodic } from './periodic.js';
import { withPoolClient } from './pool-client.js';
import { purgeExpiredEvents, type PurgeResult } from './sql/replay-retention.js';
import { isConnectionTrouble } from './transient.js';

export type RetentionResult =
  | { purged: true; doneDeleted: number; deadDeleted: number; logsDeleted: number; batches: number }
  | { purged: false; failed?: true };

/**
 * Retention is bounded work: each batch is one short transaction
 * (wharf.purge, wharf.purge_logs), and the run repeats batches until one
 * deletes nothing, another host takes the lock between two of them, or the
 * worker stops. What a failed batch would have deleted stays in place.
 */
export function startRetention(options: {
  pool: pg.Pool;
  every: () => number;
  logger: Logger;
  onRun: (result: RetentionResult) => void;
}): Periodic {
  let stopping = false;
  const periodic = runPeriodically(options.every, async () => {
    options.onRun(await runRetention(options.pool, options.logger, () => stopping));
  });
  return {
    stop() {
      stopping = true;
      return periodic.stop();
    },
  };
}

async function runRetention(pool: pg.Pool, logger: Logger, stopping: () => boolean): Promise<RetentionResult> {
  const total = { purged: true as const, doneDeleted: 0, deadDeleted: 0, logsDeleted: 0, batches: 0 };
  try {
    while (!stopping()) {
      const batch = await withPoolClient(pool, (client, discard) => purgeExpiredEvents(client).catch((error: unknown) => {
        discard(error);
        throw error;
      }));
      if (!batch.purged) break;
      total.batches += 1;
      total.doneDeleted += batch.doneDeleted;
      total.deadDeleted += batch.deadDeleted;
      total.logsDeleted += batch.logsDeleted;
      retentionDeletedTotal.inc({ state: 'DONE' }, batch.doneDeleted);
      retentionDeletedTotal.inc({ state: 'DEAD' }, batch.deadDeleted);
      retentionDeletedTotal.inc({ state: 'LOG' }, batch.logsDeleted);
      if (batch.doneDeleted + batch.deadDeleted + batch.logsDeleted === 0) break;
      if (total.batches % 20 === 0) {
        logger.info({ batches: total.batches, done_deleted: total.doneDeleted, dead_deleted: total.deadDeleted,
          logs_deleted: total.logsDeleted }, 'retention in progress');
      }
    }
    if (total.batches === 0) return { purged: false };
    logger.info({ batches: total.batches, done_deleted: total.doneDeleted, dead_deleted: total.deadDeleted,
      logs_deleted: total.logsDeleted }, 'retention purged');
    return total;
  } catch (error) {
    retentionFailuresTotal.inc();
    logger[isConnectionTrouble(error) ? 'warn' : 'error']({ error_class: classOf(error), batches: total.batches },
      'retention failed; rows left in place');
    return { purged: false, failed: true };
  }
}
