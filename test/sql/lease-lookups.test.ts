// The writes that name a lease (renew, complete, complete_many, release,
// fail) find it by primary key, whatever the statistics say, and touch no
// other index of the inbox: an index of leased rows would cost every claim an
// entry, and a walk of one would cost every lookup the number of leases
// (sql/30-claim-lease.sql). The reaper finds the leases from the scope rows.
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { flushStatistics } from '../support/statistics.js';
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

/** Index scans per index of provider_event, as the statistics hold them once `client`'s are flushed. */
async function indexScans(client: pg.Client): Promise<Map<string, number>> {
  await flushStatistics(client);
  const { rows } = await db.pool.query<{ name: string; scans: string }>(
    `SELECT indexrelname AS name, idx_scan AS scans FROM pg_stat_user_indexes WHERE relname = 'provider_event'`);
  return new Map(rows.map((row) => [row.name, Number(row.scans)]));
}

it('looks up every lease by primary key, never by walking the leased rows', async () => {
  await admitEvents(db.pool, Array.from({ length: leased }, (_, n) => ({ scope: `repo:lookup-${n}` })));
  await db.pool.query('VACUUM ANALYZE wharf.provider_event');
  const client = await db.connect();
  try {
    const { rows } = await client.query<Lease>(`SELECT id, lease_epoch FROM wharf.claim('lookups', $1)`, [leased]);
    expect(rows).toHaveLength(leased);
    const before = await indexScans(client);

    const slice = (n: number) => rows.slice(n * 20, n * 20 + 20);
    const ids = (part: Lease[]) => part.map((row) => row.id);
    const epochs = (part: Lease[]) => part.map((row) => row.lease_epoch);
    const { rows: renewed } = await client.query<{ ok: boolean }>(
      'SELECT wharf.renew(l.id, l.epoch) AS ok FROM unnest($1::bigint[], $2::bigint[]) AS l(id, epoch)', [ids(slice(0)), epochs(slice(0))]);
    const { rows: completed } = await client.query<{ ok: boolean }>(
      'SELECT wharf.complete(l.id, l.epoch) AS ok FROM unnest($1::bigint[], $2::bigint[]) AS l(id, epoch)', [ids(slice(1)), epochs(slice(1))]);
    const { rows: completedMany } = await client.query<{ id: string }>(
      `SELECT id FROM wharf.complete_many($1, $2, array_fill('handled'::text, ARRAY[20])) AS id`, [ids(slice(2)), epochs(slice(2))]);
    const { rows: released } = await client.query<{ ok: boolean }>(
      'SELECT wharf.release(l.id, l.epoch) AS ok FROM unnest($1::bigint[], $2::bigint[]) AS l(id, epoch)', [ids(slice(3)), epochs(slice(3))]);
    const { rows: failed } = await client.query<{ state: string }>(
      `SELECT wharf.fail(l.id, l.epoch, 'transient', 'ECONNRESET') AS state
         FROM unnest($1::bigint[], $2::bigint[]) AS l(id, epoch)`, [ids(slice(4)), epochs(slice(4))]);
    // Each write found its lease: the lookups below were real ones.
    expect(renewed.every((row) => row.ok)).toBe(true);
    expect(completed.every((row) => row.ok)).toBe(true);
    expect(completedMany).toHaveLength(20);
    expect(released.every((row) => row.ok)).toBe(true);
    expect(failed.every((row) => row.state === 'QUEUED')).toBe(true);

    const after = await indexScans(client);
    for (const [name, scans] of after) {
      if (!leaseLookupIndexes.has(name)) expect({ name, scans: scans - before.get(name)! }).toEqual({ name, scans: 0 });
    }
    expect(after.get('provider_event_pkey')! - before.get('provider_event_pkey')!).toBeGreaterThanOrEqual(100);
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
    // Counted on the session whose statistics are flushed before the reap:
    // this count scans the inbox, and a late flush would put it in the window.
    const { rows: expired } = await client.query<{ n: string }>(`SELECT count(*) AS n FROM wharf.provider_event WHERE state = 'LEASED'`);
    const before = await indexScans(client);
    const seqScansBefore = await inboxSequentialScans(client);
    const { rows } = await client.query<{ reaped: number }>('SELECT wharf.reap() AS reaped');
    expect(rows[0]!.reaped).toBe(Number(expired[0]!.n));
    const after = await indexScans(client);
    for (const [name, scans] of after) {
      if (!leaseLookupIndexes.has(name)) expect({ name, scans: scans - before.get(name)! }).toEqual({ name, scans: 0 });
    }
    expect(await inboxSequentialScans(client)).toBe(seqScansBefore);
  } finally {
    await client.end();
  }
});

/** Sequential scans of the inbox, as the statistics hold them once `client`'s are flushed. */
async function inboxSequentialScans(client: pg.Client): Promise<number> {
  await flushStatistics(client);
  const { rows } = await db.pool.query<{ scans: string }>(
    `SELECT seq_scan AS scans FROM pg_stat_user_tables WHERE schemaname = 'wharf' AND relname = 'provider_event'`);
  return Number(rows[0]!.scans);
}
