// Epoch fencing across real sessions: a lease taken back by the reaper makes
// every write of its old holder a no-op, an open fenced write keeps the reaper
// away, and a row locked by the reaper or an erasure fails a fence at once.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { claimOne, type Lease, scalar, timedSession } from '../support/sessions.js';
import { eventState, admitEvents, setSettings, stepNames, testWorkspace, waitFor } from '../support/worker-inbox.js';

let db: TestDatabase;
beforeEach(async () => {
  db = await createTestDatabase();
  await db.pool.query('CREATE TABLE business_write (event_id bigint NOT NULL, writer text NOT NULL)');
});
afterEach(async () => {
  await db?.drop();
});

async function businessWrites(): Promise<string[]> {
  const { rows } = await db.pool.query<{ writer: string }>('SELECT writer FROM business_write ORDER BY writer');
  return rows.map((row) => row.writer);
}

/** Expires the leases of `ids` now, as if their holders had stalled. */
async function expireLeases(ids: string[]): Promise<void> {
  await db.pool.query(
    `UPDATE wharf.provider_event SET leased_until = clock_timestamp() - interval '1 second' WHERE id = ANY($1)`,
    [ids],
  );
}

describe('a lease taken back by reap', () => {
  it("makes the old holder's complete, fail, renew, release, step and fence change nothing; the new holder's work commits", async () => {
    await setSettings(db.pool, { lease: '200 milliseconds', base_delay: '1 millisecond', max_delay: '2 milliseconds' });
    const [id] = await admitEvents(db.pool, [{ scope: 'taken' }]);
    const [oldHolder, reaper, newHolder] = [await timedSession(db), await timedSession(db), await timedSession(db)];

    const old = await claimOne(oldHolder, 'old');
    expect(old).toEqual({ id, lease_epoch: '1' });
    // The old holder opens its business transaction and writes, not yet fenced.
    await oldHolder.query('BEGIN');
    await oldHolder.query(`INSERT INTO business_write VALUES ($1, 'old')`, [id]);

    // The lease runs out for real; the reaper takes it back, and a new holder claims it.
    await waitFor(async () => (await scalar<number>(reaper, 'SELECT wharf.reap() AS value')) === 1, 5_000, 'the reap');
    await setSettings(db.pool, { lease: '2 minutes' });
    const fresh = await waitFor(() => claimOne(newHolder, 'new'), 5_000, 'the new claim');
    expect(fresh).toEqual({ id, lease_epoch: '2' });

    // The old holder's fence fails and its whole transaction rolls back.
    await expect(oldHolder.query('SELECT wharf.fence($1, $2)', [id, old!.lease_epoch])).rejects.toMatchObject({ code: 'WH412' });
    await oldHolder.query('ROLLBACK');
    // Every other write under the old epoch is a no-op.
    const epoch = old!.lease_epoch;
    expect(await scalar(oldHolder, 'SELECT wharf.complete($1, $2) AS value', [id, epoch])).toBe(false);
    expect(await scalar(oldHolder, `SELECT wharf.fail($1, $2, 'unknown', 'Error') AS value`, [id, epoch])).toBeNull();
    expect(await scalar(oldHolder, 'SELECT wharf.renew($1, $2) AS value', [id, epoch])).toBe(false);
    expect(await scalar(oldHolder, 'SELECT wharf.release($1, $2) AS value', [id, epoch])).toBe(false);
    await expect(oldHolder.query(`SELECT wharf.step($1, $2, 'write')`, [id, epoch])).rejects.toMatchObject({ code: 'WH412' });
    await expect(oldHolder.query('SELECT wharf.fence($1, $2)', [id, epoch])).rejects.toMatchObject({ code: 'WH412' });
    expect(await eventState(db.pool, id!)).toMatchObject({
      state: 'LEASED',
      lease_epoch: '2',
      attempt: 2,
      failures: 1,
      error_class: 'LeaseExpired',
    });
    expect(await scalar(db.pool, 'SELECT leased_by AS value FROM wharf.provider_event WHERE id = $1', [id])).toBe('new');
    expect(await businessWrites()).toEqual([]);
    expect(await stepNames(db.pool, id!)).toEqual([]);

    // The new holder's fenced work commits.
    await newHolder.query('BEGIN');
    expect(await scalar(newHolder, `SELECT wharf.step($1, $2, 'write') AS value`, [id, '2'])).toBe(true);
    await newHolder.query(`INSERT INTO business_write VALUES ($1, 'new')`, [id]);
    await newHolder.query('SELECT wharf.fence($1, $2)', [id, '2']);
    await newHolder.query('COMMIT');
    expect(await scalar(newHolder, 'SELECT wharf.complete($1, $2) AS value', [id, '2'])).toBe(true);
    expect(await eventState(db.pool, id!)).toMatchObject({ state: 'DONE', outcome: 'handled' });
    expect(await businessWrites()).toEqual(['new']);
    expect(await stepNames(db.pool, id!)).toEqual(['write']);
  });
});

