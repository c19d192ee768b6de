// Admission finds a delivery's source and recipients through the indexes that
// lead to them, whatever the statistics say (sql/80-admission.sql): the
// source by its installation (uq_connection_installation), the recipients by
// the routed subjects (ix_subscription_recipients), each subscriber by
// primary key. At 10,000 connections on one source a plan that walks the
// source's connections, or the installation's thousand subscriptions, reads
// thousands of index entries per delivery.
//
// The statistics states are pinned, not left to autovacuum (which analyzes
// whenever enough rows changed, so that an unpinned test checked whichever
// state it happened upon): autovacuum is off for the three tables, and each
// state is made by hand: never analyzed, one table analyzed (either), all.
// Each state is read by a new session, whose cached plans are made under it.
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { flushStatistics } from '../support/statistics.js';

const source = 'https://github.com';
const workspaces = 1_000;
const installationsPerWorkspace = 10;
const repositories = 1_000;
const deliveries = 30;
const tables = ['workspace', 'connection', 'subscription'] as const;

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
  for (const table of tables) await db.pool.query(`ALTER TABLE wharf.${table} SET (autovacuum_enabled = false)`);
  // The fixture is loaded straight into the tables, as their owner: 10,000
  // upserts would take longer than the reads under test. One session, whose
  // counts are flushed at the end: the subscriptions' foreign key checks
  // read 11,000 connection index entries, which a late flush put into the
  // first window measured below.
  const loader = await db.connect();
  await loader.query(`INSERT INTO wharf.workspace (id) SELECT generate_series(1, $1::int)`, [workspaces]);
  await loader.query(
    `INSERT INTO wharf.connection (workspace_id, provider, source, kind, external_id)
     SELECT w, 'github', $1, 'app_installation', (w * 100 + k)::text
       FROM generate_series(1, $2::int) w, generate_series(1, $3::int) k`,
    [source, workspaces, installationsPerWorkspace]);
  // Installation 101 (workspace 1) subscribes to a thousand repositories;
  // every other one to a repository of its own.
  await loader.query(
    `INSERT INTO wharf.subscription (connection_id, subject)
     SELECT c.id, 'repo:acme/r' || k FROM wharf.connection c, generate_series(1, $1::int) k WHERE c.external_id = '101'`,
    [repositories]);
  await loader.query(
    `INSERT INTO wharf.subscription (connection_id, subject)
     SELECT c.id, 'repo:other/r' || c.external_id FROM wharf.connection c WHERE c.external_id <> '101'`);
  await flushStatistics(loader);
  await loader.end();
});
afterAll(async () => {
  await db?.drop();
});

/** Index entries read from the indexes of `table`, as the statistics hold them once `client`'s are flushed. */
async function indexReads(client: pg.Client, table: string): Promise<number> {
  await flushStatistics(client);
  const { rows } = await db.pool.query<{ reads: string }>(
    `SELECT coalesce(sum(idx_tup_read), 0) AS reads FROM pg_stat_user_indexes WHERE schemaname = 'wharf' AND relname = $1`,
    [table]);
  return Number(rows[0]!.reads);
}

interface Reads {
  subscription: number;
  connection: number;
}

