// wharf.erase_person against live leases and live admissions: a LEASED row
// and its steps go, its holder's next step or fence raises WH410, and
// admission goes on (and never deadlocks with an erasure).
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admit, type Admission } from '../../edge/sql/admission.js';
import type { LeaseWithToken } from '../../worker/sql/event-row.js';
import { claimEvents } from '../../worker/sql/claim-lease.js';
import { claimStep, fenceEvent } from '../../worker/sql/steps-fences.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { githubPush } from '../support/github-push.js';
import { backendPid, blockedOnLock, timedSession } from '../support/sessions.js';

const source = 'https://github.com';
const alice = { ids: ['123'], logins: ['alice'] };
let db: TestDatabase;

/** A push to `subject`, sent by `login`, fanned out to workspaces 1 and 2. */
function push(deliveryKey: string, subject: string, login: string): Admission {
  return githubPush({
    source, deliveryKey, subjects: [subject], payload: { sender: { id: login === 'alice' ? 123 : 456, login } },
  });
}

async function erase(client: pg.Pool | pg.ClientBase): Promise<number> {
  const { rows } = await client.query<{ erased: string }>('SELECT wharf.erase_person($1, $2) AS erased', [
    source,
    JSON.stringify(alice),
  ]);
  return Number(rows[0]!.erased);
}

/** Leases the one due row of `deliveryKey` in workspace 1. */
async function lease(deliveryKey: string): Promise<LeaseWithToken> {
  const claimed = await claimEvents(db.pool, 'worker-1', 100);
  const row = claimed.find((event) => event.delivery_key === deliveryKey && event.workspace_id === '1');
  if (!row) throw new Error(`${deliveryKey} was not claimed`);
  return { id: row.id, epoch: row.lease_epoch, token: row.lease_token };
}

async function exists(table: 'provider_event' | 'provider_event_step', id: string): Promise<boolean> {
  const column = table === 'provider_event' ? 'id' : 'event_id';
  const { rows } = await db.pool.query(`SELECT 1 FROM wharf.${table} WHERE ${column} = $1`, [id]);
  return rows.length > 0;
}

beforeAll(async () => {
  db = await createTestDatabase();
  for (const workspace of [1, 2]) await db.pool.query('SELECT wharf.upsert_workspace($1)', [workspace]);
  await db.pool.query(
    `SELECT wharf.subscribe(wharf.upsert_connection(1, 'github', $1, 'app_installation', '1'), 'org:acme')`,
    [source],
  );
  await db.pool.query(`SELECT wharf.subscribe(wharf.upsert_connection(2, 'github', $1, 'pat', 'p'), 'org:acme')`, [
    source,
  ]);
  const { rows } = await db.pool.query<{ id: string }>('SELECT id FROM wharf.connection');
  for (const { id } of rows) {
    for (let index = 0; index < 8; index += 1) {
      await db.pool.query('SELECT wharf.subscribe($1, $2)', [id, `repo:acme/r${index}`]);
    }
  }
});

afterAll(async () => {
  await db?.drop();
});

describe('erasure of a LEASED row', () => {
  it("deletes the row and its steps; the holder's next step and fence raise WH410", async () => {
    await admit(db.pool, push('leased-1', 'repo:acme/r0', 'alice'));
    const held = await lease('leased-1');
    const handler = await db.connect();
    await handler.query('BEGIN');
    expect(await claimStep(handler, held, 'commit:1')).toBe(true);
    await handler.query('COMMIT');
    expect(await exists('provider_event_step', held.id)).toBe(true);

    expect(await erase(db.pool)).toBe(2);

    expect(await exists('provider_event', held.id)).toBe(false);
    expect(await exists('provider_event_step', held.id)).toBe(false);
    await handler.query('BEGIN');
    await expect(claimStep(handler, held, 'commit:2')).rejects.toMatchObject({ code: 'WH410' });
    await handler.query('ROLLBACK');
    await expect(fenceEvent(handler, held)).rejects.toMatchObject({ code: 'WH410' });
    await handler.end();
  });

  it('waits for a business transaction holding the fence; a fence during the erasure raises 55P03', async () => {
    await admit(db.pool, push('leased-2', 'repo:acme/r1', 'alice'));
    const held = await lease('leased-2');
    const handler = await db.connect();
    const eraser = await db.connect();

    // The handler's business transaction holds the fence: the erasure waits for it.
    await handler.query('BEGIN');
    expect(await claimStep(handler, held, 'commit:1')).toBe(true);
    const eraserPid = await backendPid(eraser);
    await eraser.query('BEGIN');
    const erasing = erase(eraser);
    await blockedOnLock(db.pool, eraserPid);
    await handler.query('COMMIT');
    expect(await erasing).toBe(2);

    // The erasure holds the row until it commits: a fence fails at once, no wait.
    await handler.query('BEGIN');
    await expect(fenceEvent(handler, held)).rejects.toMatchObject({ code: '55P03' });
    await handler.query('ROLLBACK');
    await eraser.query('COMMIT');

    await expect(fenceEvent(handler, held)).rejects.toMatchObject({ code: 'WH410' });
    expect(await exists('provider_event', held.id)).toBe(false);
    expect(await exists('provider_event_step', held.id)).toBe(false);
    await Promise.all([handler.end(), eraser.end()]);
  });
});

