// The on-call pages in Chromium: an issue opens when a real worker's handler
// fails, is acknowledged and resolved from its page, and reopens on the live
// list when the failure returns; a stuck scope is shown, links the events
// waiting behind its head, and is unblocked by moving its head to the dead
// letters after a confirmation, after which the worker handles its
// successors; an issue alert rule fires once per issue into a local receiver
// with a valid Standard Webhooks signature and shows delivered on the Alerts
// page; the live events list shows a new event without a reload; a
// JSON search finds exactly the matching events and none of another
// workspace's; another workspace's token gets 403 on every new page. Each
// page's screenshot (light and dark) is kept in WHARF_SCREENSHOT_DIR (by
// default a directory under the system's temp dir, named in the output).
import { randomBytes } from 'node:crypto';
import { mkdirSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createApiToken } from '../../../operator/sql/operator.js';
import { createWorker, startAlertSender, type HandlerContext, type Worker } from '../../../worker/index.js';
import { browserTimeout } from '../../support/browser.js';
import { admit, adminToken, connection, signedIn, startConsoleRig, stateOf, type ConsoleRig } from '../../support/console-rig.js';
import { ageScope } from '../../support/api-fixtures.js';
import { waitFor } from '../../support/worker-inbox.js';

vi.setConfig({ testTimeout: 180_000 });

const screenshotDir = process.env.WHARF_SCREENSHOT_DIR ?? join(tmpdir(), 'wharf-console-screenshots');
let rig: ConsoleRig;
let worker: Worker;
let context: BrowserContext;
let page: Page;
const W = 1101;
const OTHER = 1102;
let conn: string;
let otherToken: string;
const stuck: { head: string; behind: string[]; scopeKey: string } = { head: '', behind: [], scopeKey: '' };
/** An event with a nested payload, for the JSON viewer. */
let nested = '';
/** The local receiver of the workspace's alert rule, and what it received. */
let receiver: Server;
const alertSecret = `whsec_${randomBytes(32).toString('base64')}`;
const received: { headers: Record<string, string>; body: string }[] = [];

class UpstreamDown extends Error {
  override name = 'UpstreamDown';
}

/** Fails (unknown: retried later) an event whose payload says so; handles every other. */
async function handle(ctx: HandlerContext): Promise<void> {
  if ((ctx.event.payload as { fail?: boolean }).fail) throw new UpstreamDown('the upstream is down');
}

async function screenshot(name: string, target: Page = page): Promise<void> {
  const path = join(screenshotDir, `${name}.png`);
  await target.screenshot({ path, fullPage: true });
  expect(statSync(path).size).toBeGreaterThan(1000);
}

beforeAll(async () => {
  mkdirSync(screenshotDir, { recursive: true });
  console.info(`console screenshots: ${screenshotDir}`);
  rig = await startConsoleRig();
  const db = rig.db.pool;
  conn = await connection(db, W, 'generic', ['repo:acme/stuck']);
  // A failing event is DEAD at its first failure: no retry of it can reopen
  // a resolved issue before the test makes the failure return.
  await db.query(`SELECT wharf.set_setting('max_attempts', '1')`);
  receiver = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const headers = Object.fromEntries(['webhook-id', 'webhook-timestamp', 'webhook-signature'].map((h) => [h, String(request.headers[h])]));
      received.push({ headers, body: Buffer.concat(chunks).toString('utf8') });
      response.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  // Told of every new issue, from before anything fails.
  await db.query(`SELECT wharf.create_alert_rule($1, 'on-call', 'issue_opened', NULL, NULL, 'webhook', $2, $3, 'setup')`,
    [W, `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/alerts`, alertSecret]);
  await connection(db, OTHER, 'generic', []);
  otherToken = (await createApiToken(db, String(OTHER), 'other')).token;

  // A scope held behind its head: the head failed and waits an hour for its
  // retry; two events wait behind it. It has been failing for an hour.
  stuck.head = (await admit(db, conn, { subject: 'repo:acme/stuck' })).id;
  for (let i = 0; i < 2; i++) stuck.behind.push((await admit(db, conn, { subject: 'repo:acme/stuck' })).id);
  const { rows } = await db.query<{ id: string; lease_epoch: string; scope_key: string }>(`SELECT id, lease_epoch, scope_key FROM wharf.claim('setup', 100)`);
  for (const row of rows) {
    if (row.id === stuck.head) {
      await db.query(`SELECT wharf.fail($1, $2, 'transient', 'UpstreamTimeout')`, [row.id, row.lease_epoch]);
      stuck.scopeKey = row.scope_key;
    } else await db.query('SELECT wharf.release($1, $2)', [row.id, row.lease_epoch]);
  }
  await db.query(`UPDATE wharf.provider_event SET next_attempt_at = now() + interval '1 hour' WHERE id = $1`, [stuck.head]);
  await ageScope(db, stuck.head, 3600);

  worker = createWorker({
    connectionString: rig.db.url, handlers: { 'generic:ping': handle }, concurrency: 2,
    settings: { pollEvery: 500 }, logger: pino({ level: 'silent' }),
  });
  await worker.start();
  ({ context, page } = await signedIn(rig, adminToken));
  await page.setViewportSize({ width: 1280, height: 900 });
});

