// Every host takes back expired leases, so a crashed worker's rows return
// even when it never comes back: soon after it starts (hosts restarting often
// must not leave leases to the longest-lived one), then every reapEvery with
// jitter.
import type pg from 'pg';
import type { Logger } from 'pino';
import { classOf } from './classify.js';
import { reapedTotal } from './metrics.js';
import { spread } from '../db/backoff.js';
import { runPeriodically, type Periodic } from './periodic.js';
import { reapExpiredLeases } from './sql/claim-lease.js';
import { isConnectionTrouble } from './transient.js';

export function startReaper(options: {
  pool: pg.Pool;
  every: () => number;
  logger: Logger;
  onReaped: (count: number) => void;
}): Periodic {
  return runPeriodically(() => spread(options.every()), async () => {
    try {
      const reaped = await reapExpiredLeases(options.pool);
      if (reaped > 0) {
        reapedTotal.inc(reaped);
        options.logger.warn({ reaped }, 'expired leases taken back');
      }
      options.onReaped(reaped);
    } catch (error) {
      // A database that cannot serve now (down, failing over, a standby) is
      // said at warn, once a round; anything else is a bug to look at.
      options.logger[isConnectionTrouble(error) ? 'warn' : 'error']({ error_class: classOf(error) }, 'reaper failed');
    }
  }, () => 1_000 + Math.random() * 2_000);
}
