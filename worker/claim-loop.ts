// Keeps up to `concurrency` handlers busy. It claims as many rows as it has
// free slots and loops at once while claims fill them; when a claim comes
// back short it marks the listener idle, claims once more (mark_idle succeeds
// only when no admission is in flight, so every admitted row is visible now),
// reads when the next retry falls due when that may have changed, claims once
// more after the read, and only then sleeps, until a notification, a finished handler, the
// earliest retry it knows of falls due (next-due.ts), or poll_every. While
// admissions keep mark_idle refusing, it claims every few ms.
import type pg from 'pg';
import type { Logger } from 'pino';
import { classOf } from './classify.js';
import type { Listener } from './listener.js';
import { claimedTotal } from './metrics.js';
import type { NextDue } from './next-due.js';
import { claimEvents, readNextDueIn } from './sql/claim-lease.js';
import { isConnectionTrouble } from './transient.js';
import type { ProviderEventRow } from './sql/event-row.js';
import type { Wakeup } from './wakeup.js';

export interface ClaimLoopOptions {
  pool: pg.Pool;
  workerId: string;
  /** What this host claims (wharf.claim's p_handles); null: everything. */
  handles: readonly string[] | null;
  listener: Listener;
  wakeup: Wakeup;
  nextDue: NextDue;
  logger: Logger;
  pollEvery: () => number;
  /** How many more rows this host may lease now (worker/create-worker.ts says why). */
  freeSlots: () => number;
  stopping: () => boolean;
  startRun: (row: ProviderEventRow) => void;
  onIdle: () => void;
  /** Where the database is, for the one line an outage logs. */
  database: { host: string; port?: number };
}

const firstErrorBackoff = 100;
/** How soon to try marking idle again after an admission in flight refused it. */
const markRetryMs = 2;

export async function runClaimLoop(options: ClaimLoopOptions): Promise<void> {
  const { listener, wakeup } = options;
  let errorBackoff = firstErrorBackoff;
  // An outage is said once (with where), and its end once: not every retry.
  let unavailable = false;
  while (!options.stopping()) {
    const free = options.freeSlots();
    if (free <= 0) {
      // A finishing handler wakes the loop.
      wakeup.reset();
      if (options.freeSlots() <= 0) await wakeup.sleep(options.pollEvery());
      continue;
    }
    wakeup.reset();
    let claimed: number;
    try {
      // While idle the listener's connection serves the claims too: the host
      // then holds that one connection and no other.
      const rows = await claimEvents(listener.connection ?? options.pool, options.workerId, free, options.handles);
      claimed = rows.length;
      if (claimed > 0) claimedTotal.inc(claimed);
      for (const row of rows) options.startRun(row);
      if (claimed === free) await listener.markBusy();
      errorBackoff = firstErrorBackoff;
      if (unavailable) options.logger.info(options.database, 'the database is reachable again');
      unavailable = false;
    } catch (error) {
      if (!isConnectionTrouble(error)) {
        options.logger.error({ error_class: classOf(error), retry_in_ms: errorBackoff }, 'claim failed');
      } else if (!unavailable) {
        unavailable = true;
        options.logger.warn({ error_class: classOf(error), ...options.database }, 'the database is unavailable; claiming again with backoff');
      }
      await wakeup.sleep(errorBackoff);
      errorBackoff = Math.min(options.pollEvery(), errorBackoff * 2);
      continue;
    }
    if (claimed === free || options.stopping()) continue;
    if (!listener.isIdle) {
      try {
        const mark = await listener.markIdle();
        if (mark === 'marked') continue;
        if (mark === 'busy') {
          // An admission was in flight: its row may be about to commit.
          await wakeup.sleep(markRetryMs);
          continue;
        }
      } catch (error) {
        options.logger.warn({ error_class: classOf(error) }, 'could not mark the listener idle');
      }
    }
    if (options.nextDue.needsReading) {
      try {
        await options.nextDue.refresh(() => readNextDueIn(listener.connection ?? options.pool));
        // next_due_at names only retries still to fall due: one that fell due
        // since the claim above is not in it, so claim once more before sleeping.
        continue;
      } catch (error) {
        // The poll still finds the retry.
        options.logger.warn({ error_class: classOf(error) }, 'could not read when the next retry is due');
      }
    }
    if (claimed === 0) options.onIdle();
    await wakeup.sleep(options.nextDue.sleepMs(options.pollEvery()));
  }
}
