// The edge spends nothing on a request it will refuse: the free checks (the
// signature headers there and well formed, a declared body within the limit)
// come before any lookup of the endpoint; an unknown connection id costs one
// indexed lookup, as a known connection's first request does, and however
// many there are they cannot push a live connection out of the cache.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../db/database.js';
import { parseKeyRing } from '../../db/secret-box.js';
import { createEdgeApp } from '../../edge/app.js';
import { createConnectionCache } from '../../edge/connection-cache.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { edgeEnv, freshId, recorder, seedConnection, testSecretKeys } from '../support/edge-fixtures.js';

let db: TestDatabase;
let endpointLookups = 0;
/** The test database, counting the edge's endpoint lookups (wharf.connection_endpoint). */
let counting: Database;

beforeAll(async () => {
  db = await createTestDatabase();
  counting = {
    query(text, params) {
      if (text.includes('wharf.connection_endpoint')) endpointLookups += 1;
      return db.pool.query(text, params);
    },
  };
});
afterAll(async () => {
  await db?.drop();
});

/** How many endpoint lookups `work` made. */
async function lookupsOf(work: () => Promise<unknown>): Promise<number> {
  const before = endpointLookups;
  await work();
  return endpointLookups - before;
}

describe('through the app', () => {
  const maxBodyBytes = 1024;

  it('answers a missing or malformed signature 401 and a declared oversize body 413 without a lookup', async () => {
    const recorded = recorder();
    const app = createEdgeApp({ database: counting, env: { ...edgeEnv, WHARF_MAX_BODY_BYTES: String(maxBodyBytes) }, ...recorded });
    const id = await seedConnection(db.pool, {
      workspace: freshId(), provider: 'stripe', source: 'https://stripe.example', kind: 'webhook', externalId: null, subjects: [], secret: 'whsec_free_checks_0123456789',
    });
    const signature = `t=${Math.floor(Date.now() / 1000)},v1=${'a'.repeat(64)}`;
    const answers: number[] = [];
    const lookups = await lookupsOf(async () => {
      for (const path of [`/hooks/stripe/${id}`, `/hooks/stripe/${freshId()}`]) {
        answers.push((await app.request(path, { method: 'POST', body: '{}' })).status);
        answers.push((await app.request(path, { method: 'POST', body: '{}', headers: { 'stripe-signature': 'v1=nothex' } })).status);
        const big = 'x'.repeat(maxBodyBytes + 1);
        answers.push((await app.request(path, {
          method: 'POST', body: big, headers: { 'stripe-signature': signature, 'content-length': String(big.length) },
        })).status);
      }
    });
    expect(answers).toEqual([401, 401, 413, 401, 401, 413]);
    expect(lookups).toBe(0);
    // Well formed and within the limit: now the endpoint is looked up (once), and the signature checked.
    expect(await lookupsOf(async () => {
      for (let i = 0; i < 3; i++) {
        expect((await app.request(`/hooks/stripe/${id}`, { method: 'POST', body: '{}', headers: { 'stripe-signature': signature } })).status).toBe(401);
      }
    })).toBe(1);
  });
});

describe('the connection cache', () => {
  it('keeps a live connection however many unknown ids are asked for, each of which costs one lookup', async () => {
    const id = await seedConnection(db.pool, {
      workspace: freshId(), provider: 'stripe', source: 'https://stripe.example', kind: 'webhook', externalId: null, subjects: [], secret: 'whsec_cache_0123456789',
    });
    const cache = createConnectionCache(counting, { ttlMs: 60_000, keyRing: parseKeyRing(testSecretKeys), maxEntries: 4, maxUnknown: 4 });
    expect(await lookupsOf(async () => expect((await cache.get(id))?.signingKeys).toEqual(['whsec_cache_0123456789']))).toBe(1);
    const unknownIds = Array.from({ length: 50 }, () => 900_000_000 + freshId());
    expect(await lookupsOf(async () => {
      for (const unknown of unknownIds) expect(await cache.get(unknown)).toBeUndefined();
    })).toBe(unknownIds.length);
    // The live connection is still cached: no lookup.
    expect(await lookupsOf(async () => expect(await cache.get(id)).toBeDefined())).toBe(0);
    // The latest unknown ids are cached as unknown, the earliest made room for them.
    expect(await lookupsOf(() => cache.get(unknownIds.at(-1)!))).toBe(0);
    expect(await lookupsOf(() => cache.get(unknownIds[0]!))).toBe(1);
  });

  it('shares one lookup among concurrent requests for one id, known or not', async () => {
    const cache = createConnectionCache(counting, { ttlMs: 60_000, keyRing: parseKeyRing(testSecretKeys) });
    const unknown = 900_000_000 + freshId();
    expect(await lookupsOf(() => Promise.all(Array.from({ length: 10 }, () => cache.get(unknown))))).toBe(1);
  });
});
