// Cancelling a running bulk replay from its console page, in Chromium: the
// page shows a Cancel button while it runs; pressing it stops it, the page
// says who cancelled it, no later batch replays anything, and another
// workspace's token cannot cancel it (403).
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { runBulkReplay } from '../../../operator/bulk-replay-runner.js';
import { startBulkReplay } from '../../../operator/sql/bulk-replay.js';
import { createApiToken } from '../../../operator/sql/operator.js';
import { createConnection, deadEvent } from '../../support/api-fixtures.js';
import { signedIn, startConsoleRig, type ConsoleRig } from '../../support/console-rig.js';

vi.setConfig({ testTimeout: 120_000 });

let rig: ConsoleRig;
let context: BrowserContext;
let page: Page;
const W = 1401;
const OTHER = 1402;

beforeAll(async () => {
  rig = await startConsoleRig();
  await rig.db.pool.query('SELECT wharf.upsert_workspace($1), wharf.upsert_workspace($2)', [W, OTHER]);
  const connection = await createConnection(rig.db.pool, W);
  for (let i = 0; i < 4; i += 1) await deadEvent(rig.db.pool, connection);
  ({ context, page } = await signedIn(rig, (await createApiToken(rig.db.pool, String(W), 'oncall')).token));
});

afterAll(async () => {
  await context?.close();
  await rig?.close();
});

describe('cancelling a bulk replay', () => {
  it('from its page: stopped, said who did it, nothing replayed after; refused to another workspace', async () => {
    // Started, one batch of one replayed, and no runner: it stays running for the page.
    const replay = await startBulkReplay(rig.db.pool, String(W), {}, 'token:oncall');
    await rig.db.pool.query('SELECT wharf.continue_bulk_replay($1, $2, 1)', [W, replay.id]);
    const pagePath = `${rig.consoleUrl}/workspaces/${W}/bulk-replays/${replay.id}`;

    const { context: theirs, page: theirPage } = await signedIn(rig, (await createApiToken(rig.db.pool, String(OTHER), 'other')).token);
    try {
      expect((await theirPage.goto(pagePath))?.status()).toBe(403);
    } finally {
      await theirs.close();
    }

    await page.goto(pagePath);
    await page.getByRole('button', { name: 'Cancel bulk replay' }).click();
    await page.getByText('Cancelled by token:oncall').waitFor();
    expect(await page.getByRole('button', { name: 'Cancel bulk replay' }).count()).toBe(0);
    expect(await page.locator('#bulk-status').textContent()).toMatch(/Replayed 1 of 4 matched .*cancelled/);

    expect(await runBulkReplay(rig.db.pool, String(W), String(replay.id))).toMatchObject({ state: 'cancelled', replayed: 1 });
    const { rows } = await rig.db.pool.query<{ state: string; n: number }>(
      'SELECT state, count(*)::int AS n FROM wharf.provider_event WHERE workspace_id = $1 GROUP BY state ORDER BY state', [W]);
    expect(rows).toEqual([{ state: 'DEAD', n: 3 }, { state: 'QUEUED', n: 1 }]);
  });
});
