// Connection secrets end to end: sql/75-connection-secrets.sql stores a GitLab
// token as its SHA-256 and a signing key only encrypted under the key ring;
// a rotation keeps the previous secret valid for `secret_overlap`; the
// operator's rotation and re-encryption; and the edge's per-isolate cache,
// which decrypts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encryptSecret, generateKeyRingEntry, parseKeyRing, type KeyRing } from '../../db/secret-box.js';
import { hashGitLabToken } from '../../edge/adapters/index.js';
import { createConnectionCache } from '../../edge/connection-cache.js';
import { reencryptSigningKeys, rotateConnectionSecret } from '../../operator/sql/connection-secrets.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { freshId, seedConnection, testSecretKeys, type Provider } from '../support/edge-fixtures.js';
import { sqlstate } from '../support/sqlstate.js';

let db: TestDatabase;
let ring: KeyRing;
beforeAll(async () => {
  db = await createTestDatabase();
  ring = (await parseKeyRing(testSecretKeys))!;
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

const cacheOf = (keyRing: KeyRing | undefined, options: { now?: () => number } = {}) =>
  createConnectionCache(db.pool, { ttlMs: 60_000, keyRing: Promise.resolve(keyRing), ...options });

describe('wharf.set_connection_secret and wharf.connection_endpoint', () => {
  it('keep a GitLab token only as its SHA-256', async () => {
    const id = await connection('gitlab', 'glpat-secret-token-0123456789');
    expect(await endpoint(id)).toEqual([{
      provider: 'gitlab', source: 'https://gitlab.example.com', route: {},
      token_sha256: await hashGitLabToken('glpat-secret-token-0123456789'), signing_key: null,
      previous_token_sha256: null, previous_signing_key: null,
    }]);
    const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM wharf.connection_secret WHERE connection_id = $1
                                            AND (signing_key IS NOT NULL OR position('glpat' in encode(token_sha256, 'escape')) > 0)`, [id]);
    expect(rows[0].n).toBe(0);
  });

  it('store no signing key in plaintext: read as the table owner, the table holds ciphertext only', async () => {
    const keys = ['outline-signing-key-0123456789', 'forgejo-signing-key-0123456789', `whsec_${Buffer.alloc(24, 7).toString('base64')}`];
    const ids = await Promise.all([
      connection('outline', keys[0]), connection('forgejo', keys[1]), connection('generic', keys[2]),
    ]);
    const { rows } = await db.pool.query<{ dump: string }>(
      'SELECT row_to_json(s)::text AS dump FROM wharf.connection_secret s WHERE connection_id = ANY ($1)', [ids]);
    expect(rows).toHaveLength(3);
    for (const row of rows) {
      for (const key of keys) expect(row.dump).not.toContain(key);
      expect(row.dump).toMatch(/"signing_key":"aes256gcm:test1:/);
    }
    // The constraint refuses plaintext even from a role that writes the table itself.
    expect(await sqlstate(db.pool.query(
      `UPDATE wharf.connection_secret SET signing_key = 'plaintext-key' WHERE connection_id = $1`, [ids[0]]))).toBe('23514');
  });

  it('refuse NULLs, unknown connections, app-level providers and a signing key that is not encrypted', async () => {
    const set = (id: number | null, secret: string | null) => db.pool.query('SELECT wharf.set_connection_secret($1, $2)', [id, secret]);
    expect(await sqlstate(set(null, 'x'))).toBe('22004');
    expect(await sqlstate(set(await connection('forgejo'), ''))).toBe('22004');
    expect(await sqlstate(set(987654321, 'x'))).toBe('P0002');
    expect(await sqlstate(set(await connection('github'), 'x'))).toBe('22023');
    expect(await sqlstate(set(await connection('slack'), 'x'))).toBe('22023');
    expect(await sqlstate(set(await connection('outline'), 'a-plaintext-signing-key'))).toBe('22023');
    expect(await sqlstate(set(await connection('generic'), `whsec_${Buffer.alloc(24).toString('base64')}`))).toBe('22023');
  });

  it('rotate in place, bump the generation, and keep the previous secret for secret_overlap only', async () => {
    const id = await connection('outline', 'first-key-0123456789abcdef');
    const generation = async () => Number((await db.pool.query('SELECT generation FROM wharf.connection WHERE id = $1', [id])).rows[0].generation);
    const before = await generation();
    await db.pool.query('SELECT wharf.set_connection_secret($1, $2)', [id, await encryptSecret(ring, id, 'second-key-0123456789abcdef')]);
    expect(await generation()).toBe(before + 1);
    expect((await cacheOf(ring).get(id))?.signingKeys).toEqual(['second-key-0123456789abcdef', 'first-key-0123456789abcdef']);

    await db.pool.query(`UPDATE wharf.connection_secret SET previous_valid_until = now() - interval '1 second' WHERE connection_id = $1`, [id]);
    expect((await cacheOf(ring).get(id))?.signingKeys).toEqual(['second-key-0123456789abcdef']);
  });

  it('return no row for an unknown connection, and go with a deleted one', async () => {
    expect(await endpoint(987654321)).toEqual([]);
    const id = await connection('forgejo', 'forgejo-key-0123456789abcdef');
    await db.pool.query('DELETE FROM wharf.connection WHERE id = $1', [id]);
    expect((await db.pool.query('SELECT 1 FROM wharf.connection_secret WHERE connection_id = $1', [id])).rows).toEqual([]);
  });
});

describe("the operator's rotation and the key ring", () => {
  it('refuses weak secrets with the rule, and rotation without a key ring for signing keys', async () => {
    const outline = String(await connection('outline'));
    const generic = String(await connection('generic'));
    await expect(rotateConnectionSecret(db.pool, ring, outline, 'short')).rejects.toThrow('at least 20 characters');
    await expect(rotateConnectionSecret(db.pool, ring, generic, `whsec_${Buffer.alloc(15).toString('base64')}`))
      .rejects.toThrow('at least 16 random bytes');
    await expect(rotateConnectionSecret(db.pool, undefined, outline)).rejects.toThrow('WHARF_SECRET_KEYS');
    const secret = await rotateConnectionSecret(db.pool, ring, generic);
    expect(secret).toMatch(/^whsec_/);
    expect((await cacheOf(ring).get(Number(generic)))?.signingKeys).toEqual([secret]);
  });

  it('re-encrypts every stored key under a new newest key, which then decrypts alone', async () => {
    const ids = await Promise.all(['outline', 'forgejo', 'generic'].map((provider) => connection(provider as Provider)));
    const secrets = await Promise.all(ids.map((id) => rotateConnectionSecret(db.pool, ring, String(id))));
    // A key stored in plaintext before release 0.2.0 (the constraint lets old rows be):
    const legacy = await connection('forgejo');
    await db.pool.query(`ALTER TABLE wharf.connection_secret DROP CONSTRAINT connection_secret_signing_key_encrypted`);
    await db.pool.query(`INSERT INTO wharf.connection_secret (connection_id, signing_key) VALUES ($1, 'legacy-plaintext-key-0123')`, [legacy]);
    await db.pool.query(`ALTER TABLE wharf.connection_secret ADD CONSTRAINT connection_secret_signing_key_encrypted
      CHECK (signing_key ~ '^aes256gcm:[A-Za-z0-9_.-]{1,32}:[A-Za-z0-9+/]+={0,2}:[A-Za-z0-9+/]+={0,2}$'
             AND previous_signing_key ~ '^aes256gcm:[A-Za-z0-9_.-]{1,32}:[A-Za-z0-9+/]+={0,2}:[A-Za-z0-9+/]+={0,2}$') NOT VALID`);
    expect((await cacheOf(undefined).get(legacy))?.signingKeys).toEqual(['legacy-plaintext-key-0123']);

    const rotated = (await parseKeyRing(`${generateKeyRingEntry('test2')},${testSecretKeys}`))!;
    const progress = await reencryptSigningKeys(db.pool, rotated);
    expect(progress.reencrypted).toBe(progress.total);
    expect(progress.total).toBeGreaterThanOrEqual(4);

    const newestOnly: KeyRing = { keys: [rotated.keys[0]!] };
    const cache = cacheOf(newestOnly);
    for (const [index, id] of ids.entries()) expect((await cache.get(id))?.signingKeys[0]).toBe(secrets[index]);
    expect((await cache.get(legacy))?.signingKeys).toEqual(['legacy-plaintext-key-0123']);
    const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM wharf.connection_secret
                                            WHERE signing_key NOT LIKE 'aes256gcm:test2:%' OR previous_signing_key NOT LIKE 'aes256gcm:test2:%'`);
    expect(rows[0].n).toBe(0);
    // The constraint now covers the old rows too.
    const { rows: constraint } = await db.pool.query(
      `SELECT convalidated FROM pg_constraint WHERE conname = 'connection_secret_signing_key_encrypted'`);
    expect(constraint).toEqual([{ convalidated: true }]);
  });

  it('a ciphertext copied to another connection does not decrypt', async () => {
    const [a, b] = await Promise.all([connection('outline', 'outline-key-a-0123456789'), connection('outline')]);
    const { rows } = await db.pool.query('SELECT signing_key FROM wharf.connection_secret WHERE connection_id = $1', [a]);
    await db.pool.query('SELECT wharf.set_connection_secret($1, $2)', [b, rows[0].signing_key]);
    await expect(cacheOf(ring).get(b)).rejects.toThrow(`does not decrypt`);
  });
});

describe('the connection cache', () => {
  it('answers from memory until the TTL passes, then sees a rotated secret', async () => {
    const id = await connection('forgejo', 'old-key-0123456789abcdefgh');
    let clock = 0;
    let lookups = 0;
    const database = db.pool;
    const cache = createConnectionCache(
      { query: (text, params) => { lookups += 1; return database.query(text, params); } },
      { ttlMs: 1000, now: () => clock, keyRing: Promise.resolve(ring) },
    );
    const [a, b] = await Promise.all([cache.get(id), cache.get(id)]);
    expect(a?.signingKeys).toEqual(['old-key-0123456789abcdefgh']);
    expect(b).toBe(a);
    await db.pool.query('SELECT wharf.set_connection_secret($1, $2)', [id, await encryptSecret(ring, id, 'new-key-0123456789abcdefgh')]);
    clock = 999;
    expect((await cache.get(id))?.signingKeys[0]).toBe('old-key-0123456789abcdefgh');
    clock = 1001;
    expect((await cache.get(id))?.signingKeys[0]).toBe('new-key-0123456789abcdefgh');
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
    }, { ttlMs: 60_000, keyRing: Promise.resolve(ring) });
    await expect(cache.get(987654321)).rejects.toThrow('down');
    fail = false;
    expect(await cache.get(987654321)).toBeUndefined();
    expect(await cache.get(987654321)).toBeUndefined();
    expect(lookups).toBe(2);
  });
});
