// Pausing a connection from the console holds its events while a worker runs
// (stored, QUEUED, never claimed), and resuming lets the worker handle them.
// A second, active connection proves the worker kept claiming meanwhile.
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { pino } from 'pino';
import { createWorker, type Worker } from '../../../worker/index.js';
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
const W = 701;

beforeAll(async () => {
  rig = await startConsoleRig();
  worker = createWorker({
    connectionString: rig.db.url,
    handlers: { 'generic:*': () => {} },
    concurrency: 2,
    settings: { pollEvery: 1_000 },
    logger: pino({ level: 'silent' }),
  });
  await worker.start();
});

afterAll(async () => {
  await worker?.stop();
  await rig?.close();
});

it('holds a paused connection\'s events while a worker runs, and the worker handles them after Resume', async () => {
  const paused = await connection(rig.db.pool, W, 'generic', ['repo:acme/held']);
  const active = await connection(rig.db.pool, W, 'generic', ['repo:acme/free']);
  const { context, page } = await signedIn(rig, adminToken);
  try {
    await page.goto(`${rig.consoleUrl}/workspaces/${W}/connections`);
    const row = page.getByRole('row').filter({ has: page.getByRole('rowheader', { name: paused, exact: true }) });
    expect(await row.textContent()).toContain('repo:acme/held');
    await page.getByRole('button', { name: `Pause connection ${paused}` }).click();
    await page.getByRole('status').filter({ hasText: 'Connection paused' }).waitFor();
    expect(await row.locator('.state').textContent()).toBe('PAUSED');

    const held: string[] = [];
    for (let i = 0; i < 3; i++) {
      const receipt = await admit(rig.db.pool, paused, { subject: 'repo:acme/held', eventType: 'held' });
      expect(receipt.outcome).toBe('stored');
      held.push(receipt.id);
    }
    // Admitted after the held ones: once the worker has handled it, it has
    // claimed past them, and they must still be waiting.
    const probe = await admit(rig.db.pool, active, { subject: 'repo:acme/free', eventType: 'probe' });
    await waitFor(async () => (await stateOf(rig.db.pool, probe.id)) === 'DONE', 30_000, 'the active connection\'s event');

    await page.goto(`${rig.consoleUrl}/workspaces/${W}/events?event_type=held`);
    const states = () => page.locator('tbody .state').allTextContents();
    expect(await states()).toEqual(['QUEUED', 'QUEUED', 'QUEUED']);
    expect(await page.locator('tbody th[scope=row] a').allTextContents()).toEqual([...held].reverse());

    await page.goto(`${rig.consoleUrl}/workspaces/${W}/connections`);
    await page.getByRole('button', { name: `Resume connection ${paused}` }).click();
    await page.getByRole('status').filter({ hasText: 'Connection resumed' }).waitFor();
    expect(await row.locator('.state').textContent()).toBe('ACTIVE');

    await page.goto(`${rig.consoleUrl}/workspaces/${W}/events?event_type=held`);
    await reloadUntil(page, async () => (await states()).join() === 'DONE,DONE,DONE', 'the held events to be handled');
  } finally {
    await context.close();
  }
});

it('pauses and resumes the whole workspace from the same page', async () => {
  const { context, page } = await signedIn(rig, adminToken);
  try {
    await page.goto(`${rig.consoleUrl}/workspaces/${W}/connections`);
    await page.getByRole('button', { name: `Pause workspace ${W}` }).click();
    await page.getByRole('status').filter({ hasText: 'Workspace paused' }).waitFor();
    const { rows } = await rig.db.pool.query<{ state: string }>('SELECT state FROM wharf.workspace WHERE id = $1', [W]);
    expect(rows[0]!.state).toBe('PAUSED');
    await page.getByRole('button', { name: `Resume workspace ${W}` }).click();
    await page.getByRole('status').filter({ hasText: 'Workspace resumed' }).waitFor();
  } finally {
    await context.close();
  }
});
