// Claimers on separate connections racing over one inbox: order per scope,
// one lease per scope, no double handling, every row ends DONE or DEAD; and a
// row waiting for its retry holds back its own scope only.
// A completion, a failure or a release retried under its epoch while its
// first try is still open waits for it, then reports it.
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { fileSeed, Rng } from '../support/random.js';
import { admitEvents, setSettings } from '../support/worker-inbox.js';
import { backendPid, blockedOnLock } from '../support/sessions.js';
import { sleep } from '../support/sleep.js';

const scopes = 50;
const eventsPerScope = 40;
const claimers = 8;
const maxAttempts = 3;

interface ClaimedRow {
  id: string;
  lease_epoch: string;
  scope_key: string;
}

interface RaceTally {
  claims: number;
  completed: Map<string, number>;
  deadByFail: number;
}

/** The handlers' fates: printed on failure, WHARF_TEST_SEED replays the draws (not the interleaving). */
const seed = fileSeed(import.meta.url);


/** One claim loop: claims up to two rows, handles each with a random fate, until nothing is left. */
async function claimLoop(client: pg.Client, worker: string, tally: RaceTally, deadline: number, random: Rng): Promise<void> {
  for (;;) {
    if (Date.now() > deadline) throw new Error(`${worker} ran out of time`);
    const { rows } = await client.query<ClaimedRow>(
      'SELECT id, lease_epoch, scope_key FROM wharf.claim($1, 2)',
      [worker],
    );
    if (rows.length === 0) {
      const { rows: open } = await client.query<{ open: boolean }>(
        `SELECT EXISTS (SELECT FROM wharf.provider_event WHERE state IN ('QUEUED', 'LEASED')) AS open`,
      );
      if (!open[0]?.open) return;
      await sleep(2);
      continue;
    }
    tally.claims += rows.length;
    for (const row of rows) await handle(client, row, tally, random);
  }
}

/** A handler: fails transiently, unknown or permanently at random, else records its effect once and completes. */
async function handle(client: pg.Client, row: ClaimedRow, tally: RaceTally, random: Rng): Promise<void> {
  const roll = random.float();
  const kind = roll < 0.12 ? 'transient' : roll < 0.22 ? 'unknown' : roll < 0.25 ? 'permanent' : undefined;
  if (kind) {
    const { rows } = await client.query<{ state: string | null }>(
      'SELECT wharf.fail($1, $2, $3, $4) AS state',
      [row.id, row.lease_epoch, kind, 'RandomFailure'],
    );
    expect(rows[0]?.state, `fail of a held lease (${row.id})`).not.toBeNull();
    if (rows[0]?.state === 'DEAD') tally.deadByFail += 1;
    return;
  }
  // The effect commits in a fenced business transaction (one statement),
  // recorded as a step. A busy fence (55P03: another session has the row
  // locked for a moment) rolls back and runs the same transaction again, as
  // the worker does.
  for (;;) {
    try {
      await client.query(
        `WITH step AS (SELECT wharf.step($1, $2, 'effect') AS run)
         INSERT INTO handled_log (event_id, scope_key) SELECT $1, $3 FROM step WHERE run`,
        [row.id, row.lease_epoch, row.scope_key],
      );
      break;
    } catch (error) {
      if ((error as { code?: string }).code !== '55P03') throw error;
      await sleep(1);
    }
  }
  const { rows } = await client.query<{ done: boolean }>('SELECT wharf.complete($1, $2) AS done', [
    row.id,
    row.lease_epoch,
  ]);
  expect(rows[0]?.done, `complete of a held lease (${row.id})`).toBe(true);
  tally.completed.set(row.id, (tally.completed.get(row.id) ?? 0) + 1);
}

interface Sample {
  leased: number;
  doublyLeased: number;
  overtaking: number;
}

/** Samples, in one snapshot each, the leases while the race runs. */
async function sampleLeases(client: pg.Client, stop: () => boolean): Promise<Sample[]> {
  const samples: Sample[] = [];
  while (!stop()) {
    const { rows } = await client.query<{ leased: number; doubly_leased: number; overtaking: number }>(`
      SELECT
        (SELECT count(*)::int FROM wharf.provider_event WHERE state = 'LEASED') AS leased,
        (SELECT count(*)::int FROM (SELECT scope_key FROM wharf.provider_event WHERE state = 'LEASED'
                                     GROUP BY scope_key HAVING count(*) > 1) d) AS doubly_leased,
        (SELECT count(*)::int FROM wharf.provider_event l
          WHERE l.state = 'LEASED'
            AND EXISTS (SELECT FROM wharf.provider_event o
                         WHERE o.scope_key = l.scope_key AND o.id < l.id AND o.state IN ('QUEUED', 'LEASED'))
        ) AS overtaking`);
    const row = rows[0]!;
    samples.push({ leased: row.leased, doublyLeased: row.doubly_leased, overtaking: row.overtaking });
    await sleep(5);
  }
  return samples;
}

