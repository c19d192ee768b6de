// Events in Chromium: filtering the list (state, provider, event type,
// subject, received between) and paging it, opening one event (payload and
// headers escaped, attempts and steps), replaying a DEAD one and seeing a real
// worker handle it, and a bulk replay followed to the end on its progress page.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import { pino } from 'pino';
import { runBulkReplay } from '../../../operator/bulk-replay-runner.js';
import { startBulkReplay } from '../../../operator/sql/bulk-replay.js';
import { createWorker, type HandlerContext, type Worker } from '../../../worker/index.js';
import { reloadUntil } from '../../support/browser.js';
import {
  admit, adminToken, connection, signedIn, startConsoleRig, stateOf, type ConsoleRig,
} from '../../support/console-rig.js';
import { waitFor } from '../../support/worker-inbox.js';

// A browser, a server and a worker on a loaded two-core CI machine: waits of
// up to a minute inside a test must not meet vitest's own limit first.
vi.setConfig({ testTimeout: 180_000 });

let rig: ConsoleRig;
let worker: Worker;
let context: BrowserContext;
let page: Page;
const W = 601;
let generic: string;
let github: string;

/**
 * Fails permanently (SyntaxError: DEAD at once) an event whose payload says
 * so until it is replayed; every other event, and a replayed one, is handled
 * in a step of its own.
 */
async function handle(ctx: HandlerContext): Promise<void> {
  const payload = ctx.event.payload as { fail?: boolean };
  if (payload.fail && ctx.event.replayedAt === null) throw new SyntaxError('the payload says fail');
  await ctx.step('record', async () => undefined);
}

beforeAll(async () => {
  rig = await startConsoleRig();
  generic = await connection(rig.db.pool, W, 'generic', ['repo:acme/api', 'repo:acme/web']);
  github = await connection(rig.db.pool, W, 'github', ['repo:acme/api']);
  worker = createWorker({
    connectionString: rig.db.url,
    handlers: { 'generic:*': handle, 'github:*': handle },
    concurrency: 2,
    settings: { pollEvery: 1_000 },
    // Dead letters are this suite's point: keep their log lines out of the test output.
    logger: pino({ level: 'silent' }),
  });
  await worker.start();
  ({ context, page } = await signedIn(rig, adminToken));
});

afterAll(async () => {
  await context?.close();
  await worker?.stop();
  await rig?.close();
});

/** The event ids the current list page links to, in order. */
async function listedIds(): Promise<string[]> {
  return page.locator('tbody th[scope=row] a').allTextContents();
}

describe('the events list', () => {
  it('filters by provider, event type, subject, state and received time, and pages with the "Older" link', async () => {
    const push = await admit(rig.db.pool, github, { provider: 'github', eventType: 'push', subject: 'repo:acme/api' });
    const issue = await admit(rig.db.pool, generic, { eventType: 'issue', subject: 'repo:acme/web' });
    await waitFor(async () => (await stateOf(rig.db.pool, push.id)) === 'DONE' && (await stateOf(rig.db.pool, issue.id)) === 'DONE',
      30_000, 'the worker to handle both');

    await page.goto(`${rig.consoleUrl}/workspaces/${W}/events`);
    await page.getByLabel('Provider').fill('github');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/provider=github/);
    expect(await listedIds()).toEqual([push.id]);

    await page.getByLabel('Provider').fill('');
    await page.getByLabel('Event type').fill('issue');
    await page.getByLabel('Subject').fill('repo:acme/web');
    await page.getByLabel('State').selectOption('DONE');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/event_type=issue/);
    expect(await listedIds()).toEqual([issue.id]);

    await page.getByLabel('State').selectOption('QUEUED');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/state=QUEUED/);
    await page.getByText('No events match.').waitFor();

    // Received before a time long past: nothing; from then on: both.
    await page.goto(`${rig.consoleUrl}/workspaces/${W}/events`);
    await page.getByLabel('Received before (UTC)').fill('2001-01-01T00:00:00');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/received_before=/);
    await page.getByText('No events match.').waitFor();
    await page.goto(`${rig.consoleUrl}/workspaces/${W}/events?received_after=2001-01-01T00:00`);
    expect(await listedIds()).toEqual(expect.arrayContaining([push.id, issue.id]));
  });

  it('pages newest first: 50 a page, then the rest behind "Older", filters kept', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 53; i++) ids.push((await admit(rig.db.pool, generic, { eventType: 'paged', subject: 'repo:acme/web' })).id);
    await page.goto(`${rig.consoleUrl}/workspaces/${W}/events?event_type=paged`);
    const newest = [...ids].reverse();
    expect(await listedIds()).toEqual(newest.slice(0, 50));
    await page.getByRole('link', { name: 'Older' }).click();
    await page.waitForURL(/cursor=/);
    expect(new URL(page.url()).searchParams.get('event_type')).toBe('paged');
    expect(await listedIds()).toEqual(newest.slice(50));
    expect(await page.getByRole('link', { name: 'Older' }).count()).toBe(0);
  });
});

