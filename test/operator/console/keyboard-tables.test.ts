// The console's tables with the keyboard only, in Chromium: Tab reaches the
// events list's rows (one row in the tab order, drawn focused), j/k and the
// arrow keys move between them, Enter opens the focused row's event; the
// issues list and the stuck scopes list open an issue and a stuck head the
// same way. No mouse, no click.
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { admitEvent, ageScope, createConnection, deadEvent } from '../../support/api-fixtures.js';
import { adminToken, signedIn, startConsoleRig, type ConsoleRig } from '../../support/console-rig.js';

vi.setConfig({ testTimeout: 120_000 });

let rig: ConsoleRig;
let context: BrowserContext;
let page: Page;
const W = 1301;
/** Newest first, as the events list shows them. */
let events: number[] = [];
let stuckHead = 0;

/** Presses Tab until a table row has the focus (at most `limit` times); the row's text. */
async function tabToRow(limit = 80): Promise<string> {
  for (let i = 0; i < limit; i += 1) {
    await page.keyboard.press('Tab');
    const row = await page.evaluate(() => (document.activeElement?.matches('table[data-rows] > tbody > tr') ? document.activeElement.textContent : null));
    if (row !== null) return row;
  }
  throw new Error(`no table row took the focus after ${limit} Tabs`);
}

const focusedRowIndex = () => page.evaluate(() => {
  const row = document.activeElement;
  return row instanceof HTMLTableRowElement && row.matches('tbody > tr') ? row.sectionRowIndex : -1;
});

beforeAll(async () => {
  rig = await startConsoleRig();
  const db = rig.db.pool;
  await db.query('SELECT wharf.upsert_workspace($1)', [W]);
  const connection = await createConnection(db, W);
  await deadEvent(db, connection);
  // A stuck scope: its head failed an hour ago and waits for its retry.
  stuckHead = await admitEvent(db, connection, { subject: 'repo:acme/keyboard-stuck' });
  const { rows } = await db.query<{ id: string; lease_epoch: string }>(`SELECT id, lease_epoch FROM wharf.claim('setup', 100)`);
  for (const row of rows) {
    if (Number(row.id) === stuckHead) await db.query(`SELECT wharf.fail($1, $2, 'transient', 'UpstreamDown')`, [row.id, row.lease_epoch]);
    else await db.query('SELECT wharf.release($1, $2)', [row.id, row.lease_epoch]);
  }
  await db.query(`UPDATE wharf.provider_event SET next_attempt_at = now() + interval '1 hour' WHERE id = $1`, [stuckHead]);
  await ageScope(db, stuckHead, 3600);
  for (let i = 0; i < 3; i += 1) await admitEvent(db, connection);
  const listed = await db.query<{ id: string }>('SELECT id FROM wharf.provider_event WHERE workspace_id = $1 ORDER BY id DESC', [W]);
  events = listed.rows.map((row) => Number(row.id));
  ({ context, page } = await signedIn(rig, adminToken));
});

afterAll(async () => {
  await context?.close();
  await rig?.close();
});

describe('keyboard tables', () => {
  it('the events list: Tab reaches a row, drawn focused; j/k and the arrows move; Enter opens the event', async () => {
    await page.goto(`${rig.consoleUrl}/workspaces/${W}/events`);
    const first = await tabToRow();
    expect(first).toContain(String(events[0]));
    expect(await focusedRowIndex()).toBe(0);
    const outline = await page.evaluate(() => getComputedStyle(document.activeElement!).outlineStyle);
    expect(outline, 'the focused row is drawn').not.toBe('none');

    await page.keyboard.press('j');
    await page.keyboard.press('ArrowDown');
    expect(await focusedRowIndex()).toBe(2);
    await page.keyboard.press('k');
    expect(await focusedRowIndex()).toBe(1);
    await page.keyboard.press('End');
    expect(await focusedRowIndex()).toBe(events.length - 1);
    await page.keyboard.press('ArrowUp');
    await page.keyboard.press('Home');
    expect(await focusedRowIndex()).toBe(0);
    await page.keyboard.press('ArrowDown');
    expect(await page.evaluate(() => document.querySelectorAll('table[data-rows] > tbody > tr[tabindex="0"]').length),
      'one row in the tab order: the one moved to').toBe(1);

    await Promise.all([page.waitForURL(`**/workspaces/${W}/events/${events[1]}`), page.keyboard.press('Enter')]);
  });

  it('the issues list: j moves to the next issue, Enter opens it', async () => {
    const { rows } = await rig.db.pool.query<{ id: string; error_class: string }>(
      'SELECT id, error_class FROM wharf.issue WHERE workspace_id = $1', [W]);
    expect(rows.map((row) => row.error_class).sort(), "the dead letter's and the failing head's").toEqual(['SyntaxError', 'UpstreamDown']);
    await page.goto(`${rig.consoleUrl}/workspaces/${W}/issues`);
    await tabToRow();
    await page.keyboard.press('j');
    const second = await page.evaluate(() => document.activeElement?.querySelector('th')?.textContent ?? '');
    const issue = rows.find((row) => row.error_class === second);
    expect(issue, `the second row names an issue (${second})`).toBeDefined();
    await Promise.all([page.waitForURL(`**/workspaces/${W}/issues/${issue!.id}`), page.keyboard.press('Enter')]);
    expect(await page.locator('h1').textContent()).toContain(second);
  });

  it('the stuck scopes list: Enter opens the stuck head', async () => {
    await page.goto(`${rig.consoleUrl}/workspaces/${W}/stuck`);
    expect(await tabToRow()).toContain('repo:acme/keyboard-stuck');
    await Promise.all([page.waitForURL(`**/workspaces/${W}/events/${stuckHead}`), page.keyboard.press('Enter')]);
  });
});