/** Admits `deliveries` pushes on a new session, one admit each and then as one admit_many; the index entries each way read. */
async function admitPushes(label: string): Promise<{ admit: Reads; admitMany: Reads }> {
  const client = await db.connect();
  const push = (n: number) => ({
    provider: 'github', source, delivery_key: `${label}-${n}`, event_type: 'push', route: { installation_id: '101' },
    subjects: [`repo:acme/r${1 + ((n * 37) % repositories)}`, 'org:acme'], payload: { ref: 'main' }, headers: {},
  });
  const reads = async (work: () => Promise<void>): Promise<Reads> => {
    const before = { subscription: await indexReads(client, 'subscription'), connection: await indexReads(client, 'connection') };
    await work();
    return {
      subscription: (await indexReads(client, 'subscription')) - before.subscription,
      connection: (await indexReads(client, 'connection')) - before.connection,
    };
  };
  try {
    // Past the five calls after which PL/pgSQL caches a generic plan.
    const admit = await reads(async () => {
      for (let n = 0; n < deliveries; n += 1) {
        const d = push(n);
        const { rows } = await client.query<{ receipt: { events: { outcome: string }[] } }>(
          `SELECT wharf.admit($1, $2, $3, $4, $5, $6, $7, '{}') AS receipt`,
          [d.provider, d.source, d.delivery_key, d.event_type, d.route, d.subjects, d.payload]);
        expect(rows[0]!.receipt.events.map((event) => event.outcome)).toEqual(['stored']);
      }
    });
    const admitMany = await reads(async () => {
      const batch = Array.from({ length: deliveries }, (_, n) => ({ ...push(n), delivery_key: `${label}-many-${n}` }));
      const { rows } = await client.query<{ receipts: { events: { outcome: string }[] }[] }>(
        'SELECT wharf.admit_many($1) AS receipts', [JSON.stringify(batch)]);
      expect(rows[0]!.receipts.flatMap((receipt) => receipt.events.map((event) => event.outcome)))
        .toEqual(Array(deliveries).fill('stored'));
    });
    return { admit, admitMany };
  } finally {
    await client.end();
  }
}

/** Which of the three tables have statistics (pg_statistic rows). */
async function analyzed(): Promise<string[]> {
  const { rows } = await db.pool.query<{ relname: string }>(
    `SELECT DISTINCT c.relname::text AS relname FROM pg_statistic s JOIN pg_class c ON c.oid = s.starelid
      WHERE c.relnamespace = 'wharf'::regnamespace AND c.relname = ANY ($1) ORDER BY 1`, [tables]);
  return rows.map((row) => row.relname);
}

/** Drops the statistics of `table`, as if it had never been analyzed (superuser). */
async function forget(table: string): Promise<void> {
  await db.pool.query(`DELETE FROM pg_statistic WHERE starelid = $1::regclass`, [`wharf.${table}`]);
}

// Per delivery, two reads of one subject's subscriptions (a few entries) and
// of a few connections by primary key, and the source by its installation.
const bound = deliveries * 12;

describe.each([
  { state: 'never analyzed', make: async () => {}, expected: [] },
  { state: 'the connections alone analyzed', make: () => db.pool.query('ANALYZE wharf.connection'), expected: ['connection'] },
  {
    state: 'the subscriptions alone analyzed',
    make: async () => { await forget('connection'); await db.pool.query('ANALYZE wharf.subscription'); },
    expected: ['subscription'],
  },
  { state: 'every table analyzed', make: () => db.pool.query('ANALYZE wharf.workspace, wharf.connection, wharf.subscription'),
    expected: ['connection', 'subscription', 'workspace'] },
])('with $state', ({ state, make, expected }) => {
  it('reads only the routed subjects\' subscriptions and the connections they name', async () => {
    await make();
    expect(await analyzed()).toEqual(expected);
    const reads = await admitPushes(state.replace(/\W+/g, '-'));
    for (const way of [reads.admit, reads.admitMany]) {
      expect(way.subscription).toBeGreaterThan(0);
      expect(way.subscription).toBeLessThanOrEqual(bound);
      expect(way.connection).toBeLessThanOrEqual(bound);
    }
  });
});

describe('upsert_connection', () => {
  it('finds a connection by its natural key through the index, not by walking the workspace\'s connections', async () => {
    const client = await db.connect();
    try {
      const upserts = 200;
      const upsert = async () => {
        for (let n = 0; n < upserts; n += 1) {
          await client.query(`SELECT wharf.upsert_connection(2, 'gitlab', 'https://gitlab.example.com', 'webhook', $1)`, [`hook-${n}`]);
        }
      };
      await upsert();
      const before = await indexReads(client, 'connection');
      await upsert();  // every one found: the natural key's lookup alone
      const reads = (await indexReads(client, 'connection')) - before;
      // `external_id IS NOT DISTINCT FROM` walked the 200 webhooks for each: 20,000 entries.
      expect(reads).toBeGreaterThan(0);
      expect(reads).toBeLessThanOrEqual(upserts * 3);
    } finally {
      await client.end();
    }
  });
});