describe('claimers racing over one inbox', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it(`${claimers} claimers over ${scopes} scopes × ${eventsPerScope} events keep every rule`, async () => {
    await setSettings(db.pool, { base_delay: '1 millisecond', max_delay: '4 milliseconds', max_attempts: String(maxAttempts) });
    await db.pool.query(
      'CREATE TABLE handled_log (seq bigint GENERATED ALWAYS AS IDENTITY, event_id bigint NOT NULL, scope_key text NOT NULL)',
    );
    // Interleaved across scopes, so ids of one scope are far apart.
    const events = [];
    for (let n = 0; n < eventsPerScope; n += 1) {
      for (let s = 0; s < scopes; s += 1) events.push({ scope: `race:${s}` });
    }
    const ids = await admitEvents(db.pool, events);
    expect(ids).toHaveLength(scopes * eventsPerScope);

    const tally: RaceTally = { claims: 0, completed: new Map(), deadByFail: 0 };
    const clients = await Promise.all(Array.from({ length: claimers + 1 }, () => db.connect()));
    const sampler = clients.pop()!;
    let racing = true;
    // A guard against a hang, not a speed assertion.
    const deadline = Date.now() + 45_000;
    const sampling = sampleLeases(sampler, () => !racing);
    try {
      await Promise.all(clients.map((client, n) => claimLoop(client, `claimer-${n}`, tally, deadline, Rng.for(seed, 0, n))));
    } finally {
      racing = false;
    }
    const samples = await sampling;

    // While racing: never two leases in a scope, never a lease ahead of an older open row.
    expect(samples.length).toBeGreaterThan(10);
    expect(Math.max(...samples.map((sample) => sample.leased))).toBeGreaterThan(1);
    expect(samples.filter((sample) => sample.doublyLeased > 0)).toEqual([]);
    expect(samples.filter((sample) => sample.overtaking > 0)).toEqual([]);

    // At the end: every row DONE or DEAD, and the counts add up.
    const { rows: states } = await db.pool.query<{ state: string; count: number; attempts: number }>(
      'SELECT state, count(*)::int AS count, sum(attempt)::int AS attempts FROM wharf.provider_event GROUP BY state ORDER BY state',
    );
    const byState = new Map(states.map((row) => [row.state, row]));
    expect([...byState.keys()].every((state) => state === 'DONE' || state === 'DEAD')).toBe(true);
    const done = byState.get('DONE')?.count ?? 0;
    const dead = byState.get('DEAD')?.count ?? 0;
    expect(done + dead).toBe(scopes * eventsPerScope);
    expect(done).toBe(tally.completed.size);
    expect(dead).toBe(tally.deadByFail);
    expect(dead).toBeGreaterThan(0);
    expect(states.reduce((sum, row) => sum + row.attempts, 0)).toBe(tally.claims);

    // No row completed twice, no effect recorded twice, every DONE row's effect recorded.
    expect([...tally.completed.values()].filter((count) => count !== 1)).toEqual([]);
    const { rows: effects } = await db.pool.query<{ duplicated: number; missing: number }>(`
      SELECT (SELECT count(*)::int FROM (SELECT event_id FROM handled_log GROUP BY event_id HAVING count(*) > 1) d) AS duplicated,
             (SELECT count(*)::int FROM wharf.provider_event e
               WHERE e.state = 'DONE' AND NOT EXISTS (SELECT FROM handled_log h WHERE h.event_id = e.id)) AS missing`);
    expect(effects[0]).toEqual({ duplicated: 0, missing: 0 });

    // Per scope, effects happened and rows ended in id order.
    const { rows: disorder } = await db.pool.query<{ scope_key: string }>(`
      SELECT scope_key FROM (
        SELECT scope_key, array_agg(event_id ORDER BY seq) AS by_effect, array_agg(event_id ORDER BY event_id) AS by_id
          FROM handled_log GROUP BY scope_key) h
       WHERE by_effect <> by_id
      UNION
      SELECT scope_key FROM (
        SELECT scope_key, array_agg(id ORDER BY coalesce(handled_at, dead_at), id) AS by_end,
               array_agg(id ORDER BY id) AS by_id
          FROM wharf.provider_event GROUP BY scope_key) e
       WHERE by_end <> by_id`);
    expect(disorder).toEqual([]);

    // The unknown-failure budget was honoured: a row that used it up is DEAD, none went past it.
    const { rows: budget } = await db.pool.query<{ bad: number }>(
      `SELECT count(*)::int AS bad FROM wharf.provider_event
        WHERE failures > $1 OR (failures = $1 AND state <> 'DEAD')`,
      [maxAttempts],
    );
    expect(budget[0]?.bad).toBe(0);

    // The scope heads agree with the rows: nothing queued, nothing leased.
    const { rows: heads } = await db.pool.query(
      'SELECT scope_key FROM wharf.scope WHERE head_id IS NOT NULL OR leased_id IS NOT NULL',
    );
    expect(heads).toEqual([]);
  });

});

