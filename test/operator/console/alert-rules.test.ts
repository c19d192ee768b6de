// Alert rules from the console, in Chromium: a workspace token makes a rule
// with the form (the secret Wharf generates is shown once, on the answer,
// and is the one stored), a bad rule is refused with what is wrong, and the
// rule is deleted with its row's button; a sent alert names its issue and
// links to its page; a rule's button sends a test alert, listed as a test;
// a rule is edited with its form, keeping its id, alerts, URL and secret;
// another workspace's token gets 403 on the page and on the forms, and
// changes nothing.
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createApiToken } from '../../../operator/sql/operator.js';
import { deadEvent } from '../../support/api-fixtures.js';
import { connection, signedIn, startConsoleRig, type ConsoleRig } from '../../support/console-rig.js';

vi.setConfig({ testTimeout: 120_000 });

let rig: ConsoleRig;
let context: BrowserContext;
let page: Page;
const W = 1201;
const OTHER = 1202;
let otherToken: string;
let connectionId: string;

async function rulesOf(workspace: number): Promise<{ id: string; name: string; secret: string | null }[]> {
  const { rows } = await rig.db.pool.query<{ id: string; name: string; secret: string | null }>(
    'SELECT id, name, secret FROM wharf.alert_rule WHERE workspace_id = $1 ORDER BY id', [workspace]);
  return rows;
}

beforeAll(async () => {
  rig = await startConsoleRig();
  connectionId = await connection(rig.db.pool, W);
  await connection(rig.db.pool, OTHER);
  const own = (await createApiToken(rig.db.pool, String(W), 'oncall')).token;
  otherToken = (await createApiToken(rig.db.pool, String(OTHER), 'other')).token;
  ({ context, page } = await signedIn(rig, own));
});

afterAll(async () => {
  await context?.close();
  await rig?.close();
});

