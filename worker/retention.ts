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

export type RetentionResult = PurgeResult | { purged: false; failed: true };

export function startRetention(options: {
  pool: pg.Pool;
  every: () => number;
  logger: Logger;
  onRun: (result: RetentionResult) => void;
}): Periodic {
  return runPeriodically(options.every, async () => {
    options.onRun(await runRetention(options.pool, options.logger));
  });
}

async function runRetention(pool: pg.Pool, logger: Logger): Promise<RetentionResult> {
  try {
    const result = await withPoolClient(pool, (client, discard) => purgeExpiredEvents(client).catch((error: unknown) => {
      discard(error);
      throw error;
    }));
    if (result.purged) {
      retentionDeletedTotal.inc({ state: 'DONE' }, result.doneDeleted);
      retentionDeletedTotal.inc({ state: 'DEAD' }, result.deadDeleted);
      logger.info({ done_deleted: result.doneDeleted, dead_deleted: result.deadDeleted }, 'retention purged');
    }
    return result;
  } catch (error) {
    retentionFailuresTotal.inc();
    logger[isConnectionTrouble(error) ? 'warn' : 'error']({ error_class: classOf(error) }, 'retention failed; rows left in place');
    return { purged: false, failed: true };
  }
}
