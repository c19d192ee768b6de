// Who may try tokens, and what a wrong one costs: a valid token always
// authenticates, at once, whatever its client sent before; failed
// authentications are counted per client, slowed and then answered 429 with
// Retry-After; clients do not affect each other; the throttle forgets after
// its window and remembers a bounded number of clients. The client is the
// address the runtime tells, through X-Forwarded-For only as far as the
// trusted proxy hops say. And the admin token itself: a weak one is never accepted.
import { randomBytes } from 'node:crypto';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operatorApi } from '../../operator/api/app.js';
import { checkAdminToken } from '../../operator/api/auth.js';
import { Authenticator, type AuthenticatorOptions } from '../../operator/api/authenticator.js';
import { clientAddress, networkBucket, readTrustedProxyHops } from '../../operator/api/client-address.js';
import { AuthThrottle } from '../../operator/api/throttle.js';
import { createApiToken } from '../../operator/sql/operator.js';
import { adminToken } from '../support/api-client.js';
import { createWorkspace } from '../support/api-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { countingDatabase, nodeEnv, operatorClient, serveOperatorApi } from '../support/operator-client.js';

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

/** A sleep that records what the throttle asked for and returns at once. */
function recordedSleep() {
  const waited: number[] = [];
  return { waited, sleep: async (ms: number) => { waited.push(ms); } };
}

/** The API with its own Authenticator, which the test can look into. */
function apiWith(options: AuthenticatorOptions = {}) {
  const authenticator = new Authenticator(db.pool, options);
  return { api: operatorClient({ db: db.pool, adminToken, authenticator }), authenticator };
}

