// Retention: purge forgets DONE rows after replay_window and DEAD rows after
// dead_retention, never anything else, also while replays and admissions race
// with it.
import type pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { backendPid, blockedOnLock, type Lease, scalar, timedSession } from '../support/sessions.js';
import { admitEvent, admitEvents, setSettings, subscribedConnection, testWorkspace } from '../support/worker-inbox.js';

interface Purged {
  done_deleted: string;
  dead_deleted: string;
}

let db: TestDatabase;
beforeEach(async () => {
  db = await createTestDatabase();
});
afterEach(async () => {
  await db?.drop();
});

async function claimAll(client: pg.Client | pg.Pool): Promise<Lease[]> {
  const { rows } = await client.query<Lease>('SELECT id, lease_epoch FROM wharf.claim($1, 1000) ORDER BY id', ['purge-test']);
  return rows;
}

async function purge(client: pg.Client | pg.Pool): Promise<Purged> {
  const { rows } = await client.query<Purged>('SELECT * FROM wharf.purge()');
  return rows[0]!;
}

async function remainingIds(): Promise<string[]> {
  const { rows } = await db.pool.query<{ id: string }>('SELECT id FROM wharf.provider_event ORDER BY id');
  return rows.map((row) => row.id);
}

/** Ends every lease of `leases` as `kind`: DONE, or DEAD through a permanent failure. */
async function finish(leases: Lease[], kind: 'DONE' | 'DEAD'): Promise<void> {
  for (const lease of leases) {
    const sql =
      kind === 'DONE'
        ? 'SELECT wharf.complete($1, $2)'
        : `SELECT wharf.fail($1, $2, 'permanent', 'SyntaxError')`;
    await db.pool.query(sql, [lease.id, lease.lease_epoch]);
  }
}

/** Moves the end time of `ids` (handled_at and dead_at) `age` into the past. */
async function age(ids: string[], age: string): Promise<void> {
  await db.pool.query(
    `UPDATE wharf.provider_event
        SET handled_at  = CASE WHEN handled_at IS NOT NULL THEN now() - $2::interval END,
            dead_at     = CASE WHEN dead_at IS NOT NULL THEN now() - $2::interval END,
            -- An event ends after it arrives (purge finds its candidates by arrival).
            received_at = now() - $2::interval - interval '1 minute'
      WHERE id = ANY($1)`,
    [ids, age],
  );
}

