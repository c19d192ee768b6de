// The business transactions of one attempt (ctx.step, ctx.transaction). When
// the attempt ends (its handler returned, threw, timed out or was drained),
// none of them may commit any more: the closing write is about to end the
// lease, and wharf's lease-ending functions wait for every open fenced write
// of the lease before they end it (sql/30-claim-lease.sql). So the attempt
// closes first: a transaction not yet at its COMMIT is refused there, and one
// still open has its connection cut, which makes PostgreSQL roll it back (at
// once when it is idle in its transaction; within the pool's
// client_connection_check_interval when a statement of it is running), and
// the closing write then goes through.
import type pg from 'pg';
import { LeaseLostError } from './errors.js';

export class AttemptTransactions {
  private closed = false;
  private readonly open = new Set<pg.ClientBase>();

  /** A transaction of this attempt begins on `client`; refused once the attempt has ended. */
  begin(client: pg.ClientBase): void {
    this.refuseWhenClosed();
    this.open.add(client);
  }

  /** Its body is done: it may commit only while the attempt goes on. */
  beforeCommit(): void {
    this.refuseWhenClosed();
  }

  /** It committed or rolled back. */
  end(client: pg.ClientBase): void {
    this.open.delete(client);
  }

  /** The attempt is over: nothing of it commits from now on, and what is open is cut off. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const client of this.open) {
      // The statement in flight fails with "Connection terminated"; the pool
      // drops the client (worker/pool-client.ts).
      void (client as pg.Client).end().catch(() => {});
    }
    this.open.clear();
  }

  private refuseWhenClosed(): void {
    if (this.closed) throw new LeaseLostError('the attempt has ended: its lease is being closed');
  }
}
