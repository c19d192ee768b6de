// The leases a host holds, renewed together: one statement every renew_every
// for every handler running and every event waiting in the local queue,
// instead of a timer and a statement per lease. A lease found gone is
// reported, so that its handler is told and its waiting event dropped.
import type pg from 'pg';
import type { Logger } from 'pino';
import { classOf } from './classify.js';
import { runPeriodically, type Periodic } from './periodic.js';
import { renewLeases } from './sql/claim-lease.js';
import type { Lease } from './sql/event-row.js';

export interface LeaseRenewalOptions {
  pool: pg.Pool;
  every: () => number;
  logger: Logger;
  /** The leases to keep now. */
  held: () => Lease[];
  /** The ids of leases that were no longer held. */
  onLost: (ids: ReadonlySet<string>) => void;
}

export function renewHeldLeases(options: LeaseRenewalOptions): Periodic {
  return runPeriodically(options.every, async () => {
    const leases = options.held();
    if (leases.length === 0) return;
    try {
      const lost = await renewLeases(options.pool, leases);
      if (lost.size > 0) options.onLost(lost);
    } catch (error) {
      // The next round tries again; a lease outlasts a few missed renewals,
      // and one that expires meanwhile is the reaper's.
      options.logger.warn({ error_class: classOf(error), leases: leases.length }, 'lease renewal failed');
    }
  });
}
