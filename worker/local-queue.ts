// Claimed events waiting for a free handler (WorkerOptions.localQueue). With
// short handlers a claim sized to the free slots costs a statement and a
// commit per few events; claiming a queue's worth at once spreads that over
// many. What waits here holds its lease, so the leases are renewed while they
// wait, with the host's others, and given back when the host stops. A
// scope has at most one leased event, so waiting here never reorders a scope.
import type pg from 'pg';
import type { Logger } from 'pino';
import { classOf } from './classify.js';
import { releasedTotal } from './metrics.js';
import { releaseEvent } from './sql/claim-lease.js';
import type { Lease, ProviderEventRow } from './sql/event-row.js';

function leaseOf(row: ProviderEventRow): Lease {
  return { id: row.id, epoch: row.lease_epoch };
}

export class LocalQueue {
  private readonly rows: ProviderEventRow[] = [];

  /** capacity: how many may wait; 0 turns the queue off (claims sized to free slots). */
  constructor(readonly capacity: number) {}

  get size(): number {
    return this.rows.length;
  }

  push(row: ProviderEventRow): void {
    this.rows.push(row);
  }

  /** The event claimed first (claims come in their scopes' ready order). */
  shift(): ProviderEventRow | undefined {
    return this.rows.shift();
  }

  /**
   * How many to claim now: none until the queue has drained to half, then
   * enough for the free handlers and to fill the queue, so that claims come
   * in batches rather than one per finished handler; never more than
   * leaseRoom, the leases the host may still take.
   */
  claimable(freeHandlers: number, leaseRoom: number): number {
    if (this.rows.length > this.capacity / 2) return 0;
    return Math.max(0, Math.min(leaseRoom, freeHandlers + this.capacity - this.rows.length));
  }

  /** The leases of the waiting events (renewed with the host's others: worker/lease-renewal.ts). */
  leases(): Lease[] {
    return this.rows.map(leaseOf);
  }

  /** Drops the waiting events whose lease was found gone; returns how many. */
  drop(lost: ReadonlySet<string>): number {
    const before = this.rows.length;
    for (let i = this.rows.length - 1; i >= 0; i -= 1) {
      if (lost.has(String(this.rows[i]!.id))) this.rows.splice(i, 1);
    }
    return before - this.rows.length;
  }

  /** Gives every waiting lease back (wharf.release), as a stopping host does with its unfinished ones. */
  async releaseAll(pool: pg.Pool, logger: Logger): Promise<void> {
    const waiting = this.rows.splice(0);
    await Promise.all(waiting.map(async (row) => {
      try {
        if (await releaseEvent(pool, leaseOf(row))) releasedTotal.inc();
      } catch (error) {
        // Left to expire: the reaper returns it after its lease.
        logger.warn({ event_id: row.id, error_class: classOf(error) }, 'could not release a waiting lease');
      }
    }));
  }
}
