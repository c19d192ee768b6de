// `wharf recover` as a real process against the fake GitHub: killed with
// SIGKILL in the middle of a sweep and run again, it resumes at the page it
// was on and every failed delivery ends stored exactly once, none asked for
// twice; a process frozen mid-sweep (SIGSTOP) is taken over by another host
// once its lease runs out and, thawed, is fenced out without asking for
// anything. What stops it is said plainly, with an exit code of its own:
// 0 done, 2 done with deliveries given up (each named), 3 a configuration
// error (naming the App and the variable), 4 GitHub or the network failing
// (saying what happened and at which URL), 1 anything else.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../cli/free-port.js';
import { createGitHubAppClient, sweepApp, sweepStatus } from '../../recovery/index.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { runWharf } from '../support/wharf-cli.js';
import { waitFor } from '../support/worker-inbox.js';
import { askedTwice, createRig, notStoredOnce, type Rig } from './rig.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
let db: TestDatabase;
const rigs: Rig[] = [];
const children: ChildProcess[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
});
afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
  }
  await Promise.all(rigs.splice(0).map((rig) => rig.close()));
});
afterAll(async () => {
  await db?.drop();
});

interface Spawned {
  child: ChildProcess;
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function spawnRecover(rig: Rig, args: string[]): Spawned {
  const child = spawn(process.execPath, ['bin/wharf.js', 'recover', '--app', 'test', ...args], {
    cwd: root, env: { ...process.env, ...rig.env, DATABASE_URL: db.url }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  return { child, output: () => output, exited };
}

describe('wharf recover', () => {
  it('killed mid-sweep and run again, resumes at its page and stores every failed delivery exactly once', async () => {
    const rig = await createRig(db, { maxPerPage: 10 });
    rigs.push(rig);
    rig.outage = true;
    const failed = await rig.send(60);
    rig.outage = false;

    const first = spawnRecover(rig, ['--lease', '2s', '--json']);
    let posts = 0;
    rig.fake.onRequest = async (request) => {
      // The 26th ask arrives (page 3): the sweeper has recorded it and is
      // waiting for GitHub's answer when it dies. GitHub redelivers all the same.
      if (request.method === 'POST' && ++posts === 26) {
        first.child.kill('SIGKILL');
        await first.exited;
      }
    };
    expect((await first.exited).signal).toBe('SIGKILL');
    await waitFor(() => Promise.resolve(rig.fake.redeliveryAsks.length === 26), 5000, 'the 26th ask to be served');
    await rig.fake.settled();
    const stored = await rig.stored(failed);
    expect([...stored.values()].filter((n) => n === 1)).toHaveLength(26);
    const status = await sweepStatus(db.pool, { appId: rig.appId, source: rig.config.source });
    expect(status?.sweeping).toMatchObject({ pagesDone: 2 });
    expect(status?.sweeping?.holder).toMatch(/^cli:/);

    // Run again: it waits for the dead process's lease (2 s), then resumes.
    rig.fake.onRequest = undefined;
    const listedBefore = rig.fake.requests.filter((q) => q.method === 'GET').length;
    const second = await runWharf(['recover', '--app', 'test', '--lease', '2s', '--json'], { ...rig.env, DATABASE_URL: db.url });
    expect(second.code, second.stderr).toBe(0);
    const result = JSON.parse(second.stdout) as Record<string, unknown>;
    expect(result).toMatchObject({ outcome: 'done', resumed: true, redelivered: 34, errors: 0 });
    // Page 3 again (its first six were stored meanwhile), not page 1.
    expect(result.already_stored).toBe(6);
    const gets = rig.fake.requests.filter((q) => q.method === 'GET');
    expect(gets[listedBefore]!.cursor).toBe(gets[2]!.cursor);
    expect(gets[listedBefore]!.cursor).not.toBeNull();

    await rig.fake.settled();
    expect(notStoredOnce(await rig.stored(failed))).toEqual({});
    expect(rig.fake.redeliveryAsks).toHaveLength(60);
    expect(askedTwice(rig.fake.redeliveryAsks)).toEqual([]);
  });

  it('frozen mid-sweep, is taken over by another host once its lease runs out, and asks nothing after', async () => {
    const rig = await createRig(db, { maxPerPage: 10 });
    rigs.push(rig);
    rig.outage = true;
    const failed = await rig.send(50);
    rig.outage = false;

    const frozen = spawnRecover(rig, ['--lease', '1s']);
    let frozenGets = 0;
    let frozenAt = -1;
    let thawed = false;
    let resolveFrozen!: () => void;
    const isFrozen = new Promise<void>((resolve) => (resolveFrozen = resolve));
    rig.fake.onRequest = async (request) => {
      if (request.userAgent.startsWith('host-b')) {
        // Host B's first ask: thaw the frozen process while B holds the
        // lease and the page's deliveries are still missing, and let it run
        // into the fence before B goes on.
        if (request.method === 'POST' && !thawed) {
          thawed = true;
          frozenAt = rig.fake.requests.length;
          frozen.child.kill('SIGCONT');
          await frozen.exited;
        }
        return;
      }
      if (request.method === 'GET' && ++frozenGets === 3) {
        frozen.child.kill('SIGSTOP');
        resolveFrozen();
      }
    };
    await isFrozen;

    const started = Date.now();
    const hostB = await sweepApp({
      db: db.pool, github: createGitHubAppClient(rig.config, { userAgent: 'host-b' }), app: rig.app,
      key: { appId: rig.appId, source: rig.config.source }, holder: 'host-b', leaseMs: 1000, staleMs: 2000, waitForLeaseMs: 20_000,
    });
    expect(hostB).toMatchObject({ outcome: 'done', resumed: true, redelivered: 30 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(500);

    const exit = await frozen.exited;
    expect(exit.code).toBe(1);
    expect(frozen.output()).toMatch(/another host took over this sweep/);
    // After it was thawed, the frozen process asked GitHub for nothing.
    const afterThaw = rig.fake.requests.slice(frozenAt).filter((q) => !q.userAgent.startsWith('host-b'));
    expect(afterThaw.filter((q) => q.method === 'POST')).toEqual([]);

    await rig.fake.settled();
    expect(notStoredOnce(await rig.stored(failed))).toEqual({});
    expect(rig.fake.redeliveryAsks).toHaveLength(50);
    expect(askedTwice(rig.fake.redeliveryAsks)).toEqual([]);
  });

  it('draws a progress bar on a terminal, and only the result elsewhere', async () => {
    const rig = await createRig(db, { maxPerPage: 5 });
    rigs.push(rig);
    rig.outage = true;
    const failed = await rig.send(12);
    rig.outage = false;
    // `script` gives the command a terminal, as an operator's shell does.
    const output = await new Promise<string>((resolve, reject) => {
      execFile('script', ['-qec', 'node bin/wharf.js recover --app test --since 30m', '/dev/null'],
        { cwd: root, env: { ...process.env, ...rig.env, DATABASE_URL: db.url }, timeout: 30_000 },
        (error, stdout) => (error ? reject(error) : resolve(stdout)));
    });
    expect(output).toMatch(/test \[#{24}\] 100% 3 pages, 12 deliveries, 12 failed, 12 redelivered/);
    expect(output).toMatch(/\r\x1b\[K/);
    expect(output).toMatch(/swept app test back to \S+: 3 pages/);
    await rig.fake.settled();
    expect(notStoredOnce(await rig.stored(failed))).toEqual({});

    const piped = await runWharf(['recover', '--app', 'test', '--since', '30m'], { ...rig.env, DATABASE_URL: db.url });
    expect(piped.code, piped.stderr).toBe(0);
    expect(piped.stderr).toBe('');
    // The 12 failures and their 12 successful redeliveries: none failed still.
    expect(piped.stdout).toMatch(/^swept app test back to \S+: 5 pages, 24 deliveries, 0 failed, 0 redelivered/);
  });

  it('on Ctrl-C gives the sweep back at once, and the next run resumes it without waiting', async () => {
    const rig = await createRig(db, { maxPerPage: 5 });
    rigs.push(rig);
    rig.outage = true;
    const failed = await rig.send(15);
    rig.outage = false;
    const run = spawnRecover(rig, ['--lease', '1m']);
    let gets = 0;
    rig.fake.onRequest = async (request) => {
      if (request.method === 'GET' && ++gets === 2) {
        run.child.kill('SIGINT');
        await run.exited;
      }
    };
    const exit = await run.exited;
    expect(exit.code, run.output()).toBe(130);
    expect(run.output()).toMatch(/^stopped: 1 pages, 5 deliveries, 5 failed, 5 redelivered/m);
    const status = await sweepStatus(db.pool, { appId: rig.appId, source: rig.config.source });
    expect(status?.sweeping).toMatchObject({ pagesDone: 1, holder: null });

    rig.fake.onRequest = undefined;
    const started = Date.now();
    const again = await runWharf(['recover', '--app', 'test', '--json'], { ...rig.env, DATABASE_URL: db.url });
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ outcome: 'done', resumed: true, redelivered: 10 });
    // The lease was given back: no wait for its minute to run out.
    expect(Date.now() - started).toBeLessThan(30_000);
    await rig.fake.settled();
    expect(notStoredOnce(await rig.stored(failed))).toEqual({});
    expect(askedTwice(rig.fake.redeliveryAsks)).toEqual([]);
  });

  it('refuses an App without its id or key, naming the variable', async () => {
    const result = await runWharf(['recover', '--app', 'nosuch', '--since', '2h'], { DATABASE_URL: db.url });
    expect(result.code).toBe(3);
    expect(result.stderr).toMatch(/GITHUB_APP_NOSUCH_ID/);
  });
});

/** No stack trace: the operator reads one line saying what to fix. */
const stackFrame = /^\s+at /m;

describe('wharf recover fails clearly', () => {
  it('reports a private key that does not decode as a configuration error, naming the App and the variable', async () => {
    const rig = await createRig(db);
    rigs.push(rig);
    const garbled = '-----BEGIN RSA PRIVATE KEY-----\nnot-a-key-at-all\n-----END RSA PRIVATE KEY-----\n';
    const env = { ...rig.env, GITHUB_APP_TEST_PRIVATE_KEY: garbled, DATABASE_URL: db.url };
    const text = await runWharf(['recover', '--app', 'test'], env);
    expect(text.code, text.stderr).toBe(3);
    expect(text.stderr).toMatch(/^wharf: GitHub App test: GITHUB_APP_TEST_PRIVATE_KEY does not hold a private key that can be read/m);
    expect(text.stderr).not.toMatch(/unavailable/);
    expect(text.stderr).not.toMatch(stackFrame);
    expect(text.stdout + text.stderr).not.toContain('not-a-key-at-all');

    const json = await runWharf(['recover', '--app', 'test', '--json'], env);
    expect(json.code).toBe(3);
    expect(JSON.parse(json.stdout)).toMatchObject({
      app: 'test', outcome: 'failed', exit_code: 3, error_kind: 'config', error_variable: 'GITHUB_APP_TEST_PRIVATE_KEY',
    });
    // Nothing was sent to GitHub.
    expect(rig.fake.requests).toEqual([]);
  });

  it('reports GitHub refusing the App\'s JWT as a configuration error, with GitHub\'s message', async () => {
    const rig = await createRig(db);
    rigs.push(rig);
    const other = generateKeyPairSync('rsa', { modulusLength: 2048, privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
                                               publicKeyEncoding: { type: 'spki', format: 'pem' } });
    const env = { ...rig.env, GITHUB_APP_TEST_PRIVATE_KEY: other.privateKey, DATABASE_URL: db.url };
    const text = await runWharf(['recover', '--app', 'test'], env);
    expect(text.code, text.stderr).toBe(3);
    expect(text.stderr).toMatch(/GitHub refused the JWT of GitHub App test \(401: A JSON web token could not be decoded\)/);
    expect(text.stderr).toMatch(/GITHUB_APP_TEST_PRIVATE_KEY/);
    expect(text.stderr).not.toMatch(stackFrame);
    expect(text.stderr).not.toMatch(/BEGIN|eyJ/);

    const json = await runWharf(['recover', '--app', 'test', '--json'], env);
    expect(json.code).toBe(3);
    expect(JSON.parse(json.stdout)).toMatchObject({
      outcome: 'failed', exit_code: 3, error_kind: 'unauthorized', error_status: 401, error_url: `${rig.fake.url}/app/hook/deliveries`,
    });
  });

  it('says what happened and at which URL when GitHub cannot be reached', async () => {
    const rig = await createRig(db);
    rigs.push(rig);
    // Connection refused: nothing listens on that port.
    const closed = `http://127.0.0.1:${await freePort()}`;
    const refused = await runWharf(['recover', '--app', 'test', '--json'],
      { ...rig.env, GITHUB_APP_TEST_API_URL: closed, DATABASE_URL: db.url });
    expect(refused.code, refused.stderr).toBe(4);
    const result = JSON.parse(refused.stdout) as Record<string, unknown>;
    expect(result).toMatchObject({
      outcome: 'failed', exit_code: 4, error_kind: 'unreachable', error_cause: 'connection-refused',
      error_url: `${closed}/app/hook/deliveries`,
    });
    expect(result.error).toMatch(`could not reach GitHub at ${closed}/app/hook/deliveries: connection refused (ECONNREFUSED)`);
    expect(refused.stderr).toMatch(`could not reach GitHub at ${closed}/app/hook/deliveries: connection refused`);
    expect(refused.stderr).not.toMatch(/500|unavailable/);

    // A TLS failure: https:// to a server that speaks plain HTTP.
    const plain = rig.fake.url.replace(/^http:/, 'https:');
    const tls = await runWharf(['recover', '--app', 'test'], { ...rig.env, GITHUB_APP_TEST_API_URL: plain, DATABASE_URL: db.url });
    expect(tls.code, tls.stderr).toBe(4);
    expect(tls.stderr).toMatch(`could not reach GitHub at ${plain}/app/hook/deliveries: the TLS handshake failed`);
    expect(tls.stderr).not.toMatch(stackFrame);
  });

  it('names every delivery it gave up on, and exits 2', async () => {
    const rig = await createRig(db);
    rigs.push(rig);
    // The edge stays down: every redelivery fails too, until the sweeper's
    // ten asks for the delivery are used up.
    rig.outage = true;
    const [lost] = await rig.send(1);
    for (let ask = 0; ask < 10; ask++) {
      const swept = await sweepApp({ db: db.pool, github: createGitHubAppClient(rig.config), app: rig.app,
                                     key: { appId: rig.appId, source: rig.config.source }, holder: 'host-a' });
      expect(swept).toMatchObject({ outcome: 'done', redelivered: 1 });
      await rig.fake.settled();
    }
    // And GitHub refuses to redeliver another one.
    const [refused] = await rig.send(1);
    rig.fake.failNext('POST', { status: 422, body: { message: 'Delivery is too old to redeliver' } });

    const json = await runWharf(['recover', '--app', 'test', '--json'], { ...rig.env, DATABASE_URL: db.url });
    expect(json.code, json.stderr).toBe(2);
    const lostAttempts = rig.fake.deliveries.filter((d) => d.guid === lost);
    const refusedAttempt = rig.fake.deliveries.find((d) => d.guid === refused)!;
    expect(JSON.parse(json.stdout)).toMatchObject({
      outcome: 'done', exit_code: 2,
      gave_up: [
        { guid: refused, delivery_id: String(refusedAttempt.id), event: 'pull_request', reason: 'rejected', status: 422 },
        { guid: lost, delivery_id: String(lostAttempts.at(-1)!.id), event: 'pull_request', reason: 'max-asks', asks: 10 },
      ],
    });

    // Run again, as text: both are named again, and nothing is asked.
    const asks = rig.fake.redeliveryAsks.length;
    const text = await runWharf(['recover', '--app', 'test'], { ...rig.env, DATABASE_URL: db.url });
    expect(text.code, text.stderr).toBe(2);
    expect(text.stdout).toMatch(new RegExp(`^gave up on 2 deliveries[^\\n]*:\\n  ${refused} pull_request: GitHub refused to redeliver it[^\\n]*\\n  ${lost} pull_request: still not stored after 10 redeliveries`, 'm'));
    expect(rig.fake.redeliveryAsks).toHaveLength(asks);
  });
});
