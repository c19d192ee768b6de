// The redelivery sweeper in-process, through the real Octokit client against
// the fake GitHub: an outage window's failed deliveries end stored exactly
// once, a stopped sweep resumes at its cursor, a late original racing its
// redelivery is stored once, rate limits are waited out, and GitHub's errors
// stop a sweep without losing its place.
import { generateKeyPairSync } from 'node:crypto';
import pg from 'pg';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createGitHubAppClient, redeliveryMetrics, sweepApp, sweepStatus, type SweepOptions } from '../../recovery/index.js';
import { whyNoAnswer } from '../../recovery/github.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { askedTwice, createRig, notStoredOnce, type Rig } from './rig.js';

let db: TestDatabase;
const rigs: Rig[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
});
afterEach(async () => {
  await Promise.all(rigs.splice(0).map((rig) => rig.close()));
});
afterAll(async () => {
  await db?.drop();
});

async function rig(options: { maxPerPage?: number } = {}): Promise<Rig> {
  const made = await createRig(db, options);
  rigs.push(made);
  return made;
}

function sweep(r: Rig, options: Partial<SweepOptions> = {}) {
  return sweepApp({
    db: db.pool,
    github: createGitHubAppClient(r.config),
    app: r.app,
    key: { appId: r.config.appId, source: r.config.source },
    holder: 'test-host',
    ...options,
  });
}

async function metricValue(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  const value = (metric?.values as { value: number; labels: Record<string, string> }[] | undefined)
    ?.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l));
  return value?.value ?? 0;
}

describe('an outage window', () => {
  it('ends with every failed delivery stored exactly once, and a second sweep asks for nothing', async () => {
    const r = await rig({ maxPerPage: 10 });
    const before = await r.send(3);
    r.outage = true;
    const failed = await r.send(30);
    r.outage = false;
    const after = await r.send(3);
    expect(r.answers.filter((a) => failed.includes(a.guid)).map((a) => a.status)).toEqual(failed.map(() => 503));
    expect(notStoredOnce(await r.stored(failed))).toEqual(Object.fromEntries(failed.map((guid) => [guid, 0])));

    const registry = new Registry();
    const metrics = redeliveryMetrics(registry);
    const result = await sweep(r, { metrics });
    await r.fake.settled();

    expect(result).toMatchObject({ outcome: 'done', failed: 30, redelivered: 30, alreadyStored: 0, errors: 0, resumed: false });
    expect(result.pages).toBe(4);
    expect(notStoredOnce(await r.stored([...before, ...failed, ...after]))).toEqual({});
    expect(r.fake.redeliveryAsks).toHaveLength(30);
    expect(askedTwice(r.fake.redeliveryAsks)).toEqual([]);
    expect(await metricValue(registry, 'webhook_redelivery_found_failed_total', { app: 'test' })).toBe(30);
    expect(await metricValue(registry, 'webhook_redelivery_redelivered_total', { app: 'test' })).toBe(30);
    expect(await metricValue(registry, 'webhook_redelivery_last_success_timestamp_seconds', { app: 'test' }))
      .toBeGreaterThan(Date.now() / 1000 - 60);

    // The next sweep overlaps this one: the failures are answered by their
    // successful redeliveries, and nothing is asked again.
    const again = await sweep(r, { metrics });
    expect(again).toMatchObject({ outcome: 'done', failed: 0, redelivered: 0 });
    expect(r.fake.redeliveryAsks).toHaveLength(30);
    const status = await sweepStatus(db.pool, { appId: r.appId, source: r.config.source });
    expect(status?.lastSuccessAt).toBeInstanceOf(Date);
    expect(status?.sweeping).toBeNull();
  });

  it('counts a failed delivery that the inbox stored all the same, and asks nothing for it', async () => {
    const r = await rig();
    // GitHub gave up (status 0, timed out) while the edge still stored it.
    const late = await r.send(2, { recordAs: 0 });
    expect(notStoredOnce(await r.stored(late))).toEqual({});
    const result = await sweep(r);
    expect(result).toMatchObject({ outcome: 'done', failed: 2, alreadyStored: 2, redelivered: 0 });
    expect(r.fake.redeliveryAsks).toEqual([]);
  });

  it('stores one row when a late original races its redelivery', async () => {
    const r = await rig();
    const held = new Map<string, () => Promise<number>>();
    for (let i = 0; i < 20; i++) {
      const { delivery, release } = await r.fake.send(
        { event: 'pull_request', action: 'opened', payload: r.scenario.payload(`late-${i}-${r.appId}`) }, { hold: true });
      held.set(delivery.guid, release);
    }
    const guids = [...held.keys()];
    // Each original reaches the edge at the same moment as its redelivery.
    r.fake.onRedeliver = (original) => held.get(original.guid)!();
    const result = await sweep(r);
    await r.fake.settled();
    expect(result).toMatchObject({ outcome: 'done', failed: 20, redelivered: 20 });
    expect(notStoredOnce(await r.stored(guids))).toEqual({});
    for (const guid of guids) {
      const answers = r.answers.filter((a) => a.guid === guid);
      expect(answers.map((a) => a.status), guid).toEqual([202, 202]);
      expect(answers.map((a) => a.outcome).sort(), guid).toEqual(['duplicate', 'stored']);
    }
  });
});

