// Where a failure was thrown, in Chromium: a real worker's handler throws
// TypeErrors of one event type from two functions; the issues list shows two
// issues, each with the place it was thrown; the issue page lists its frames;
// the dead letter's page lists them as its last failure's and on its attempt.
// The error's message, holding a secret-looking string, is on no page. The
// issue's "Bulk replay" link opens the bulk replay with its filter filled in.
import type { BrowserContext, Page } from 'playwright-core';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createWorker, type HandlerContext, type Worker } from '../../../worker/index.js';
import { browserTimeout } from '../../support/browser.js';
import { admit, adminToken, connection, signedIn, startConsoleRig, stateOf, type ConsoleRig } from '../../support/console-rig.js';
import { waitFor } from '../../support/worker-inbox.js';

vi.setConfig({ testTimeout: 180_000 });

let rig: ConsoleRig;
let worker: Worker;
let context: BrowserContext;
let page: Page;
const W = 1201;
const secret = 'sk_live_51HconsoleSecret0123456789';
const dead: string[] = [];

function chargeCard(): never {
  throw new TypeError(`no card for ${secret}`);
}

function shipParcel(): never {
  throw new TypeError(`no address for ${secret}`);
}

function handle(ctx: HandlerContext): void {
  if ((ctx.event.payload as { step?: string }).step === 'charge') chargeCard();
  shipParcel();
}

beforeAll(async () => {
  rig = await startConsoleRig();
  const db = rig.db.pool;
  const conn = await connection(db, W, 'generic', ['repo:acme/shop']);
  // DEAD at the first failure: each place counts exactly its events.
  await db.query(`SELECT wharf.set_setting('max_attempts', '1')`);
  for (const step of ['charge', 'charge', 'ship']) {
    dead.push((await admit(db, conn, { subject: 'repo:acme/shop', eventType: 'order', payload: { step } })).id);
  }
  worker = createWorker({
    connectionString: rig.db.url, handlers: { 'generic:order': handle }, concurrency: 1,
    settings: { pollEvery: 200 }, logger: pino({ level: 'silent' }),
  });
  await worker.start();
  for (const id of dead) await waitFor(async () => (await stateOf(db, id)) === 'DEAD', 30_000, `event ${id} to die`);
  ({ context, page } = await signedIn(rig, adminToken));
});

afterAll(async () => {
  await context?.close();
  await worker?.stop();
  await rig?.close();
});

describe('issue frames', () => {
  it('shows two TypeError issues of one event type, each with where it was thrown', async () => {
    await page.goto(`${rig.consoleUrl}/workspaces/${W}/issues`);
    const charge = page.getByRole('row', { name: /TypeError at test\/operator\/console\/issue-frames\.test\.ts:\d+:\d+ chargeCard/ });
    const ship = page.getByRole('row', { name: /TypeError at test\/operator\/console\/issue-frames\.test\.ts:\d+:\d+ shipParcel/ });
    await charge.waitFor({ timeout: browserTimeout });
    expect(await charge.getByRole('cell', { name: '2', exact: true }).count()).toBeGreaterThan(0);
    expect(await ship.count()).toBe(1);
    expect(await page.content()).not.toContain('sk_live');

    await ship.getByRole('link', { name: 'TypeError' }).click();
    const frames = page.getByRole('list', { name: 'Where it was thrown, innermost first' });
    await frames.waitFor();
    expect((await frames.getByRole('listitem').allTextContents())[0]).toMatch(/issue-frames\.test\.ts:\d+:\d+ shipParcel$/);
    expect(await page.content()).not.toContain('sk_live');
  });

  it("links its bulk replay with the issue's filter filled in", async () => {
    await page.goto(`${rig.consoleUrl}/workspaces/${W}/issues`);
    await page.getByRole('row', { name: /shipParcel/ }).getByRole('link', { name: 'TypeError' }).click();
    await page.getByRole('link', { name: 'Bulk replay its dead letters' }).click();
    const form = page.getByRole('form', { name: 'Start a bulk replay' });
    await form.waitFor();
    expect(await form.getByLabel('Provider').inputValue()).toBe('generic');
    expect(await form.getByLabel('Event type').inputValue()).toBe('order');
    expect(await form.getByLabel('Error class').inputValue()).toBe('TypeError');
  });

  it('shows the frames on the dead letter and its attempt', async () => {
    await page.goto(`${rig.consoleUrl}/workspaces/${W}/events/${dead[2]}`);
    const last = page.getByRole('list', { name: 'Where the last failure was thrown, innermost first' });
    await last.waitFor();
    expect((await last.getByRole('listitem').allTextContents())[0]).toMatch(/issue-frames\.test\.ts:\d+:\d+ shipParcel$/);
    const attempt = page.getByRole('list', { name: 'Where attempt 1 failed, innermost first' });
    expect(await attempt.getByRole('listitem').allTextContents()).toEqual(await last.getByRole('listitem').allTextContents());
    expect(await page.content()).not.toContain('sk_live');
  });
});