describe('a row waiting for its retry', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('holds back every later row of its scope, and only its own scope', async () => {
    await setSettings(db.pool, { base_delay: '1 hour', max_delay: '2 hours' });
    const [waiting, ...later] = await admitEvents(db.pool, [
      { scope: 'held' },
      { scope: 'held' },
      { scope: 'free' },
      { scope: 'held' },
      { scope: 'free' },
      { scope: 'free' },
    ]);
    const heldIds = [waiting!, later[0]!, later[2]!];
    const freeIds = [later[1]!, later[3]!, later[4]!];

    const clients = await Promise.all(Array.from({ length: claimers }, () => db.connect()));
    const first = await clients[0]!.query<ClaimedRow>('SELECT id, lease_epoch, scope_key FROM wharf.claim($1, 10)', [
      'first',
    ]);
    expect(first.rows.map((row) => row.id).sort()).toEqual([waiting, freeIds[0]].sort());
    const held = first.rows.find((row) => row.id === waiting)!;
    await clients[0]!.query(`SELECT wharf.fail($1, $2, 'transient', 'ECONNRESET')`, [held.id, held.lease_epoch]);
    const freeFirst = first.rows.find((row) => row.id === freeIds[0])!;
    await clients[0]!.query('SELECT wharf.complete($1, $2)', [freeFirst.id, freeFirst.lease_epoch]);

    // Every claimer keeps claiming and completing until nothing more is handed out.
    const handed: string[] = [];
    await Promise.all(
      clients.map(async (client, n) => {
        for (;;) {
          const { rows } = await client.query<ClaimedRow>('SELECT id, lease_epoch, scope_key FROM wharf.claim($1, 10)', [
            `claimer-${n}`,
          ]);
          for (const row of rows) {
            handed.push(row.id);
            await client.query('SELECT wharf.complete($1, $2)', [row.id, row.lease_epoch]);
          }
          if (rows.length === 0) {
            const { rows: left } = await client.query<{ due: boolean }>(
              `SELECT EXISTS (SELECT FROM wharf.provider_event
                               WHERE scope_key LIKE '%:free' AND state IN ('QUEUED', 'LEASED')) AS due`,
            );
            if (!left[0]?.due) return;
            await sleep(2);
          }
        }
      }),
    );
    expect(handed.sort()).toEqual(freeIds.slice(1).sort());
    const { rows: heldStates } = await db.pool.query<{ id: string; state: string }>(
      'SELECT id, state FROM wharf.provider_event WHERE id = ANY($1) ORDER BY id',
      [heldIds],
    );
    expect(heldStates.map((row) => row.state)).toEqual(['QUEUED', 'QUEUED', 'QUEUED']);

    // Once due, the waiting row is handed out first, and its scope moves on behind it.
    await db.pool.query(`UPDATE wharf.provider_event SET next_attempt_at = now() - interval '1 second' WHERE id = $1`, [
      waiting,
    ]);
    const { rows: next } = await clients[1]!.query<ClaimedRow>('SELECT id, lease_epoch, scope_key FROM wharf.claim($1, 10)', [
      'after',
    ]);
    expect(next.map((row) => row.id)).toEqual([waiting]);
  });
});