/** How many delivery GUIDs the App's sweep under way remembers (what it has not decided yet). */
async function remembered(r: Rig): Promise<number> {
  const { rows } = await db.pool.query<{ n: string }>(
    'SELECT count(*) AS n FROM wharf.redelivery_seen WHERE app_id = $1 AND source = $2', [r.appId, r.config.source]);
  return Number(rows[0]!.n);
}

describe('a delivery whose attempts sit on several pages', () => {
  it('is not asked for when a failed attempt is listed a page before its OK one', async () => {
    const r = await rig({ maxPerPage: 5 });
    // Wharf answered it on purpose (202, dropped: nobody subscribes to its repository)...
    const [answered] = await r.send(1, { unwatched: true });
    expect(r.answers.at(-1)).toMatchObject({ guid: answered, status: 202 });
    await r.send(4);
    // ... and someone redelivered it by hand during an outage: a newer attempt, failed.
    r.outage = true;
    const byHand = await r.fake.redeliverByHand(answered!);
    const [lost] = await r.send(1);
    r.outage = false;
    expect(byHand.statusCode).toBe(503);
    // Newest first, five a page: [lost, its failed redelivery, 3 others] [1 other, its OK original].
    const result = await sweep(r);
    await r.fake.settled();
    expect(result).toMatchObject({ outcome: 'done', pages: 2, failed: 1, redelivered: 1 });
    const lostId = r.fake.deliveries.find((d) => d.guid === lost)!.id;
    expect(r.fake.redeliveryAsks).toEqual([lostId]);
    expect(notStoredOnce(await r.stored([lost!]))).toEqual({});
    expect(await remembered(r)).toBe(0);
  });

  it('is not asked for by a resumed sweep when its OK attempt was read before the stop', async () => {
    const r = await rig({ maxPerPage: 5 });
    // It failed during an outage, and a redelivery by hand was answered (202, dropped).
    r.outage = true;
    const [repaired] = await r.send(1, { unwatched: true });
    r.outage = false;
    await r.send(4);
    const byHand = await r.fake.redeliverByHand(repaired!);
    expect(byHand.statusCode).toBe(202);
    // Newest first, five a page: [its OK redelivery, 4 others] [its failed original].
    const stop = new AbortController();
    const first = await sweep(r, { signal: stop.signal, onProgress: (p) => { if (p.pages === 1) stop.abort(); } });
    expect(first).toMatchObject({ outcome: 'stopped', pages: 1, redelivered: 0 });
    // Another host resumes from the stored cursor, knowing what the first page held.
    const hostB = new pg.Pool({ connectionString: db.url, max: 2 });
    try {
      const second = await sweepApp({ db: hostB, github: createGitHubAppClient(r.config), app: r.app,
                                      key: { appId: r.appId, source: r.config.source }, holder: 'host-b' });
      expect(second).toMatchObject({ outcome: 'done', resumed: true, pages: 1, failed: 0, redelivered: 0 });
    } finally {
      await hostB.end();
    }
    expect(r.fake.redeliveryAsks).toEqual([]);
    expect(await remembered(r)).toBe(0);
  });
});