describe('an open fenced write', () => {
  it('keeps the reaper off its row (and only its row) until it commits, while renewals still pass', async () => {
    const [fencedId, idleId] = await admitEvents(db.pool, [{ scope: 'fenced' }, { scope: 'idle' }]);
    const [holder, business, reaper] = [await timedSession(db), await timedSession(db), await timedSession(db)];
    const { rows: leases } = await holder.query<Lease>('SELECT id, lease_epoch FROM wharf.claim($1, 10) ORDER BY id', ['holder']);
    expect(leases.map((lease) => lease.id)).toEqual([fencedId, idleId]);

    await business.query('BEGIN');
    await business.query('SELECT wharf.fence($1, 1)', [fencedId]);
    await expireLeases([fencedId!, idleId!]);

    expect(await scalar(reaper, 'SELECT wharf.reap() AS value')).toBe(1);
    expect((await eventState(db.pool, idleId!))?.state).toBe('QUEUED');
    expect(await eventState(db.pool, fencedId!)).toMatchObject({ state: 'LEASED', lease_epoch: '1', failures: 0 });

    // A renewal from the holder's own session is a plain UPDATE: the fence lock does not block it.
    expect(await scalar(holder, 'SELECT wharf.renew($1, 1) AS value', [fencedId])).toBe(true);
    await business.query(`INSERT INTO business_write VALUES ($1, 'fenced')`, [fencedId]);
    await business.query('COMMIT');
    expect(await businessWrites()).toEqual(['fenced']);

    // Once the write has committed, an expired lease is reaped as usual.
    await expireLeases([fencedId!]);
    expect(await scalar(reaper, 'SELECT wharf.reap() AS value')).toBe(1);
    expect(await scalar(holder, 'SELECT wharf.complete($1, 1) AS value', [fencedId])).toBe(false);
  });
});

describe('the reaper and a busy scope', () => {
  it('passes over an expired lease whose scope another transaction holds, instead of waiting for it', async () => {
    // An admission fanning out holds one scope and waits for the next: a
    // reaper that waited for the first while holding the second would deadlock.
    const [busy, free] = await admitEvents(db.pool, [{ scope: 'held' }, { scope: 'open' }]);
    const [claimer, admitter, reaper] = [await timedSession(db), await timedSession(db), await timedSession(db)];
    expect(await claimOne(claimer, 'w')).toBeDefined();
    expect(await claimOne(claimer, 'w')).toBeDefined();
    await expireLeases([busy!, free!]);

    await admitter.query('BEGIN');
    await admitter.query(`SELECT wharf.lock_scope($1, NULL)`, [`${testWorkspace}:generic:held`]);
    // With statement_timeout 5 s, a reaper that waited would fail with 57014.
    expect(await scalar<number>(reaper, 'SELECT wharf.reap() AS value')).toBe(1);
    expect(await eventState(db.pool, busy!)).toMatchObject({ state: 'LEASED' });
    expect(await eventState(db.pool, free!)).toMatchObject({ state: 'QUEUED' });

    await admitter.query('COMMIT');
    expect(await scalar<number>(reaper, 'SELECT wharf.reap() AS value')).toBe(1);
    expect(await eventState(db.pool, busy!)).toMatchObject({ state: 'QUEUED' });
  });
});