afterAll(async () => {
  await new Promise((resolve) => receiver?.close(resolve));
  await context?.close();
  await worker?.stop();
  await rig?.close();
});

describe('issues', () => {
  it('opens when events fail, is acknowledged and resolved from its page, and reopens on the live list', async () => {
    const db = rig.db.pool;
    await db.query('SELECT wharf.subscribe($1, $2)', [conn, 'repo:acme/flaky-1']);
    await admit(db, conn, { subject: 'repo:acme/flaky-1', payload: { fail: true } });

    await page.goto(`${rig.consoleUrl}/workspaces/${W}/issues`);
    // The live list shows it once the worker has failed it: no reload.
    const row = page.getByRole('row', { name: /UpstreamDown/ });
    await row.waitFor({ timeout: browserTimeout });
    expect(await row.getByText('open', { exact: true }).count()).toBe(1);
    await screenshot('issues');

    await row.getByRole('link', { name: 'UpstreamDown' }).click();
    await page.getByRole('heading', { name: /^Issue \d+: UpstreamDown$/ }).waitFor();
    // Its failures over time: a chart of the last 48 hours, whose description says what it shows.
    const chart = page.getByRole('img', { name: 'Failures per hour, last 48 hours' });
    expect(await chart.count()).toBe(1);
    expect(await chart.locator('desc').textContent())
      .toMatch(/^Failures: latest \d+ per hour, peak [1-9]\d* at \d\d-\d\d \d\d:00, [1-9]\d* in all; Dead letters: .* \(from \d\d-\d\d \d\d:00 to \d\d-\d\d \d\d:00 UTC\)\.$/);
    expect(await chart.locator('polyline').count()).toBe(2);
    await page.getByRole('button', { name: 'Acknowledge' }).click();
    await page.getByText('The issue is acknowledged now.').waitFor();
    expect(await page.locator('dl.facts').textContent()).toMatch(/acknowledged\s*by admin/);
    await screenshot('issue');
    await page.getByRole('button', { name: 'Resolve' }).click();
    await page.getByText('The issue is resolved now.').waitFor();

    // The fix did not hold: the same failure returns, and the list reopens it by itself.
    await page.goto(`${rig.consoleUrl}/workspaces/${W}/issues`);
    await page.evaluate(() => { (window as unknown as { marker: number }).marker = 42; });
    await page.getByRole('row', { name: /UpstreamDown/ }).getByText('resolved', { exact: true }).waitFor();
    await db.query('SELECT wharf.subscribe($1, $2)', [conn, 'repo:acme/flaky-2']);
    await admit(db, conn, { subject: 'repo:acme/flaky-2', payload: { fail: true } });
    await page.getByRole('row', { name: /UpstreamDown/ }).getByText('open', { exact: true }).waitFor({ timeout: browserTimeout });
    expect(await page.getByRole('row', { name: /UpstreamDown/ }).textContent()).toMatch(/reopened 1×/);
    expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(42);
  });
});

