// Who may try tokens, and how often: failed authentications are throttled per
// client (429 with Retry-After), a blocked client learns nothing about the
// tokens it tries, clients do not affect each other, the throttle forgets
// after its window and remembers a bounded number of clients. And the admin
// token itself: a weak one is never accepted.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operatorApi } from '../../operator/api/app.js';
import { checkAdminToken } from '../../operator/api/auth.js';
import { AuthThrottle, defaultClientKey, networkBucket } from '../../operator/api/throttle.js';
import { createApiToken } from '../../operator/sql/operator.js';
import { adminToken } from '../support/api-client.js';
import { createWorkspace } from '../support/api-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { nodeEnv, operatorClient, serveOperatorApi } from '../support/operator-client.js';

let db: TestDatabase;
let workspaceToken: string;
const A = 501;
const wrong = (i: number) => `wrong-token-${i}-${'x'.repeat(24)}`;

beforeAll(async () => {
  db = await createTestDatabase();
  await createWorkspace(db.pool, A);
  workspaceToken = (await createApiToken(db.pool, String(A), 'auth-test')).token;
});

afterAll(async () => {
  await db?.drop();
});

/** A clock the test moves (milliseconds). */
function testClock() {
  let now = 1_000_000;
  return { now: () => now, advance: (ms: number) => { now += ms; } };
}

describe('failed authentications', () => {
  it('a burst of 300 wrong tokens from one client is cut off with 429 and Retry-After', async () => {
    const api = operatorClient({ db: db.pool, adminToken });
    const env = nodeEnv('203.0.113.7');
    const statuses: number[] = [];
    let limited: Awaited<ReturnType<typeof api>> | undefined;
    for (let i = 0; i < 300; i++) {
      const response = await api('GET', '/workspaces', { token: wrong(i), env });
      statuses.push(response.status);
      if (response.status === 429) limited ??= response;
    }
    // The default: 10 failures per client and minute.
    expect(statuses.slice(0, 10)).toEqual(Array(10).fill(401));
    expect(statuses.slice(10)).toEqual(Array(290).fill(429));
    expect(limited!.body).toEqual({
      error: 'too_many_requests', message: 'too many failed authentications from this client; retry later',
    });
    const retryAfter = Number(limited!.headers.get('retry-after'));
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(limited!.headers.get('www-authenticate')).toBeNull();
    expect(limited!.headers.get('cache-control')).toBe('no-store');
  });

  it('a concurrent burst of 300 workspace-shaped guesses (each a database lookup) is cut off at the limit', async () => {
    const api = operatorClient({ db: db.pool, adminToken });
    const env = nodeEnv('203.0.113.8');
    const guesses = Array.from({ length: 300 }, (_, i) => `wharf_ws_${i.toString(16).padStart(64, '0')}`);
    const statuses = await Promise.all(guesses.map(async (token) => (await api('GET', `/workspaces/${A}/events`, { token, env })).status));
    expect(statuses.filter((status) => status === 401)).toHaveLength(10);
    expect(statuses.filter((status) => status === 429)).toHaveLength(290);
  });

  it('many good requests at once from one client are all served (they wait for each other, never 429)', async () => {
    const api = operatorClient({ db: db.pool, adminToken, authThrottle: { maxFailures: 3 } });
    const env = nodeEnv('203.0.113.9');
    const statuses = await Promise.all(Array.from({ length: 40 }, async () =>
      (await api('GET', `/workspaces/${A}/events?limit=1`, { token: workspaceToken, env })).status));
    expect(statuses).toEqual(Array(40).fill(200));
  });

  it('a blocked client learns nothing, not even from the right token; other clients are not affected', async () => {
    const api = operatorClient({ db: db.pool, adminToken, authThrottle: { maxFailures: 3 } });
    const attacker = nodeEnv('198.51.100.1');
    const operator = nodeEnv('198.51.100.2');
    for (let i = 0; i < 3; i++) expect((await api('GET', '/workspaces', { token: wrong(i), env: attacker })).status).toBe(401);
    expect((await api('GET', '/workspaces', { token: wrong(3), env: attacker })).status).toBe(429);
    expect((await api('GET', '/workspaces', { token: adminToken, env: attacker })).status).toBe(429);
    expect((await api('GET', `/workspaces/${A}/events`, { token: workspaceToken, env: attacker })).status).toBe(429);

    expect((await api('GET', '/workspaces', { token: adminToken, env: operator })).status).toBe(200);
    expect((await api('GET', `/workspaces/${A}/events`, { token: workspaceToken, env: operator })).status).toBe(200);
    // Another client's wrong token is counted against it alone.
    expect((await api('GET', '/workspaces', { token: wrong(9), env: operator })).status).toBe(401);
    // The successes of another client reset nothing.
    expect((await api('GET', '/workspaces', { token: wrong(4), env: attacker })).status).toBe(429);
  });

  it('a success does not reset the client\'s own count (a workspace token holder guessing the admin token)', async () => {
    const api = operatorClient({ db: db.pool, adminToken, authThrottle: { maxFailures: 3 } });
    const env = nodeEnv('198.51.100.3');
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) {
      statuses.push((await api('GET', '/workspaces', { token: wrong(i), env })).status);
      statuses.push((await api('GET', `/workspaces/${A}/events`, { token: workspaceToken, env })).status);
    }
    expect(statuses).toEqual([401, 200, 401, 200, 401, 429, 429, 429]);
  });

  it('forgets a client after its window', async () => {
    const clock = testClock();
    const api = operatorClient({ db: db.pool, adminToken, authThrottle: { maxFailures: 2, windowMs: 60_000, now: clock.now } });
    const env = nodeEnv('198.51.100.4');
    await api('GET', '/workspaces', { token: wrong(1), env });
    await api('GET', '/workspaces', { token: wrong(2), env });
    clock.advance(20_500);
    const blocked = await api('GET', '/workspaces', { token: adminToken, env });
    expect(blocked.status).toBe(429);
    expect(blocked.headers.get('retry-after')).toBe('40');
    clock.advance(39_500);
    expect((await api('GET', '/workspaces', { token: adminToken, env })).status).toBe(200);
    expect((await api('GET', '/workspaces', { token: wrong(3), env })).status).toBe(401);
    expect((await api('GET', '/workspaces', { token: wrong(4), env })).status).toBe(401);
    expect((await api('GET', '/workspaces', { token: wrong(5), env })).status).toBe(429);
  });

  it('does not count a request without a token (it guesses nothing)', async () => {
    const api = operatorClient({ db: db.pool, adminToken, authThrottle: { maxFailures: 2 } });
    const env = nodeEnv('198.51.100.5');
    for (let i = 0; i < 20; i++) expect((await api('GET', '/workspaces', { env })).status).toBe(401);
    expect((await api('GET', '/workspaces', { token: adminToken, env })).status).toBe(200);
  });

  it('takes the client from clientKey when given', async () => {
    const api = operatorClient({
      db: db.pool, adminToken, authThrottle: { maxFailures: 1 }, clientKey: (c) => c.req.header('x-test-client'),
    });
    expect((await api('GET', '/workspaces', { token: wrong(1), headers: { 'x-test-client': 'a' } })).status).toBe(401);
    expect((await api('GET', '/workspaces', { token: wrong(2), headers: { 'x-test-client': 'a' } })).status).toBe(429);
    expect((await api('GET', '/workspaces', { token: adminToken, headers: { 'x-test-client': 'b' } })).status).toBe(200);
  });
});

