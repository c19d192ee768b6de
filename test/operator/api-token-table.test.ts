// The token table (operator/api/token-table.ts): what a workspace token costs
// the database, and how soon a new or revoked one takes effect. A wrong token
// costs no query once the table is loaded; a missing token makes it reload
// within its budget, so a new token works at once while nobody floods and
// within reloadEveryMs while someone does; a token found there is confirmed
// by wharf.verify_token, so a revoked one stops at once. A role that may not
// read the table falls back to a lookup per token.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { onServer } from '../../cli/scratch-database.js';
import { Authenticator } from '../../operator/api/authenticator.js';
import { createApiToken, revokeApiToken } from '../../operator/sql/operator.js';
import { adminToken } from '../support/api-client.js';
import { createWorkspace } from '../support/api-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { countingDatabase, nodeEnv, operatorClient, type CountingDatabase } from '../support/operator-client.js';

let db: TestDatabase;
const A = 801;
const tableLoad = 'SELECT wharf.live_token_hashes() AS result';
const lookup = "SELECT wharf.verify_token(decode($1, 'hex')) AS result";
const guess = (i: number) => `wharf_ws_${i.toString(16).padStart(64, 'f')}`;

beforeAll(async () => {
  db = await createTestDatabase();
  await createWorkspace(db.pool, A);
});

afterAll(async () => {
  await db?.drop();
});

/** The API on a counted database, with a clock the test moves and a throttle that never gets in the way. */
function rig(database: pg.Pool = db.pool, onUnreadable?: () => void) {
  let now = 1_000_000;
  const counted: CountingDatabase = countingDatabase(database);
  const authenticator = new Authenticator(counted, {
    throttle: { maxFailures: 1_000_000, slowAfter: 1_000_000 },
    tokenTable: { now: () => now, ...(onUnreadable ? { onUnreadable } : {}) },
  });
  const api = operatorClient({ db: counted, adminToken, authenticator });
  const statusOf = async (token: string) => (await api('GET', `/workspaces/${A}/events`, { token, env: nodeEnv('192.0.2.1') })).status;
  /** The statements `work` cost the database. */
  const cost = async (work: () => Promise<unknown>) => {
    const before = counted.statements().length;
    await work();
    return counted.statements().slice(before);
  };
  return { statusOf, cost, authenticator, advance: (ms: number) => { now += ms; } };
}

describe('the token table', () => {
  it('refuses a wrong token without a query once loaded, until a miss is allowed to reload it', async () => {
    const { statusOf, cost, authenticator } = rig();
    expect(await cost(async () => expect(await statusOf(guess(1))).toBe(401))).toEqual([tableLoad]);
    // The burst: each of the next misses may reload, then none until the clock moves.
    for (let i = 2; i <= authenticator.tokens.reloadBurst; i++) expect(await cost(() => statusOf(guess(i)))).toEqual([tableLoad]);
    for (let i = 0; i < 200; i++) expect(await cost(() => statusOf(guess(100 + i)))).toEqual([]);
    // Not a workspace token's shape: not even the table is asked.
    expect(await cost(async () => expect(await statusOf('not-a-token-at-all-0123456789')).toBe(401))).toEqual([]);
  });

  it('lets a token created elsewhere work at once while nobody floods', async () => {
    const { statusOf, cost } = rig();
    expect(await statusOf(guess(1))).toBe(401);
    const created = await createApiToken(db.pool, String(A), 'calm');
    const statements = await cost(async () => expect(await statusOf(created.token)).toBe(200));
    expect(statements.slice(0, 2)).toEqual([tableLoad, lookup]);
  });

  it('lets a token created during a flood work within reloadEveryMs', async () => {
    const { statusOf, advance, authenticator } = rig();
    for (let i = 0; i < 50; i++) expect(await statusOf(guess(i))).toBe(401);
    const created = await createApiToken(db.pool, String(A), 'flooded');
    // The budget is spent: the table does not know the token yet.
    expect(await statusOf(created.token)).toBe(401);
    advance(authenticator.tokens.reloadEveryMs);
    expect(await statusOf(created.token)).toBe(200);
  });

  it('stops a revoked token at once, and forgets it: presenting it again is a miss like any wrong token', async () => {
    const { statusOf, cost, authenticator } = rig();
    const created = await createApiToken(db.pool, String(A), 'revoked-soon');
    expect(await statusOf(created.token)).toBe(200);
    expect(await revokeApiToken(db.pool, String(A), String(created.id))).toBe(true);
    expect(await cost(async () => expect(await statusOf(created.token)).toBe(401))).toEqual([lookup]);
    // Within the reload budget a miss reloads; past it, the revoked token costs nothing.
    for (let i = 1; i < authenticator.tokens.reloadBurst; i++) {
      expect(await cost(async () => expect(await statusOf(created.token)).toBe(401))).toEqual([tableLoad]);
    }
    expect(await cost(async () => expect(await statusOf(created.token)).toBe(401))).toEqual([]);
  });

  it('confirms every valid request with verify_token (which records last_used_at), and never reloads for it', async () => {
    const { statusOf, cost } = rig();
    const created = await createApiToken(db.pool, String(A), 'busy');
    expect(await statusOf(created.token)).toBe(200);
    for (let i = 0; i < 20; i++) {
      const statements = await cost(async () => expect(await statusOf(created.token)).toBe(200));
      expect(statements[0]).toBe(lookup);
      expect(statements).not.toContain(tableLoad);
    }
  });
});