describe('alerts', () => {
  it('an issue rule fires once per issue into the local receiver with a valid signature, and the Alerts page shows it delivered', async () => {
    const sender = startAlertSender({ pool: rig.db.pool, holder: 'console-test', everyMs: 3_600_000 });
    try {
      expect(await sender.runOnce()).toMatchObject({ held: true, created: 2, delivered: 2 });
      expect(await sender.runOnce()).toMatchObject({ created: 0, delivered: 0 });
    } finally {
      await sender.stop();
    }
    expect(received).toHaveLength(2);
    const classes = received.map((r) => (new Webhook(alertSecret).verify(r.body, r.headers) as { data: { facts: { issue: { error_class: string } } } })
      .data.facts.issue.error_class);
    expect(classes.sort()).toEqual(['UpstreamDown', 'UpstreamTimeout']);
    expect(received.map((r) => r.body).join()).not.toContain(alertSecret);

    await page.goto(`${rig.consoleUrl}/workspaces/${W}/alerts`);
    const rows = page.getByRole('table', { name: 'Alerts' }).locator('tbody tr');
    expect(await rows.count()).toBe(2);
    expect(await rows.first().textContent()).toMatch(/on-call.*issue_opened.*delivered.*HTTP 204/);
    expect(await page.content()).not.toContain(alertSecret);
    await screenshot('alerts');
  });
});

describe('stuck scopes', () => {
  it('shows a scope held behind its failing head and unblocks it: its successors are handled', async () => {
    await page.goto(`${rig.consoleUrl}/workspaces/${W}/stuck?minutes=10`);
    const row = page.getByRole('row', { name: /repo:acme\/stuck/ });
    await row.waitFor();
    expect(await row.textContent()).toMatch(/failing/);
    expect(await row.textContent()).toMatch(/UpstreamTimeout/);
    expect(await row.locator('td.num').last().textContent()).toBe('2');
    await screenshot('stuck-scopes');
    for (const id of stuck.behind) expect(await stateOf(rig.db.pool, id)).toBe('QUEUED');

    // What waits behind the head, one click away.
    await row.getByRole('link', { name: 'The events waiting behind the head of repo:acme/stuck' }).click();
    await page.waitForURL(/\/events\?/);
    const waiting = await page.getByRole('table').locator('tbody th a').allTextContents();
    expect(waiting.sort()).toEqual([stuck.head, ...stuck.behind].sort());
    await page.goBack();

    // Giving up on the head asks first: the table's button changes nothing.
    await row.getByRole('button', { name: 'Move head to dead letters' }).click();
    const confirm = page.getByRole('form', { name: 'Confirm moving the head to the dead letters' });
    await confirm.waitFor();
    expect(await stateOf(rig.db.pool, stuck.head)).toBe('QUEUED');
    await confirm.getByRole('button', { name: 'Move head to dead letters' }).click();
    await page.getByText('The head is in the dead letters').waitFor();
    await waitFor(async () => {
      for (const id of stuck.behind) if ((await stateOf(rig.db.pool, id)) !== 'DONE') return false;
      return true;
    }, 30_000, 'the worker to handle the successors');
    expect(await stateOf(rig.db.pool, stuck.head)).toBe('DEAD');
    const actions = page.getByRole('table', { name: 'Recent actions' });
    await actions.getByRole('row', { name: /Move head to dead letters/ }).waitFor();
    expect(await actions.getByRole('row', { name: /Move head to dead letters/ }).textContent()).toContain('admin');
  });
});

