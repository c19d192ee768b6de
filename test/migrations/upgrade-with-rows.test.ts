// A database of the previous release, holding rows in every state, upgrades
// with a plain `wharf migrate` and carries on: the lease a live worker held
// across the upgrade still renews, records steps and completes under its
// epoch; no scope gets a second lease; every scope is drained in id order;
// held rows stay held until their workspace resumes; dead letters replay.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { migrate } from '../../db/migrate.js';
import { readLock } from '../../db/migration-files.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { runWharf } from '../support/wharf-cli.js';

const lock = await readLock();
const releases = [...new Set(lock.map((entry) => entry.release))];
const previous = releases.at(-2)!;

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase({ migrate: false });
  await migrate({ databaseUrl: db.url, count: lock.findLastIndex((entry) => entry.release === previous) + 1 });
});
afterAll(async () => {
  await db?.drop();
});

const source = 'https://hooks.example.test';

async function workspaceWithConnection(workspace: number, subjects: string[]): Promise<number> {
  await db.pool.query('SELECT wharf.upsert_workspace($1)', [workspace]);
  const { rows } = await db.pool.query<{ id: number }>(
    `SELECT wharf.upsert_connection($1, 'generic', $2, 'webhook', $3) AS id`, [workspace, source, `ws-${workspace}`]);
  for (const subject of subjects) await db.pool.query('SELECT wharf.subscribe($1, $2)', [rows[0]!.id, subject]);
  return rows[0]!.id;
}

async function admit(connection: number, subject: string, key: string): Promise<string> {
  const { rows } = await db.pool.query<{ receipt: { events: Array<{ event_id: number }> } }>(
    `SELECT wharf.admit('generic', $1, $2, 'test', $3, $4, '{}', '{}') AS receipt`,
    [source, key, { connection_id: connection }, [subject]]);
  return String(rows[0]!.receipt.events[0]!.event_id);
}

interface Lease { id: string; lease_epoch: string; subject: string }

const claim = async (max: number): Promise<Lease[]> =>
  (await db.pool.query<Lease>(`SELECT id, lease_epoch, subject FROM wharf.claim('upgrade', $1)`, [max])).rows;

it(`upgrades a ${previous} database holding rows in every state without losing a lease or an order`, async () => {
  const active = await workspaceWithConnection(1, ['repo:a', 'repo:b', 'repo:c']);
  const paused = await workspaceWithConnection(2, ['repo:p']);
  const ids: Record<string, string[]> = { a: [], b: [], c: [], p: [] };
  for (let n = 0; n < 4; n += 1) {
    for (const scope of ['a', 'b', 'c']) ids[scope]!.push(await admit(active, `repo:${scope}`, `${scope}-${n}`));
    ids.p!.push(await admit(paused, 'repo:p', `p-${n}`));
  }
  await db.pool.query(`SELECT wharf.set_workspace_state(2, 'PAUSED')`);

  // Before the upgrade: a- and b-heads leased; a's completes (DONE), b's
  // dies (DEAD); then a, b and c are leased again and held by a live worker.
  const first = await claim(10);
  expect(first.map((lease) => lease.id).sort()).toEqual([ids.a![0], ids.b![0], ids.c![0]].sort());
  const byId = new Map(first.map((lease) => [lease.id, lease]));
  expect((await db.pool.query('SELECT wharf.complete($1, $2) AS ok', [ids.a![0], byId.get(ids.a![0]!)!.lease_epoch])).rows[0].ok).toBe(true);
  expect((await db.pool.query(`SELECT wharf.fail($1, $2, 'permanent', 'SyntaxError') AS state`,
    [ids.b![0], byId.get(ids.b![0]!)!.lease_epoch])).rows[0].state).toBe('DEAD');
  const held = byId.get(ids.c![0]!)!;
  const second = await claim(10);
  expect(second.map((lease) => lease.id).sort()).toEqual([ids.a![1], ids.b![1]].sort());
  const states = async () => (await db.pool.query<{ state: string; n: number }>(
    'SELECT state, count(*)::int AS n FROM wharf.provider_event GROUP BY state ORDER BY state')).rows;
  expect(await states()).toEqual([
    { state: 'DEAD', n: 1 }, { state: 'DONE', n: 1 }, { state: 'LEASED', n: 3 }, { state: 'QUEUED', n: 11 },
  ]);

  const result = await runWharf(['migrate'], { DATABASE_URL: db.url });
  expect(result.stderr).not.toMatch(/error/i);
  expect(result.code).toBe(0);

  // The leases held across the upgrade: no scope is leased twice ...
  expect(await claim(10)).toEqual([]);
  await expect(db.pool.query(`UPDATE wharf.provider_event SET state = 'LEASED' WHERE id = $1`, [ids.c![1]]))
    .rejects.toMatchObject({ code: '23505' });
  // ... and the live worker's lease renews, records a step and completes under its epoch.
  expect((await db.pool.query('SELECT wharf.renew($1, $2) AS ok', [held.id, held.lease_epoch])).rows[0].ok).toBe(true);
  expect((await db.pool.query(`SELECT wharf.step($1, $2, 'after-upgrade') AS ok`, [held.id, held.lease_epoch])).rows[0].ok).toBe(true);
  expect((await db.pool.query('SELECT wharf.complete($1, $2) AS ok', [held.id, held.lease_epoch])).rows[0].ok).toBe(true);
  for (const lease of second) {
    expect((await db.pool.query('SELECT wharf.complete($1, $2) AS ok', [lease.id, lease.lease_epoch])).rows[0].ok).toBe(true);
  }

  // Every active scope drains in id order; the paused workspace's rows wait.
  const handled: Record<string, string[]> = { a: [], b: [], c: [], p: [] };
  for (let leases = await claim(10); leases.length > 0; leases = await claim(10)) {
    for (const lease of leases) {
      handled[lease.subject.slice('repo:'.length)]!.push(lease.id);
      await db.pool.query('SELECT wharf.complete($1, $2)', [lease.id, lease.lease_epoch]);
    }
  }
  expect(handled).toEqual({ a: ids.a!.slice(2), b: ids.b!.slice(2), c: ids.c!.slice(1), p: [] });

  // Resumed, the held rows come in order; the dead letter replays and runs.
  await db.pool.query(`SELECT wharf.set_workspace_state(2, 'ACTIVE')`);
  expect((await db.pool.query(`SELECT wharf.replay(1, $1, 'ops') AS ok`, [ids.b![0]])).rows[0].ok).toBe(true);
  for (let leases = await claim(10); leases.length > 0; leases = await claim(10)) {
    for (const lease of leases) {
      handled[lease.subject.slice('repo:'.length)]!.push(lease.id);
      await db.pool.query('SELECT wharf.complete($1, $2)', [lease.id, lease.lease_epoch]);
    }
  }
  expect(handled.p).toEqual(ids.p);
  expect(handled.b!.at(-1)).toBe(ids.b![0]);
  expect(await states()).toEqual([{ state: 'DONE', n: 16 }]);
  expect((await db.pool.query('SELECT count(*)::int AS n FROM wharf.scope')).rows[0].n).toBe(0);
});
