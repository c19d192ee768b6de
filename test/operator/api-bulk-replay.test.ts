// Bulk replay through the operator API and its runner: every DEAD event of a
// workspace that matches the filter goes back to the queue once, in batches
// whose progress can be followed; a misspelt filter is refused; uncertain
// events wait for force; two runners racing on one bulk replay replay each
// event once; a cancel stops one after the batch in flight; another
// workspace neither sees, runs nor cancels it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runBulkReplay } from '../../operator/bulk-replay-runner.js';
import { startBulkReplay, type BulkReplay } from '../../operator/sql/bulk-replay.js';
import { createApiToken } from '../../operator/sql/operator.js';
import { adminToken, apiClient, type ApiCall } from '../support/api-client.js';
import { admitEvent, createConnection, createWorkspace, deadEvent, finishEvent } from '../support/api-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { waitFor } from '../support/worker-inbox.js';

let db: TestDatabase;
let api: ApiCall;
let tokenA: string;
let tokenB: string;
const A = 301;
const B = 302;
let connectionA: number;
let connectionB: number;

async function states(ids: number[]): Promise<Record<string, number>> {
  const { rows } = await db.pool.query<{ state: string; n: number }>(
    'SELECT state, count(*)::int AS n FROM wharf.provider_event WHERE id = ANY($1) GROUP BY state', [ids]);
  return Object.fromEntries(rows.map((row) => [row.state, row.n]));
}

async function deadEvents(count: number, connection: number, ending: 'DEAD' | 'uncertain' = 'DEAD'): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 0; i < count; i += 1) ids.push(await deadEvent(db.pool, connection, ending));
  return ids;
}

beforeAll(async () => {
  db = await createTestDatabase();
  api = apiClient({ db: db.pool, adminToken });
  await createWorkspace(db.pool, A);
  await createWorkspace(db.pool, B);
  connectionA = await createConnection(db.pool, A);
  connectionB = await createConnection(db.pool, B);
  tokenA = (await createApiToken(db.pool, String(A), 'ops')).token;
  tokenB = (await createApiToken(db.pool, String(B), 'ops')).token;
}, 120_000);

afterAll(async () => {
  await db?.drop();
});

describe('POST /workspaces/:ws/replays', () => {
  it('replays every matching dead letter, followed until finished; uncertain ones and other workspaces stay', async () => {
    const dead = await deadEvents(30, connectionA);
    const uncertain = await deadEvents(2, connectionA, 'uncertain');
    const otherWorkspace = await deadEvents(2, connectionB);

    const started = await api('POST', `/workspaces/${A}/replays`, { token: tokenA, body: { error_class: 'SyntaxError' } });
    expect(started.status, JSON.stringify(started.body)).toBe(202);
    expect(started.body).toMatchObject({ matched: 30, requested_by: 'token:ops', filter: { error_class: 'SyntaxError' } });

    const finished = await waitFor(async () => {
      const status = await api('GET', `/workspaces/${A}/replays/${started.body.id}`, { token: tokenA });
      expect(status.status).toBe(200);
      return status.body.state === 'finished' ? status.body : undefined;
    }, 30_000, 'the bulk replay to finish');
    expect(finished).toMatchObject({ matched: 30, replayed: 30, skipped: 0 });
    expect(await states(dead)).toEqual({ QUEUED: 30 });
    expect(await states(uncertain)).toEqual({ DEAD: 2 });
    expect(await states(otherWorkspace)).toEqual({ DEAD: 2 });

    const listed = await api('GET', `/workspaces/${A}/replays`, { token: tokenA });
    expect((listed.body as unknown as BulkReplay[])[0]?.id).toBe(started.body.id);
  });

  it('takes the uncertain ones only with force', async () => {
    const uncertain = await deadEvents(1, connectionA, 'uncertain');
    const started = await api('POST', `/workspaces/${A}/replays`, {
      token: tokenA, body: { error_class: 'OutcomeUncertain', force: true },
    });
    expect(started.status).toBe(202);
    await waitFor(async () => (await states(uncertain)).QUEUED === 1, 30_000, 'the uncertain event to be replayed');
  });

  it('refuses a misspelt filter (it would widen the replay) and bad times, before anything runs', async () => {
    const dead = await deadEvents(1, connectionA);
    for (const body of [{ error_klass: 'SyntaxError' }, { dead_after: 'yesterday' }, { provider: '' }, { force: 'yes' }]) {
      const response = await api('POST', `/workspaces/${A}/replays`, { token: tokenA, body });
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(response.body.error).toBe('bad_request');
    }
    expect(await states(dead)).toEqual({ DEAD: 1 });
  });

  it("keeps another workspace's token out", async () => {
    const started = await api('POST', `/workspaces/${A}/replays`, { token: tokenA, body: { provider: 'none' } });
    expect((await api('GET', `/workspaces/${A}/replays/${started.body.id}`, { token: tokenB })).status).toBe(403);
    expect((await api('GET', `/workspaces/${B}/replays/${started.body.id}`, { token: tokenB })).status).toBe(404);
    expect((await api('POST', `/workspaces/${A}/replays`, { token: tokenB, body: {} })).status).toBe(403);
  });
});