describe('an ask in flight', () => {
  it('is not asked again by the next sweep while GitHub has not redelivered it yet', async () => {
    const r = await rig();
    r.outage = true;
    const failed = await r.send(5);
    r.outage = false;
    const open = r.fake.holdRedeliveries();
    const first = await sweep(r);
    expect(first).toMatchObject({ outcome: 'done', failed: 5, redelivered: 5 });
    // GitHub accepted the asks but has not redelivered: still not stored.
    expect(notStoredOnce(await r.stored(failed))).toEqual(Object.fromEntries(failed.map((guid) => [guid, 0])));
    const second = await sweep(r);
    expect(second).toMatchObject({ outcome: 'done', failed: 5, redelivered: 0, alreadyRequested: 5 });
    expect(r.fake.redeliveryAsks).toHaveLength(5);
    open();
    await r.fake.settled();
    expect(notStoredOnce(await r.stored(failed))).toEqual({});
  });
});

describe('a stopped sweep', () => {
  it('resumes at the page after the last one done, asking nothing twice', async () => {
    const r = await rig({ maxPerPage: 10 });
    r.outage = true;
    const failed = await r.send(40);
    r.outage = false;

    const stop = new AbortController();
    const first = await sweep(r, { signal: stop.signal, onProgress: (p) => { if (p.pages === 2) stop.abort(); } });
    expect(first).toMatchObject({ outcome: 'stopped', pages: 2, redelivered: 20 });
    const status = await sweepStatus(db.pool, { appId: r.appId, source: r.config.source });
    expect(status?.sweeping).toMatchObject({ pagesDone: 2, holder: null });
    const listedBefore = r.fake.requests.filter((q) => q.method === 'GET').length;

    const second = await sweep(r);
    expect(second).toMatchObject({ outcome: 'done', resumed: true, redelivered: 20 });
    // It went on from GitHub's cursor of page 3, not from the first page.
    const resumedAt = r.fake.requests.filter((q) => q.method === 'GET')[listedBefore]!;
    expect(resumedAt.cursor).toBe(r.fake.requests.filter((q) => q.method === 'GET')[2]!.cursor);
    expect(resumedAt.cursor).not.toBeNull();
    await r.fake.settled();
    expect(notStoredOnce(await r.stored(failed))).toEqual({});
    expect(r.fake.redeliveryAsks).toHaveLength(40);
    expect(askedTwice(r.fake.redeliveryAsks)).toEqual([]);
  });
});

