// The Node receiver's group commit (DESIGN.md, "Edge receiver"), over real
// HTTP against a real PostgreSQL. Every test makes its batches deterministic
// the same way: a session holds a lock that admission's INSERT needs, so the
// first delivery's admission waits in the database; the deliveries sent
// then wait in the receiver (its webhook_admit_waiting gauge says how many)
// and form the next batch when the lock is let go. What is asserted is the
// mechanism (batch sizes, statuses, rows), never how long anything took.
import type pg from 'pg';
import { Registry, type Histogram } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { readAdmitBatch } from '../../edge/settings.js';
import { startNodeServer, type NodeServer } from '../../server/node.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { backendPid, blockedOnLock } from '../support/sessions.js';
import {
  countEvents, edgeEnv, freshId, newDeliveryKey, recorder, scenario, type ProviderScenario, type Recorded,
} from '../support/edge-fixtures.js';

let db: TestDatabase;
let github: ProviderScenario;

beforeAll(async () => {
  db = await createTestDatabase();
  github = await scenario(db.pool, 'github', freshId());
});
afterAll(async () => {
  await db?.drop();
});

interface Receiver {
  server: NodeServer;
  registry: Registry;
  recorded: Recorded;
}

const running: Receiver[] = [];
const held: pg.Client[] = [];
afterEach(async () => {
  // A failed test must not leave a lock that blocks the next one.
  for (const client of held.splice(0)) await client.end().catch(() => {});
  for (const receiver of running.splice(0)) await receiver.server.close();
});

/** A Node server of its own, with its own registry so that its batch sizes are its alone. */
async function startReceiver(env: Record<string, string> = {}): Promise<Receiver> {
  const registry = new Registry();
  const recorded = recorder();
  const server = await startNodeServer({ databaseUrl: db.url, env: { ...edgeEnv, ...env }, registry, logger: recorded.logger });
  const receiver = { server, registry, recorded };
  running.push(receiver);
  return receiver;
}

interface Answer {
  status: number;
  retryAfter: string | null;
  // any: receipts and errors of every shape.
  json: Record<string, any>;
  deliveryKey: string;
}

async function send(receiver: Receiver, s: ProviderScenario, body: string, deliveryKey: string): Promise<Answer> {
  const response = await fetch(`${receiver.server.url}${s.path}`, {
    method: 'POST', body, headers: { 'content-type': 'application/json', ...(await s.sign(body, { deliveryKey })) },
  });
  const text = await response.text();
  return { status: response.status, retryAfter: response.headers.get('retry-after'), json: text ? JSON.parse(text) : {}, deliveryKey };
}

/** A delivery of scenario `s` with a body of its own (GitHub deduplicates by body), optionally padded to about `size` bytes. */
function deliver(receiver: Receiver, s: ProviderScenario = github, options: { size?: number; key?: string } = {}): Promise<Answer> {
  const deliveryKey = options.key ?? newDeliveryKey();
  const payload = s.payload(deliveryKey);
  const body = JSON.stringify(options.size ? { ...payload, padding: 'x'.repeat(options.size) } : payload);
  return send(receiver, s, body, deliveryKey);
}

interface BatchSizes {
  count: number;
  sum: number;
  /** Batches of at most `le` deliveries. */
  atMost(le: number): number;
}

async function batchSizes(receiver: Receiver): Promise<BatchSizes> {
  const metric = await (receiver.registry.getSingleMetric('webhook_admit_batch_size') as Histogram | undefined)?.get();
  const values = metric?.values ?? [];
  const named = (suffix: string) => values.find((value) => value.metricName === `webhook_admit_batch_size${suffix}`)?.value ?? 0;
  return {
    count: named('_count'),
    sum: named('_sum'),
    atMost: (le) => values.find((value) => value.metricName === 'webhook_admit_batch_size_bucket' && value.labels.le === le)?.value ?? Number.NaN,
  };
}

async function waiting(receiver: Receiver): Promise<number> {
  const metric = await receiver.registry.getSingleMetric('webhook_admit_waiting')?.get();
  return metric?.values[0]?.value ?? 0;
}

/** Polls until `check` holds; the test's own timeout bounds it. */
async function until(check: () => Promise<boolean> | boolean): Promise<void> {
  while (!(await check())) await new Promise((resolve) => setTimeout(resolve, 20));
}

/** A session holding a lock that admission's INSERT waits for, until release(). */
async function holdInserts(): Promise<{ release(): Promise<void> }> {
  const client = await db.connect();
  held.push(client);
  await client.query('BEGIN');
  await client.query('LOCK TABLE wharf.provider_event IN SHARE MODE');
  return { release: async () => void (await client.query('COMMIT')) };
}

