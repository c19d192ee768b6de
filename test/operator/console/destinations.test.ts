// Destinations in the console, in Chromium: a workspace token makes one
// with the form (the signing secret Wharf draws is shown once, on the
// answer, never in a URL, and is the one stored, sealed); a bad URL is
// refused naming it and saves nothing; the list shows its state and figures;
// its page shows settings, rules (added with a filter, a bad filter refused
// naming its place, edited in place), credentials (never shown), pause/resume, a new secret
// shown once; a dead letter is replayed from its row and the others after
// their count, and the event's page says where it was forwarded; a filter is tested against a stored event; the edit form
// changes it; another workspace's token gets 403 and changes nothing.
//
// The console is served here with the key ring (ConsoleDeps.keyRing), as
// server/app.ts is to pass it.
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { decryptSecret, parseKeyRing } from '../../../db/secret-box.js';
import { consoleApp } from '../../../operator/console/app.js';
import { createApiToken } from '../../../operator/sql/operator.js';
import { adminToken } from '../../support/api-client.js';
import { admitEvent, createConnection, createWorkspace } from '../../support/api-fixtures.js';
import { browserTimeout, launchBrowser } from '../../support/browser.js';
import { signIn } from '../../support/console-rig.js';
import { createTestDatabase, type TestDatabase } from '../../support/database.js';
import { testSecretKeys } from '../../support/edge-fixtures.js';

vi.setConfig({ testTimeout: 120_000 });

let db: TestDatabase;
let browser: Browser;
let server: ReturnType<typeof serve>;
let consoleUrl: string;
let context: BrowserContext;
let page: Page;
let connectionId: number;
let otherToken: string;
const W = 1301;
const OTHER = 1302;

async function stored(name: string): Promise<{ id: string; signing_secret: string; credentials: string | null; state: string } | undefined> {
  const { rows } = await db.pool.query<{ id: string; signing_secret: string; credentials: string | null; state: string }>(
    'SELECT id, signing_secret, credentials, state FROM wharf.destination WHERE workspace_id = $1 AND name = $2', [W, name]);
  return rows[0];
}

/** Claims the destination's deliveries due now and fails each for good (DEAD); others go back. */
async function killDeliveries(destinationId: string): Promise<string[]> {
  const { rows } = await db.pool.query<{ delivery_id: string; epoch: string; destination_id: string }>(
    `SELECT delivery_id, epoch, destination_id FROM wharf.claim_deliveries('fixture', 1000)`);
  const dead: string[] = [];
  for (const row of rows) {
    if (row.destination_id !== destinationId) {
      await db.pool.query('SELECT wharf.release_delivery($1, $2)', [row.delivery_id, row.epoch]);
      continue;
    }
    await db.pool.query(`SELECT wharf.fail_delivery($1, $2, 'permanent', 'HttpStatus400', 400, 7, 'nope')`, [row.delivery_id, row.epoch]);
    dead.push(row.delivery_id);
  }
  return dead;
}

beforeAll(async () => {
  db = await createTestDatabase();
  await createWorkspace(db.pool, W);
  await createWorkspace(db.pool, OTHER);
  connectionId = await createConnection(db.pool, W);
  const app = new Hono().route('/console', consoleApp({ db: db.pool, adminToken, keyRing: parseKeyRing(testSecretKeys) }));
  const port = await new Promise<number>((resolve) => {
    server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, (info: AddressInfo) => resolve(info.port));
  });
  consoleUrl = `http://127.0.0.1:${port}/console`;
  browser = await launchBrowser();
  const own = (await createApiToken(db.pool, String(W), 'oncall')).token;
  otherToken = (await createApiToken(db.pool, String(OTHER), 'other')).token;
  context = await browser.newContext();
  context.setDefaultTimeout(browserTimeout);
  page = await context.newPage();
  await signIn(page, consoleUrl, own);
}, 120_000);

afterAll(async () => {
  await context?.close();
  await browser?.close();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await db?.drop();
});

