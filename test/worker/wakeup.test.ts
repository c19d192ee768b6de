// Wake-ups: LISTEN wharf_event brings an admitted event in long before the
// poll would; a killed LISTEN connection comes back; the poll alone finds
// rows nobody notified about (admitted with the idle marks taken, so that no
// notification is sent: admitUnannounced), also while its LISTEN connection
// is held down (its reconnect kept waiting in the pool); an idle host holds
// only its listener; a retry runs when it falls due, which no notification
// announces.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { showEvent } from '../../operator/sql/operator.js';
import { createWorker, type RunOutcome, type Worker } from '../../worker/index.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import {
  admitEvent, admitUnannounced, setSettings, subscribedConnection, testWorkspace, waitFor,
} from '../support/worker-inbox.js';

let db: TestDatabase;
let connectionId: string;
const outcomes = new Map<string, RunOutcome>();
const subject = 'repo:acme/api';

async function listenerPid(worker: Worker): Promise<number | undefined> {
  const { rows } = await db.pool.query<{ pid: number }>(
    `SELECT l.backend_pid AS pid FROM wharf.idle_listener l
      WHERE l.listener = $1 AND EXISTS (SELECT FROM pg_stat_activity a WHERE a.pid = l.backend_pid)`,
    [worker.id],
  );
  return rows[0]?.pid;
}

/** A LISTEN wharf_event of the test's own, counting what it hears until stop(). */
async function notificationsHeard(): Promise<{ count(): number; stop(): Promise<void> }> {
  const client = await db.connect();
  let heard = 0;
  client.on('notification', () => (heard += 1));
  await client.query('LISTEN wharf_event');
  return {
    count: () => heard,
    stop: async () => {
      // A notification sent just before is delivered before this answer.
      await client.query('SELECT 1');
      await client.end();
    },
  };
}

/**
 * A pool that can hold down the listener: while `holding`, a connect() in
 * promise form (the listener's, Listener.connect) waits until release(),
 * while pool.query (the claim loop's, the closing writes'), which checks out
 * in callback form, goes on as usual. Holds only what the test starts
 * holding after the worker is up.
 */
class ListenerHoldingPool extends pg.Pool {
  holding = false;
  held = 0;
  private readonly waiting: Array<() => void> = [];

  override connect(): Promise<pg.PoolClient>;
  override connect(callback: (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) => void): void;
  override connect(
    callback?: (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) => void,
  ): Promise<pg.PoolClient> | void {
    if (callback) return super.connect(callback);
    if (!this.holding) return super.connect();
    this.held += 1;
    return new Promise<void>((resolve) => this.waiting.push(resolve)).then(() => super.connect());
  }

  release(): void {
    this.holding = false;
    for (const resume of this.waiting.splice(0)) resume();
  }
}

function start(options: { applicationName: string; pollEvery?: number }): Worker {
  const url = new URL(db.url);
  url.searchParams.set('application_name', options.applicationName);
  const worker = createWorker({
    connectionString: url.toString(),
    handlers: { 'generic:*': () => {} },
    concurrency: 2,
    ...(options.pollEvery !== undefined ? { settings: { pollEvery: options.pollEvery } } : {}),
  });
  worker.on('settled', ({ eventId, outcome }) => outcomes.set(eventId, outcome));
  return worker;
}

beforeAll(async () => {
  db = await createTestDatabase();
  // Only a notification can explain a wake-up within a minute.
  await setSettings(db.pool, { poll_every: '60 seconds' });
  connectionId = await subscribedConnection(db.pool, subject);
});

afterAll(async () => {
  await db?.drop();
});

