// Sweeps on a schedule: two `wharf worker --sweep-app` hosts sweep the same
// App every few hundred milliseconds, one at a time through the App's lease,
// and bring an outage window into the inbox exactly once, with the sweeper's
// metrics on their /metrics; a host warns when the App's last complete sweep
// is too old.
import { generateKeyPairSync } from 'node:crypto';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../cli/postgres-server.js';
import {
  createGitHubAppClient, RecoveryConfigError, startRedeliverySweeps, type RecoveryLogger,
} from '../../recovery/index.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { waitFor } from '../support/worker-inbox.js';
import { fixtureHandlers, killSpawnedWorkers, spawnWorker } from '../support/worker-process.js';
import { askedTwice, createRig, notStoredOnce, type Rig } from './rig.js';
import { jsonLines } from '../support/json-lines.js';

let db: TestDatabase;
const rigs: Rig[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
});
afterEach(async () => {
  await killSpawnedWorkers();
  await Promise.all(rigs.splice(0).map((rig) => rig.close()));
});
afterAll(async () => {
  await db?.drop();
});

function recordingLogger(): RecoveryLogger & { lines: { level: string; fields: Record<string, unknown>; message: string }[] } {
  const lines: { level: string; fields: Record<string, unknown>; message: string }[] = [];
  const log = (level: string) => (fields: Record<string, unknown>, message: string) => {
    lines.push({ level, fields, message });
  };
  return { lines, info: log('info'), warn: log('warn'), error: log('error') };
}

/** The value of a metric line on a /metrics page (0 when absent). */
function metric(page: string, name: string): number {
  const match = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(page);
  return match?.[1] ? Number(match[1]) : 0;
}

describe('wharf worker --sweep-app', () => {
  it('two hosts sweeping on a schedule bring an outage window into the inbox exactly once', async () => {
    const rig = await createRig(db, { maxPerPage: 10 });
    rigs.push(rig);
    rig.outage = true;
    const failed = await rig.send(30);
    rig.outage = false;

    const ports = [await freePort(), await freePort()];
    const hosts = ports.map((port, i) => spawnWorker({
      databaseUrl: db.url,
      args: ['--handlers', fixtureHandlers('by-type.ts'), '--metrics-port', String(port), '--sweep-every', '300ms'],
      env: { ...rig.env, WHARF_SWEEP_APPS: 'test', HANDLES: 'nothing', HOST: `host-${i}` },
    }));
    await waitFor(async () => Object.keys(notStoredOnce(await rig.stored(failed))).length === 0, 30_000,
      `every failed delivery to be stored\n${hosts.map((h) => h.output()).join('\n')}`);
    // A few more turns on both hosts: nothing is asked again.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await rig.fake.settled();
    expect(notStoredOnce(await rig.stored(failed))).toEqual({});
    expect(rig.fake.redeliveryAsks).toHaveLength(30);
    expect(askedTwice(rig.fake.redeliveryAsks)).toEqual([]);

    const pages = await Promise.all(ports.map(async (port) => (await fetch(`http://127.0.0.1:${port}/metrics`)).text()));
    expect(pages.reduce((sum, page) => sum + metric(page, 'webhook_redelivery_redelivered_total'), 0)).toBe(30);
    // Every host reports when the App was last swept to the end, by any host.
    for (const page of pages) expect(metric(page, 'webhook_redelivery_last_success_timestamp_seconds')).toBeGreaterThan(Date.now() / 1000 - 60);
    expect(hosts.every((host) => host.output().includes('"msg":"redelivery sweeps scheduled"'))).toBe(true);
  });

  it('holds the App\'s sweep for --sweep-lease, how long another host waits before taking over a dead one', async () => {
    const rig = await createRig(db);
    rigs.push(rig);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let listing!: () => void;
    const listed = new Promise<void>((resolve) => (listing = resolve));
    rig.fake.onRequest = async (request) => {
      if (request.method !== 'GET') return;
      listing();
      await held;
    };
    const host = spawnWorker({
      databaseUrl: db.url,
      args: ['--handlers', fixtureHandlers('by-type.ts'), '--sweep-app', 'test', '--sweep-every', '300ms', '--sweep-lease', '2h'],
      env: { ...rig.env, HANDLES: 'nothing' },
    });
    try {
      // The host is mid-sweep, waiting for GitHub's first page.
      await Promise.race([listed, host.exited.then(() => { throw new Error(`the worker exited:\n${host.output()}`); })]);
      const { rows } = await db.pool.query<{ left_s: number }>(
        `SELECT extract(epoch FROM leased_until - clock_timestamp())::float8 AS left_s
           FROM wharf.redelivery_sweep WHERE app_id = $1 AND source = $2`, [rig.appId, rig.config.source]);
      expect(rows[0]?.left_s).toBeGreaterThan(7_000);
      expect(rows[0]?.left_s).toBeLessThanOrEqual(7_200);
    } finally {
      release();
    }
  });

  it('logs an App whose key does not decode once a turn, naming the variable, and goes on with its other work', async () => {
    const rig = await createRig(db);
    rigs.push(rig);
    rig.outage = true;
    const failed = await rig.send(3);
    rig.outage = false;
    const port = await freePort();
    const garbled = '-----BEGIN RSA PRIVATE KEY-----\nnot-a-key-at-all\n-----END RSA PRIVATE KEY-----';
    const host = spawnWorker({
      databaseUrl: db.url,
      args: ['--handlers', fixtureHandlers('by-type.ts'), '--metrics-port', String(port), '--sweep-app', 'broken,test',
             '--sweep-every', '300ms'],
      env: { ...rig.env, GITHUB_APP_BROKEN_ID: '4242', GITHUB_APP_BROKEN_PRIVATE_KEY: garbled, HANDLES: 'nothing' },
    });
    const lines = () => jsonLines<{ level: number; app?: string; msg: string }>(host.output());
    const brokenLines = () => lines().filter((line) => line.app === 'broken');
    // The other App is swept all the same, turn after turn.
    await waitFor(async () => Object.keys(notStoredOnce(await rig.stored(failed))).length === 0, 30_000,
      `the other App's failed deliveries to be stored\n${host.output()}`);
    await waitFor(() => Promise.resolve(brokenLines().length >= 4), 30_000, `four turns\n${host.output()}`);
    expect(host.child.exitCode).toBeNull();
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);

    const broken = brokenLines();
    for (const line of broken) {
      expect(line.level).toBe(50);
      expect(line.msg).toMatch(/^GitHub App broken: GITHUB_APP_BROKEN_PRIVATE_KEY does not hold a private key that can be read/);
    }
    // Once a turn: as often as the other App's sweep began, give or take the turn under way.
    const turns = lines().filter((line) => line.app === 'test' && /^redelivery sweep (began|resumed)$/.test(line.msg)).length;
    expect(Math.abs(broken.length - turns), host.output()).toBeLessThanOrEqual(1);
    expect(host.output()).not.toMatch(/^\s+at /m);
    expect(host.output()).not.toContain('not-a-key-at-all');
  });

  it('runs without an App\'s private key, saying which variable to set', async () => {
    const rig = await createRig(db);
    rigs.push(rig);
    const host = spawnWorker({
      databaseUrl: db.url,
      args: ['--handlers', fixtureHandlers('by-type.ts'), '--sweep-app', 'test', '--sweep-every', '300ms'],
      env: { GITHUB_APP_TEST_ID: rig.appId, HANDLES: 'nothing' },
    });
    await waitFor(() => Promise.resolve(/GITHUB_APP_TEST_PRIVATE_KEY/.test(host.output())), 30_000, host.output());
    expect(host.child.exitCode).toBeNull();
    expect(host.output()).toMatch(/"msg":"GitHub App test: set GITHUB_APP_TEST_PRIVATE_KEY to the GitHub App's private key \(PEM\)"/);
  });
});

