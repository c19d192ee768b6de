// `wharf recover` as a real process against the fake GitHub: killed with
// SIGKILL in the middle of a sweep and run again, it resumes at the page it
// was on and every failed delivery ends stored exactly once, none asked for
// twice; a process frozen mid-sweep (SIGSTOP) is taken over by another host
// once its lease runs out and, thawed, is fenced out without asking for
// anything.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
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
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/GITHUB_APP_NOSUCH_ID/);
  });
});
