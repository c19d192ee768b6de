// A delivery's deadline in the Node receiver's group commit counts from its
// arrival, not from when its batch is sent (edge/coalesced-admission.ts).
// Each call reaches a real PostgreSQL only when the test lets it go, so a
// batch "in flight" stays in flight for as long as the test needs: what is
// asserted is which answer came while which call was still pending, never
// how long anything took. A batch's deliveries are pushed, and the call ahead
// of them failed, in one synchronous step, so no deadline passes before the
// batch is sent.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseUnavailableError, type Database } from '../../db/database.js';
import { coalesceAdmissions, type Admit } from '../../edge/coalesced-admission.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { countEvents, freshId, newDeliveryKey, recorder, seedConnection } from '../support/edge-fixtures.js';
import { githubPush } from '../support/github-push.js';

let db: TestDatabase;
const installationId = String(freshId());
const subject = `repo:acme/deadline-${installationId}`;

beforeAll(async () => {
  db = await createTestDatabase();
  await seedConnection(db.pool, {
    workspace: freshId(), provider: 'github', source: 'https://github.com', kind: 'app_installation', externalId: installationId, subjects: [subject],
  });
});
afterAll(async () => {
  await db?.drop();
});

interface HeldCall {
  text: string;
  params: unknown[];
  settled: boolean;
  /** Sends the call on to PostgreSQL. */
  release(): void;
  /** Fails the call without reaching PostgreSQL, as a lost connection does. */
  fail(error: Error): void;
}

/** The test database, each of whose calls waits until the test releases or fails it. */
function heldDatabase(): { database: Database; calls: HeldCall[] } {
  const calls: HeldCall[] = [];
  const database: Database = {
    async query<Row extends object>(text: string, params: unknown[] = []) {
      let go!: (proceed: boolean) => void;
      let failure: Error | undefined;
      const gate = new Promise<boolean>((resolve) => (go = resolve));
      const call: HeldCall = {
        text, params, settled: false,
        release: () => go(true),
        fail: (error) => { failure = error; go(false); },
      };
      calls.push(call);
      try {
        if (!(await gate)) throw failure;
        return await db.pool.query<Row>(text, params);
      } finally {
        call.settled = true;
      }
    },
  };
  return { database, calls };
}

function coalescer(database: Database, deadlineMs: number): { admit: Admit; waiting(): number } {
  let waiting = 0;
  const admit = coalesceAdmissions({
    database, deadlineMs, bound: { deliveries: 64, bytes: 1 << 20 }, logger: recorder().logger,
    changeWaiting: (change) => void (waiting += change),
  });
  return { admit, waiting: () => waiting };
}

const push = (deliveryKey: string) => githubPush({ deliveryKey, subjects: [subject], installationId, payload: { key: deliveryKey } });

/** For each answer, whether it was a rejection as unavailable (503 with Retry-After). */
async function unavailable(answers: Promise<PromiseSettledResult<unknown>[]>): Promise<boolean[]> {
  return (await answers).map((answer) => answer.status === 'rejected' && answer.reason instanceof DatabaseUnavailableError);
}

/** Whether any call carried this delivery key (admit's third argument, or inside admit_many's document). */
const sent = (calls: HeldCall[], deliveryKey: string) => calls.some((call) => JSON.stringify(call.params).includes(deliveryKey));

describe('the deadline of a delivery in the Node receiver\'s group commit', () => {
  it('answers a delivery queued behind a batch in flight at its own deadline, and never sends it', async () => {
    const { database, calls } = heldDatabase();
    const { admit, waiting } = coalescer(database, 200);
    const [first, queued] = [newDeliveryKey(), newDeliveryKey()];
    const answers = Promise.allSettled([admit(push(first)), admit(push(queued))]);
    expect(calls).toHaveLength(1);
    expect(waiting()).toBe(1);

    // Both answered at their deadlines while the first call was still in
    // flight; the queued one is out of the queue.
    expect(await unavailable(answers)).toEqual([true, true]);
    expect(calls).toHaveLength(1);
    expect(calls[0]!.settled).toBe(false);
    expect(waiting()).toBe(0);

    // The first call commits after its 503: the provider's retry will be a duplicate.
    calls[0]!.release();
    await expect.poll(() => calls[0]!.settled).toBe(true);
    expect(await countEvents(db.pool, first)).toBe(1);
    // A later delivery goes; the queued one was never sent, so nothing of it is stored.
    const later = newDeliveryKey();
    const laterAnswer = admit(push(later));
    await expect.poll(() => calls.length).toBe(2);
    calls[1]!.release();
    expect(await laterAnswer).toMatchObject({ delivery_key: later, events: [{ outcome: 'stored' }] });
    expect(sent(calls, queued)).toBe(false);
    expect(await countEvents(db.pool, queued)).toBe(0);
  });

  it('answers the deliveries of a batch still in flight at their deadline; its commit then stores them, and a retry is a duplicate', async () => {
    const { database, calls } = heldDatabase();
    const { admit, waiting } = coalescer(database, 200);
    const keys = [newDeliveryKey(), newDeliveryKey(), newDeliveryKey()];
    const [lost, ...batched] = keys.map((key) => admit(push(key)));
    const batchedAnswers = Promise.allSettled(batched);
    // The first call fails at once; the two queued behind it go as one batch.
    calls[0]!.fail(new Error('connection lost'));
    await expect(lost).rejects.toThrow('connection lost');
    await expect.poll(() => calls.length).toBe(2);
    expect(calls[1]!.text).toContain('wharf.admit_many(');
    expect(waiting()).toBe(0);

    expect(await unavailable(batchedAnswers)).toEqual([true, true]);
    expect(calls[1]!.settled).toBe(false);

    calls[1]!.release();
    await expect.poll(() => calls[1]!.settled).toBe(true);
    expect(await countEvents(db.pool, keys[1])).toBe(1);
    expect(await countEvents(db.pool, keys[2])).toBe(1);
    const retry = admit(push(keys[1]!));
    await expect.poll(() => calls.length).toBe(3);
    calls[2]!.release();
    expect(await retry).toMatchObject({ delivery_key: keys[1], events: [{ outcome: 'duplicate' }] });
  });
});