describe('two sweepers at once', () => {
  it('one sweeps, the other finds the App busy or sweeps after it; no delivery is asked for twice', async () => {
    const r = await rig({ maxPerPage: 5 });
    r.outage = true;
    const failed = await r.send(25);
    r.outage = false;
    // Two hosts: pools of their own.
    const hostB = new pg.Pool({ connectionString: db.url, max: 2 });
    try {
      // Whichever host takes the lease, its GitHub calls wait until the
      // other host has tried: the two sweeps overlap for certain.
      let firstBack!: () => void;
      const oneReturned = new Promise<void>((resolve) => (firstBack = resolve));
      r.fake.onRequest = () => oneReturned;
      const pa = sweep(r, { holder: 'host-a' });
      const pb = sweepApp({ db: hostB, github: createGitHubAppClient(r.config), app: r.app,
                            key: { appId: r.appId, source: r.config.source }, holder: 'host-b' });
      void Promise.race([pa, pb]).then(() => firstBack());
      const [a, b] = await Promise.all([pa, pb]);
      r.fake.onRequest = () => new Promise((resolve) => setTimeout(resolve, 20));
      expect([a.outcome, b.outcome].sort()).toEqual(['busy', 'done']);
      const busy = a.outcome === 'busy' ? a : b;
      expect(['host-a', 'host-b', null]).toContain(busy.holder);

      // Both hosts again, this time each waiting for the other: the second
      // sweeps after the first and asks for nothing new.
      r.outage = true;
      const more = await r.send(10);
      r.outage = false;
      const [c, d] = await Promise.all([
        sweep(r, { holder: 'host-a', waitForLeaseMs: 30_000 }),
        sweepApp({ db: hostB, github: createGitHubAppClient(r.config), app: r.app, key: { appId: r.appId, source: r.config.source },
                   holder: 'host-b', waitForLeaseMs: 30_000 }),
      ]);
      expect([c.outcome, d.outcome]).toEqual(['done', 'done']);
      expect(c.redelivered + d.redelivered).toBe(10);
      await r.fake.settled();
      expect(notStoredOnce(await r.stored([...failed, ...more]))).toEqual({});
      expect(r.fake.redeliveryAsks).toHaveLength(35);
      expect(askedTwice(r.fake.redeliveryAsks)).toEqual([]);
    } finally {
      await hostB.end();
    }
  });
});

