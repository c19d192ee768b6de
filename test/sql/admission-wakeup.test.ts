// Admission's wake-up (rule 6): pg_notify('wharf_event') only while a claimer
// has marked its LISTEN connection idle, and no lost wake-up when a listener
// goes idle while an admission is in flight.
import type pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { admit, type Admission } from '../../edge/sql/admission.js';
import { claimEvents, completeEvents, markListenerBusy, markListenerIdle } from '../../worker/sql/claim-lease.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { githubPush } from '../support/github-push.js';

const source = 'https://github.com';
let db: TestDatabase;
let listener: pg.Client;
/** Payloads of wharf_event notifications the listener received, in order. */
let received: string[] = [];

function push(deliveryKey: string, subjects = ['repo:acme/api', 'org:acme']): Admission {
  return githubPush({ source, deliveryKey, subjects });
}

/**
 * What the listener got before now. Notifications arrive in commit order, so
 * once a probe sent now has arrived, every earlier notification has too: an
 * empty answer proves that nothing was sent, without waiting for a timeout.
 */
async function notificationsBeforeNow(): Promise<string[]> {
  const probe = `probe-${Math.random()}`;
  const arrived = new Promise<void>((resolve) => {
    const check = (message: pg.Notification): void => {
      if (message.payload !== probe) return;
      listener.off('notification', check);
      resolve();
    };
    listener.on('notification', check);
  });
  await db.pool.query('SELECT pg_notify($1, $2)', ['wharf_event', probe]);
  await arrived;
  const before = received.filter((payload) => !payload.startsWith('probe-'));
  received = [];
  return before;
}

beforeAll(async () => {
  db = await createTestDatabase();
  await db.pool.query('SELECT wharf.upsert_workspace(1)');
  await db.pool.query(
    `SELECT wharf.subscribe(wharf.upsert_connection(1, 'github', $1, 'app_installation', '1'), 'org:acme')`,
    [source],
  );
  listener = await db.connect();
  listener.on('notification', (message) => received.push(message.payload ?? ''));
  await listener.query('LISTEN wharf_event');
});

/** Completes every row a claim can lease, so that a test's claim sees only its own rows. */
async function drain(): Promise<void> {
  for (;;) {
    const claimed = await claimEvents(db.pool, 'drain', 100);
    if (claimed.length === 0) return;
    await completeEvents(db.pool, claimed.map((row) => ({ id: row.id, epoch: row.lease_epoch, outcome: 'handled' as const })));
  }
}

beforeEach(async () => {
  await markListenerBusy(db.pool, 'host-a');
  await drain();
  await notificationsBeforeNow();
});

afterAll(async () => {
  await db?.drop();
});

describe('wake-up', () => {
  it('an idle listener is notified by an admission that stores a row', async () => {
    await markListenerIdle(listener, 'host-a');
    await admit(db.pool, push('idle-1'));
    expect(await notificationsBeforeNow()).toEqual(['']);
  });

  it('a listener that did not mark itself idle gets no notification', async () => {
    const receipt = await admit(db.pool, push('busy-1'));
    expect(receipt.events).toMatchObject([{ outcome: 'stored' }]);
    expect(await notificationsBeforeNow()).toEqual([]);
  });

  it('a listener marked busy again gets no notification', async () => {
    await markListenerIdle(listener, 'host-a');
    await markListenerBusy(listener, 'host-a');
    await admit(db.pool, push('busy-2'));
    expect(await notificationsBeforeNow()).toEqual([]);
  });

  it('an admission that stores nothing (a duplicate, a drop) notifies nobody', async () => {
    await admit(db.pool, push('dup-1'));
    await markListenerIdle(listener, 'host-a');
    const duplicate = await admit(db.pool, push('dup-1'));
    expect(duplicate.events).toMatchObject([{ outcome: 'duplicate' }]);
    const dropped = await admit(db.pool, push('dup-2', ['repo:nobody/x']));
    expect(dropped.dropped).toBe('no-subscriber');
    expect(await notificationsBeforeNow()).toEqual([]);
  });

  it('a listener going idle while an admission is in flight is refused, then marks once it committed and claims the row', async () => {
    const admitter = await db.connect();
    await admitter.query('BEGIN');
    const receipt = await admit(admitter, push('inflight-1'));
    expect(receipt.events).toMatchObject([{ outcome: 'stored' }]);

    // Had mark_idle succeeded now, a claim would miss the uncommitted row and
    // the admission, past its check, would notify nobody: a lost wake-up. It
    // refuses at once instead of queueing every later admission behind it.
    expect(await markListenerIdle(listener, 'host-a')).toBe(false);
    const { rows: marks } = await db.pool.query('SELECT listener FROM wharf.idle_listener');
    expect(marks).toEqual([]);
    await admitter.query('COMMIT');
    expect(await markListenerIdle(listener, 'host-a')).toBe(true);

    const claimed = await claimEvents(listener, 'host-a', 10);
    expect(claimed.map((row) => row.delivery_key)).toEqual(['inflight-1']);
    await completeEvents(listener, [{ id: claimed[0]!.id, epoch: claimed[0]!.lease_epoch, outcome: 'handled' }]);
    await admitter.end();
  });

  it('racing admissions and mark_idle: each row is claimed after mark_idle or its notification arrives', async () => {
    const admitter = await db.connect();
    for (let round = 0; round < 25; round += 1) {
      const deliveryKey = `race-${round}`;
      // A scope of its own: a row left QUEUED by an earlier round must not hide this one.
      const admission = admit(admitter, push(deliveryKey, [`repo:acme/race-${round}`, 'org:acme']));
      // The worker's protocol: claim after every attempt to mark, until marked.
      const claimed: Awaited<ReturnType<typeof claimEvents>> = [];
      for (;;) {
        const marked = await markListenerIdle(listener, 'host-a');
        claimed.push(...(await claimEvents(listener, 'host-a', 10)));
        if (marked) break;
      }
      await admission;
      const notified = await notificationsBeforeNow();

      const sawRow = claimed.some((row) => row.delivery_key === deliveryKey);
      expect(sawRow || notified.length > 0, `round ${round}: neither claimed nor notified`).toBe(true);

      await completeEvents(listener, claimed.map((row) => ({ id: row.id, epoch: row.lease_epoch, outcome: 'handled' as const })));
      await markListenerBusy(listener, 'host-a');
    }
    await admitter.end();
  });
});