describe('a completion retried while its first try is still open', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  /** One leased row; the first try of its completion runs in `first`, open, and the retry on another session. */
  async function racedRetry(scope: string, firstEnds: 'COMMIT' | 'ROLLBACK'): Promise<{ retried: string[]; state: unknown }> {
    const [id] = await admitEvents(db.pool, [{ scope }]);
    const { rows } = await db.pool.query<{ lease_epoch: string }>(
      'SELECT lease_epoch FROM wharf.claim($1, 10) WHERE id = $2', ['racer', id]);
    const epoch = rows[0]!.lease_epoch;
    const first = await db.connect();
    const retry = await db.connect();
    const retryPid = await backendPid(retry);
    try {
      await first.query('BEGIN');
      await first.query(`SELECT * FROM wharf.complete_many($1, $2, '{handled}')`, [[id], [epoch]]);
      const retried = retry.query<{ id: string }>(`SELECT id::text FROM wharf.complete_many($1, $2, '{handled}') AS id`, [[id], [epoch]]);
      // The retry waits on the row lock the first try holds (pinned, not timed).
      await blockedOnLock(db.pool, retryPid, { timeout: 10_000, what: 'the retry to wait for the first try' });
      await first.query(firstEnds);
      const answer = (await retried).rows.map((row) => row.id);
      const { rows: state } = await db.pool.query('SELECT state, lease_epoch::text FROM wharf.provider_event WHERE id = $1', [id]);
      return { retried: answer.map((got) => (got === id ? 'the row' : got)), state: state[0] };
    } finally {
      await first.end();
      await retry.end();
    }
  }

  it('reports the row completed once the first try commits, writing nothing more', async () => {
    expect(await racedRetry('retry-commit', 'COMMIT')).toEqual({ retried: ['the row'], state: { state: 'DONE', lease_epoch: '1' } });
  });

  it('completes the row itself when the first try rolled back', async () => {
    expect(await racedRetry('retry-rollback', 'ROLLBACK')).toEqual({ retried: ['the row'], state: { state: 'DONE', lease_epoch: '1' } });
  });
});

describe('a failure or a release retried while its first try is still open', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
    // A failed row stays QUEUED, not due, for the whole test.
    await setSettings(db.pool, { base_delay: '1 hour', max_delay: '1 hour' });
  });
  afterAll(async () => {
    await db?.drop();
  });

  const writes = {
    fail: `SELECT wharf.fail($1, $2, 'unknown', 'TypeError')::text AS answer`,
    release: 'SELECT wharf.release($1, $2)::text AS answer',
  };

  /**
   * One leased row; the first try of `write` runs in `first`, open, and the
   * retry on another session. The retry's answer, and the row and its
   * history after: one failure counted, one history entry, however the
   * first try ended.
   */
  async function racedRetry(write: keyof typeof writes, scope: string, firstEnds: 'COMMIT' | 'ROLLBACK') {
    const [id] = await admitEvents(db.pool, [{ scope }]);
    const { rows } = await db.pool.query<{ lease_epoch: string }>(
      'SELECT lease_epoch FROM wharf.claim($1, 10) WHERE id = $2', ['racer', id]);
    const epoch = rows[0]!.lease_epoch;
    const first = await db.connect();
    const retry = await db.connect();
    const retryPid = await backendPid(retry);
    try {
      await first.query('BEGIN');
      await first.query(writes[write], [id, epoch]);
      const retried = retry.query<{ answer: string | null }>(writes[write], [id, epoch]);
      // The retry waits on the row lock the first try holds (pinned, not timed).
      await blockedOnLock(db.pool, retryPid, { timeout: 10_000, what: 'the retry to wait for the first try' });
      await first.query(firstEnds);
      const answer = (await retried).rows[0]?.answer;
      const { rows: state } = await db.pool.query(
        `SELECT e.state, e.failures, e.lease_epoch::text,
                (SELECT array_agg(h.ended || ' ' || h.left_state) FROM wharf.event_attempt h WHERE h.event_id = e.id) AS history
           FROM wharf.provider_event e WHERE e.id = $1`, [id]);
      return { answer, ...state[0] };
    } finally {
      await first.end();
      await retry.end();
    }
  }

  it('a failure: answers the state the first try left once it commits, writing nothing more', async () => {
    expect(await racedRetry('fail', 'fail-commit', 'COMMIT'))
      .toEqual({ answer: 'QUEUED', state: 'QUEUED', failures: 1, lease_epoch: '1', history: ['unknown QUEUED'] });
  });

  it('a failure: written by the retry itself when the first try rolled back', async () => {
    expect(await racedRetry('fail', 'fail-rollback', 'ROLLBACK'))
      .toEqual({ answer: 'QUEUED', state: 'QUEUED', failures: 1, lease_epoch: '1', history: ['unknown QUEUED'] });
  });

  it('a release: answers true once the first try commits, writing nothing more', async () => {
    expect(await racedRetry('release', 'release-commit', 'COMMIT'))
      .toEqual({ answer: 'true', state: 'QUEUED', failures: 0, lease_epoch: '1', history: ['released QUEUED'] });
  });

  it('a release: written by the retry itself when the first try rolled back', async () => {
    expect(await racedRetry('release', 'release-rollback', 'ROLLBACK'))
      .toEqual({ answer: 'true', state: 'QUEUED', failures: 0, lease_epoch: '1', history: ['released QUEUED'] });
  });
});
