// Everything a console browser test stands on: a fresh migrated database, the
// real Node server (edge, API and console) on a free port, a Chromium, and
// the steps every test takes (signing in, admitting through wharf.admit).
import { randomUUID } from 'node:crypto';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { Registry } from 'prom-client';
import { startNodeServer, type NodeServer } from '../../server/node.js';
import { createTestDatabase, type TestDatabase } from './database.js';
import { adminToken } from './api-client.js';
import { browserTimeout, launchBrowser } from './browser.js';
import { edgeEnv, recorder } from './edge-fixtures.js';
import { admitDelivery, buildConnection } from './inbox-fixtures.js';

export { adminToken };

export interface ConsoleRig {
  db: TestDatabase;
  server: NodeServer;
  browser: Browser;
  /** The console's address, e.g. http://127.0.0.1:41234/console. */
  consoleUrl: string;
  close(): Promise<void>;
}

export async function startConsoleRig(): Promise<ConsoleRig> {
  const db = await createTestDatabase();
  const server = await startNodeServer({
    databaseUrl: db.url,
    env: { ...edgeEnv, WHARF_ADMIN_TOKEN: adminToken },
    registry: new Registry(),
    logger: recorder().logger,
  });
  const browser = await launchBrowser().catch(async (error: unknown) => {
    await server.close();
    await db.drop();
    throw error;
  });
  return {
    db, server, browser, consoleUrl: `${server.url}/console`,
    async close() {
      await browser.close();
      await server.close();
      await db.drop();
    },
  };
}

/** A fresh browser context (its own cookies) with the console's sign-in done. */
export async function signedIn(rig: ConsoleRig, token: string): Promise<{ context: BrowserContext; page: Page }> {
  const context = await rig.browser.newContext();
  context.setDefaultTimeout(browserTimeout);
  const page = await context.newPage();
  await signIn(page, rig.consoleUrl, token);
  return { context, page };
}

export async function signIn(page: Page, consoleUrl: string, token: string): Promise<void> {
  await page.goto(`${consoleUrl}/login`);
  await page.getByLabel('Admin or workspace token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
}

type Db = Pick<TestDatabase['pool'], 'query'>;

export const consoleSource = 'https://hooks.example.test';

/** A webhook connection of `workspace` for `provider`, subscribed to `subjects`; its id. */
export async function connection(db: Db, workspace: number, provider = 'generic', subjects: string[] = []): Promise<string> {
  return String(await buildConnection(db, {
    workspace, provider, source: consoleSource, externalId: `console-${workspace}-${randomUUID().slice(0, 8)}`, subjects,
  }));
}

export interface Delivery {
  provider?: string;
  eventType?: string;
  subject: string;
  payload?: unknown;
  headers?: Record<string, string>;
}

/**
 * Admits one delivery through wharf.admit (the only way rows enter the
 * inbox) on a connection subscribed to its subject; the stored event's id
 * and the receipt's outcome ('stored' while paused, too).
 */
export async function admit(db: Db, connectionId: string, delivery: Delivery): Promise<{ id: string; outcome: string }> {
  // WH409 (the route changed during admission) asks the caller to retry, as the edge does.
  return admitDelivery(db, {
    provider: delivery.provider ?? 'generic', source: consoleSource, deliveryKey: randomUUID(), eventType: delivery.eventType ?? 'ping',
    route: { connection_id: Number(connectionId) }, subjects: [delivery.subject], payload: delivery.payload ?? {},
    headers: delivery.headers ?? {}, retryRouteChanged: true,
  });
}

/** The event's state as the inbox has it (for waiting on workers, not for assertions the page should make). */
export async function stateOf(db: Db, id: string): Promise<string | undefined> {
  const { rows } = await db.query<{ state: string }>('SELECT state FROM wharf.provider_event WHERE id = $1', [id]);
  return rows[0]?.state;
}
