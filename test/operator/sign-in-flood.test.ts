// Issue #35, as an attacker would try it: 100,000 wrong tokens from 20,000
// addresses (half from twenty of them, half sprayed over the rest), at the
// API and at the console's sign-in form, each with a forged X-Forwarded-For.
// Then a valid workspace token and the valid admin token, from a flooding
// address and from a fresh one, at both doors. In process, no HTTP: the
// flood takes some seconds of CPU on an idle machine.
//
// Both doors share one Authenticator, as `wharf serve` composes them
// (server/app.ts). Its clock stands still and its sleep only records, so
// that the verdicts do not depend on the machine's speed: "within
// milliseconds" is shown by what the valid requests did not do (no delay,
// no count, no reload of the token table), not by a stopwatch.
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operatorApi } from '../../operator/api/app.js';
import { Authenticator } from '../../operator/api/authenticator.js';
import { consoleApp } from '../../operator/console/app.js';
import { createApiToken } from '../../operator/sql/operator.js';
import { adminToken } from '../support/api-client.js';
import { createWorkspace } from '../support/api-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { countingDatabase, nodeEnv, type CountingDatabase } from '../support/operator-client.js';

const origin = 'http://wharf.test';
const A = 701;
const requests = 100_000;
const flooders = Array.from({ length: 20 }, (_, i) => `198.18.0.${i + 1}`);
const sprayers = Array.from({ length: 19_980 }, (_, i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
const fresh = '203.0.113.99';
const tokenTableLoad = 'SELECT wharf.live_token_hashes() AS result';

let db: TestDatabase;
let counted: CountingDatabase;
let workspaceToken: string;
let authenticator: Authenticator;
let app: Hono;
const waited: number[] = [];
let form: { cookie: string; csrf: string };

beforeAll(async () => {
  db = await createTestDatabase();
  await createWorkspace(db.pool, A);
  workspaceToken = (await createApiToken(db.pool, String(A), 'on-call')).token;
  counted = countingDatabase(db.pool);
  const frozen = () => 1_000_000;
  authenticator = new Authenticator(counted, {
    throttle: { now: frozen, sleep: async (ms) => { waited.push(ms); } },
    tokenTable: { now: frozen },
  });
  app = new Hono()
    .route('/api', operatorApi({ db: counted, adminToken, authenticator }))
    .route('/console', consoleApp({ db: counted, adminToken, authenticator }));
  const page = await app.request(`${origin}/console/login`);
  const csrf = /name="csrf" value="([^"]+)"/.exec(await page.text())?.[1];
  if (!csrf) throw new Error('no CSRF field on the sign-in form');
  form = { cookie: (page.headers.get('set-cookie') ?? '').split(';')[0]!, csrf };
});

afterAll(async () => {
  await db?.drop();
});

/** A header a client writes itself, different on every request. */
const forged = (i: number) => ({ 'x-forwarded-for': `192.0.2.${i % 250}, 100.64.${(i >> 8) & 255}.${i & 255}` });

async function callApi(path: string, token: string, address: string, headers: Record<string, string> = {}): Promise<Response> {
  return app.request(`${origin}/api${path}`, { headers: { authorization: `Bearer ${token}`, ...headers } }, nodeEnv(address));
}