/** The pids of backends waiting for a lock in `call` ('wharf.admit(' or 'wharf.admit_many('). */
async function waitingBackends(call: string): Promise<number[]> {
  const { rows } = await db.pool.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity
      WHERE datname = current_database() AND wait_event_type = 'Lock' AND position($1 in query) > 0`, [call]);
  return rows.map((row) => row.pid);
}

async function untilWaitingIn(call: string, backends = 1): Promise<number[]> {
  let pids: number[] = [];
  await until(async () => (pids = await waitingBackends(call)).length >= backends);
  return pids;
}

/** Every event id a 202 names is a stored row. */
async function expectEveryReceiptStored(answers: Answer[]): Promise<void> {
  const ids = answers.filter((a) => a.status === 202).flatMap((a) => (a.json.events as { event_id: number }[]).map((e) => e.event_id));
  const { rows } = await db.pool.query<{ n: string }>('SELECT count(*) AS n FROM wharf.provider_event WHERE id = ANY($1::bigint[])', [ids]);
  expect(Number(rows[0]!.n)).toBe(new Set(ids).size);
}

describe('group commit in the Node receiver', () => {
  it('admits a delivery that finds nothing in flight at once, alone, with wharf.admit', async () => {
    const receiver = await startReceiver();
    const lock = await holdInserts();
    const answer = deliver(receiver);
    // In the database already, with no other request sent: it waited for no company.
    await untilWaitingIn('wharf.admit(');
    expect(await waitingBackends('wharf.admit_many(')).toEqual([]);
    expect(await batchSizes(receiver)).toMatchObject({ count: 1, sum: 1 });
    await lock.release();
    const { status, json, deliveryKey } = await answer;
    expect(status).toBe(202);
    expect(json).toMatchObject({ status: 'accepted', delivery_key: deliveryKey, events: [{ outcome: 'stored' }] });
    expect(await countEvents(db.pool, deliveryKey)).toBe(1);
  });

  it('sends the deliveries that arrive while a batch is in flight as the next batch, each answered with its own receipt after its commit', async () => {
    const receiver = await startReceiver();
    const stored = await countEvents(db.pool);
    const lock = await holdInserts();
    const first = deliver(receiver);
    await untilWaitingIn('wharf.admit(');
    const rest = Array.from({ length: 10 }, () => deliver(receiver));
    await until(async () => (await waiting(receiver)) === 10);
    // Nothing of them is stored while the batch ahead of them is in flight.
    expect(await countEvents(db.pool)).toBe(stored);
    await lock.release();

    const answers = await Promise.all([first, ...rest]);
    expect(answers.map((a) => a.status)).toEqual(Array(11).fill(202));
    for (const answer of answers) {
      expect(answer.json).toMatchObject({ delivery_key: answer.deliveryKey, events: [{ outcome: 'stored' }] });
      expect(await countEvents(db.pool, answer.deliveryKey)).toBe(1);
    }
    await expectEveryReceiptStored(answers);
    // The first alone, then the ten in one admit_many.
    const sizes = await batchSizes(receiver);
    expect(sizes).toMatchObject({ count: 2, sum: 11 });
    expect(sizes.atMost(8)).toBe(1);
    expect(await waiting(receiver)).toBe(0);
  });

  it('answers 503 to every delivery of a batch whose backend is killed, and leaves no 202 without its row', async () => {
    const receiver = await startReceiver();
    const lock = await holdInserts();
    const first = deliver(receiver);
    const [alone] = await untilWaitingIn('wharf.admit(');
    const batch = Array.from({ length: 8 }, () => deliver(receiver));
    await until(async () => (await waiting(receiver)) === 8);
    await db.pool.query('SELECT pg_terminate_backend($1)', [alone]);
    const [flushing] = await untilWaitingIn('wharf.admit_many(');
    await db.pool.query('SELECT pg_terminate_backend($1)', [flushing]);
    const failed = await Promise.all([first, ...batch]);
    await lock.release();

    for (const answer of failed) {
      expect(answer.status).toBe(503);
      expect(answer.retryAfter).not.toBeNull();
      expect(await countEvents(db.pool, answer.deliveryKey)).toBe(0);
    }
    // The receiver carries on with the pool's other connections.
    const after = await Promise.all(Array.from({ length: 4 }, () => deliver(receiver)));
    expect(after.map((a) => a.status)).toEqual(Array(4).fill(202));
    await expectEveryReceiptStored(after);
  });

  it('never answers 202 for an uncommitted delivery while backends are killed at random moments', async () => {
    const receiver = await startReceiver();
    let killing = true;
    const killer = (async () => {
      while (killing) {
        // One admitting backend at a time, now and then: some batches commit, some die mid-way.
        await db.pool.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid() AND position('wharf.admit' in query) > 0 AND state = 'active'
            LIMIT 1`);
        await new Promise((resolve) => setTimeout(resolve, 40));
      }
    })();
    const answers: Answer[] = [];
    const seen = (status: number) => answers.some((a) => a.status === status);
    try {
      // Rounds of concurrent requests until both answers were seen (a bounded number of rounds).
      for (let round = 0; round < 6 || (!(seen(202) && seen(503)) && round < 100); round += 1) {
        answers.push(...(await Promise.all(Array.from({ length: 12 }, () => deliver(receiver)))));
      }
    } finally {
      killing = false;
      await killer;
    }
    expect(seen(202) && seen(503)).toBe(true);
    expect(answers.every((a) => a.status === 202 || (a.status === 503 && a.retryAfter !== null))).toBe(true);
    await expectEveryReceiptStored(answers);
  });

  it('splits a batch at its byte bound, and sends a delivery larger than the bound alone', async () => {
    const receiver = await startReceiver({ WHARF_ADMIT_BATCH: '64,10kB' });
    const lock = await holdInserts();
    const first = deliver(receiver);
    await untilWaitingIn('wharf.admit(');
    // Queued in this order, they go as 4 KB + 4 KB | 12 KB alone | 4 KB + 4 KB | 4 KB (a third 4 KB would pass 10 kB).
    const sizes = [4_000, 4_000, 12_000, 4_000, 4_000, 4_000];
    const rest: Promise<Answer>[] = [];
    for (const size of sizes) {
      const before = await waiting(receiver);
      rest.push(deliver(receiver, github, { size }));
      // One at a time, so that they queue in this order.
      await until(async () => (await waiting(receiver)) === before + 1);
    }
    await lock.release();
    const answers = await Promise.all([first, ...rest]);
    expect(answers.map((a) => a.status)).toEqual(Array(7).fill(202));
    await expectEveryReceiptStored(answers);
    // 1 | 2 | 1 | 2 | 1 : five batches, none over two deliveries.
    const batches = await batchSizes(receiver);
    expect(batches).toMatchObject({ count: 5, sum: 7 });
    expect(batches.atMost(2)).toBe(5);
    expect(batches.atMost(1)).toBe(3);
  });

  it('splits a batch at its bound of deliveries', async () => {
    const receiver = await startReceiver({ WHARF_ADMIT_BATCH: '4' });
    const lock = await holdInserts();
    const first = deliver(receiver);
    await untilWaitingIn('wharf.admit(');
    const rest = Array.from({ length: 9 }, () => deliver(receiver));
    await until(async () => (await waiting(receiver)) === 9);
    await lock.release();
    const answers = await Promise.all([first, ...rest]);
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(202));
    // 1 | 4 | 4 | 1
    const batches = await batchSizes(receiver);
    expect(batches).toMatchObject({ count: 4, sum: 10 });
    expect(batches.atMost(4)).toBe(4);
    expect(batches.atMost(2)).toBe(2);
  });

  it('stores a delivery sent twice into one batch once, the second receipt a duplicate of it', async () => {
    const receiver = await startReceiver();
    const lock = await holdInserts();
    const first = deliver(receiver);
    await untilWaitingIn('wharf.admit(');
    const key = newDeliveryKey();
    const body = JSON.stringify(github.payload(key));
    const twice = [send(receiver, github, body, key), send(receiver, github, body, key)];
    await until(async () => (await waiting(receiver)) === 2);
    await lock.release();
    const answers = await Promise.all(twice);
    expect((await first).status).toBe(202);
    expect(answers.map((a) => a.status)).toEqual([202, 202]);
    const events = answers.map((a) => a.json.events[0]);
    expect(events.map((e) => e.outcome).sort()).toEqual(['duplicate', 'stored']);
    expect(events[0].event_id).toBe(events[1].event_id);
    expect(await countEvents(db.pool, key)).toBe(1);
    expect(await batchSizes(receiver)).toMatchObject({ count: 2, sum: 3 });
  });

  it('answers 400 unstorable-body to the one body PostgreSQL cannot store and stores its neighbours', async () => {
    const receiver = await startReceiver();
    const lock = await holdInserts();
    const first = deliver(receiver);
    await untilWaitingIn('wharf.admit(');
    const good = [deliver(receiver), deliver(receiver)];
    const badKey = newDeliveryKey();
    // JavaScript parses it; jsonb has no number this large: admit_many's whole document fails to parse.
    const badBody = JSON.stringify(github.payload(badKey)).replace(/}$/, ',"huge":1e999999}');
    const bad = send(receiver, github, badBody, badKey);
    good.push(deliver(receiver));
    await until(async () => (await waiting(receiver)) === 4);
    await lock.release();

    const [badAnswer, ...goodAnswers] = await Promise.all([bad, first, ...good]);
    expect(badAnswer!.status).toBe(400);
    expect(badAnswer!.json.error).toBe('unstorable-body');
    expect(await countEvents(db.pool, badKey)).toBe(0);
    expect(goodAnswers.map((a) => a.status)).toEqual([202, 202, 202, 202]);
    await expectEveryReceiptStored(goodAnswers);
    expect(await batchSizes(receiver)).toMatchObject({ count: 2, sum: 5 });
    expect(receiver.recorded.lines.some((line) => line.fields.event === 'admit_batch_split' && line.fields.sqlstate === '22003')).toBe(true);
  });

  it('a batch whose source changes while it waits reads the change after it commits: every delivery admitted, none told to retry', async () => {
    const receiver = await startReceiver();
    const changed = await scenario(db.pool, 'github', freshId());
    const { rows } = await db.pool.query<{ id: string }>('SELECT connection_id AS id FROM wharf.subscription WHERE subject = $1', [changed.subject]);
    const changedConnection = Number(rows[0]!.id);
    const lock = await holdInserts();
    const first = deliver(receiver);
    await untilWaitingIn('wharf.admit(');
    // A lifecycle change of one connection of the same source: it waits for
    // the admission in flight (which holds the source's lock shared), then
    // holds that lock exclusively until it commits.
    const change = await db.connect();
    held.push(change);
    await change.query('BEGIN');
    const changer = await backendPid(change);
    const changing = change.query(`SELECT wharf.set_connection_state($1, 'PAUSED')`, [changedConnection]);
    await blockedOnLock(db.pool, changer, { timeout: 10_000, what: 'the change to wait for the admission in flight' });
    const paused = deliver(receiver, changed);
    const others = [deliver(receiver), deliver(receiver)];
    await until(async () => (await waiting(receiver)) === 3);
    await lock.release();
    await changing;
    // The batch waits for the source's lock before it reads anything; the change commits, then the batch reads it.
    await untilWaitingIn('wharf.admit_many(');
    await change.query('COMMIT');

    const answers = await Promise.all([paused, first, ...others]);
    expect(answers.map((a) => a.status)).toEqual([202, 202, 202, 202]);
    await expectEveryReceiptStored(answers);
    // Admitted under the committed change: a paused connection's delivery is stored and held.
    const { rows: held_ } = await db.pool.query<{ connection_state: string }>(
      `SELECT c.state AS connection_state FROM wharf.provider_event e JOIN wharf.connection c ON c.id = e.connection_id
        WHERE e.delivery_key = $1`, [answers[0]!.deliveryKey]);
    expect(held_).toEqual([{ connection_state: 'PAUSED' }]);
    expect(await batchSizes(receiver)).toMatchObject({ count: 2, sum: 4 });
  });
});