describe('GitHub answers', () => {
  it('waits out a 429 with Retry-After and a 403 with x-ratelimit-reset, then finishes', async () => {
    const r = await rig();
    r.outage = true;
    const failed = await r.send(3);
    r.outage = false;
    r.fake.failNext('GET', { status: 429, headers: { 'retry-after': '1' }, body: { message: 'You have exceeded a secondary rate limit.' } });
    r.fake.failNext('POST', {
      status: 403, body: { message: 'API rate limit exceeded for app' },
      headers: { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(Math.floor(Date.now() / 1000) + 1) },
    });
    const waits: number[] = [];
    const started = Date.now();
    const result = await sweep(r, { github: createGitHubAppClient(r.config, { onWait: ({ ms }) => waits.push(ms) }) });
    expect(result).toMatchObject({ outcome: 'done', redelivered: 3, errors: 0 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    expect(waits[0]).toBe(1000);
    expect(waits[1]).toBeGreaterThan(0);
    expect(r.fake.requests.map((q) => q.status).slice(0, 3)).toEqual([429, 200, 403]);
    await r.fake.settled();
    expect(notStoredOnce(await r.stored(failed))).toEqual({});
  });

  it('stops on a rate limit longer than it may wait, keeps its place, and the next sweep finishes', async () => {
    const r = await rig({ maxPerPage: 2 });
    r.outage = true;
    const failed = await r.send(4);
    r.outage = false;
    const registry = new Registry();
    const metrics = redeliveryMetrics(registry);
    const github = createGitHubAppClient(r.config, { maxWaitMs: 500 });
    // The first page is served, the second is rate limited for two minutes.
    let listed = 0;
    r.fake.onRequest = (request) => {
      if (request.method === 'GET' && ++listed === 2) {
        r.fake.failNext('GET', { status: 429, headers: { 'retry-after': '120' }, body: { message: 'rate limited' } });
      }
    };
    const first = await sweep(r, { github, metrics });
    expect(first.outcome).toBe('failed');
    expect(first.pages).toBe(1);
    expect(await metricValue(registry, 'webhook_redelivery_errors_total', { kind: 'rate-limited' })).toBe(1);
    const status = await sweepStatus(db.pool, { appId: r.appId, source: r.config.source });
    expect(status).toMatchObject({ lastError: 'GitHubRateLimited', sweeping: { pagesDone: 1, holder: null } });

    r.fake.onRequest = undefined;
    const second = await sweep(r, { metrics });
    expect(second).toMatchObject({ outcome: 'done', resumed: true });
    expect(first.redelivered + second.redelivered).toBe(4);
    await r.fake.settled();
    expect(notStoredOnce(await r.stored(failed))).toEqual({});
    expect(askedTwice(r.fake.redeliveryAsks)).toEqual([]);
  });

  it('asks again, on the next sweep, for a redelivery whose request GitHub could not take', async () => {
    const r = await rig();
    r.outage = true;
    const [guid] = await r.send(1);
    r.outage = false;
    r.fake.failNext('POST', { status: 502 });
    const first = await sweep(r);
    // GitHub may have acted on it: not asked again within the sweep.
    expect(first).toMatchObject({ outcome: 'failed', redelivered: 0 });
    expect(first.error?.message).toMatch(/unavailable \(502\)/);
    expect(r.fake.requests.filter((q) => q.method === 'POST').map((q) => q.status)).toEqual([502]);
    expect(r.fake.redeliveryAsks).toEqual([]);

    const second = await sweep(r);
    expect(second).toMatchObject({ outcome: 'done', resumed: true, redelivered: 1 });
    await r.fake.settled();
    expect(notStoredOnce(await r.stored([guid!]))).toEqual({});
    expect(r.fake.redeliveryAsks).toHaveLength(1);
  });

  it('says GitHub gave no answer within the request timeout, and at which URL', async () => {
    const r = await rig();
    let answer!: () => void;
    const never = new Promise<void>((resolve) => (answer = resolve));
    r.fake.onRequest = () => never;
    try {
      const result = await sweep(r, { github: createGitHubAppClient(r.config, { requestTimeoutMs: 200, attempts: 2 }) });
      expect(result.outcome).toBe('failed');
      expect(result.error).toMatchObject({ failure: 'unreachable', noAnswer: 'timeout', url: `${r.fake.url}/app/hook/deliveries` });
      expect(result.error?.message).toBe(
        `could not reach GitHub at ${r.fake.url}/app/hook/deliveries: no answer within 0.2s, after 2 tries`);
      const status = await sweepStatus(db.pool, { appId: r.appId, source: r.config.source });
      expect(status?.lastError).toBe('GitHubUnreachable');
    } finally {
      answer();
    }
  });

  it('names a DNS failure as fetch reports it', () => {
    // What Node's fetch throws when a name does not resolve (no DNS query is
    // made here: the tests use loopback only).
    const lookup = Object.assign(new Error('getaddrinfo ENOTFOUND api.github.invalid'),
      { code: 'ENOTFOUND', syscall: 'getaddrinfo', hostname: 'api.github.invalid' });
    expect(whyNoAnswer(new TypeError('fetch failed', { cause: lookup }), 30_000))
      .toEqual({ cause: 'dns', text: 'the DNS lookup of api.github.invalid failed (ENOTFOUND)' });
  });

  it('is refused with a JWT signed by another key, and says so', async () => {
    const r = await rig();
    r.outage = true;
    await r.send(1);
    r.outage = false;
    const other = generateKeyPairSync('rsa', { modulusLength: 2048, privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
                                               publicKeyEncoding: { type: 'spki', format: 'pem' } });
    const registry = new Registry();
    const result = await sweep(r, {
      github: createGitHubAppClient({ ...r.config, privateKey: other.privateKey }), metrics: redeliveryMetrics(registry),
    });
    expect(result.outcome).toBe('failed');
    expect(result.error?.message).toBe('GitHub refused the JWT of GitHub App test (401: A JSON web token could not be decoded): ' +
      'check GITHUB_APP_TEST_PRIVATE_KEY and GITHUB_APP_TEST_ID');
    expect(r.fake.requests.map((q) => q.status)).toEqual([401]);
    expect(await metricValue(registry, 'webhook_redelivery_errors_total', { kind: 'unauthorized' })).toBe(1);
  });
});