describe('the default client key', () => {
  it('is the remote address @hono/node-server exposes, whatever X-Forwarded-For says', async () => {
    const served = await serveOperatorApi({ db: db.pool, adminToken, authThrottle: { maxFailures: 2 } });
    try {
      for (let i = 0; i < 2; i++) {
        const response = await served.call('GET', '/workspaces', { token: wrong(i), from: '127.0.0.2', headers: { 'x-forwarded-for': `10.0.0.${i}` } });
        expect(response.status).toBe(401);
      }
      const blocked = await served.call('GET', '/workspaces', { token: adminToken, from: '127.0.0.2', headers: { 'x-forwarded-for': '10.9.9.9' } });
      expect(blocked.status).toBe(429);
      expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
      expect((await served.call('GET', '/workspaces', { token: adminToken, from: '127.0.0.3' })).status).toBe(200);
    } finally {
      await served.close();
    }
  });

  it('groups an IPv6 client by its /64 and an IPv4-mapped address as IPv4', () => {
    expect(networkBucket('2001:db8:1:2:aaaa::1')).toBe(networkBucket('2001:0db8:0001:0002:ffff:1:2:3'));
    expect(networkBucket('2001:db8:1:2::1')).not.toBe(networkBucket('2001:db8:1:3::1'));
    expect(networkBucket('::ffff:192.0.2.1')).toBe('192.0.2.1');
    expect(networkBucket('fe80::1%eth0')).toBe(networkBucket('fe80::2'));
    expect(networkBucket('192.0.2.1')).toBe('192.0.2.1');
  });

  it('on Cloudflare (request.cf present) is CF-Connecting-IP, which a client cannot set there; elsewhere that header counts for nothing', async () => {
    const api = operatorClient({ db: db.pool, adminToken, authThrottle: { maxFailures: 1 } });
    const cf = { colo: 'TST' };
    expect((await api('GET', '/workspaces', { token: wrong(1), cf, headers: { 'cf-connecting-ip': '192.0.2.10' } })).status).toBe(401);
    expect((await api('GET', '/workspaces', { token: adminToken, cf, headers: { 'cf-connecting-ip': '192.0.2.10' } })).status).toBe(429);
    expect((await api('GET', '/workspaces', { token: adminToken, cf, headers: { 'cf-connecting-ip': '192.0.2.11' } })).status).toBe(200);

    // Without a known address (no Node socket, no cf) all callers share one
    // bucket: a header a client sets itself changes nothing.
    const shared = operatorClient({ db: db.pool, adminToken, authThrottle: { maxFailures: 1 } });
    expect((await shared('GET', '/workspaces', { token: wrong(1), headers: { 'cf-connecting-ip': '192.0.2.20' } })).status).toBe(401);
    expect((await shared('GET', '/workspaces', { token: adminToken, headers: { 'cf-connecting-ip': '192.0.2.21' } })).status).toBe(429);
  });

  it('is undefined (one shared bucket) when the runtime tells no address', async () => {
    const seen: (string | undefined)[] = [];
    const app = operatorApi({ db: db.pool, adminToken, clientKey: (c) => { const key = defaultClientKey(c); seen.push(key); return key; } });
    await app.request('/workspaces', { headers: { authorization: 'Bearer nope' } });
    await app.request('/workspaces', { headers: { authorization: 'Bearer nope' } }, nodeEnv('::ffff:192.0.2.1'));
    expect(seen).toEqual([undefined, '192.0.2.1']);
  });
});