describe('destinations in the console', () => {
  let id = '';

  it('are made with the form, the secret shown once and stored sealed; a bad URL is refused naming it', async () => {
    await page.goto(`${consoleUrl}/workspaces/${W}/destinations`);
    await page.getByRole('link', { name: 'Destinations', exact: true }).waitFor();
    expect(await page.getByRole('status').first().textContent()).toMatch(/No destination yet/);
    await page.getByRole('link', { name: 'New destination' }).click();

    // A bad URL first: the answer says what is wrong, nothing is saved.
    const form = page.getByRole('form', { name: 'New destination' });
    await form.getByLabel('Name', { exact: true }).fill('shop');
    await form.getByLabel(/^URL/).fill('ftp://shop.example.test/hooks');
    const [refused] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith('/destinations') && r.request().method() === 'POST'),
      form.getByRole('button', { name: 'Create destination' }).click(),
    ]);
    expect(refused.status()).toBe(400);
    expect(await page.getByRole('alert').textContent()).toMatch(/^destination url: must be an https:\/\//);
    expect(await stored('shop')).toBeUndefined();

    await page.goto(`${consoleUrl}/workspaces/${W}/destinations/new`);
    const again = page.getByRole('form', { name: 'New destination' });
    await again.getByLabel('Name', { exact: true }).fill('shop');
    await again.getByLabel(/^URL/).fill('https://shop.example.test/hooks');
    await again.getByLabel(/^Rate limit/).fill('20');
    await again.getByLabel(/^Extra headers/).fill('X-Team: payments');
    await again.getByRole('button', { name: 'Create destination' }).click();

    const secret = (await page.locator('#new-secret').textContent())?.trim() ?? '';
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    expect(page.url(), 'never in a URL').not.toContain('whsec_');
    const row = await stored('shop');
    id = row!.id;
    expect(await decryptSecret(await parseKeyRing(testSecretKeys), { destinationId: id }, row!.signing_secret)).toBe(secret);
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Destination shop');
    expect(await page.locator('dl.facts').textContent()).toMatch(/Rate limit20 per second.*Extra headersX-Team: payments/s);

    await page.goto(`${consoleUrl}/workspaces/${W}/destinations/${id}`);
    expect(await page.content(), 'shown once').not.toContain(secret);
  });

  it('lists it with its state and figures', async () => {
    await page.goto(`${consoleUrl}/workspaces/${W}/destinations`);
    const table = page.getByRole('table', { name: 'Destinations' });
    const headers = await table.locator('thead th').allTextContents();
    expect(headers).toEqual(['Name', 'State', 'URL', 'Per minute', 'Success (1 h)', 'p50', 'p99', 'Queued', 'Dead']);
    const row = table.getByRole('row', { name: /shop/ });
    expect((await row.locator('td, th').allTextContents()).map((text) => text.trim()))
      .toEqual(['shop', 'ACTIVE', 'https://shop.example.test/hooks', '0', '—', '—', '—', '0', '0']);
    await row.getByRole('link', { name: 'shop' }).click();
    await page.getByRole('heading', { name: 'Destination shop' }).waitFor();
  });

  it('takes rules (a bad filter refused naming its place), credentials it never shows, pause, resume and a new secret shown once', async () => {
    const base = `${consoleUrl}/workspaces/${W}/destinations/${id}`;
    await page.goto(base);
    await page.getByText('Add a rule').click();
    const ruleForm = page.getByRole('form', { name: 'Add a rule' });
    await ruleForm.getByLabel(/^Filter/).fill('{"payload": {"action": {"$regex": "^o"}}}');
    const [refused] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith('/rules') && r.request().method() === 'POST'),
      ruleForm.getByRole('button', { name: 'Add rule' }).click(),
    ]);
    expect(refused.status()).toBe(400);
    expect(await page.getByRole('alert').textContent()).toBe('rule filter.payload.action: unknown operator $regex');

    await page.goto(base);
    await page.getByText('Add a rule').click();
    await ruleForm.getByLabel(/^Event types/).fill('ping');
    await ruleForm.getByLabel(/^Filter/).fill('{"payload": {"action": {"$in": ["opened", "closed"]}}}');
    await ruleForm.getByRole('button', { name: 'Add rule' }).click();
    await page.getByRole('status').filter({ hasText: 'The rule is saved' }).waitFor();
    expect(await page.getByRole('table').first().textContent()).toMatch(/event types ping.*\{"payload":\{"action":\{"\$in":\["opened","closed"\]\}\}\}/);

    // Edited in place: a criterion emptied is dropped, the rest kept.
    const { rows: [rule] } = await db.pool.query<{ id: string }>('SELECT id FROM wharf.destination_rule WHERE destination_id = $1', [id]);
    await page.getByRole('link', { name: `Edit rule ${rule!.id}` }).click();
    const editForm = page.getByRole('form', { name: 'Edit rule' });
    expect(await editForm.getByLabel(/^Filter/).inputValue()).toBe('{"payload":{"action":{"$in":["opened","closed"]}}}');
    expect(await editForm.getByLabel(/^Event types/).inputValue()).toBe('ping');
    await editForm.getByLabel(/^Event types/).fill('');
    await editForm.getByRole('button', { name: 'Save rule' }).click();
    await page.getByRole('status').filter({ hasText: 'The rule is changed' }).waitFor();
    const edited = await db.pool.query('SELECT event_types, filter, forward_only FROM wharf.destination_rule WHERE id = $1', [rule!.id]);
    expect(edited.rows).toEqual([{ event_types: null, filter: { payload: { action: { $in: ['opened', 'closed'] } } }, forward_only: false }]);

    const credentials = page.getByRole('form', { name: 'Set credentials' });
    await credentials.getByRole('combobox', { name: 'Kind' }).selectOption('header');
    await credentials.getByLabel(/^Token, password or header value/).fill('key-SEKRIT-42');
    await credentials.getByLabel(/^User \(basic\) or header name/).fill('X-Api-Key');
    await credentials.getByRole('button', { name: 'Save credentials' }).click();
    await page.getByRole('status').filter({ hasText: 'The credentials are saved' }).waitFor();
    expect(await page.locator('dl.facts').textContent()).toContain('header (stored encrypted, not shown)');
    expect(await page.content()).not.toContain('key-SEKRIT-42');
    const sealed = (await stored('shop'))!.credentials!;
    expect(JSON.parse(await decryptSecret(await parseKeyRing(testSecretKeys), { destinationId: id }, sealed)))
      .toEqual({ type: 'header', name: 'X-Api-Key', value: 'key-SEKRIT-42' });

    await page.getByRole('button', { name: 'Pause' }).click();
    await page.getByRole('status').filter({ hasText: 'The destination is paused' }).waitFor();
    expect(await page.locator('dl.facts .state').textContent()).toBe('PAUSED');
    expect((await stored('shop'))!.state).toBe('PAUSED');
    await page.getByRole('button', { name: 'Resume' }).click();
    await page.getByRole('status').filter({ hasText: 'The destination is resumed' }).waitFor();
    expect((await stored('shop'))!.state).toBe('ACTIVE');

    await page.getByRole('button', { name: 'Rotate secret' }).click();
    const secret = (await page.locator('#new-secret').textContent())?.trim() ?? '';
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    expect(await decryptSecret(await parseKeyRing(testSecretKeys), { destinationId: id }, (await stored('shop'))!.signing_secret)).toBe(secret);
    await page.goto(base);
    expect(await page.content()).not.toContain(secret);
    expect(await page.locator('dl.facts').textContent()).toMatch(/rotated; the previous one signs too until/);
  });

  it('replays a dead letter from its row, and the others after their count', async () => {
    for (let i = 0; i < 3; i += 1) await admitEvent(db.pool, connectionId, { payload: { action: 'opened' } });
    await admitEvent(db.pool, connectionId, { payload: { action: 'edited' } });
    const dead = await killDeliveries(id);
    expect(dead).toHaveLength(3);
    const base = `${consoleUrl}/workspaces/${W}/destinations/${id}`;
    await page.goto(base);
    const deadTable = page.getByRole('table', { name: 'Dead letters' });
    expect(await deadTable.locator('tbody tr').count()).toBe(3);
    await deadTable.getByRole('button', { name: `Replay delivery ${dead[0]}` }).click();
    await page.getByRole('status').filter({ hasText: 'The delivery is back in the queue' }).waitFor();
    expect(await page.getByRole('table', { name: 'Dead letters' }).locator('tbody tr').count()).toBe(2);

    const replayForm = page.getByRole('form', { name: 'Replay dead letters' });
    await replayForm.getByLabel('Error class').fill('HttpStatus400');
    await replayForm.getByRole('button', { name: 'Count matching dead letters' }).click();
    expect(await page.locator('#replay-count').textContent()).toBe('2 dead deliveries match: error class HttpStatus400.');
    // Counting replayed nothing.
    const { rows: before } = await db.pool.query("SELECT count(*)::int AS n FROM wharf.destination_delivery WHERE destination_id = $1 AND state = 'DEAD'", [id]);
    expect(before).toEqual([{ n: 2 }]);
    await page.getByRole('button', { name: 'Replay 2 dead deliveries' }).click();
    await page.getByRole('status').filter({ hasText: '2 dead deliveries are back in the queue.' }).waitFor();
    expect(await page.getByText('No dead letter.').count()).toBe(1);
    const { rows } = await db.pool.query("SELECT count(*)::int AS n FROM wharf.destination_delivery WHERE destination_id = $1 AND state = 'QUEUED' AND replayed_by = 'token:oncall'", [id]);
    expect(rows).toEqual([{ n: 3 }]);

    await page.getByRole('table', { name: 'Recent deliveries' }).getByRole('link', { name: dead[0]!, exact: true }).click();
    expect(await page.locator('dl.facts').textContent()).toContain(`wd_${dead[0]}`);
    expect(await page.getByRole('table').textContent()).toMatch(/400.*7 ms.*HttpStatus400.*nope/s);

    // The event's page names where it was forwarded, and how that went.
    await page.locator('dl.facts').getByRole('link', { name: /generic ping/ }).click();
    const forwarded = page.getByRole('table', { name: 'Forwarded to' });
    expect((await forwarded.getByRole('row', { name: /shop/ }).locator('th, td').allTextContents()).slice(0, 5))
      .toEqual(['shop', dead[0], 'QUEUED', '0', 'HTTP 400 · HttpStatus400']);
  });

  it('tests a filter against a stored event, saving nothing', async () => {
    const event = await admitEvent(db.pool, connectionId, { payload: { action: 'opened', number: 7 } });
    await page.goto(`${consoleUrl}/workspaces/${W}/destinations`);
    await page.getByRole('link', { name: 'Test a filter against an event' }).click();
    const form = page.getByRole('form', { name: 'Test a filter' });
    await form.getByLabel(/^Filter/).fill('{"payload": {"number": {"$gte": 5}}}');
    await form.getByLabel('Event id').fill(String(event));
    await form.getByRole('button', { name: 'Test' }).click();
    expect(await page.locator('#filter-result').textContent()).toMatch(new RegExp(`^The filter matches event ${event}\\.`));
    await page.getByRole('form', { name: 'Test a filter' }).getByLabel(/^Filter/).fill('{"payload": {"action": "closed"}}');
    await page.getByRole('form', { name: 'Test a filter' }).getByRole('button', { name: 'Test' }).click();
    expect(await page.locator('#filter-result').textContent()).toMatch(/does not match/);
  });

  it('is edited with its form, changing what the form changes', async () => {
    await page.goto(`${consoleUrl}/workspaces/${W}/destinations/${id}`);
    await page.getByRole('link', { name: 'Edit', exact: true }).click();
    const form = page.getByRole('form', { name: 'Edit destination' });
    expect(await form.getByLabel('Name', { exact: true }).inputValue()).toBe('shop');
    await form.getByLabel(/^Timeout/).fill('2500');
    await form.getByLabel(/^Rate limit/).fill('');
    await form.getByRole('checkbox', { name: /Ordered: one delivery/ }).uncheck();
    await form.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('status').filter({ hasText: 'The destination is changed' }).waitFor();
    const facts = await page.locator('dl.facts').textContent();
    expect(facts).toMatch(/Orderunordered.*Rate limitnone.*Timeout2500 ms/s);
    expect(facts).toContain('X-Team: payments');
  });

  it("refuses another workspace's token (403), changing nothing", async () => {
    const other = await browser.newContext();
    try {
      const otherPage = await other.newPage();
      await signIn(otherPage, consoleUrl, otherToken);
      for (const path of [`/workspaces/${W}/destinations`, `/workspaces/${W}/destinations/${id}`, `/workspaces/${W}/destinations/new`]) {
        const response = await otherPage.goto(`${consoleUrl}${path}`);
        expect(response?.status(), path).toBe(403);
      }
      // Its own workspace has no such destination.
      expect((await otherPage.goto(`${consoleUrl}/workspaces/${OTHER}/destinations/${id}`))?.status()).toBe(404);
      // A form of its own session, posted at the other workspace's destination.
      await otherPage.goto(`${consoleUrl}/workspaces/${OTHER}/destinations`);
      const status = await otherPage.evaluate(async ([url]) => {
        const csrf = document.querySelector<HTMLInputElement>('input[name="csrf"]')!.value;
        const response = await fetch(url!, { method: 'POST', body: new URLSearchParams({ csrf, state: 'PAUSED' }) });
        return response.status;
      }, [`${consoleUrl}/workspaces/${W}/destinations/${id}/state`]);
      expect(status).toBe(403);
      expect((await stored('shop'))!.state).toBe('ACTIVE');
    } finally {
      await other.close();
    }
  });

  it('deletes it', async () => {
    await page.goto(`${consoleUrl}/workspaces/${W}/destinations/${id}`);
    await page.getByRole('button', { name: 'Delete destination' }).click();
    await page.getByRole('status').filter({ hasText: 'The destination is deleted' }).waitFor();
    expect(await stored('shop')).toBeUndefined();
  });
});
