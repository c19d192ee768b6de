// A bulk replay commits in batches, and admissions and claims never wait
// behind it (docs/operating.md): 3,000 DEAD events of 300 scopes are
// replayed by the operator's runner (operator/bulk-replay-runner.ts, batches
// of 100) while two sessions admit into those same scopes and two claim and
// complete. Then the replay is finished with every event replayed; the
// admissions and claims went on while it ran, between its batches (each
// finished at three or more of the replay's partial progress points, a count
// and not a clock); and no admission or claim took longer than a generous
// bound (10 s, where each takes milliseconds: a bound on waiting behind the
// whole replay, not a speed test).
//
// Able to fail: with the replay's batches committed as one transaction (the
// runner given one session inside BEGIN … COMMIT, as a replay that held its
// scope locks to the end would be), the admissions into its scopes wait
// behind the whole of it and finish at one partial progress point, not three
// ("expected 1 to be greater than or equal to 3").
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runBulkReplay } from '../../operator/bulk-replay-runner.js';
import { startBulkReplay } from '../../operator/sql/bulk-replay.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { fileSeed, Rng } from '../support/random.js';
import { admitEvent, subscribedConnection, testSource, testWorkspace } from '../support/worker-inbox.js';

const scopeCount = 300;
const deadPerScope = 10;
const total = scopeCount * deadPerScope;
const batchSize = 100;
/** Far above any one admission or claim here (milliseconds), far below the replay's whole run. */
const latencyBoundMs = 10_000;

/** Which scopes the admitters pick: printed on failure, WHARF_TEST_SEED replays it. */
const seed = fileSeed(import.meta.url);

let db: TestDatabase;
let connectionId: string;
const subjects = Array.from({ length: scopeCount }, (_, n) => `repo:acme/bulk-${n}`);

beforeAll(async () => {
  db = await createTestDatabase();
  for (const subject of subjects) connectionId = await subscribedConnection(db.pool, subject);
  // The dead letters, through the SQL API: admitted (admit_many, a round of
  // one event per scope at a time), claimed and failed permanently.
  for (let round = 0; round < deadPerScope; round += 1) {
    const deliveries = subjects.map((subject, n) => ({
      provider: 'generic', source: testSource, delivery_key: `bulk-dead-${round}-${n}`, event_type: 'dead',
      route: { connection_id: Number(connectionId) }, subjects: [subject], payload: { round }, headers: {},
    }));
    await db.pool.query('SELECT wharf.admit_many($1)', [JSON.stringify(deliveries)]);
  }
  for (let dead = 0; dead < total;) {
    const { rows } = await db.pool.query<{ n: number }>(
      `WITH claimed AS (SELECT id, lease_epoch FROM wharf.claim('seed-dead', $1))
       SELECT count(wharf.fail(id, lease_epoch, 'permanent', 'Seeded'))::int AS n FROM claimed`, [scopeCount]);
    if (rows[0]!.n === 0) throw new Error(`seeding: nothing to claim after ${dead} dead letters`);
    dead += rows[0]!.n;
  }
}, 120_000);

afterAll(async () => {
  await db?.drop();
});

interface Timed {
  ms: number;
  /** The replay's progress (events replayed) when this finished. */
  progress: number;
}

it(`a bulk replay of ${total} events runs in batches while admissions and claims into its scopes go on`, async () => {
  const replay = await startBulkReplay(db.pool, String(testWorkspace), { event_type: 'dead' }, 'bulk-race');
  expect(replay.matched).toBe(total);

  const sessions = await Promise.all(Array.from({ length: 4 }, () => db.connect()));
  const admissions: Timed[] = [];
  const claims: Timed[] = [];
  let progress = 0;
  let replaying = true;

  const timed = async <T>(into: Timed[], work: () => Promise<T>): Promise<T> => {
    const started = performance.now();
    const result = await work();
    into.push({ ms: performance.now() - started, progress });
    return result;
  };

  const admitter = async (client: pg.Client, random: Rng): Promise<void> => {
    while (replaying) {
      await timed(admissions, () => admitEvent(client, connectionId, random.pick(subjects), 'fresh'));
    }
  };

  const claimer = async (client: pg.Client, worker: string): Promise<void> => {
    while (replaying) {
      const rows = await timed(claims, async () =>
        (await client.query<{ id: string; lease_epoch: string }>('SELECT id, lease_epoch FROM wharf.claim($1, 10)', [worker])).rows);
      for (const row of rows) await client.query('SELECT wharf.complete($1, $2)', [row.id, row.lease_epoch]);
      if (rows.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    }
  };

  const runner = (async () => {
    try {
      return await runBulkReplay(db.pool, String(testWorkspace), String(replay.id), {
        batchSize, onProgress: (state) => (progress = state.replayed),
      });
    } finally {
      replaying = false;
    }
  })();
  let finished;
  try {
    [finished] = await Promise.all([
      runner,
      admitter(sessions[0]!, Rng.for(seed, 0, 0)),
      admitter(sessions[1]!, Rng.for(seed, 0, 1)),
      claimer(sessions[2]!, 'bulk-claimer-0'),
      claimer(sessions[3]!, 'bulk-claimer-1'),
    ]);
  } finally {
    await Promise.all(sessions.map((session) => session.end()));
  }

  expect(finished).toMatchObject({ state: 'finished', matched: total, replayed: total });
  const partial = (timings: Timed[]) => new Set(timings.map((t) => t.progress).filter((p) => p > 0 && p < total)).size;
  expect(partial(admissions), 'admissions finished between the replay\'s batches').toBeGreaterThanOrEqual(3);
  expect(partial(claims), 'claims finished between the replay\'s batches').toBeGreaterThanOrEqual(3);
  const slowest = (timings: Timed[]) => Math.max(...timings.map((t) => t.ms));
  expect(slowest(admissions), `slowest of ${admissions.length} admissions (ms)`).toBeLessThan(latencyBoundMs);
  expect(slowest(claims), `slowest of ${claims.length} claims (ms)`).toBeLessThan(latencyBoundMs);
});