describe('the throttle\'s memory', () => {
  it('holds at most maxClients clients; past that, new clients share one bucket and the blocked stay blocked', () => {
    const clock = testClock();
    const throttle = new AuthThrottle({ maxFailures: 2, windowMs: 1000, maxClients: 100, now: clock.now });
    throttle.recordFailure('blocked');
    throttle.recordFailure('blocked');
    for (let i = 0; i < 100_000; i++) throttle.recordFailure(`spray-${i}`);
    expect(throttle.size).toBeLessThanOrEqual(101);
    expect(throttle.retryAfter('blocked')).toBe(1);
    // Every client the map has no room for is in the overflow bucket, long blocked by now.
    expect(throttle.retryAfter('newcomer')).toBe(1);
    expect(throttle.retryAfter('spray-5')).toBe(0);

    clock.advance(1000);
    expect(throttle.retryAfter('blocked')).toBe(0);
    expect(throttle.retryAfter('newcomer')).toBe(0);
    throttle.recordFailure('later');
    expect(throttle.size).toBeLessThanOrEqual(2);
  });
});

describe('the admin token', () => {
  it('checkAdminToken refuses short, repetitive and unsendable tokens with the reason', () => {
    expect(checkAdminToken('admin')).toMatch(/at least 32 characters/);
    expect(checkAdminToken('e2e-admin-token-4f0c9a7d2b1e')).toMatch(/at least 32 characters/);
    expect(checkAdminToken('a'.repeat(64))).toMatch(/at least 16 distinct characters/);
    expect(checkAdminToken('abababababababababababababababab12')).toMatch(/at least 16 distinct characters/);
    expect(checkAdminToken(`${'x'.repeat(10)} 0123456789abcdefghijklmnop`)).toMatch(/printable ASCII/);
    expect(checkAdminToken('ü0123456789abcdefghijklmnopqrstuv')).toMatch(/printable ASCII/);
    expect(checkAdminToken('hunter2')).not.toContain('hunter2');
  });

  it('checkAdminToken accepts the test token, a generated one and 32 characters of 16 kinds', () => {
    expect(adminToken.length).toBeGreaterThanOrEqual(32);
    expect(checkAdminToken(adminToken)).toBeUndefined();
    for (let i = 0; i < 100; i++) expect(checkAdminToken(randomBytes(24).toString('base64url'))).toBeUndefined();
    expect(checkAdminToken(randomBytes(32).toString('base64'))).toBeUndefined();
    expect(checkAdminToken('0123456789abcdef'.repeat(2))).toBeUndefined();
  });

  it('a weak admin token is never accepted: reported through onConfigurationError, workspace tokens still work', async () => {
    for (const weak of ['admin', 'a'.repeat(40)]) {
      const reasons: string[] = [];
      const api = operatorClient({ db: db.pool, adminToken: weak, onConfigurationError: (reason) => reasons.push(reason) });
      expect(reasons).toEqual([checkAdminToken(weak)]);
      const refused = await api('GET', '/workspaces', { token: weak });
      expect(refused).toMatchObject({ status: 401, body: { error: 'unauthorized' } });
      expect((await api('GET', `/workspaces/${A}/events`, { token: workspaceToken })).status).toBe(200);
    }
  });

  it('a weak admin token without onConfigurationError refuses to build the API', () => {
    expect(() => operatorApi({ db: db.pool, adminToken: 'admin' })).toThrow(/admin token.*at least 32 characters/);
  });

  it('no admin token (unset or empty) is no configuration error', () => {
    const reasons: string[] = [];
    operatorApi({ db: db.pool, onConfigurationError: (reason) => reasons.push(reason) });
    operatorApi({ db: db.pool, adminToken: '', onConfigurationError: (reason) => reasons.push(reason) });
    expect(reasons).toEqual([]);
  });
});
