// `npm start` as a new user runs it: embedded PostgreSQL (no DATABASE_URL),
// the demo GitHub App, the edge receiver with the operator API, the example
// handlers, the `wharf` CLI next to it, and Ctrl-C that leaves nothing behind.
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { stablePortRange } from '../../cli/free-port.js';
import { signGitHubBody } from '../../edge/adapters/github.js';
import { runWharf } from '../support/wharf-cli.js';
import { listProcesses, spawnStart, waitForBanner, type Banner, type StartProcess } from '../support/start-process.js';
import { waitFor } from '../support/worker-inbox.js';

const adminToken = 'e2e-admin-token-4f0c9a7d2b1e-5c8e7a3f6d90';
const webhookSecret = 'e2e-demo-webhook-secret-8d3a';

let start: StartProcess | undefined;
let banner: Banner;

beforeAll(async () => {
  start = await spawnStart({ WHARF_ADMIN_TOKEN: adminToken, GITHUB_APP_DEMO_WEBHOOK_SECRET: webhookSecret });
  banner = await waitForBanner(start, 90_000);
}, 100_000);

afterAll(async () => {
  await start?.destroy();
});

interface Json {
  status: number;
  body: Record<string, unknown>;
}

async function call(method: string, path: string, init: { headers?: Record<string, string>; body?: string } = {}): Promise<Json> {
  const response = await fetch(`${banner.edgeUrl}${path}`, { method, ...init });
  const text = await response.text();
  return { status: response.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

const api = (method: string, path: string): Promise<Json> =>
  call(method, `/api/workspaces/1${path}`, {
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: method === 'POST' ? '{}' : undefined,
  });

/** A GitHub push for the demo App's installation and subscription, signed as GitHub signs it. */
async function deliverPush(extra: Record<string, unknown> = {}): Promise<{ deliveryKey: string; eventId: number }> {
  const deliveryKey = randomUUID();
  const body = JSON.stringify({
    ref: 'refs/heads/main',
    repository: { full_name: 'acme/api', name: 'api', owner: { login: 'acme' } },
    installation: { id: 1 },
    sender: { id: 7, login: 'e2e' },
    ...extra,
  });
  const answer = await call('POST', '/hooks/github/demo', {
    headers: {
      'content-type': 'application/json',
      'x-github-event': 'push',
      'x-github-delivery': deliveryKey,
      'x-hub-signature-256': await signGitHubBody(webhookSecret, body),
    },
    body,
  });
  expect(answer.status, JSON.stringify(answer.body)).toBe(202);
  expect(answer.body).toMatchObject({
    status: 'accepted', delivery_id: deliveryKey, dropped: null, refused: [],
    events: [{ workspace_id: 1, event_id: expect.any(Number), outcome: 'stored' }],
  });
  const [stored] = answer.body.events as { event_id: number }[];
  return { deliveryKey, eventId: stored!.event_id };
}

type Event = Record<string, unknown> & { state: string };

/** Polls the operator API until the event matches `ready`. */
function eventWhen(id: number, ready: (event: Event) => boolean, what: string): Promise<Event> {
  return waitFor(async () => {
    const { status, body } = await api('GET', `/events/${id}`);
    expect(status).toBe(200);
    return ready(body as Event) ? (body as Event) : undefined;
  }, 20_000, `event ${id} to be ${what}`);
}

/** DEAD again after a replay: handled once more since that replay, not the DEAD row it replayed. */
const deadAfterReplayBy = (account: string) => (event: Event): boolean =>
  event.state === 'DEAD' && event.replayed_by === account
  && Date.parse(String(event.dead_at)) >= Date.parse(String(event.replayed_at));

it('admits a signed GitHub push and the example handler completes it', async () => {
  const { deliveryKey, eventId } = await deliverPush();
  const done = await eventWhen(eventId, (event) => event.state === 'DONE', 'DONE');
  expect(done).toMatchObject({
    workspace_id: 1, provider: 'github', event_type: 'push', subject: 'repo:acme/api',
    outcome: 'handled', attempt: 1, failures: 0, error_class: null, replayed_by: null,
    steps: [{ name: `logged:${deliveryKey}`, committed_at: expect.any(String) }],
  });
  // The stored headers keep the event type and drop the signature.
  expect(done.headers).toMatchObject({ 'x-github-event': 'push' });
  expect(JSON.stringify(done.headers)).not.toContain('sha256=');
  // The log line is written asynchronously (pino): it may trail the commit.
  await waitFor(async () => start!.output().includes('example handler received an event'), 10_000, 'the handler\'s log line');
});

it('writes dev.env for a second terminal with what it generated, never what it was given, and the sample curl', async () => {
  const file = join(start!.stateDir, 'dev.env');
  expect((await stat(file)).mode & 0o777).toBe(0o600);
  const lines = (await readFile(file, 'utf8')).split('\n').filter((line) => line.startsWith('export '));
  expect(lines.map((line) => /^export (\w+)=/.exec(line)?.[1])).toEqual(['DATABASE_URL', 'WHARF_SECRET_KEYS']);
  expect(lines[0]).toBe(`export DATABASE_URL='${banner.databaseUrl}'`);
  // The development database's port lies below the ephemeral range, where no
  // outgoing connection can hold it while the database is down.
  const port = Number(new URL(banner.databaseUrl).port);
  const { low, high } = stablePortRange();
  expect(port).toBeGreaterThanOrEqual(low);
  expect(port).toBeLessThanOrEqual(high);
  expect(start!.output()).toContain(`. ${file}`);
  const sample = await readFile(join(start!.stateDir, 'sample-delivery.sh'), 'utf8');
  expect(start!.output()).toContain(sample.split('\n').slice(1).join('\n').trim());
  expect(sample).toContain(`${banner.edgeUrl}/hooks/github/demo`);
});

it('a failing payload ends DEAD, and replays through the API and the CLI end DEAD again, each recorded', async () => {
  const { eventId } = await deliverPush({ wharf_demo_fail: true });
  await waitFor(async () => {
    const { status, body } = await api('GET', '/dead');
    expect(status).toBe(200);
    return (body.events as { id: number }[]).some((event) => event.id === eventId);
  }, 20_000, `event ${eventId} in the dead letters`);
  const dead = await eventWhen(eventId, (event) => event.state === 'DEAD', 'DEAD');
  expect(dead).toMatchObject({
    attempt: 1, failures: 0, error_class: 'PayloadParsingError', replayed_by: null, steps: [],
  });

  const replayed = await api('POST', `/events/${eventId}/replay`);
  expect(replayed.status, JSON.stringify(replayed.body)).toBe(202);
  // The answer is read after the commit that woke the worker: it may already
  // have claimed the row, or even failed it again; replayed_by stays.
  expect(replayed.body).toMatchObject({ id: eventId, replayed_by: 'admin' });
  const deadAgain = await eventWhen(eventId, deadAfterReplayBy('admin'), 'DEAD again after the API replay');
  expect(deadAgain).toMatchObject({ attempt: 1, failures: 0, error_class: 'PayloadParsingError' });

  const cli = await runWharf(['replay', String(eventId), '--workspace', '1', '--account', 'e2e', '--json'],
    { DATABASE_URL: banner.databaseUrl });
  expect(cli.code, cli.stderr).toBe(0);
  const cliEvent = JSON.parse(cli.stdout) as Event;
  expect(cliEvent).toMatchObject({ id: eventId, replayed_by: 'e2e' });
  expect(Date.parse(String(cliEvent.replayed_at))).toBeGreaterThanOrEqual(Date.parse(String(deadAgain.replayed_at)));
  const deadThird = await eventWhen(eventId, deadAfterReplayBy('e2e'), 'DEAD again after the CLI replay');
  expect(deadThird).toMatchObject({ attempt: 1, failures: 0, error_class: 'PayloadParsingError' });
});

it('Ctrl-C (SIGINT to the process group) drains and releases the running event, then stops everything: nothing is left', async () => {
  const { stateDir } = start!;
  const before = await listProcesses();
  // npm, sh, tsx and the wharf process name the state dir; PostgreSQL, in a
  // session of its own, is out of the terminal's process group.
  expect(before.filter((p) => p.args.includes(stateDir)).map((p) => p.pid)).toContain(banner.wharfPid);
  const postmaster = before.find((p) => p.args.includes(banner.dataDirectory) && /\bpostgres\b/.test(p.args));
  expect(postmaster).toBeDefined();
  expect(postmaster!.pgid).not.toBe(start!.child.pid);
  expect(existsSync(join(banner.dataDirectory, 'postmaster.pid'))).toBe(true);

  // An event whose handler runs for a while: Ctrl-C arrives mid-handler.
  const { eventId } = await deliverPush({ wharf_demo_sleep_ms: 60_000 });
  await eventWhen(eventId, (event) => event.state === 'LEASED', 'LEASED');

  start!.interrupt();
  const exit = await Promise.race([
    start!.exited,
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no exit within 30 s:\n${start!.output()}`)), 30_000)),
  ]);
  // npm runs the script through /bin/sh (dash), which ends by the SIGINT it
  // received once its child has exited, and npm passes that signal on; the
  // wharf process itself must exit 0, which it logs.
  expect(exit.code === 0 || exit.signal === 'SIGINT', JSON.stringify(exit)).toBe(true);
  const exited = /"pid":(\d+)[^\n]*"code":(\d+)[^\n]*"msg":"exited"/.exec(start!.output());
  expect(exited?.slice(1).map(Number), start!.output()).toEqual([banner.wharfPid, 0]);
  expect(start!.output()).not.toMatch(/stopping failed|second signal|could not record/);
  // The running event went back to the queue uncounted, while the database still ran.
  expect(start!.output()).toMatch(new RegExp(`"event_id":"${eventId}"[^\n]*"msg":"released"`));

  const after = await listProcesses();
  expect(after.filter((p) => p.args.includes(stateDir) || p.args.includes(banner.dataDirectory) || p.pgid === start!.child.pid)).toEqual([]);
  // A clean PostgreSQL shutdown removes its pid file; a killed one leaves it.
  expect(existsSync(join(banner.dataDirectory, 'postmaster.pid'))).toBe(false);
}, 60_000);