describe('WHARF_ADMIT_BATCH', () => {
  it('off: every request calls wharf.admit itself, concurrently', async () => {
    const receiver = await startReceiver({ WHARF_ADMIT_BATCH: 'off' });
    const lock = await holdInserts();
    const answers = Array.from({ length: 3 }, () => deliver(receiver));
    await untilWaitingIn('wharf.admit(', 3);
    await lock.release();
    expect((await Promise.all(answers)).map((a) => a.status)).toEqual([202, 202, 202]);
    expect(await batchSizes(receiver)).toMatchObject({ count: 0 });
  });

  it('reads deliveries and bytes, defaults to 64 and 1 MB, and refuses what it cannot read', async () => {
    expect(readAdmitBatch({})).toEqual({ deliveries: 64, bytes: 1024 * 1024 });
    expect(readAdmitBatch({ WHARF_ADMIT_BATCH: '32' })).toEqual({ deliveries: 32, bytes: 1024 * 1024 });
    expect(readAdmitBatch({ WHARF_ADMIT_BATCH: '128,4MB' })).toEqual({ deliveries: 128, bytes: 4 * 1024 * 1024 });
    expect(readAdmitBatch({ WHARF_ADMIT_BATCH: '16, 500 kB' })).toEqual({ deliveries: 16, bytes: 500 * 1024 });
    expect(readAdmitBatch({ WHARF_ADMIT_BATCH: '16,65536' })).toEqual({ deliveries: 16, bytes: 65536 });
    expect(readAdmitBatch({ WHARF_ADMIT_BATCH: 'off' })).toBeUndefined();
    expect(readAdmitBatch({ WHARF_ADMIT_BATCH: '1' })).toBeUndefined();
    for (const bad of ['0', '-4', 'many', '64,1GB', '64,', '64,0']) {
      expect(() => readAdmitBatch({ WHARF_ADMIT_BATCH: bad }), bad).toThrow(/WHARF_ADMIT_BATCH/);
    }
    await expect(startNodeServer({ databaseUrl: db.url, env: { ...edgeEnv, WHARF_ADMIT_BATCH: 'lots' }, registry: new Registry(), logger: recorder().logger }))
      .rejects.toThrow(/WHARF_ADMIT_BATCH/);
  });
});
