// Starting a bulk replay from the console, in Chromium: the form filters by
// payload too (JSON containment, as the event search does), shows how many
// dead letters match before anything runs, and starts only when that count
// is confirmed; the filter can be changed from the count; a filter that
// matches nothing offers nothing to start, and a start that skips the count
// is refused.
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createApiToken } from '../../../operator/sql/operator.js';
import { admitEvent, createConnection, finishEvent } from '../../support/api-fixtures.js';
import { signedIn, startConsoleRig, type ConsoleRig } from '../../support/console-rig.js';

vi.setConfig({ testTimeout: 120_000 });

let rig: ConsoleRig;
let context: BrowserContext;
let page: Page;
const W = 1411;
const api = { repository: { full_name: 'acme/api' } };
const web = { repository: { full_name: 'acme/web' } };
const apiEvents: number[] = [];
const webEvents: number[] = [];

beforeAll(async () => {
  rig = await startConsoleRig();
  await rig.db.pool.query('SELECT wharf.upsert_workspace($1)', [W]);
  const connection = await createConnection(rig.db.pool, W);
  for (const [payload, ids] of [[api, apiEvents], [api, apiEvents], [api, apiEvents], [web, webEvents], [web, webEvents]] as const) {
    const id = await admitEvent(rig.db.pool, connection, { payload: { ...payload, n: ids.length } });
    await finishEvent(rig.db.pool, id, 'DEAD');
    ids.push(id);
  }
  ({ context, page } = await signedIn(rig, (await createApiToken(rig.db.pool, String(W), 'oncall')).token));
});

afterAll(async () => {
  await context?.close();
  await rig?.close();
});

async function states(ids: number[]): Promise<string[]> {
  const { rows } = await rig.db.pool.query<{ state: string }>(
    'SELECT state FROM wharf.provider_event WHERE id = ANY($1) ORDER BY id', [ids]);
  return rows.map((row) => row.state);
}

async function bulkReplays(): Promise<number> {
  const { rows } = await rig.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM wharf.bulk_replay WHERE workspace_id = $1', [W]);
  return rows[0]!.n;
}

describe('starting a bulk replay', () => {
  it('by payload: the count first, nothing replayed until it is confirmed, then only those', async () => {
    await page.goto(`${rig.consoleUrl}/workspaces/${W}/bulk-replays`);
    await page.getByLabel('Payload contains (JSON)').fill('{"repository": {"full_name": "acme/api"}}');
    await page.getByRole('button', { name: 'Count matching dead letters' }).click();
    const count = page.locator('#bulk-count');
    expect(await count.textContent()).toBe('3 dead letters match: payload {"repository":{"full_name":"acme/api"}}.');
    expect(await states([...apiEvents, ...webEvents]), 'counting replays nothing').toEqual(Array(5).fill('DEAD'));
    expect(await bulkReplays()).toBe(0);

    // Back to the form, the filter kept, and counted again.
    await page.getByRole('link', { name: 'Change the filter' }).click();
    expect(JSON.parse(await page.getByLabel('Payload contains (JSON)').inputValue())).toEqual(api);
    await page.getByRole('button', { name: 'Count matching dead letters' }).click();

    await page.getByRole('button', { name: 'Replay 3 dead letters' }).click();
    await page.waitForURL(/\/bulk-replays\/\d+$/);
    const status = page.locator('#bulk-status');
    await status.filter({ hasText: 'finished' }).waitFor({ timeout: 60_000 });
    expect(await status.textContent()).toBe('Replayed 3 of 3 matched (0 skipped), finished.');
    expect(await states(apiEvents)).toEqual(['QUEUED', 'QUEUED', 'QUEUED']);
    expect(await states(webEvents)).toEqual(['DEAD', 'DEAD']);
  });

  it('offers nothing to start when nothing matches, and refuses a start that skipped the count', async () => {
    const before = await bulkReplays();
    await page.goto(`${rig.consoleUrl}/workspaces/${W}/bulk-replays`);
    await page.getByLabel('Payload contains (JSON)').fill('{"repository": {"full_name": "acme/none"}}');
    await page.getByRole('button', { name: 'Count matching dead letters' }).click();
    expect(await page.locator('#bulk-count').textContent()).toMatch(/^0 dead letters match: /);
    await page.getByText('Nothing to replay.').waitFor();
    expect(await page.getByRole('button', { name: /^Replay/ }).count()).toBe(0);

    const csrf = await page.locator('input[name=csrf]').first().inputValue();
    const unconfirmed = await page.request.post(`${rig.consoleUrl}/workspaces/${W}/bulk-replays`, {
      form: { csrf, payload: JSON.stringify(web) }, headers: { origin: new URL(rig.consoleUrl).origin }, maxRedirects: 0,
    });
    expect(unconfirmed.status()).toBe(400);
    expect(await unconfirmed.text()).toContain('Count the matching dead letters first');
    expect(await bulkReplays()).toBe(before);
    expect(await states(webEvents)).toEqual(['DEAD', 'DEAD']);
  });
});
