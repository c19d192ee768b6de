// A connection checked out of a pool for several statements. pg-pool drops
// its own error listener on checkout, so a connection that dies while held
// (the server restarting) would crash the process with an unhandled 'error'
// event: this one listens, and the statement in flight fails instead. A
// connection that died, or that `work` says is unusable, is not pooled again.
import type pg from 'pg';

export async function withPoolClient<T>(
  pool: pg.Pool,
  work: (client: pg.PoolClient, discard: (error: unknown) => void) => Promise<T>,
): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  const discard = (error: unknown): void => {
    broken ??= error instanceof Error ? error : new Error('connection unusable');
  };
  client.on('error', discard);
  try {
    return await work(client, discard);
  } finally {
    client.removeListener('error', discard);
    client.release(broken);
  }
}