describe('one event', () => {
  it('shows payload and headers as text (escaped), its attempts and steps; a DEAD one replays and is handled', async () => {
    const marker = '<img src=x id=injected>';
    const dead = await admit(rig.db.pool, generic, {
      eventType: 'fragile', subject: 'repo:acme/api', payload: { fail: true, note: marker },
      headers: { 'x-request-id': 'req-<b>42</b>' },
    });
    await waitFor(async () => (await stateOf(rig.db.pool, dead.id)) === 'DEAD', 30_000, 'the event to die');

    await page.goto(`${rig.consoleUrl}/workspaces/${W}/dead`);
    await page.getByRole('link', { name: dead.id, exact: true }).click();
    await page.getByRole('heading', { name: `Event ${dead.id}` }).waitFor();
    // Markup in a payload is shown, never parsed.
    expect(await page.getByLabel('Payload').textContent()).toContain(marker);
    expect(await page.locator('#injected').count()).toBe(0);
    expect(await page.getByLabel('Headers').textContent()).toContain('req-<b>42</b>');
    // The failed attempt, with how it ended and its error class.
    const attempts = page.getByRole('table', { name: 'Attempts' });
    const firstAttempt = attempts.getByRole('row').nth(1);
    expect(await firstAttempt.textContent()).toContain('permanent');
    expect(await firstAttempt.textContent()).toContain('SyntaxError');
    await page.getByText('No step committed.').waitFor();

    await page.getByRole('button', { name: 'Replay' }).click();
    await page.getByRole('status').filter({ hasText: 'Replayed' }).waitFor();
    await reloadUntil(page, async () => (await page.locator('dl.facts .state').textContent()) === 'DONE', 'the replayed event to be handled');
    expect(await attempts.getByRole('row').count()).toBe(3);
    expect(await attempts.getByRole('row').nth(2).textContent()).toContain('handled');
    await page.getByRole('table', { name: 'Steps' }).getByRole('rowheader', { name: 'record' }).waitFor();
    expect(await page.getByRole('button', { name: 'Replay' }).count()).toBe(0);
  });

  it('answers 409 with the state named when the event is no longer DEAD', async () => {
    const done = await admit(rig.db.pool, generic, { eventType: 'fine', subject: 'repo:acme/api' });
    await waitFor(async () => (await stateOf(rig.db.pool, done.id)) === 'DONE', 30_000, 'the event to be handled');
    await page.goto(`${rig.consoleUrl}/workspaces/${W}/events/${done.id}`);
    const csrf = await page.locator('input[name=csrf]').first().inputValue();
    const response = await page.request.post(`${rig.consoleUrl}/workspaces/${W}/events/${done.id}/replay`, {
      form: { csrf }, headers: { origin: new URL(rig.consoleUrl).origin }, maxRedirects: 0,
    });
    expect(response.status()).toBe(409);
    expect(await response.text()).toContain('this one is DONE');
  });
});

