// One lock order (contract v5, sql/20's lock_scopes): admit_many batches that
// fan out to the same scopes of three workspaces race complete_many batches
// given their leases in random order, over subjects whose order differs
// between the database's collation and JavaScript's (case, accents,
// punctuation). No statement may deadlock or fail, and everything admitted is
// handled once. Before, free_scopes locked the scopes it deleted before those
// it updated, and callers had to pre-sort in admission's order.
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

const github = 'https://github.com';
const subjects = ['a', 'B', '_c', 'é', 'Z', 'aa', 'Ä', 'b', 'e'].map((name) => `repo:acme/${name}`);
const seed = Number(process.env.WHARF_TEST_SEED ?? Date.now() % 100_000);

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
  for (const [workspace, installation] of [[1, '100'], [2, '200'], [3, '300']] as const) {
    await db.pool.query('SELECT wharf.upsert_workspace($1)', [workspace]);
    const { rows } = await db.pool.query<{ id: string }>(
      `SELECT wharf.upsert_connection($1, 'github', $2, 'app_installation', $3) AS id`, [workspace, github, installation]);
    for (const subject of subjects) await db.pool.query('SELECT wharf.subscribe($1, $2)', [rows[0]!.id, subject]);
  }
});

afterAll(async () => {
  await db?.drop();
});

function random(state: number): () => number {
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    return state / 2_147_483_648;
  };
}

function shuffled<T>(items: T[], rand: () => number): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i -= 1) {
    const j = Math.floor(rand() * (i + 1));
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy;
}

async function admitBatches(client: pg.Client, admitter: number, batches: number, rand: () => number): Promise<number> {
  let admitted = 0;
  for (let batch = 0; batch < batches; batch += 1) {
    const deliveries = Array.from({ length: 12 }, (_, n) => ({
      provider: 'github', source: github, delivery_key: `lock-${admitter}-${batch}-${n}`, event_type: 'push',
      route: { installation_id: '100' }, subjects: [subjects[Math.floor(rand() * subjects.length)]!],
      payload: { n }, headers: {},
    }));
    const { rows } = await client.query<{ receipts: Array<{ events?: unknown[]; error?: unknown }> }>(
      'SELECT wharf.admit_many($1::jsonb) AS receipts', [JSON.stringify(deliveries)]);
    for (const receipt of rows[0]!.receipts) {
      expect(receipt.error).toBeUndefined();
      admitted += receipt.events?.length ?? 0;
    }
  }
  return admitted;
}

async function completeBatches(client: pg.Client, admitting: () => boolean, rand: () => number): Promise<number> {
  let completed = 0;
  for (;;) {
    const { rows } = await client.query<{ id: string; lease_epoch: string }>(`SELECT id, lease_epoch FROM wharf.claim('lock-order', 16)`);
    if (rows.length === 0) {
      if (!admitting()) return completed;
      await new Promise((resolve) => setTimeout(resolve, 5));
      continue;
    }
    const leases = shuffled(rows, rand);
    const done = await client.query('SELECT wharf.complete_many($1::bigint[], $2::bigint[], $3::text[])', [
      leases.map((lease) => lease.id), leases.map((lease) => lease.lease_epoch), leases.map(() => 'handled')]);
    completed += done.rowCount ?? 0;
  }
}

it(`admit_many fan-outs and complete_many batches over the same scopes never deadlock (seed ${seed})`, async () => {
  const rand = random(seed);
  const admitters = await Promise.all(Array.from({ length: 4 }, () => db.connect()));
  const completers = await Promise.all(Array.from({ length: 2 }, () => db.connect()));
  try {
    let admitting = true;
    const completing = completers.map((client) => completeBatches(client, () => admitting, random(Math.floor(rand() * 1e9))));
    const admitted = await Promise.all(admitters.map((client, n) => admitBatches(client, n, 25, random(Math.floor(rand() * 1e9)))))
      .finally(() => {
        admitting = false;
      });
    const completed = (await Promise.all(completing)).reduce((sum, n) => sum + n, 0);
    const total = admitted.reduce((sum, n) => sum + n, 0);
    expect(total).toBe(4 * 25 * 12 * 3);  // every delivery fans out to the three workspaces
    expect(completed).toBe(total);
    const { rows } = await db.pool.query<{ state: string; n: number }>(
      'SELECT state, count(*)::int AS n FROM wharf.provider_event GROUP BY state');
    expect(rows).toEqual([{ state: 'DONE', n: total }]);
  } finally {
    await Promise.all([...admitters, ...completers].map((client) => client.end()));
  }
});