describe('the schedule', () => {
  it('warns when the App\'s last complete sweep is older than the bound, and sets the gauge from the database', async () => {
    const rig = await createRig(db);
    rigs.push(rig);
    const registry = new Registry();
    const good = startRedeliverySweeps({ database: db.pool, apps: ['test'], env: rig.env, registry, firstAfterMs: 60_000 });
    const [first] = await good.runOnce();
    await good.stop();
    expect(first?.outcome).toBe('done');

    // Another host whose GitHub calls now fail (a revoked key): its turns
    // fail, and once the last success is older than the bound it warns.
    const other = generateKeyPairSync('rsa', { modulusLength: 2048, privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
                                               publicKeyEncoding: { type: 'spki', format: 'pem' } });
    const logger = recordingLogger();
    const registry2 = new Registry();
    const failing = startRedeliverySweeps({
      database: db.pool, apps: ['test'], env: rig.env, registry: registry2, logger, staleAfterMs: 1, firstAfterMs: 60_000,
      clientFor: (config) => createGitHubAppClient({ ...config, privateKey: other.privateKey }),
    });
    try {
      await new Promise((resolve) => setTimeout(resolve, 20));
      const [result] = await failing.runOnce();
      expect(result?.outcome).toBe('failed');
      // GitHub refused the JWT: said once, naming the App, GitHub's answer and the variables.
      expect(logger.lines.filter((line) => line.level === 'error').map((line) => line.message)).toEqual([
        'redelivery sweep failed: GitHub refused the JWT of GitHub App test (401: A JSON web token could not be decoded): ' +
          'check GITHUB_APP_TEST_PRIVATE_KEY and GITHUB_APP_TEST_ID; the next one resumes here',
      ]);
      const warning = logger.lines.find((line) => line.level === 'warn');
      expect(warning?.message).toMatch(/last complete redelivery sweep of this GitHub App is too old/);
      expect(warning?.fields).toMatchObject({ app: 'test', last_error: 'GitHubUnauthorized' });
      expect(Date.parse(String(warning?.fields.last_success_at))).toBeGreaterThan(Date.now() - 60_000);
      const gauge = (await registry2.getSingleMetric('webhook_redelivery_last_success_timestamp_seconds')!.get()).values[0];
      expect(gauge?.value).toBeCloseTo(Date.parse(String(warning?.fields.last_success_at)) / 1000, 2);
    } finally {
      await failing.stop();
    }
  });

  it('reports an App without its id at each turn, and refuses a name that is no App name at start', async () => {
    const logger = recordingLogger();
    const schedule = startRedeliverySweeps({ database: db.pool, apps: ['nosuch'], env: {}, logger, firstAfterMs: 60_000 });
    try {
      const [result] = await schedule.runOnce();
      expect(result?.outcome).toBe('failed');
      expect(result?.error).toBeInstanceOf(RecoveryConfigError);
      expect(logger.lines.filter((line) => line.level === 'error')).toEqual([{
        level: 'error', message: 'GitHub App nosuch: set GITHUB_APP_NOSUCH_ID to the GitHub App\'s id',
        fields: { app: 'nosuch', error_kind: 'config', variable: 'GITHUB_APP_NOSUCH_ID' },
      }]);
    } finally {
      await schedule.stop();
    }
    expect(() => startRedeliverySweeps({ database: db.pool, apps: ['no such'], env: {} })).toThrow(RecoveryConfigError);
  });
});
