// sql/75-connection-secrets.sql and the edge's per-isolate cache of it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConnectionCache } from '../../edge/connection-cache.js';
import { hashGitLabToken } from '../../edge/adapters/index.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { freshId, seedConnection, type Provider } from '../support/edge-fixtures.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

function connection(provider: Provider, secret?: string) {
  return seedConnection(db.pool, { workspace: freshId(), provider, source: `https://${provider}.example.com`, kind: 'webhook',
                                   externalId: String(freshId()), subjects: [], secret });
}

async function endpoint(id: number) {
  const { rows } = await db.pool.query('SELECT * FROM wharf.connection_endpoint($1)', [id]);
  return rows;
}

async function sqlstate(promise: Promise<unknown>): Promise<string | undefined> {
  return promise.then(() => undefined, (error: { code?: string }) => error.code);
}

describe('wharf.set_connection_secret and wharf.connection_endpoint', () => {
  it('keep a GitLab token only as its SHA-256', async () => {
    const id = await connection('gitlab', 'glpat-secret-token');
    expect(await endpoint(id)).toEqual([{ provider: 'gitlab', source: 'https://gitlab.example.com', route: {},
                                          token_sha256: await hashGitLabToken('glpat-secret-token'), signing_key: null }]);
    const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM wharf.connection_secret WHERE connection_id = $1
                                            AND (signing_key IS NOT NULL OR position('glpat' in encode(token_sha256, 'escape')) > 0)`, [id]);
    expect(rows[0].n).toBe(0);
  });

  it('rotate a key in place and bump the connection generation', async () => {
    const id = await connection('outline', 'first-key');
    const generation = async () => (await db.pool.query('SELECT generation FROM wharf.connection WHERE id = $1', [id])).rows[0].generation;
    const before = Number(await generation());
    await db.pool.query('SELECT wharf.set_connection_secret($1, $2)', [id, 'second-key']);
    expect((await endpoint(id))[0].signing_key).toBe('second-key');
    expect(Number(await generation())).toBe(before + 1);
  });

  it('return no row for an unknown connection, and go with a deleted one', async () => {
    expect(await endpoint(987654321)).toEqual([]);
    const id = await connection('forgejo', 'key');
    await db.pool.query('DELETE FROM wharf.connection WHERE id = $1', [id]);
    expect((await db.pool.query('SELECT 1 FROM wharf.connection_secret WHERE connection_id = $1', [id])).rows).toEqual([]);
  });

  it('refuse NULLs, unknown connections, app-level providers and malformed Standard Webhooks keys', async () => {
    const set = (id: number | null, secret: string | null) => db.pool.query('SELECT wharf.set_connection_secret($1, $2)', [id, secret]);
    expect(await sqlstate(set(null, 'x'))).toBe('22004');
    expect(await sqlstate(set(await connection('forgejo'), ''))).toBe('22004');
    expect(await sqlstate(set(987654321, 'x'))).toBe('P0002');
    expect(await sqlstate(set(await connection('github'), 'x'))).toBe('22023');
    expect(await sqlstate(set(await connection('slack'), 'x'))).toBe('22023');
    expect(await sqlstate(set(await connection('generic'), 'not-whsec'))).toBe('22023');
    expect(await sqlstate(set(await connection('generic'), `whsec_${Buffer.from('k').toString('base64')}`))).toBeUndefined();
  });
});

describe('the connection cache', () => {
  it('answers from memory until the TTL passes, then sees a rotated secret', async () => {
    const id = await connection('forgejo', 'old-key');
    let clock = 0;
    let lookups = 0;
    const database = db.pool;
    const cache = createConnectionCache(
      { query: (text, params) => { lookups += 1; return database.query(text, params); } },
      { ttlMs: 1000, now: () => clock },
    );
    const [a, b] = await Promise.all([cache.get(id), cache.get(id)]);
    expect(a?.signingKey).toBe('old-key');
    expect(b).toBe(a);
    await db.pool.query('SELECT wharf.set_connection_secret($1, $2)', [id, 'new-key']);
    clock = 999;
    expect((await cache.get(id))?.signingKey).toBe('old-key');
    clock = 1001;
    expect((await cache.get(id))?.signingKey).toBe('new-key');
    expect(lookups).toBe(2);
  });

  it('remembers an unknown connection, and forgets a failed lookup', async () => {
    let lookups = 0;
    let fail = true;
    const database = db.pool;
    const cache = createConnectionCache({
      query: (text, params) => {
        lookups += 1;
        return fail ? Promise.reject(new Error('down')) : database.query(text, params);
      },
    }, { ttlMs: 60_000 });
    await expect(cache.get(987654321)).rejects.toThrow('down');
    fail = false;
    expect(await cache.get(987654321)).toBeUndefined();
    expect(await cache.get(987654321)).toBeUndefined();
    expect(lookups).toBe(2);
  });
});
