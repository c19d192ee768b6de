// A worker whose single-host URL names a server in recovery (a DNS name that
// has not moved yet, an old primary that rejoined as a standby): every write
// there answers 25006. The worker waits, saying so once, without an error per
// retry and without a LISTEN error flood, charges nothing, and works as soon
// as that server is promoted, in the same process.
import { afterAll, beforeAll, expect, it } from 'vitest';
import pg from 'pg';
import { migrate } from '../../db/migrate.js';
import { createOwnPostgres, type OwnPostgres } from '../support/own-postgres.js';
import { admitEvents, waitFor } from '../support/worker-inbox.js';
import { fixtureHandlers, killSpawnedWorkers, spawnWorker } from '../support/worker-process.js';

let primary: OwnPostgres;
let standby: OwnPostgres;

beforeAll(async () => {
  primary = await createOwnPostgres({ binaries: 'system', settings: { wal_level: 'replica' } });
  await primary.start();
  await migrate({ databaseUrl: primary.url });
  const client = new pg.Client({ connectionString: primary.url });
  await client.connect();
  await client.query('CREATE TABLE handled_log (seq bigint GENERATED ALWAYS AS IDENTITY, event_id bigint, scope_key text, pid int)');
  await client.end();
  standby = await createOwnPostgres({ binaries: 'system', standbyOf: primary });
  await standby.start();
}, 120_000);

afterAll(async () => {
  await killSpawnedWorkers();
  await standby?.stop();
  await primary?.stop();
}, 60_000);

const levelOf = (line: string): number => Number(/"level":(\d+)/.exec(line)?.[1] ?? 0);

it('waits on a standby without an error flood, and handles events once it is promoted', async () => {
  const worker = spawnWorker({
    databaseUrl: standby.url,
    args: ['--handlers', fixtureHandlers('record-order.ts'), '--concurrency', '2'],
    env: { WHARF_REQUIRE_SYNC_STANDBY: 'skip' },
  });
  let exit: unknown;
  void worker.exited.then((value) => (exit = value));
  // Its settings are readable on the standby: it starts, then its first claim is refused (25006).
  await waitFor(async () => /database is unavailable/.test(worker.output()) || exit !== undefined, 30_000, 'the worker to find the database read-only');
  // Several rounds of the backoff (100 ms doubling to the 5 s poll) and of the listener's reconnects.
  await new Promise((resolve) => setTimeout(resolve, 4_000));
  expect(exit, worker.output()).toBeUndefined();
  const lines = worker.output().split('\n');
  const loud = lines.filter((line) => levelOf(line) >= 40);
  // Once each: the claims' outage, the listener's loss, and the reaper's round (every reapEvery,
  // 30 s by default: its first round comes 1-3 s after the start); no error-level line at all.
  expect(loud.filter((line) => /database is unavailable/.test(line))).toHaveLength(1);
  expect(loud.filter((line) => /listener connection lost/.test(line)).length).toBeLessThanOrEqual(1);
  expect(lines.filter((line) => levelOf(line) >= 50), worker.output()).toEqual([]);
  expect(loud.length, loud.join('\n')).toBeLessThanOrEqual(3);

  await primary.halt();
  await standby.promote();
  const pool = new pg.Pool({ connectionString: standby.url, max: 2 });
  try {
    const [id] = await admitEvents(pool, [{ scope: 'after-promotion' }]);
    const handled = await waitFor(async () => (await pool.query<{ pid: number }>(
      'SELECT pid FROM handled_log WHERE event_id = $1', [id])).rows[0], 30_000, 'the event admitted after the promotion to be handled');
    expect(handled.pid).toBe(worker.child.pid);
    const done = await waitFor(async () => (await pool.query<{ state: string; failures: number }>(
      `SELECT state, failures FROM wharf.provider_event WHERE id = $1 AND state = 'DONE'`, [id])).rows[0], 30_000, 'its completion');
    expect(done).toEqual({ state: 'DONE', failures: 0 });
    expect(exit).toBeUndefined();
  } finally {
    await pool.end();
  }
}, 120_000);
