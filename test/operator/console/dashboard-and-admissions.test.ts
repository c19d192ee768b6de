// The dashboard's charts (admitted and handled per minute, queue depth, age of
// the oldest waiting event: inline SVG, each an image with a text summary,
// and the numbers in a table), the admission log, and the screenshot of the
// dashboard that README shows (docs/console.png with WHARF_UPDATE_SCREENSHOT=1,
// a temporary file otherwise, so that a test run leaves the checkout clean).
import { mkdirSync, mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { pino } from 'pino';
import { setConnectionState } from '../../../operator/sql/connections.js';
import { createWorker, type Worker } from '../../../worker/index.js';
import {
  admit, adminToken, connection, consoleSource, signedIn, startConsoleRig, stateOf, type ConsoleRig,
} from '../../support/console-rig.js';
import { waitFor } from '../../support/worker-inbox.js';

// A browser, a server and a worker on a loaded two-core CI machine: waits of
// up to a minute inside a test must not meet vitest's own limit first.
vi.setConfig({ testTimeout: 180_000 });

let rig: ConsoleRig;
let worker: Worker;
const W = 801;
const handled: string[] = [];
let waiting: string[];

beforeAll(async () => {
  rig = await startConsoleRig();
  const busy = await connection(rig.db.pool, W, 'generic', ['repo:acme/api', 'repo:acme/other']);
  const github = await connection(rig.db.pool, W, 'github', ['repo:acme/api']);
  // An event no host handles (event type 'unhandled' has no key) stays QUEUED: the depth.
  worker = createWorker({
    connectionString: rig.db.url,
    handlers: { 'generic:ping': () => {}, 'github:push': () => {} },
    concurrency: 2,
    settings: { pollEvery: 1_000 },
    logger: pino({ level: 'silent' }),
  });
  await worker.start();
  for (let i = 0; i < 6; i++) handled.push((await admit(rig.db.pool, busy, { subject: 'repo:acme/api' })).id);
  for (let i = 0; i < 2; i++) handled.push((await admit(rig.db.pool, github, { provider: 'github', eventType: 'push', subject: 'repo:acme/api' })).id);
  waiting = [(await admit(rig.db.pool, busy, { subject: 'repo:acme/other', eventType: 'unhandled' })).id];
  await waitFor(async () => {
    for (const id of handled) if ((await stateOf(rig.db.pool, id)) !== 'DONE') return false;
    return true;
  }, 30_000, 'the worker to handle the events');
});

afterAll(async () => {
  await worker?.stop();
  await rig?.close();
});

it('draws admitted/handled, depth and oldest age with text alternatives, and takes the screenshot', async () => {
  const { context, page } = await signedIn(rig, adminToken);
  try {
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.goto(`${rig.consoleUrl}/workspaces/${W}?hours=1`);
    const charts = page.getByRole('img');
    expect(await charts.count()).toBe(3);
    const throughput = page.getByRole('img', { name: /Admitted and handled per minute/ });
    const summary = await page.locator('#throughput-desc').textContent();
    expect(summary).toMatch(new RegExp(`admitted: .*, ${handled.length + waiting.length} in all`));
    expect(summary).toMatch(new RegExp(`handled: .*, ${handled.length} in all`));
    expect(await throughput.locator('polyline').count()).toBe(2);
    expect(await page.locator('#depth-desc').textContent()).toContain('depth: latest 1 events');

    // The same numbers as a table: the last hour, a row per minute.
    await page.getByText('The numbers, minute by minute').click();
    const table = page.getByRole('table', { name: 'Queue history per minute' });
    const rows = await table.locator('tbody tr').count();
    expect(rows).toBeGreaterThanOrEqual(60);
    expect(rows).toBeLessThanOrEqual(61);
    const admittedColumn = await table.locator('tbody tr td:nth-child(2)').allTextContents();
    expect(admittedColumn.reduce((sum, n) => sum + Number(n), 0)).toBe(handled.length + waiting.length);
    await page.getByText('The numbers, minute by minute').click();

    const target = process.env.WHARF_UPDATE_SCREENSHOT === '1'
      ? fileURLToPath(new URL('../../../docs/console.png', import.meta.url))
      : join(mkdtempSync(join(tmpdir(), 'wharf-console-')), 'console.png');
    mkdirSync(join(target, '..'), { recursive: true });
    await page.screenshot({ path: target, fullPage: true });
    expect(statSync(target).size).toBeGreaterThan(10_000);
  } finally {
    await context.close();
  }
});

it('lists deliveries refused at admission, for the workspace and (admin) for all', async () => {
  const refusing = await connection(rig.db.pool, W, 'generic', ['repo:acme/closed']);
  await setConnectionState(rig.db.pool, refusing, 'SUSPENDED');
  const deliveryKey = `refused-${Date.now()}`;
  await rig.db.pool.query(`SELECT wharf.admit('generic', $1, $2, 'ping', $3, $4, '{}', '{}')`,
    [consoleSource, deliveryKey, { connection_id: Number(refusing) }, ['repo:acme/closed']]);

  const { context, page } = await signedIn(rig, adminToken);
  try {
    await page.goto(`${rig.consoleUrl}/workspaces/${W}/admissions`);
    const row = page.getByRole('row').filter({ hasText: deliveryKey });
    expect(await row.textContent()).toContain('source-inactive');
    await page.goto(`${rig.consoleUrl}/installation/admissions`);
    await page.getByRole('row').filter({ hasText: deliveryKey }).waitFor();
  } finally {
    await context.close();
  }
});