describe('admission during an erasure', () => {
  it('other deliveries are admitted while an erasure is uncommitted', async () => {
    await admit(db.pool, push('before-1', 'repo:acme/r2', 'alice'));
    const eraser = await db.connect();
    await eraser.query('BEGIN');
    expect(await erase(eraser)).toBe(2);

    // A wait here would be a bug: fail instead of hanging the suite.
    const admitter = await timedSession(db, '10s');
    const bob = await admit(admitter, push('during-1', 'repo:acme/r3', 'bob'));
    const aliceAgain = await admit(admitter, push('during-2', 'repo:acme/r4', 'alice'));
    expect(bob.events.map((event) => event.outcome)).toEqual(['stored', 'stored']);
    expect(aliceAgain.events.map((event) => event.outcome)).toEqual(['stored', 'stored']);

    await eraser.query('COMMIT');
    const { rows } = await db.pool.query<{ delivery_key: string }>(
      `SELECT DISTINCT delivery_key FROM wharf.provider_event WHERE delivery_key IN ('before-1', 'during-1', 'during-2')
        ORDER BY 1`,
    );
    // An event stored while the erasure ran is not in its snapshot: a later erasure takes it.
    expect(rows.map((row) => row.delivery_key)).toEqual(['during-1', 'during-2']);
    expect(await erase(db.pool)).toBe(2);
    await Promise.all([eraser.end(), admitter.end()]);
  });

  it('a redelivery racing the erasure of its own rows neither deadlocks nor fails', async () => {
    // Rows of one delivery in two workspaces, then a leased row whose handler
    // holds the fence, so the erasure reaches it last and waits there.
    await admit(db.pool, push('redelivered', 'repo:acme/r5', 'alice'));
    await admit(db.pool, push('blocking', 'repo:acme/r6', 'alice'));
    const claimed = await claimEvents(db.pool, 'worker-1', 100);
    const blocking = claimed.find((row) => row.delivery_key === 'blocking' && row.workspace_id === '1');
    expect(claimed.filter((row) => row.delivery_key === 'redelivered')).toHaveLength(2);
    const held: LeaseWithToken = { id: blocking!.id, epoch: blocking!.lease_epoch, token: blocking!.lease_token };

    const handler = await db.connect();
    const eraser = await db.connect();
    const admitter = await db.connect();
    const [eraserPid, admitterPid] = await Promise.all([backendPid(eraser), backendPid(admitter)]);
    await handler.query('BEGIN');
    await claimStep(handler, held, 'commit:1');
    const erasing = erase(eraser);
    await blockedOnLock(db.pool, eraserPid);

    const redelivery = admit(admitter, push('redelivered', 'repo:acme/r5', 'alice'));
    const redeliveryDone = redelivery.then(
      () => undefined,
      () => undefined,
    );
    // The redelivery either finishes now or waits on the erasure; either way, let it get there.
    await Promise.race([blockedOnLock(db.pool, admitterPid), redeliveryDone]);
    await handler.query('COMMIT');

    const [erased, receipt] = await Promise.all([erasing, redelivery]);
    expect(erased).toBe(4);
    expect(receipt.events).toHaveLength(2);
    await Promise.all([handler.end(), eraser.end(), admitter.end()]);
  });
});
