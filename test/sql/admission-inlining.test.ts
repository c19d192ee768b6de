// Admission calls no SQL-language function that the planner leaves as a call
// (sql/80-admission.sql). A SQL function is inlined into its caller when its
// body is one expression without FROM or sub-select and its arguments are
// cheap; one that is not runs through the SQL-function executor, which parses
// and plans its body again in every transaction (and for every row of a
// trigger). Four such calls were a quarter of wharf.admit's instructions.
//
// track_functions = 'all' counts every PL/pgSQL and SQL function call, but an
// inlined SQL function is no call at all: the counts of one transaction
// (pg_stat_xact_user_functions, which no other session can add to) must name
// PL/pgSQL functions only. Counted in a warm session, as the edge's pooled
// sessions run: a session's first five executions of a statement plan it
// with its arguments as constants, and a call to an IMMUTABLE SQL function
// of constants is then evaluated by the planner (a call) instead of inlined.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { flushStatistics } from '../support/statistics.js';

/** Rolled-back runs of the work before the counted one: past the planner's five custom plans. */
const warmRuns = 6;

const source = 'https://github.com';
let db: TestDatabase;
let connectionSigned: number;

beforeAll(async () => {
  db = await createTestDatabase();
  await db.pool.query('SELECT wharf.upsert_workspace(1), wharf.upsert_workspace(2)');
  const { rows } = await db.pool.query<{ id: string }>(
    `SELECT wharf.upsert_connection(1, 'github', $1, 'app_installation', '7') AS id`, [source]);
  await db.pool.query(`SELECT wharf.subscribe($1, 'repo:acme/api')`, [rows[0]!.id]);
  const gitlab = await db.pool.query<{ id: string }>(
    `SELECT wharf.upsert_connection(2, 'gitlab', 'https://gitlab.com', 'webhook', 'hook-1') AS id`);
  connectionSigned = Number(gitlab.rows[0]!.id);
  await db.pool.query(`SELECT wharf.subscribe($1, 'project:42')`, [connectionSigned]);
});
afterAll(async () => {
  await db?.drop();
});

interface Called { name: string; language: string; calls: number }

/** The functions of schema wharf that `work` called, with their language, counted in its own transaction. */
async function functionsCalledBy(work: (client: pg.Client) => Promise<unknown>): Promise<Called[]> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    await client.query(`SET track_functions = 'all'`);
    for (let run = 0; run < warmRuns; run += 1) {
      await client.query('BEGIN');
      await work(client);
      await client.query('ROLLBACK');
    }
    // The warm runs' counts leave the session's pending counts.
    await flushStatistics(client);
    await client.query('BEGIN');
    await work(client);
    const { rows } = await client.query<{ name: string; language: string; calls: string }>(
      `SELECT f.funcname AS name, l.lanname AS language, f.calls
         FROM pg_stat_xact_user_functions f
         JOIN pg_proc p ON p.oid = f.funcid JOIN pg_language l ON l.oid = p.prolang
        WHERE f.schemaname = 'wharf'
        ORDER BY 1`);
    await client.query('ROLLBACK');
    return rows.map((row) => ({ name: row.name, language: row.language, calls: Number(row.calls) }));
  } finally {
    await client.end();
  }
}

const push = (key: string, extra: Record<string, unknown> = {}) => ({
  provider: 'github', source, delivery_key: key, event_type: 'push', route: { installation_id: '7' },
  subjects: ['repo:acme/api', 'org:acme'], payload: { ref: 'refs/heads/main' }, headers: { 'x-github-event': 'push' },
  body_sha256: null, ...extra,
});

describe('admission and inlining', () => {
  const cases: [string, (client: pg.Client) => Promise<unknown>][] = [
    ['admit, a new provider-signed delivery with a body digest', (client) => client.query(
      `SELECT wharf.admit('github', $1, 'd-1', 'push', '{"installation_id": "7"}', '{repo:acme/api}', '{"a": 1}',
                          '{"x-github-event": "push"}', $2)`, [source, 'a'.repeat(64)])],
    ['admit, the same delivery again (a duplicate)', async (client) => {
      for (let n = 0; n < 2; n += 1) {
        await client.query(`SELECT wharf.admit('github', $1, 'd-2', 'push', '{"installation_id": "7"}', '{repo:acme/api}', '{}', '{}')`,
          [source]);
      }
    }],
    ['admit, a connection-signed delivery', (client) => client.query(
      `SELECT wharf.admit('gitlab', 'https://gitlab.com', 'g-1', 'Push Hook', jsonb_build_object('connection_id', $1::bigint),
                          '{project:42}', '{}', '{}')`, [connectionSigned])],
    ['admit, an installation control event', (client) => client.query(
      `SELECT wharf.admit('github', $1, 'c-1', 'installation', '{"installation_id": "7", "control": true}', '{}',
                          '{"action": "created", "installation": {"id": 7}}', '{}')`, [source])],
    ['admit, a delivery dropped for an unknown source', (client) => client.query(
      `SELECT wharf.admit('github', $1, 'u-1', 'push', '{"installation_id": "999"}', '{repo:acme/api}', '{}', '{}')`, [source])],
    ['admit_many, three deliveries (one repeated) and a malformed one', (client) => client.query(
      'SELECT wharf.admit_many($1::jsonb)',
      [JSON.stringify([push('m-1'), push('m-2'), push('m-1'), { ...push('m-3'), provider: 'nobody' }])])],
  ];

  for (const [name, work] of cases) {
    it(`${name}: calls PL/pgSQL functions only`, async () => {
      const called = await functionsCalledBy(work);
      // It counted something: the entry point itself.
      expect(called.map((f) => f.name)).toEqual(expect.arrayContaining([expect.stringMatching(/^admit(_many)?$/)]));
      expect(called.filter((f) => f.language !== 'plpgsql')).toEqual([]);
    });
  }

  it('would see a SQL function that is not inlined', async () => {
    // The check's own proof: a SQL function whose body has a sub-select is a call.
    await db.pool.query(`CREATE FUNCTION wharf.test_not_inlined(p bigint) RETURNS boolean LANGUAGE sql STABLE
                         AS $$ SELECT EXISTS (SELECT FROM wharf.workspace WHERE id = p) $$`);
    try {
      const called = await functionsCalledBy((client) => client.query('SELECT wharf.test_not_inlined(1)'));
      expect(called).toEqual([{ name: 'test_not_inlined', language: 'sql', calls: 1 }]);
    } finally {
      await db.pool.query('DROP FUNCTION wharf.test_not_inlined(bigint)');
    }
  });
});