describe('bulk replay', () => {
  it('replays every matching dead letter, shows the progress until finished, and the worker handles them', async () => {
    const victims: string[] = [];
    for (let i = 0; i < 12; i++) {
      victims.push((await admit(rig.db.pool, generic, { eventType: 'batch', subject: 'repo:acme/web', payload: { fail: true } })).id);
    }
    // A dead letter the filter leaves out.
    const other = (await admit(rig.db.pool, generic, { eventType: 'other', subject: 'repo:acme/web', payload: { fail: true } })).id;
    await waitFor(async () => {
      for (const id of [...victims, other]) if ((await stateOf(rig.db.pool, id)) !== 'DEAD') return false;
      return true;
    }, 60_000, 'every event to die');

    await page.goto(`${rig.consoleUrl}/workspaces/${W}/bulk-replays`);
    await page.getByLabel('Event type').fill('batch');
    await page.getByLabel('Error class').fill('SyntaxError');
    await page.getByRole('button', { name: 'Count matching dead letters' }).click();
    await page.getByRole('button', { name: 'Replay 12 dead letters' }).click();
    await page.waitForURL(/\/bulk-replays\/\d+$/);
    const status = page.locator('#bulk-status');
    // Running, it refreshes itself (script polling, or a meta refresh): no reload here.
    await status.filter({ hasText: 'finished' }).waitFor({ timeout: 60_000 });
    expect(await status.textContent()).toBe('Replayed 12 of 12 matched (0 skipped), finished.');
    const bar = page.getByRole('progressbar');
    expect(await bar.getAttribute('value')).toBe('12');
    expect(await bar.getAttribute('max')).toBe('12');

    await waitFor(async () => {
      for (const id of victims) if ((await stateOf(rig.db.pool, id)) !== 'DONE') return false;
      return true;
    }, 60_000, 'the worker to handle every replayed event');
    expect(await stateOf(rig.db.pool, other)).toBe('DEAD');
    await page.goto(`${rig.consoleUrl}/workspaces/${W}/events?event_type=batch&state=DONE`);
    expect((await listedIds()).sort()).toEqual([...victims].sort());
  });

  it('follows a running replay by itself (its nonce\'d script under the CSP) until it is finished', async () => {
    const dead: string[] = [];
    for (let i = 0; i < 3; i++) {
      dead.push((await admit(rig.db.pool, generic, { eventType: 'later', subject: 'repo:acme/web', payload: { fail: true } })).id);
    }
    await waitFor(async () => {
      for (const id of dead) if ((await stateOf(rig.db.pool, id)) !== 'DEAD') return false;
      return true;
    }, 60_000, 'every event to die');
    // Recorded but not run yet: the page opens on a running replay.
    const replay = await startBulkReplay(rig.db.pool, String(W), { event_type: 'later' }, 'test');
    const violations: string[] = [];
    page.on('console', (message) => {
      if (/Content Security Policy/i.test(message.text())) violations.push(message.text());
    });
    await page.goto(`${rig.consoleUrl}/workspaces/${W}/bulk-replays/${replay.id}`);
    const status = page.locator('#bulk-status');
    expect(await status.textContent()).toBe('Replayed 0 of 3 matched (0 skipped), running.');

    await runBulkReplay(rig.db.pool, String(W), String(replay.id));
    // No reload from here: the page's own script must notice.
    await status.filter({ hasText: 'finished' }).waitFor({ timeout: 30_000 });
    expect(await status.textContent()).toBe('Replayed 3 of 3 matched (0 skipped), finished.');
    expect(violations).toEqual([]);
    const progress = await page.request.get(`${rig.consoleUrl}/workspaces/${W}/bulk-replays/${replay.id}/progress`);
    expect(await progress.json()).toEqual({ state: 'finished', matched: 3, replayed: 3, skipped: 0 });
  });
});