describe('runBulkReplay', () => {
  // A workspace of its own per test, so that matched counts only its events.
  let workspace = 310;
  async function freshConnection(): Promise<{ ws: string; connection: number }> {
    workspace += 1;
    await createWorkspace(db.pool, workspace);
    return { ws: String(workspace), connection: await createConnection(db.pool, workspace) };
  }

  it('advances batch by batch, each its own transaction', async () => {
    const { ws, connection } = await freshConnection();
    const dead = await deadEvents(12, connection);
    const replay = await startBulkReplay(db.pool, ws, {}, 'test');
    expect(replay.matched).toBe(12);
    const progress: number[] = [];
    const finished = await runBulkReplay(db.pool, ws, String(replay.id), {
      batchSize: 5, onProgress: (step) => progress.push(step.replayed),
    });
    expect(progress).toEqual([5, 10, 12]);
    expect(finished).toMatchObject({ state: 'finished', replayed: 12 });
    expect(await states(dead)).toEqual({ QUEUED: 12 });
  });

  it('is cancelled after the batch in flight, which counts; what it replayed stays; its runner stops; another workspace cannot', async () => {
    const { ws, connection } = await freshConnection();
    const dead = await deadEvents(12, connection);
    const replay = await startBulkReplay(db.pool, ws, {}, 'test');
    const token = (await createApiToken(db.pool, ws, 'oncall')).token;
    const cancelPath = `/workspaces/${ws}/replays/${replay.id}/cancel`;
    expect((await api('POST', cancelPath, { token: tokenB })).status, 'another workspace').toBe(403);

    // A batch in flight (its transaction open) holds the bulk replay: the
    // cancel waits for it, then counts what it replayed.
    const batch = await db.pool.connect();
    try {
      await batch.query('BEGIN');
      await batch.query('SELECT wharf.continue_bulk_replay($1, $2, 5)', [ws, replay.id]);
      const cancelling = api('POST', cancelPath, { token });
      await waitFor(async () => {
        const { rows } = await db.pool.query(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%cancel_bulk_replay%'`);
        return rows.length > 0;
      }, 10_000, 'the cancel to wait for the batch');
      await batch.query('COMMIT');
      const cancelled = await cancelling;
      expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
      expect(cancelled.body).toMatchObject({ cancelled: true, state: 'cancelled', cancelled_by: 'token:oncall', replayed: 5, skipped: 0 });
    } finally {
      batch.release();
    }

    const after = await runBulkReplay(db.pool, ws, String(replay.id), { batchSize: 5 });
    expect(after, 'the runner stops at once').toMatchObject({ state: 'cancelled', replayed: 5 });
    expect(await states(dead)).toEqual({ QUEUED: 5, DEAD: 7 });
    expect((await api('POST', cancelPath, { token })).body).toMatchObject({ cancelled: false, state: 'cancelled' });
    expect((await api('POST', `/workspaces/${ws}/replays/999999/cancel`, { token })).status).toBe(404);
  });

  it('runs two bulk replays whose events share scopes at once, without a deadlock', async () => {
    const { ws, connection } = await freshConnection();
    // 40 dead letters over 4 scopes, alternately SyntaxError and OutcomeUncertain:
    // each replay's batches lock the same scopes as the other's, in another event order.
    const dead: number[] = [];
    for (let i = 0; i < 40; i += 1) {
      const id = await admitEvent(db.pool, connection, { subject: `repo:acme/shared-${ws}-${i % 4}` });
      await finishEvent(db.pool, id, i % 2 === 0 ? 'DEAD' : 'uncertain');
      dead.push(id);
    }
    const [syntax, uncertain] = await Promise.all([
      startBulkReplay(db.pool, ws, { error_class: 'SyntaxError' }, 'a'),
      startBulkReplay(db.pool, ws, { error_class: 'OutcomeUncertain' }, 'b', true),
    ]);
    const results = await Promise.all([syntax, uncertain].map((replay) =>
      runBulkReplay(db.pool, ws, String(replay.id), { batchSize: 2 })));
    expect(results.map((result) => [result?.state, result?.replayed])).toEqual([['finished', 20], ['finished', 20]]);
    expect(await states(dead)).toEqual({ QUEUED: 40 });
  });

  it('counts each event once when three runners race on one bulk replay', async () => {
    const { ws, connection } = await freshConnection();
    const dead = await deadEvents(40, connection);
    const replay = await startBulkReplay(db.pool, ws, {}, 'racer');
    const run = () => runBulkReplay(db.pool, ws, String(replay.id), { batchSize: 3 });
    const results = await Promise.all([run(), run(), run()]);
    // A runner that finds a batch running elsewhere stops (null); one that runs the last batch finishes it.
    const last = results.find((result) => result !== null) ?? await run();
    expect(last).toMatchObject({ state: 'finished', matched: 40, replayed: 40, skipped: 0 });
    expect(await states(dead)).toEqual({ QUEUED: 40 });
  });
});