describe('live events and search', () => {
  it('shows a new event on the events list without a reload', async () => {
    await page.goto(`${rig.consoleUrl}/workspaces/${W}/events`);
    await page.evaluate(() => { (window as unknown as { marker: number }).marker = 7; });
    await rig.db.pool.query('SELECT wharf.subscribe($1, $2)', [conn, 'repo:acme/live']);
    const { id } = await admit(rig.db.pool, conn, { subject: 'repo:acme/live' });
    await page.getByRole('link', { name: id, exact: true }).waitFor({ timeout: browserTimeout });
    expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(7);

    // The event's own page and the dashboard refresh themselves the same way.
    for (const path of [`events/${id}`, '']) {
      await page.goto(`${rig.consoleUrl}/workspaces/${W}${path ? `/${path}` : ''}`);
      await page.locator('#live-status', { hasText: /^Live: updated/ }).waitFor({ timeout: browserTimeout });
    }
  });

  it('finds exactly the events whose payload contains the JSON typed, and none of another workspace', async () => {
    const db = rig.db.pool;
    await db.query('SELECT wharf.subscribe($1, $2)', [conn, 'repo:acme/search']);
    const otherConn = await connection(db, OTHER, 'generic', ['repo:acme/search']);
    const matching = [
      (await admit(db, conn, { subject: 'repo:acme/search', payload: { repository: { full_name: 'acme/api' }, n: 1 } })).id,
      (await admit(db, conn, { subject: 'repo:acme/search', payload: { repository: { full_name: 'acme/api' }, n: 2 } })).id,
    ];
    await admit(db, conn, { subject: 'repo:acme/search', payload: { repository: { full_name: 'acme/web' } } });
    const theirs = (await admit(db, otherConn, { subject: 'repo:acme/search', payload: { repository: { full_name: 'acme/api' } } })).id;

    await page.goto(`${rig.consoleUrl}/workspaces/${W}/events`);
    await page.getByLabel('Payload contains (JSON)').fill('{"repository": {"full_name": "acme/api"}}');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/payload=/);
    nested = matching[0]!;
    const ids = await page.locator('tbody th[scope="row"] a').allTextContents();
    expect(ids).toEqual([...matching].reverse());
    expect(ids).not.toContain(theirs);
    expect(await page.getByLabel('Payload contains (JSON)').inputValue()).toBe('{"repository": {"full_name": "acme/api"}}');
    await screenshot('events-search');

    await page.getByLabel('Payload contains (JSON)').fill('acme/api');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.getByText(/Payload contains must be a JSON object/).waitFor();
  });

  it('folds the JSON of an event, and follows the system\'s dark scheme', async () => {
    await page.goto(`${rig.consoleUrl}/workspaces/${W}/events/${nested}`);
    const payload = page.getByLabel('Payload');
    expect(await payload.textContent()).toContain('"full_name": "acme/api"');
    const summary = payload.locator('summary', { hasText: '"repository"' });
    const repository = summary.locator('xpath=..');
    expect(await repository.getAttribute('open')).not.toBeNull();
    await summary.click();
    expect(await repository.getAttribute('open')).toBeNull();
    expect(await payload.locator('.j-string', { hasText: '"acme/api"' }).isVisible()).toBe(false);
    await screenshot('event');
    const dark = await rig.browser.newContext({ colorScheme: 'dark' });
    try {
      const darkPage = await dark.newPage();
      await darkPage.goto(`${rig.consoleUrl}/login`);
      const background = await darkPage.evaluate(() => getComputedStyle(document.body).backgroundColor);
      expect(background).toBe('rgb(13, 17, 23)');
      await screenshot('sign-in-dark', darkPage);
    } finally {
      await dark.close();
    }
  });
});

describe('isolation', () => {
  it('refuses another workspace\'s token on every new page, and shows none of its data', async () => {
    const { context: theirs, page: theirPage } = await signedIn(rig, otherToken);
    try {
      for (const path of ['issues', 'stuck', 'stuck/confirm?scope_key=x&event_id=1', 'alerts', 'issues/1', `events?payload=${encodeURIComponent('{"n":1}')}`]) {
        const response = await theirPage.goto(`${rig.consoleUrl}/workspaces/${W}/${path}`);
        expect(response?.status(), path).toBe(403);
        expect(await theirPage.content()).not.toMatch(/UpstreamDown|repo:acme\/stuck/);
      }
      const own = await theirPage.goto(`${rig.consoleUrl}/workspaces/${OTHER}/issues`);
      expect(own?.status()).toBe(200);
      expect(await theirPage.content()).not.toMatch(/UpstreamDown/);
    } finally {
      await theirs.close();
    }
  });
});