describe('with poll_every at 60 s', () => {
  let worker: Worker;
  beforeAll(async () => {
    worker = start({ applicationName: 'wharf-wakeup-listen' });
    await worker.start();
    await waitFor(() => listenerPid(worker), 10_000, 'the listener to go idle');
  });
  afterAll(async () => {
    await worker?.stop();
  });

  it('handles an admitted event through LISTEN, long before the next poll', async () => {
    const id = await admitEvent(db.pool, connectionId, subject);
    expect(await waitFor(async () => outcomes.get(id), 5_000, 'the notified event')).toBe('handled');
  });

  it('an idle host holds its listener connection and no other', async () => {
    const count = async (): Promise<number> => {
      const { rows } = await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'wharf-wakeup-listen'`,
      );
      return rows[0]!.n;
    };
    await waitFor(async () => (await count()) === 1, 10_000, 'the pool to close idle connections');
    expect(await count()).toBe(1);
  });

  it('runs a retry when it falls due, not at the next poll', async () => {
    await setSettings(db.pool, { base_delay: '300 milliseconds', max_delay: '300 milliseconds' });
    const failedOnce = new Set<string>();
    const retrying = createWorker({
      connectionString: db.url,
      // Fails every event's first attempt (an unknown failure: retried after the delay).
      handlers: {
        'outline:*': ({ event }) => {
          if (failedOnce.has(event.id)) return;
          failedOnce.add(event.id);
          throw new Error('first attempt fails');
        },
      },
      concurrency: 2,
    });
    const settled: RunOutcome[] = [];
    retrying.on('settled', ({ outcome }) => settled.push(outcome));
    await retrying.start();
    try {
      const retryConnection = await subscribedConnection(db.pool, 'repo:acme/retry', 'outline');
      const id = await admitEvent(db.pool, retryConnection, 'repo:acme/retry', 'test', { provider: 'outline' });
      // The retry waits 150-300 ms; only its due time can wake the host before the 60 s poll.
      await waitFor(async () => settled.includes('handled'), 15_000, 'the retried event');
      expect(settled).toEqual(['retried', 'handled']);
      const event = await showEvent(db.pool, { workspaceId: String(testWorkspace) }, id);
      expect(event?.attempts.map((attempt) => [attempt.attempt, attempt.ended, attempt.error_class]))
        .toEqual([[1, 'unknown', 'Error'], [2, 'handled', null]]);
    } finally {
      await retrying.stop();
      await setSettings(db.pool, { base_delay: '2 seconds', max_delay: '5 minutes' });
    }
  });

  it('reconnects a killed LISTEN connection and is woken through it again', async () => {
    const killed = await listenerPid(worker);
    await db.pool.query('SELECT pg_terminate_backend($1)', [killed]);
    const replaced = await waitFor(async () => {
      const pid = await listenerPid(worker);
      return pid !== undefined && pid !== killed ? pid : undefined;
    }, 10_000, 'a new listener');
    expect(replaced).not.toBe(killed);
    const id = await admitEvent(db.pool, connectionId, subject);
    expect(await waitFor(async () => outcomes.get(id), 5_000, 'the event after reconnecting')).toBe('handled');
  });
});

describe('with a short poll', () => {
  let worker: Worker;
  beforeAll(async () => {
    worker = start({ applicationName: 'wharf-wakeup-poll', pollEvery: 500 });
    await worker.start();
    await waitFor(() => listenerPid(worker), 10_000, 'the listener to go idle');
  });
  afterAll(async () => {
    await worker?.stop();
  });

  it('finds a row that no notification announced', async () => {
    // Able to fail: with the claim loop's sleep made to ignore poll_every
    // (worker/claim-loop.ts, the last `wakeup.sleep(...)` given an hour),
    // nothing wakes the worker and this times out.
    const heard = await notificationsHeard();
    try {
      // Admitted with every idle mark taken first: no notification is sent
      // (a LISTEN of the test's own hears none), so only the poll can find it.
      const id = await admitUnannounced(db.pool, connectionId, subject, 'unannounced');
      expect(await waitFor(async () => outcomes.get(id), 10_000, 'the polled event')).toBe('handled');
      expect(heard.count(), 'notifications on wharf_event').toBe(0);
    } finally {
      await heard.stop();
    }
  });

  it('finds a row admitted while its LISTEN connection is dead', async () => {
    // The poll or the listener's reconnect (which looks once, for what was
    // admitted while nobody listened) finds it: no notification can.
    const killed = await listenerPid(worker);
    await db.pool.query('SELECT pg_terminate_backend($1)', [killed]);
    const id = await admitUnannounced(db.pool, connectionId, subject, 'while-deaf');
    expect(await waitFor(async () => outcomes.get(id), 10_000, 'the event while the listener was down')).toBe('handled');
    await waitFor(async () => {
      const pid = await listenerPid(worker);
      return pid !== undefined && pid !== killed;
    }, 10_000, 'the listener to come back');
  });
});

describe('with a short poll and its LISTEN connection held down', () => {
  let worker: Worker;
  let pool: ListenerHoldingPool;
  beforeAll(async () => {
    pool = new ListenerHoldingPool({ connectionString: db.url, max: 6, idleTimeoutMillis: 2_000 });
    pool.on('error', () => {});
    worker = createWorker({ pool, handlers: { 'generic:*': () => {} }, concurrency: 2, settings: { pollEvery: 500 } });
    worker.on('settled', ({ eventId, outcome }) => outcomes.set(eventId, outcome));
    await worker.start();
    await waitFor(() => listenerPid(worker), 10_000, 'the listener to go idle');
  });
  afterAll(async () => {
    pool?.release();
    await worker?.stop();
    await pool?.end();
  });

  it('finds a row while no listener can connect: only the poll can', async () => {
    // Able to fail: with the claim loop's sleep made to ignore poll_every
    // (worker/claim-loop.ts, the last `wakeup.sleep(...)` given an hour),
    // nothing finds the row while the listener is held down, and this times out.
    pool.holding = true;
    const killed = await listenerPid(worker);
    await db.pool.query('SELECT pg_terminate_backend($1)', [killed]);
    // Its reconnect is waiting in the pool: no listener, no reconnect's look.
    await waitFor(async () => pool.held > 0, 10_000, 'the listener to try to reconnect');
    const id = await admitUnannounced(db.pool, connectionId, subject, 'while-held-down');
    expect(await waitFor(async () => outcomes.get(id), 10_000, 'the polled event')).toBe('handled');
    expect(await listenerPid(worker), 'no listener came back meanwhile').toBeUndefined();
    pool.release();
    await waitFor(async () => (await listenerPid(worker)) !== undefined, 10_000, 'the listener to come back once let through');
  });
});