describe('purge', () => {
  it('deletes DONE rows past replay_window and DEAD rows past dead_retention, and nothing else', async () => {
    const names = ['doneOld', 'doneNew', 'deadOld', 'deadNew', 'uncertainOld', 'queued', 'leased', 'waiting'] as const;
    const ids = Object.fromEntries(
      (await admitEvents(db.pool, names.map((name) => ({ scope: name })))).map((id, n) => [names[n]!, id]),
    ) as Record<(typeof names)[number], string>;
    const leases = new Map((await claimAll(db.pool)).map((lease) => [lease.id, lease]));
    const lease = (id: string) => leases.get(id)!;
    await db.pool.query(`SELECT wharf.step($1, $2, 'kept-until-purged')`, [ids.doneOld, lease(ids.doneOld).lease_epoch]);
    await finish([lease(ids.doneOld), lease(ids.doneNew)], 'DONE');
    await finish([lease(ids.deadOld), lease(ids.deadNew)], 'DEAD');
    await db.pool.query(`SELECT wharf.fail($1, $2, 'uncertain', 'OutcomeUncertain')`, [
      ids.uncertainOld,
      lease(ids.uncertainOld).lease_epoch,
    ]);
    await db.pool.query('SELECT wharf.release($1, $2)', [ids.queued, lease(ids.queued).lease_epoch]);
    await db.pool.query(`SELECT wharf.fail($1, $2, 'transient', 'ECONNRESET')`, [ids.waiting, lease(ids.waiting).lease_epoch]);

    await age([ids.doneOld], '3 days 1 minute');
    await age([ids.doneNew], '2 days 23 hours');
    await age([ids.deadOld, ids.uncertainOld], '30 days 1 minute');
    await age([ids.deadNew], '29 days 23 hours');
    // Old arrivals and an end time no QUEUED or LEASED row carries: purge must
    // go by state as well. (dead_at is DEAD's own: a CHECK refuses it here.)
    await db.pool.query(
      `UPDATE wharf.provider_event SET handled_at = now() - interval '1 year', received_at = now() - interval '1 year'
        WHERE id = ANY($1)`,
      [[ids.queued, ids.leased, ids.waiting]],
    );

    expect(await purge(db.pool)).toEqual({ done_deleted: '1', dead_deleted: '2' });
    expect(await remainingIds()).toEqual([ids.doneNew, ids.deadNew, ids.queued, ids.leased, ids.waiting]);
    const { rows: states } = await db.pool.query<{ state: string }>(
      'SELECT state FROM wharf.provider_event ORDER BY id',
    );
    expect(states.map((row) => row.state)).toEqual(['DONE', 'DEAD', 'QUEUED', 'LEASED', 'QUEUED']);
    const { rows: steps } = await db.pool.query('SELECT event_id FROM wharf.provider_event_step');
    expect(steps).toEqual([]);

    // The windows are settings; a second purge under the same ones finds nothing.
    expect(await purge(db.pool)).toEqual({ done_deleted: '0', dead_deleted: '0' });
    await setSettings(db.pool, { replay_window: '2 days', dead_retention: '29 days' });
    expect(await purge(db.pool)).toEqual({ done_deleted: '1', dead_deleted: '1' });
    expect(await remainingIds()).toEqual([ids.queued, ids.leased, ids.waiting]);
  });

  it('racing with replays, either purges a DEAD row or lets it be replayed, never both', async () => {
    const ids = await admitEvents(db.pool, Array.from({ length: 5 }, (_, n) => ({ scope: `dead:${n}` })));
    await finish(await claimAll(db.pool), 'DEAD');
    await age(ids, '31 days');
    const [replayedBefore, replayedDuring, purgedFirst] = ids as [string, string, string];
    const [replayer, purger, observer] = await Promise.all([timedSession(db), timedSession(db), timedSession(db)]);
    const replayerPid = await backendPid(replayer);
    const replay = (client: pg.Client, id: string) =>
      scalar<boolean>(client, `SELECT wharf.replay($1, $2, 'ops') AS value`, [testWorkspace, id]);

    // A replay committed before the purge: the row is QUEUED, purge passes it by.
    expect(await replay(replayer, replayedBefore)).toBe(true);
    // A replay still open when the purge reaches its row: purge passes it by
    // without waiting (SKIP LOCKED: its transaction stays short).
    await replayer.query('BEGIN');
    expect(await replay(replayer, replayedDuring)).toBe(true);
    await purger.query('BEGIN');
    expect(await purge(purger)).toEqual({ done_deleted: '0', dead_deleted: String(ids.length - 2) });
    await replayer.query('COMMIT');
    // A replay that reaches a row the open purge deleted waits, then finds nothing.
    const late = replay(replayer, purgedFirst);
    await blockedOnLock(observer, replayerPid, { timeout: 5_000 });
    await purger.query('COMMIT');
    expect(await late).toBe(false);

    const { rows } = await db.pool.query<{ id: string; state: string }>('SELECT id, state FROM wharf.provider_event ORDER BY id');
    expect(rows).toEqual([
      { id: replayedBefore, state: 'QUEUED' },
      { id: replayedDuring, state: 'QUEUED' },
    ]);
    // Both replayed rows head their scopes again.
    expect((await claimAll(db.pool)).map((lease) => lease.id)).toEqual([replayedBefore, replayedDuring]);
  });

  it('racing with admissions, never loses a row admitted into a scope it is emptying', async () => {
    const connections = new Map<string, string>();
    for (const scope of ['first', 'second']) connections.set(scope, await subscribedConnection(db.pool, scope));
    for (const scope of ['first', 'second']) await admitEvent(db.pool, connections.get(scope)!, scope);
    const scopeRows = async () =>
      (await db.pool.query<{ subject: string }>(`SELECT split_part(scope_key, ':', 3) AS subject FROM wharf.scope ORDER BY 1`)).rows.map(
        (row) => row.subject,
      );
    const { rows: scopeKeys } = await db.pool.query<{ scope_key: string }>('SELECT DISTINCT scope_key FROM wharf.provider_event');
    // A scope whose last lease ends with nothing queued goes at once; other
    // paths leave empty rows for purge (an admission of a duplicate makes its
    // scope row and stores nothing), as lock_scope alone does here.
    const leaveEmptyScopes = () =>
      Promise.all(scopeKeys.map(({ scope_key }) => db.pool.query('SELECT wharf.lock_scope($1, $2)', [scope_key, testWorkspace])));
    await finish(await claimAll(db.pool), 'DONE');
    expect(await scopeRows()).toEqual([]);
    await leaveEmptyScopes();
    await age(await remainingIds(), '4 days');
    const [admitter, purger, observer] = await Promise.all([timedSession(db), timedSession(db), timedSession(db)]);
    const admitterPid = await backendPid(admitter);

    // An admission holding its scope row: purge passes over that row and empties the other.
    await admitter.query('BEGIN');
    const secondId = await admitEvent(admitter, connections.get('second')!, 'second');
    expect(await purge(purger)).toEqual({ done_deleted: '2', dead_deleted: '0' });
    await admitter.query('COMMIT');
    expect(await scopeRows()).toEqual(['second']);

    // An admission into a scope row an open purge is deleting waits, then makes the scope anew.
    const [lease] = await claimAll(db.pool);
    expect(lease?.id).toBe(secondId);
    await finish([lease!], 'DONE');
    await leaveEmptyScopes();
    await age([secondId], '4 days');
    await purger.query('BEGIN');
    expect(await purge(purger)).toEqual({ done_deleted: '1', dead_deleted: '0' });
    const admitting = admitEvent(admitter, connections.get('second')!, 'second');
    await blockedOnLock(observer, admitterPid, { timeout: 5_000 });
    await purger.query('COMMIT');
    const thirdId = await admitting;

    expect(await remainingIds()).toEqual([thirdId]);
    expect(await scopeRows()).toEqual(['second']);
    expect((await claimAll(db.pool)).map((claimed) => claimed.id)).toEqual([thirdId]);
  });
});
