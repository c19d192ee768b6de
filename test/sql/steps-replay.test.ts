// Step records across real sessions: a step rolls back with a transaction
// whose fence fails, two sessions racing for one step run it once, and a
// replayed row resumes after the steps it committed before it died.
import type pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { backendPid, blockedOnLock, claimOne, type Lease, scalar, timedSession } from '../support/sessions.js';
import { admitEvents, stepNames, testWorkspace } from '../support/worker-inbox.js';

let db: TestDatabase;
beforeEach(async () => {
  db = await createTestDatabase();
  await db.pool.query('CREATE TABLE business_write (event_id bigint NOT NULL, step_name text NOT NULL)');
});
afterEach(async () => {
  await db?.drop();
});

/** Claims step `name` in the open transaction of `client` and, when it is new, does its business write. */
async function runStep(client: pg.Client, lease: Lease, name: string): Promise<boolean> {
  const run = await scalar<boolean>(client, 'SELECT wharf.step($1, $2, $3) AS value', [lease.id, lease.lease_epoch, name]);
  if (run) await client.query('INSERT INTO business_write VALUES ($1, $2)', [lease.id, name]);
  return run;
}

async function businessWrites(): Promise<string[]> {
  const { rows } = await db.pool.query<{ step_name: string }>('SELECT step_name FROM business_write ORDER BY step_name');
  return rows.map((row) => row.step_name);
}

describe('a step', () => {
  it('rolls back with its transaction when its fence finds the lease ended', async () => {
    const [id] = await admitEvents(db.pool, [{ scope: 'steps' }]);
    const [worker, business] = [await timedSession(db), await timedSession(db)];
    const lease = (await claimOne(worker, 'worker'))!;
    expect(lease).toEqual({ id, lease_epoch: '1' });

    await business.query('BEGIN');
    await business.query('INSERT INTO business_write VALUES ($1, $2)', [id, 'charge:0']);
    // Meanwhile the worker gives the lease back (shutting down). The business
    // transaction has not fenced yet, so nothing holds the release up (one
    // that has waits for it: test/worker/lease-end.test.ts).
    expect(await scalar(worker, 'SELECT wharf.release($1, $2) AS value', [id, lease.lease_epoch])).toBe(true);
    await expect(runStep(business, lease, 'charge:1')).rejects.toMatchObject({ code: 'WH412' });
    await business.query('ROLLBACK');
    expect(await stepNames(db.pool, id!)).toEqual([]);
    expect(await businessWrites()).toEqual([]);

    // The next holder runs the step again, since it never committed.
    const next = (await claimOne(worker, 'worker'))!;
    expect(next).toEqual({ id, lease_epoch: '2' });
    await business.query('BEGIN');
    expect(await runStep(business, next, 'charge:1')).toBe(true);
    await business.query('SELECT wharf.fence($1, $2)', [id, next.lease_epoch]);
    await business.query('COMMIT');
    expect(await stepNames(db.pool, id!)).toEqual(['charge:1']);
    expect(await businessWrites()).toEqual(['charge:1']);
  });

  it('claimed by two sessions at once runs in exactly one: the second waits, then skips or runs it', async () => {
    const [id] = await admitEvents(db.pool, [{ scope: 'steps' }]);
    const [worker, first, second, observer] = [await timedSession(db), await timedSession(db), await timedSession(db), await timedSession(db)];
    const lease = (await claimOne(worker, 'worker'))!;
    const secondPid = await backendPid(second);
    const waitsOnFirst = () =>
      blockedOnLock(observer, secondPid, { timeout: 5_000, what: 'the second session to wait for the first' });

    // The first commits: the second finds the step done.
    await first.query('BEGIN');
    expect(await runStep(first, lease, 'issue:1')).toBe(true);
    await second.query('BEGIN');
    const secondRun = runStep(second, lease, 'issue:1');
    await waitsOnFirst();
    await first.query('COMMIT');
    expect(await secondRun).toBe(false);
    await second.query('COMMIT');

    // The first rolls back: the second runs the step itself.
    await first.query('BEGIN');
    expect(await runStep(first, lease, 'issue:2')).toBe(true);
    await second.query('BEGIN');
    const secondRetry = runStep(second, lease, 'issue:2');
    await waitsOnFirst();
    await first.query('ROLLBACK');
    expect(await secondRetry).toBe(true);
    await second.query('COMMIT');

    expect(await stepNames(db.pool, id!)).toEqual(['issue:1', 'issue:2']);
    expect(await businessWrites()).toEqual(['issue:1', 'issue:2']);
  });
});

describe('a replayed row', () => {
  it('resumes after its committed steps: step is false for those and true for the rest', async () => {
    const [id] = await admitEvents(db.pool, [{ scope: 'replayed' }, { scope: 'replayed' }]);
    const [worker, business] = [await timedSession(db), await timedSession(db)];
    const lease = (await claimOne(worker, 'worker'))!;
    expect(lease).toEqual({ id, lease_epoch: '1' });

    // Two steps commit, the third is rolled back by the handler's failure.
    for (const name of ['commit:a', 'commit:b']) {
      await business.query('BEGIN');
      expect(await runStep(business, lease, name)).toBe(true);
      await business.query('SELECT wharf.fence($1, $2)', [id, lease.lease_epoch]);
      await business.query('COMMIT');
    }
    await business.query('BEGIN');
    expect(await runStep(business, lease, 'commit:c')).toBe(true);
    await business.query('ROLLBACK');
    expect(await scalar(worker, `SELECT wharf.fail($1, $2, 'permanent', 'SyntaxError') AS value`, [id, lease.lease_epoch])).toBe(
      'DEAD',
    );

    expect(await scalar(worker, `SELECT wharf.replay($1, $2, 'ops@example.com') AS value`, [testWorkspace, id])).toBe(true);
    const again = (await claimOne(worker, 'worker'))!;
    expect(again).toEqual({ id, lease_epoch: '2' });
    const ran: Record<string, boolean> = {};
    for (const name of ['commit:a', 'commit:b', 'commit:c', 'commit:d']) {
      await business.query('BEGIN');
      ran[name] = await runStep(business, again, name);
      await business.query('SELECT wharf.fence($1, $2)', [id, again.lease_epoch]);
      await business.query('COMMIT');
    }
    expect(ran).toEqual({ 'commit:a': false, 'commit:b': false, 'commit:c': true, 'commit:d': true });
    expect(await scalar(worker, 'SELECT wharf.complete($1, $2) AS value', [id, again.lease_epoch])).toBe(true);

    // Each business write happened once, across both runs.
    expect(await businessWrites()).toEqual(['commit:a', 'commit:b', 'commit:c', 'commit:d']);
    expect(await stepNames(db.pool, id!)).toEqual(['commit:a', 'commit:b', 'commit:c', 'commit:d']);
  });
});