async function signIn(token: string, address: string, headers: Record<string, string> = {}): Promise<Response> {
  return app.request(`${origin}/console/login`, {
    method: 'POST',
    headers: { cookie: form.cookie, origin, 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams({ csrf: form.csrf, token }).toString(),
  }, nodeEnv(address));
}

function record(map: Map<string, number[]>, address: string, status: number): void {
  const statuses = map.get(address) ?? [];
  statuses.push(status);
  map.set(address, statuses);
}

/** A wrong token: mostly shaped like a workspace token (the table is asked), sometimes not (refused before it). */
function wrongToken(i: number): string {
  return i % 7 === 0 ? `guess-${i}-${'z'.repeat(30)}` : `wharf_ws_${i.toString(16).padStart(64, '0')}`;
}

describe('a flood of wrong tokens from 20,000 addresses', () => {
  const statusesOf = new Map<string, number[]>();
  /** The flooders' answers at the console's sign-in form. */
  const signInStatusesOf = new Map<string, number[]>();
  let largestMemory = 0;
  let retryAfter: string | null = null;
  /** A flooding address the throttle holds past its failures when the flood ends. */
  let blocked: string;

  beforeAll(async () => {
    for (let i = 0; i < requests; i++) {
      // Half the requests from twenty flooding addresses, half sprayed over 19,980 others.
      const address = i % 2 === 0 ? flooders[(i / 2) % flooders.length]! : sprayers[((i - 1) / 2) % sprayers.length]!;
      // One round of the twenty flooders and twenty sprayers in twenty at the console's sign-in
      // form, the others at the API (a sign-in page costs several times an API answer to render).
      const atConsole = Math.floor(i / 40) % 20 === 19;
      const response = atConsole
        ? await signIn(wrongToken(i), address, forged(i))
        : await callApi(`/workspaces/${A}/events`, wrongToken(i), address, forged(i));
      await response.arrayBuffer();
      record(statusesOf, address, response.status);
      if (atConsole && i % 2 === 0) record(signInStatusesOf, address, response.status);
      if (response.status === 429) retryAfter ??= response.headers.get('retry-after');
      if (i % 1000 === 0) largestMemory = Math.max(largestMemory, authenticator.throttle.size);
    }
    largestMemory = Math.max(largestMemory, authenticator.throttle.size);
    // Which flooders the throttle still remembers depends on where the spray's
    // evictions left off; the sequence is fixed, so this is the same on every run.
    blocked = flooders.find((address) => authenticator.throttle.failures(address) > authenticator.throttle.maxFailures)!;
  }, 300_000);

  it('answers every flooding address 429 with Retry-After once past its failures, at both doors', () => {
    for (const address of flooders) {
      const statuses = statusesOf.get(address)!;
      expect(statuses).toHaveLength(2_500);
      expect(new Set(statuses)).toEqual(new Set([401, 429]));
      // A window's ten failures, again whenever a sprayed address made the throttle forget this one.
      expect(statuses.filter((status) => status === 429).length).toBeGreaterThan(2_250);
    }
    expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
    // Their sign-ins at the console were cut off as well: one count for both doors.
    for (const address of flooders) {
      const statuses = signInStatusesOf.get(address)!;
      expect(statuses).toHaveLength(125);
      expect(statuses.filter((status) => status === 429).length).toBeGreaterThan(100);
    }
  });

  it('refuses the sprayed addresses, each under its limit, with 401', () => {
    const statuses = sprayers.flatMap((address) => statusesOf.get(address) ?? []);
    expect(statuses).toHaveLength(requests / 2);
    expect(new Set(statuses)).toEqual(new Set([401]));
  });

  it('keeps the throttle\'s memory under its bound, and slows only within its limits', () => {
    expect(largestMemory).toBeLessThanOrEqual(authenticator.throttle.maxClients);
    expect(largestMemory).toBe(10_000);
    expect(waited.length).toBeGreaterThan(0);
    for (const ms of waited) {
      expect(ms).toBeGreaterThanOrEqual(authenticator.throttle.delayMs);
      expect(ms).toBeLessThanOrEqual(authenticator.throttle.maxDelayMs);
    }
  });

  it('cost the database the token table\'s reload budget, not a query per wrong token', () => {
    const statements = counted.statements();
    expect(statements.length).toBeGreaterThan(0);
    expect(statements.length).toBeLessThanOrEqual(authenticator.tokens.reloadBurst);
    expect(new Set(statements)).toEqual(new Set([tokenTableLoad]));
  });

  it('counted the flooding addresses by their sockets: the forged X-Forwarded-For changed nothing', async () => {
    expect(blocked).toBeDefined();
    for (const forgedAddress of [fresh, '192.0.2.200', blocked]) {
      const response = await callApi(`/workspaces/${A}/events`, wrongToken(3), blocked, { 'x-forwarded-for': forgedAddress });
      expect(response.status).toBe(429);
    }
    expect(authenticator.throttle.failures(fresh)).toBe(0);
    expect(authenticator.throttle.failures('192.0.2.200')).toBe(0);
  });

  describe('then the valid tokens', () => {
    for (const who of ['a flooding address', 'a fresh address'] as const) {
      it(`from ${who}: 200 at the API and a session at the console, not counted, not delayed, without a reload`, async () => {
        const address = who === 'a fresh address' ? fresh : blocked;
        if (address === blocked) expect(authenticator.throttle.failures(blocked)).toBeGreaterThan(authenticator.throttle.maxFailures);
        const before = {
          statements: counted.statements().length,
          waited: waited.length,
          remembered: authenticator.throttle.size,
          failures: authenticator.throttle.failures(address),
        };
        const admin = await callApi('/workspaces', adminToken, address, forged(1));
        expect(admin.status).toBe(200);
        const workspace = await callApi(`/workspaces/${A}/events`, workspaceToken, address, forged(2));
        expect(workspace.status).toBe(200);
        expect(await workspace.json()).toMatchObject({ events: [] });

        const adminSession = await signIn(adminToken, address, forged(3));
        expect(adminSession.status).toBe(303);
        expect(adminSession.headers.get('location')).toBe('/console/workspaces');
        expect(adminSession.headers.getSetCookie().some((cookie) => cookie.startsWith('wharf_console='))).toBe(true);
        const workspaceSession = await signIn(workspaceToken, address, forged(4));
        expect(workspaceSession.status).toBe(303);
        expect(workspaceSession.headers.get('location')).toBe(`/console/workspaces/${A}`);
        // And the session's pages (each identifies the cookie's token again).
        const session = workspaceSession.headers.getSetCookie().find((cookie) => cookie.startsWith('wharf_console='))!.split(';')[0]!;
        const page = await app.request(`${origin}/console/workspaces/${A}/events`, { headers: { cookie: session } }, nodeEnv(address));
        expect(page.status).toBe(200);

        // No delay, no count, nothing remembered about the address.
        expect(waited).toHaveLength(before.waited);
        expect(authenticator.throttle.failures(address)).toBe(before.failures);
        expect(authenticator.throttle.size).toBe(before.remembered);
        // The workspace token was found in the table loaded during the flood and confirmed by
        // verify_token; the table was not reloaded.
        const statements = counted.statements().slice(before.statements);
        expect(statements).not.toContain(tokenTableLoad);
        expect(statements.filter((statement) => statement.includes('wharf.verify_token'))).toHaveLength(3);
      });
    }

    it('leaves the flooding address refused for its wrong tokens, at both doors', async () => {
      expect((await callApi('/workspaces', wrongToken(5), blocked)).status).toBe(429);
      const page = await signIn(wrongToken(6), blocked);
      expect(page.status).toBe(429);
      expect(Number(page.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(await page.text()).toContain('Too many failed sign-ins from this address');
    });
  });
});
