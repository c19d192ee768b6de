// The writes that name a lease (renew, complete, complete_many, release,
// fail) find it by primary key, whatever the statistics say, and touch no
// other index of the inbox: an index of leased rows would cost every claim an
// entry, and a walk of one would cost every lookup the number of leases
// (sql/30-claim-lease.sql). The reaper finds the leases from the scope rows.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { readsOfOwnTransaction } from '../support/statistics.js';
import { admitEvents } from '../support/worker-inbox.js';

const leased = 200;
/** The inbox's indexes a lease's own writes may read: its primary key. */
const leaseLookupIndexes = new Set(['provider_event_pkey']);

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

interface Lease {
  id: string;
  lease_epoch: string;
}

it('looks up every lease by primary key, never by walking the leased rows', async () => {
  await admitEvents(db.pool, Array.from({ length: leased }, (_, n) => ({ scope: `repo:lookup-${n}` })));
  await db.pool.query('VACUUM ANALYZE wharf.provider_event');
  const client = await db.connect();
  try {
    const { rows } = await client.query<Lease>(`SELECT id, lease_epoch FROM wharf.claim('lookups', $1)`, [leased]);
    expect(rows).toHaveLength(leased);
    const slice = (n: number) => rows.slice(n * 20, n * 20 + 20);
    const ids = (part: Lease[]) => part.map((row) => row.id);
    const epochs = (part: Lease[]) => part.map((row) => row.lease_epoch);
    const { result: ended, reads } = await readsOfOwnTransaction(client, 'wharf.provider_event', async () => ({
      renewed: (await client.query<{ ok: boolean }>(
        'SELECT wharf.renew(l.id, l.epoch) AS ok FROM unnest($1::bigint[], $2::bigint[]) AS l(id, epoch)', [ids(slice(0)), epochs(slice(0))])).rows,
      completed: (await client.query<{ ok: boolean }>(
        'SELECT wharf.complete(l.id, l.epoch) AS ok FROM unnest($1::bigint[], $2::bigint[]) AS l(id, epoch)', [ids(slice(1)), epochs(slice(1))])).rows,
      completedMany: (await client.query<{ id: string }>(
        `SELECT id FROM wharf.complete_many($1, $2, array_fill('handled'::text, ARRAY[20])) AS id`, [ids(slice(2)), epochs(slice(2))])).rows,
      released: (await client.query<{ ok: boolean }>(
        'SELECT wharf.release(l.id, l.epoch) AS ok FROM unnest($1::bigint[], $2::bigint[]) AS l(id, epoch)', [ids(slice(3)), epochs(slice(3))])).rows,
      failed: (await client.query<{ state: string }>(
        `SELECT wharf.fail(l.id, l.epoch, 'transient', 'ECONNRESET') AS state
           FROM unnest($1::bigint[], $2::bigint[]) AS l(id, epoch)`, [ids(slice(4)), epochs(slice(4))])).rows,
    }));
    // Each write found its lease: the lookups below were real ones.
    expect(ended.renewed.every((row) => row.ok)).toBe(true);
    expect(ended.completed.every((row) => row.ok)).toBe(true);
    expect(ended.completedMany).toHaveLength(20);
    expect(ended.released.every((row) => row.ok)).toBe(true);
    expect(ended.failed.every((row) => row.state === 'QUEUED')).toBe(true);

    for (const [name, { scans }] of reads.indexes) {
      if (!leaseLookupIndexes.has(name)) expect({ name, scans }).toEqual({ name, scans: 0 });
    }
    expect(reads.indexes.get('provider_event_pkey')!.scans).toBeGreaterThanOrEqual(100);
  } finally {
    await client.end();
  }
});

it('reaps from the leases its scope rows name, not from a scan of the inbox', async () => {
  // The leases above are still held; expire them, and give the inbox rows that are not leased.
  await db.pool.query(`UPDATE wharf.provider_event SET leased_until = clock_timestamp() - interval '1 second' WHERE state = 'LEASED'`);
  await admitEvents(db.pool, Array.from({ length: 50 }, (_, n) => ({ scope: `repo:queued-${n}` })));
  await db.pool.query('VACUUM ANALYZE wharf.provider_event');
  const client = await db.connect();
  try {
    // This count scans the inbox; it is flushed before the reap's transaction.
    const { rows: expired } = await client.query<{ n: string }>(`SELECT count(*) AS n FROM wharf.provider_event WHERE state = 'LEASED'`);
    const { result: reaped, reads } = await readsOfOwnTransaction(client, 'wharf.provider_event', async () =>
      (await client.query<{ reaped: number }>('SELECT wharf.reap() AS reaped')).rows[0]!.reaped);
    expect(reaped).toBe(Number(expired[0]!.n));
    for (const [name, { scans }] of reads.indexes) {
      if (!leaseLookupIndexes.has(name)) expect({ name, scans }).toEqual({ name, scans: 0 });
    }
    expect(reads.sequential).toBe(0);
    // The counting saw the reap's own lookups: a lease per scope row, by primary key.
    expect(reads.indexes.get('provider_event_pkey')!.scans).toBeGreaterThan(0);
  } finally {
    await client.end();
  }
});