describe('a fence on a busy row', () => {
  it("raises 55P03 at once while the reaper holds the row, and passes once the reaper's transaction is gone", async () => {
    const [id] = await admitEvents(db.pool, [{ scope: 'busy' }]);
    const [holder, reaper] = [await timedSession(db), await timedSession(db)];
    expect(await claimOne(holder, 'holder')).toEqual({ id, lease_epoch: '1' });
    await expireLeases([id!]);

    await reaper.query('BEGIN');
    expect(await scalar(reaper, 'SELECT wharf.reap() AS value')).toBe(1);
    await expect(holder.query('SELECT wharf.fence($1, 1)', [id])).rejects.toMatchObject({ code: '55P03' });
    await expect(holder.query(`SELECT wharf.step($1, 1, 'write')`, [id])).rejects.toMatchObject({ code: '55P03' });
    await reaper.query('ROLLBACK');

    // The reap rolled back: the lease is still the holder's.
    await holder.query('SELECT wharf.fence($1, 1)', [id]);
    expect(await stepNames(db.pool, id!)).toEqual([]);
  });

  it('raises 55P03 at once while an erasure holds the row, and WH410 once the erasure commits', async () => {
    const source = 'https://github.com';
    await db.pool.query('SELECT wharf.upsert_workspace($1)', [testWorkspace]);
    const connection = await scalar<string>(
      db.pool,
      `SELECT wharf.upsert_connection($1, 'github', $2, 'app_installation', '42') AS value`,
      [testWorkspace, source],
    );
    await db.pool.query(`SELECT wharf.subscribe($1, 'repo:acme/api')`, [connection]);
    const receipt = await scalar<{ events: Array<{ event_id: number }> }>(
      db.pool,
      `SELECT wharf.admit('github', $1, 'delivery-1', 'push', '{"installation_id": "42"}', '{repo:acme/api}',
                          '{"sender": {"id": 99, "login": "alice"}}', '{}') AS value`,
      [source],
    );
    const id = String(receipt.events[0]!.event_id);
    const [holder, eraser] = [await timedSession(db), await timedSession(db)];
    expect(await claimOne(holder, 'holder')).toEqual({ id, lease_epoch: '1' });

    await eraser.query('BEGIN');
    expect(await scalar(eraser, `SELECT wharf.erase_person($1, '{"logins": ["alice"]}') AS value`, [source])).toBe('1');
    await expect(holder.query('SELECT wharf.fence($1, 1)', [id])).rejects.toMatchObject({ code: '55P03' });
    await eraser.query('COMMIT');
    await expect(holder.query('SELECT wharf.fence($1, 1)', [id])).rejects.toMatchObject({ code: 'WH410' });
    await expect(holder.query(`SELECT wharf.step($1, 1, 'write')`, [id])).rejects.toMatchObject({ code: 'WH410' });
  });

  it('is never busy because other claimers passed over the freshly claimed row', async () => {
    // 55P03 is meant for the reaper's and an erasure's locks only. A claimer
    // whose snapshot still showed the row as a free head must not leave it
    // locked against the fence of the worker that won it.
    const events = [];
    for (let n = 0; n < 25; n += 1) for (let s = 0; s < 20; s += 1) events.push({ scope: `claimed:${s}` });
    await admitEvents(db.pool, events);
    const workers = await Promise.all(Array.from({ length: 8 }, () => timedSession(db)));
    let busy = 0;
    await Promise.all(
      workers.map(async (client, n) => {
        for (;;) {
          const { rows } = await client.query<Lease>('SELECT id, lease_epoch FROM wharf.claim($1, 2)', [`worker-${n}`]);
          if (rows.length === 0) {
            if (!(await scalar<boolean>(client, `SELECT EXISTS (SELECT FROM wharf.provider_event WHERE state <> 'DONE') AS value`))) return;
            continue;
          }
          for (const row of rows) {
            for (;;) {
              try {
                await client.query('SELECT wharf.fence($1, $2)', [row.id, row.lease_epoch]);
                break;
              } catch (error) {
                if ((error as { code?: string }).code !== '55P03') throw error;
                busy += 1;
              }
            }
            await client.query('SELECT wharf.complete($1, $2)', [row.id, row.lease_epoch]);
          }
        }
      }),
    );
    expect(busy).toBe(0);
  });
});