describe('a role that may not read the table', () => {
  const role = `wharf_operator_old_${randomBytes(4).toString('hex')}`;
  let pool: pg.Pool;

  beforeAll(async () => {
    const password = randomBytes(12).toString('hex');
    await db.pool.query(`CREATE ROLE ${role} LOGIN PASSWORD '${password}'`);
    // What an operator role was granted before wharf.live_token_hashes existed, as far as this test needs.
    await db.pool.query(`GRANT USAGE ON SCHEMA wharf TO ${role}`);
    await db.pool.query(`GRANT EXECUTE ON FUNCTION wharf.verify_token(bytea),
      wharf.list_events(bigint, text, text, integer, bigint, text, text, timestamptz, timestamptz) TO ${role}`);
    const url = new URL(db.url);
    url.username = role;
    url.password = password;
    pool = new pg.Pool({ connectionString: url.toString(), max: 2 });
    pool.on('error', () => {});
  });

  afterAll(async () => {
    await pool?.end();
    // Its grants live in the test's database; the role itself on the server.
    await db.pool.query(`DROP OWNED BY ${role}`);
    await onServer(inject('postgresUrl'), async (client) => {
      await client.query(`DROP ROLE IF EXISTS ${role}`);
    });
  });

  it('still authenticates, looking every workspace-shaped token up as before, says so, and tries the table again later', async () => {
    let told = 0;
    const { statusOf, cost, advance, authenticator } = rig(pool, () => { told++; });
    const created = await createApiToken(db.pool, String(A), 'old-grants');
    expect(await cost(async () => expect(await statusOf(guess(1))).toBe(401))).toEqual([tableLoad, lookup]);
    expect(told).toBe(1);
    expect(await cost(async () => expect(await statusOf(guess(2))).toBe(401))).toEqual([lookup]);
    expect(await statusOf(created.token)).toBe(200);
    advance(authenticator.tokens.unreadableRetryMs);
    expect(await cost(async () => expect(await statusOf(guess(3))).toBe(401))).toEqual([tableLoad, lookup]);
    expect(told).toBe(2);

    // Once the role may, the table is used.
    await db.pool.query(`GRANT EXECUTE ON FUNCTION wharf.live_token_hashes() TO ${role}`);
    advance(authenticator.tokens.unreadableRetryMs);
    expect(await cost(async () => expect(await statusOf(guess(4))).toBe(401))).toEqual([tableLoad]);
    expect(await cost(async () => expect(await statusOf(created.token)).toBe(200))).toContain(lookup);
    expect(told).toBe(2);
  });
});