describe('failed authentications', () => {
  it('a burst of 300 wrong tokens from one client: five answered at once, five slowed, then 429 with Retry-After', async () => {
    const { waited, sleep } = recordedSleep();
    const { api } = apiWith({ throttle: { sleep } });
    const env = nodeEnv('203.0.113.7');
    const statuses: number[] = [];
    let limited: Awaited<ReturnType<typeof api>> | undefined;
    for (let i = 0; i < 300; i++) {
      const response = await api('GET', '/workspaces', { token: wrong(i), env });
      statuses.push(response.status);
      if (response.status === 429) limited ??= response;
    }
    // The default: 10 failures per client and minute, the last five of them slowed.
    expect(statuses.slice(0, 10)).toEqual(Array(10).fill(401));
    expect(statuses.slice(10)).toEqual(Array(290).fill(429));
    expect(waited).toEqual([250, 500, 1000, 2000, 2000]);
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

  it('slows for real by default: the sixth failure waits its 250 ms', async () => {
    const { api } = apiWith();
    const env = nodeEnv('203.0.113.6');
    for (let i = 0; i < 5; i++) expect((await api('GET', '/workspaces', { token: wrong(i), env })).status).toBe(401);
    const started = performance.now();
    expect((await api('GET', '/workspaces', { token: wrong(5), env })).status).toBe(401);
    expect(performance.now() - started).toBeGreaterThanOrEqual(240);
  });

  it('a concurrent burst of 300 workspace-shaped guesses costs one load of the token table, no lookup each', async () => {
    const counted = countingDatabase(db.pool);
    const authenticator = new Authenticator(counted, { throttle: { sleep: recordedSleep().sleep } });
    const api = operatorClient({ db: counted, adminToken, authenticator });
    const env = nodeEnv('203.0.113.8');
    const guesses = Array.from({ length: 300 }, (_, i) => `wharf_ws_${i.toString(16).padStart(64, '0')}`);
    const statuses = await Promise.all(guesses.map(async (token) => (await api('GET', `/workspaces/${A}/events`, { token, env })).status));
    expect(statuses.filter((status) => status === 401)).toHaveLength(10);
    expect(statuses.filter((status) => status === 429)).toHaveLength(290);
    expect(counted.statements()).toEqual(['SELECT wharf.live_token_hashes() AS result']);
  });

  it('a valid token from a client past its failures is served, neither counted nor delayed nor refused', async () => {
    const { waited, sleep } = recordedSleep();
    const { api, authenticator } = apiWith({ throttle: { maxFailures: 3, slowAfter: 1, sleep } });
    const attacker = nodeEnv('198.51.100.1');
    for (let i = 0; i < 3; i++) expect((await api('GET', '/workspaces', { token: wrong(i), env: attacker })).status).toBe(401);
    expect((await api('GET', '/workspaces', { token: wrong(3), env: attacker })).status).toBe(429);
    const [failures, delays, remembered] = [authenticator.throttle.failures('198.51.100.1'), waited.length, authenticator.throttle.size];

    expect((await api('GET', '/workspaces', { token: adminToken, env: attacker })).status).toBe(200);
    expect((await api('GET', `/workspaces/${A}/events`, { token: workspaceToken, env: attacker })).status).toBe(200);
    const many = await Promise.all(Array.from({ length: 40 }, async () =>
      (await api('GET', `/workspaces/${A}/events?limit=1`, { token: workspaceToken, env: attacker })).status));
    expect(many).toEqual(Array(40).fill(200));
    // The throttle was not asked: no count, no delay, nothing remembered.
    expect(authenticator.throttle.failures('198.51.100.1')).toBe(failures);
    expect(waited).toHaveLength(delays);
    expect(authenticator.throttle.size).toBe(remembered);
    // And the client's wrong tokens are still refused with 429.
    expect((await api('GET', '/workspaces', { token: wrong(4), env: attacker })).status).toBe(429);
  });

  it('counts each client alone', async () => {
    const { api } = apiWith({ throttle: { maxFailures: 3, sleep: recordedSleep().sleep } });
    const attacker = nodeEnv('198.51.100.11');
    const operator = nodeEnv('198.51.100.12');
    for (let i = 0; i < 4; i++) await api('GET', '/workspaces', { token: wrong(i), env: attacker });
    expect((await api('GET', '/workspaces', { token: wrong(9), env: operator })).status).toBe(401);
    expect((await api('GET', '/workspaces', { token: adminToken, env: operator })).status).toBe(200);
    expect((await api('GET', '/workspaces', { token: wrong(5), env: attacker })).status).toBe(429);
  });

  it('a success resets nothing: a workspace token\'s holder guessing the admin token is cut off all the same', async () => {
    const { api } = apiWith({ throttle: { maxFailures: 3, sleep: recordedSleep().sleep } });
    const env = nodeEnv('198.51.100.3');
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) {
      statuses.push((await api('GET', '/workspaces', { token: wrong(i), env })).status);
      statuses.push((await api('GET', `/workspaces/${A}/events`, { token: workspaceToken, env })).status);
    }
    expect(statuses).toEqual([401, 200, 401, 200, 401, 200, 429, 200]);
  });

  it('forgets a client after its window', async () => {
    const clock = testClock();
    const { api } = apiWith({ throttle: { maxFailures: 2, windowMs: 60_000, now: clock.now } });
    const env = nodeEnv('198.51.100.4');
    await api('GET', '/workspaces', { token: wrong(1), env });
    await api('GET', '/workspaces', { token: wrong(2), env });
    clock.advance(20_500);
    const blocked = await api('GET', '/workspaces', { token: wrong(3), env });
    expect(blocked.status).toBe(429);
    expect(blocked.headers.get('retry-after')).toBe('40');
    clock.advance(39_500);
    expect((await api('GET', '/workspaces', { token: wrong(4), env })).status).toBe(401);
    expect((await api('GET', '/workspaces', { token: wrong(5), env })).status).toBe(401);
    expect((await api('GET', '/workspaces', { token: wrong(6), env })).status).toBe(429);
  });

  it('does not count a request without a token (it guesses nothing)', async () => {
    const { api, authenticator } = apiWith({ throttle: { maxFailures: 2 } });
    const env = nodeEnv('198.51.100.5');
    for (let i = 0; i < 20; i++) expect((await api('GET', '/workspaces', { env })).status).toBe(401);
    expect(authenticator.throttle.size).toBe(0);
    expect((await api('GET', '/workspaces', { token: wrong(1), env })).status).toBe(401);
  });

  it('takes the client from clientKey when given', async () => {
    const { api } = apiWith({ throttle: { maxFailures: 1 }, clientKey: (c) => c.req.header('x-test-client') });
    expect((await api('GET', '/workspaces', { token: wrong(1), headers: { 'x-test-client': 'a' } })).status).toBe(401);
    expect((await api('GET', '/workspaces', { token: wrong(2), headers: { 'x-test-client': 'a' } })).status).toBe(429);
    expect((await api('GET', '/workspaces', { token: wrong(3), headers: { 'x-test-client': 'b' } })).status).toBe(401);
  });

  it('a database that cannot say is no failed authentication: 503, not counted', async () => {
    const down = { query: () => Promise.reject(Object.assign(new Error('connection refused'), { code: 'ECONNREFUSED' })) };
    const authenticator = new Authenticator(down, { throttle: { maxFailures: 1 } });
    const api = operatorClient({ db: down, adminToken, authenticator });
    const env = nodeEnv('198.51.100.6');
    for (let i = 0; i < 3; i++) {
      const response = await api('GET', `/workspaces/${A}/events`, { token: `wharf_ws_${'a'.repeat(64)}`, env });
      expect(response.status).toBe(503);
      expect(response.headers.get('retry-after')).toBe('5');
    }
    expect(authenticator.throttle.failures('198.51.100.6')).toBe(0);
  });
});

describe('the client address', () => {
  it('is the remote address @hono/node-server exposes, whatever X-Forwarded-For says', async () => {
    const authenticator = new Authenticator(db.pool, { throttle: { maxFailures: 2 } });
    const served = await serveOperatorApi({ db: db.pool, adminToken, authenticator });
    try {
      for (let i = 0; i < 2; i++) {
        const response = await served.call('GET', '/workspaces', { token: wrong(i), from: '127.0.0.2', headers: { 'x-forwarded-for': `10.0.0.${i}` } });
        expect(response.status).toBe(401);
      }
      const blocked = await served.call('GET', '/workspaces', { token: wrong(3), from: '127.0.0.2', headers: { 'x-forwarded-for': '10.9.9.9' } });
      expect(blocked.status).toBe(429);
      expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(authenticator.throttle.size).toBe(1);
      expect(authenticator.throttle.failures('127.0.0.2')).toBe(3);
      expect((await served.call('GET', '/workspaces', { token: adminToken, from: '127.0.0.2' })).status).toBe(200);
      expect((await served.call('GET', '/workspaces', { token: wrong(4), from: '127.0.0.3' })).status).toBe(401);
    } finally {
      await served.close();
    }
  });

  it('behind trusted proxy hops, is the entry of X-Forwarded-For the nearest proxy wrote; entries before it are the client\'s own', async () => {
    const authenticator = new Authenticator(db.pool, { trustedProxyHops: 1, throttle: { maxFailures: 2 } });
    const served = await serveOperatorApi({ db: db.pool, adminToken, authenticator });
    try {
      // One proxy at 127.0.0.4, which appended the address it was called from.
      const viaProxy = (forged: string, client: string) =>
        ({ from: '127.0.0.4', headers: { 'x-forwarded-for': forged ? `${forged}, ${client}` : client } });
      for (let i = 0; i < 2; i++) {
        expect((await served.call('GET', '/workspaces', { token: wrong(i), ...viaProxy(`10.0.0.${i}`, '192.0.2.50') })).status).toBe(401);
      }
      expect((await served.call('GET', '/workspaces', { token: wrong(2), ...viaProxy('10.9.9.9', '192.0.2.50') })).status).toBe(429);
      expect((await served.call('GET', '/workspaces', { token: wrong(3), ...viaProxy('', '192.0.2.51') })).status).toBe(401);
      expect(authenticator.throttle.failures('192.0.2.50')).toBe(3);
      expect(authenticator.throttle.failures('192.0.2.51')).toBe(1);
      expect(authenticator.throttle.failures('127.0.0.4')).toBe(0);
      // Without the header, the caller is the peer itself.
      expect((await served.call('GET', '/workspaces', { token: wrong(4), from: '127.0.0.4' })).status).toBe(401);
      expect(authenticator.throttle.failures('127.0.0.4')).toBe(1);
    } finally {
      await served.close();
    }
  });

  it('reads X-Forwarded-For by the hops counted from its end, ports and brackets off, and nothing that is no address', () => {
    const keyOf = async (hops: number, forwarded?: string) => {
      const key = clientAddress({ trustedProxyHops: hops });
      const app = new Hono().get('*', (c) => c.text(key(c) ?? '(none)'));
      const headers: Record<string, string> = forwarded === undefined ? {} : { 'x-forwarded-for': forwarded };
      return (await app.request('/', { headers }, nodeEnv('127.0.0.9'))).text();
    };
    return Promise.all([
      expect(keyOf(0, '192.0.2.1')).resolves.toBe('127.0.0.9'),
      expect(keyOf(1, '192.0.2.1, 192.0.2.2')).resolves.toBe('192.0.2.2'),
      expect(keyOf(2, '192.0.2.1, 192.0.2.2, 192.0.2.3')).resolves.toBe('192.0.2.2'),
      expect(keyOf(3, '192.0.2.1')).resolves.toBe('192.0.2.1'),
      expect(keyOf(1, '192.0.2.7:4711')).resolves.toBe('192.0.2.7'),
      expect(keyOf(1, '[2001:db8:1:2::7]:4711')).resolves.toBe(networkBucket('2001:db8:1:2::1')),
      expect(keyOf(1, '2001:db8:1:2::7')).resolves.toBe(networkBucket('2001:db8:1:2::1')),
      expect(keyOf(1, 'unknown')).resolves.toBe('127.0.0.9'),
      expect(keyOf(1, '999.0.0.1')).resolves.toBe('127.0.0.9'),
      expect(keyOf(1, '')).resolves.toBe('127.0.0.9'),
      expect(keyOf(1)).resolves.toBe('127.0.0.9'),
    ]);
  });

  it('WHARF_TRUSTED_PROXY_HOPS: unset or empty is 0; a whole number up to 10 is taken; anything else is a problem and 0', () => {
    expect(readTrustedProxyHops(undefined)).toEqual({ hops: 0 });
    expect(readTrustedProxyHops('')).toEqual({ hops: 0 });
    expect(readTrustedProxyHops('2')).toEqual({ hops: 2 });
    expect(readTrustedProxyHops(' 1 ')).toEqual({ hops: 1 });
    for (const bad of ['-1', '1.5', 'two', '11', 'true']) {
      const read = readTrustedProxyHops(bad);
      expect(read.hops).toBe(0);
      expect(read.problem).toMatch(/WHARF_TRUSTED_PROXY_HOPS must be a whole number from 0 to 10/);
    }
    expect(() => clientAddress({ trustedProxyHops: -1 })).toThrow(/trustedProxyHops/);
  });

  it('groups an IPv6 client by its /64 and an IPv4-mapped address as IPv4', () => {
    expect(networkBucket('2001:db8:1:2:aaaa::1')).toBe(networkBucket('2001:0db8:0001:0002:ffff:1:2:3'));
    expect(networkBucket('2001:db8:1:2::1')).not.toBe(networkBucket('2001:db8:1:3::1'));
    expect(networkBucket('::ffff:192.0.2.1')).toBe('192.0.2.1');
    expect(networkBucket('fe80::1%eth0')).toBe(networkBucket('fe80::2'));
    expect(networkBucket('192.0.2.1')).toBe('192.0.2.1');
  });

  it('on Cloudflare (request.cf present) is CF-Connecting-IP, which a client cannot set there; elsewhere that header counts for nothing', async () => {
    const { api, authenticator } = apiWith({ throttle: { maxFailures: 1 } });
    const cf = { colo: 'TST' };
    expect((await api('GET', '/workspaces', { token: wrong(1), cf, headers: { 'cf-connecting-ip': '192.0.2.10' } })).status).toBe(401);
    expect((await api('GET', '/workspaces', { token: wrong(2), cf, headers: { 'cf-connecting-ip': '192.0.2.10' } })).status).toBe(429);
    expect((await api('GET', '/workspaces', { token: wrong(3), cf, headers: { 'cf-connecting-ip': '192.0.2.11' } })).status).toBe(401);
    expect(authenticator.throttle.failures('192.0.2.10')).toBe(2);

    // Without a known address (no Node socket, no cf), callers are counted
    // together: a header a client sets itself changes nothing.
    const shared = apiWith({ throttle: { maxFailures: 1 } });
    expect((await shared.api('GET', '/workspaces', { token: wrong(1), headers: { 'cf-connecting-ip': '192.0.2.20' } })).status).toBe(401);
    expect((await shared.api('GET', '/workspaces', { token: wrong(2), headers: { 'cf-connecting-ip': '192.0.2.21' } })).status).toBe(429);
    expect((await shared.api('GET', '/workspaces', { token: adminToken, headers: { 'cf-connecting-ip': '192.0.2.21' } })).status).toBe(200);
  });

  it('is undefined when the runtime tells no address', async () => {
    const seen: (string | undefined)[] = [];
    const key = clientAddress();
    const { api } = apiWith({ clientKey: (c) => { const found = key(c); seen.push(found); return found; } });
    await api('GET', '/workspaces', { token: 'nope' });
    await api('GET', '/workspaces', { token: 'nope', env: nodeEnv('::ffff:192.0.2.1') });
    expect(seen).toEqual([undefined, '192.0.2.1']);
  });
});

describe('the throttle\'s memory', () => {
  it('holds at most maxClients clients, forgetting the one whose window ends first; no client shares another\'s count', async () => {
    const clock = testClock();
    const throttle = new AuthThrottle({ maxFailures: 2, windowMs: 1000, maxClients: 100, now: clock.now });
    await throttle.refuse('blocked');
    await throttle.refuse('blocked');
    expect(await throttle.refuse('blocked')).toBe(1);
    for (let i = 0; i < 100_000; i++) {
      await throttle.refuse(`spray-${i}`);
      if (i % 1000 === 0) expect(throttle.size).toBeLessThanOrEqual(100);
    }
    expect(throttle.size).toBe(100);
    // The oldest were forgotten, the newest are remembered; a newcomer starts at nothing.
    expect(throttle.failures('blocked')).toBe(0);
    expect(throttle.failures('spray-0')).toBe(0);
    expect(throttle.failures('spray-99999')).toBe(1);
    expect(await throttle.refuse('newcomer')).toBeUndefined();
    expect(throttle.failures('newcomer')).toBe(1);
    expect(throttle.size).toBe(100);

    clock.advance(1000);
    expect(throttle.failures('spray-99999')).toBe(0);
    await throttle.refuse('later');
    expect(throttle.size).toBe(1);
  });

  it('delays at most maxDelayed refusals at once; the others are answered without waiting', async () => {
    const releases: (() => void)[] = [];
    const throttle = new AuthThrottle({ maxFailures: 100, slowAfter: 0, maxDelayed: 3, sleep: (ms) => new Promise((resolve) => {
      expect(ms).toBeGreaterThan(0);
      releases.push(() => resolve());
    }) });
    const pending = Array.from({ length: 10 }, (_, i) => throttle.refuse(`client-${i}`));
    const settled = await Promise.all(pending.slice(3));
    expect(settled).toEqual(Array(7).fill(undefined));
    expect(throttle.delayed).toBe(3);
    for (const release of releases) release();
    await Promise.all(pending);
    expect(throttle.delayed).toBe(0);
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