describe('alert rules in the console', () => {
  it('are made with the form, showing a generated secret once, refused when incomplete, and deleted from their row', async () => {
    await page.goto(`${rig.consoleUrl}/workspaces/${W}/alerts`);
    const form = page.getByRole('form', { name: 'New rule' });
    await form.getByLabel('Name').fill('pager');
    await form.getByRole('combobox', { name: /^When/ }).selectOption('issue_opened');
    await form.getByRole('combobox', { name: /^To/ }).selectOption('webhook');
    await form.getByLabel(/^URL/).fill('https://alerts.example.test/wharf');
    await form.getByRole('button', { name: 'Save rule' }).click();

    const secret = (await page.locator('#new-secret').textContent())?.trim();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(page.url(), 'never in a URL').not.toContain('whsec_');
    await expect.poll(() => page.getByRole('row', { name: /pager/ }).count()).toBe(1);
    await expect.poll(() => page.getByRole('row', { name: /pager/ }).textContent()).toMatch(/issue_opened.*webhook · alerts\.example\.test.*token:oncall/s);
    const [stored] = await rulesOf(W);
    expect(stored).toMatchObject({ name: 'pager', secret });

    await page.goto(`${rig.consoleUrl}/workspaces/${W}/alerts`);
    expect(await page.content(), 'shown once').not.toContain(secret);

    // A stuck-scope rule needs a window: refused, saying so, nothing saved.
    const again = page.getByRole('form', { name: 'New rule' });
    await again.getByLabel('Name').fill('stuck');
    await again.getByRole('combobox', { name: /^When/ }).selectOption('stuck_scope');
    await again.getByLabel(/^URL/).fill('https://alerts.example.test/wharf');
    const [refused] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith('/alert-rules') && r.request().method() === 'POST'),
      again.getByRole('button', { name: 'Save rule' }).click(),
    ]);
    expect(refused.status()).toBe(400);
    expect(await page.getByRole('alert').textContent()).toMatch(/window_seconds/);
    expect((await rulesOf(W)).map((r) => r.name)).toEqual(['pager']);

    await page.goto(`${rig.consoleUrl}/workspaces/${W}/alerts`);
    await page.getByRole('button', { name: 'Delete rule pager' }).click();
    await page.getByText('The rule is deleted').waitFor();
    expect(await page.getByRole('row', { name: /pager/ }).count()).toBe(0);
    expect(await rulesOf(W)).toEqual([]);
  });

  it('name the issue a sent alert was about, with its link; send a test alert from a rule; edit a rule, keeping its alerts', async () => {
    const secret = 'whsec_c2VjcmV0LXNlY3JldA==';
    const { rows: [made] } = await rig.db.pool.query<{ rule: { id: number } }>(
      `SELECT wharf.create_alert_rule($1, 'issues', 'issue_opened', NULL, NULL, 'webhook', 'https://alerts.example.test/edit', $2, 'setup') AS rule`,
      [W, secret]);
    const ruleId = made!.rule.id;
    await deadEvent(rig.db.pool, Number(connectionId));
    const { rows: [lease] } = await rig.db.pool.query<{ token: string }>("SELECT wharf.take_alert_sender('console-test', '1 minute') AS token");
    await rig.db.pool.query('SELECT wharf.evaluate_alert_rules($1)', [lease!.token]);
    await rig.db.pool.query('SELECT wharf.release_alert_sender($1)', [lease!.token]);
    const { rows: [issue] } = await rig.db.pool.query<{ id: string }>('SELECT id FROM wharf.issue WHERE workspace_id = $1', [W]);

    await page.goto(`${rig.consoleUrl}/workspaces/${W}/alerts`);
    const link = page.getByRole('link', { name: new RegExp(`^issue ${issue!.id}: `) });
    expect(await link.getAttribute('href')).toBe(`${new URL(rig.consoleUrl).pathname}/workspaces/${W}/issues/${issue!.id}`);
    await link.click();
    await page.waitForURL(`**/workspaces/${W}/issues/${issue!.id}`);

    await page.goto(`${rig.consoleUrl}/workspaces/${W}/alerts`);
    await page.getByRole('button', { name: 'Send a test alert of rule issues' }).click();
    await page.getByText('A test alert is on its way').waitFor();
    await expect.poll(() => page.getByRole('row', { name: /test issue_opened/ }).count()).toBe(1);
    const { rows: tests } = await rig.db.pool.query('SELECT rule_id, state FROM wharf.alert WHERE test ORDER BY id');
    expect(tests).toEqual([{ rule_id: String(ruleId), state: 'pending' }]);

    await page.getByRole('link', { name: 'Edit rule issues' }).click();
    const form = page.getByRole('form', { name: 'Edit rule' });
    expect(await form.getByLabel('Name').inputValue()).toBe('issues');
    // Refused when incomplete, saying what is wrong; nothing changed.
    await form.getByRole('combobox', { name: /^When/ }).selectOption('dead_letter_rate');
    const [refused] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST'),
      form.getByRole('button', { name: 'Save changes' }).click(),
    ]);
    expect(refused.status()).toBe(400);
    expect(await page.getByRole('alert').textContent()).toMatch(/threshold/);

    await page.goto(`${rig.consoleUrl}/workspaces/${W}/alert-rules/${ruleId}/edit`);
    const again = page.getByRole('form', { name: 'Edit rule' });
    await again.getByLabel('Name').fill('stuck heads');
    await again.getByRole('combobox', { name: /^When/ }).selectOption('stuck_scope');
    await again.getByLabel(/^Window/).fill('600');
    await again.getByRole('button', { name: 'Save changes' }).click();
    await page.getByText('The rule is changed').waitFor();
    const { rows: [edited] } = await rig.db.pool.query(
      'SELECT name, kind, window_seconds, url, secret, updated_by FROM wharf.alert_rule WHERE id = $1', [ruleId]);
    expect(edited).toEqual({ name: 'stuck heads', kind: 'stuck_scope', window_seconds: 600, url: 'https://alerts.example.test/edit', secret,
      updated_by: 'token:oncall' });
    const { rows: [kept] } = await rig.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM wharf.alert WHERE rule_id = $1', [ruleId]);
    expect(kept!.n, 'its alerts stay').toBe(2);
    await expect.poll(() => page.getByRole('row', { name: /stuck heads/ }).count()).toBeGreaterThanOrEqual(2);
    await rig.db.pool.query('DELETE FROM wharf.alert_rule WHERE id = $1', [ruleId]);
  });

  it("refuse another workspace's token: 403 on the page and on every form, nothing changed", async () => {
    const { rows: [kept] } = await rig.db.pool.query<{ rule: { id: number } }>(
      `SELECT wharf.create_alert_rule($1, 'kept', 'issue_opened', NULL, NULL, 'slack', 'https://hooks.slack.example/T/B/x', NULL, 'setup') AS rule`, [W]);
    const { context: theirs, page: theirPage } = await signedIn(rig, otherToken);
    try {
      const view = await theirPage.goto(`${rig.consoleUrl}/workspaces/${W}/alerts`);
      expect(view?.status()).toBe(403);
      expect(await theirPage.content()).not.toContain('kept');

      // Their own page's forms (with their own CSRF token), pointed at W.
      for (const action of [`/workspaces/${W}/alert-rules`, `/workspaces/${W}/alert-rules/${kept!.rule.id}/delete`,
        `/workspaces/${W}/alert-rules/${kept!.rule.id}`, `/workspaces/${W}/alert-rules/${kept!.rule.id}/test`]) {
        await theirPage.goto(`${rig.consoleUrl}/workspaces/${OTHER}/alerts`);
        const form = theirPage.getByRole('form', { name: 'New rule' });
        await form.getByLabel('Name').fill('intruder');
        await form.getByLabel(/^URL/).fill('https://alerts.example.test/intruder');
        await form.evaluate((element, target) => element.setAttribute('action', target), `${new URL(rig.consoleUrl).pathname}${action}`);
        const [response] = await Promise.all([
          theirPage.waitForResponse((r) => r.request().method() === 'POST'),
          form.getByRole('button', { name: 'Save rule' }).click(),
        ]);
        expect(response.status(), action).toBe(403);
      }
      expect((await rulesOf(W)).map((r) => r.name)).toEqual(['kept']);
      expect(await rulesOf(OTHER)).toEqual([]);
      const { rows: [tests] } = await rig.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM wharf.alert WHERE test');
      expect(tests!.n, 'no test alert sent').toBe(0);
    } finally {
      await theirs.close();
    }
  });
});
