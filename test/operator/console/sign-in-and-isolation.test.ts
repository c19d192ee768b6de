// The console's doors, in Chromium: signing in with an admin or workspace
// token (cookie HttpOnly, SameSite=Strict, Path=/console), a wrong token
// refused, a workspace token that cannot reach another workspace's events
// even by URL, a POST without its CSRF token refused, a revoked token that
// stops working, signing out, and the security headers of every page.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createApiToken, revokeApiToken } from '../../../operator/sql/operator.js';
import { admitInstallationEvent } from '../../support/api-fixtures.js';
import {
  admit, adminToken, connection, signedIn, signIn, startConsoleRig, stateOf, type ConsoleRig,
} from '../../support/console-rig.js';

// A browser, a server and a worker on a loaded two-core CI machine: waits of
// up to a minute inside a test must not meet vitest's own limit first.
vi.setConfig({ testTimeout: 180_000 });

let rig: ConsoleRig;
const A = 501;
const B = 502;
let tokenA: string;
let eventA: string;
let eventB: string;
let connectionA: string;

beforeAll(async () => {
  rig = await startConsoleRig();
  connectionA = await connection(rig.db.pool, A, 'generic', ['repo:acme/a']);
  const connectionB = await connection(rig.db.pool, B, 'generic', ['repo:other/b']);
  eventA = (await admit(rig.db.pool, connectionA, { subject: 'repo:acme/a', payload: { mine: 'alpha-payload' } })).id;
  eventB = (await admit(rig.db.pool, connectionB, { subject: 'repo:other/b', payload: { secret: 'bravo-payload' } })).id;
  tokenA = (await createApiToken(rig.db.pool, String(A), 'console')).token;
});

afterAll(async () => {
  await rig?.close();
});

describe('signing in', () => {
  it('keeps the token in an HttpOnly, SameSite=Strict cookie scoped to /console, and sends the admin to the workspaces', async () => {
    const { context, page } = await signedIn(rig, adminToken);
    try {
      expect(new URL(page.url()).pathname).toBe('/console/workspaces');
      await page.getByRole('link', { name: String(A), exact: true }).waitFor();
      const cookies = await context.cookies();
      const session = cookies.find((cookie) => cookie.name === 'wharf_console');
      expect(session).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/console', secure: false });
      expect(await page.evaluate(() => document.cookie)).not.toContain('wharf_console');
    } finally {
      await context.close();
    }
  });

  it('lets the admin see installation rows (no workspace), which no workspace list shows', async () => {
    const installation = String(await admitInstallationEvent(rig.db.pool));
    const { context, page } = await signedIn(rig, adminToken);
    try {
      await page.getByRole('link', { name: 'events', exact: true }).click();
      await page.getByRole('heading', { name: 'Events · Installation' }).waitFor();
      await page.getByRole('link', { name: installation, exact: true }).click();
      await page.getByRole('heading', { name: `Event ${installation}` }).waitFor();
      expect(await page.getByLabel('Payload').textContent()).toContain('"action": "created"');
      await page.goto(`${rig.consoleUrl}/workspaces/${A}/events`);
      expect(await page.getByRole('link', { name: installation, exact: true }).count()).toBe(0);
    } finally {
      await context.close();
    }
  });

  it('refuses a wrong token with the form again and sets no session', async () => {
    const context = await rig.browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${rig.consoleUrl}/login`);
      await page.getByLabel('Admin or workspace token').fill(`${tokenA}x`);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('alert').filter({ hasText: 'That token is not valid.' }).waitFor();
      expect((await context.cookies()).map((cookie) => cookie.name)).not.toContain('wharf_console');
    } finally {
      await context.close();
    }
  });

  it('sends a browser without a session to the sign-in form', async () => {
    const context = await rig.browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${rig.consoleUrl}/workspaces/${A}/events`);
      expect(new URL(page.url()).pathname).toBe('/console/login');
    } finally {
      await context.close();
    }
  });
});

describe('a workspace token', () => {
  it('sees its own events and never another workspace\'s, whatever the URL', async () => {
    const { context, page } = await signedIn(rig, tokenA);
    try {
      expect(new URL(page.url()).pathname).toBe(`/console/workspaces/${A}`);
      await page.goto(`${rig.consoleUrl}/workspaces/${A}/events`);
      await page.getByRole('link', { name: eventA, exact: true }).waitFor();
      expect(await page.getByRole('link', { name: eventB, exact: true }).count()).toBe(0);

      // Another workspace's list: refused before any query.
      const list = await page.goto(`${rig.consoleUrl}/workspaces/${B}/events`);
      expect(list?.status()).toBe(403);
      expect(await page.content()).not.toContain(`>${eventB}<`);
      // Another workspace's event through its own workspace's URL: not found there.
      const throughOwn = await page.goto(`${rig.consoleUrl}/workspaces/${A}/events/${eventB}`);
      expect(throughOwn?.status()).toBe(404);
      expect(await page.content()).not.toContain('bravo-payload');
      const direct = await page.goto(`${rig.consoleUrl}/workspaces/${B}/events/${eventB}`);
      expect(direct?.status()).toBe(403);
      expect(await page.content()).not.toContain('bravo-payload');
      // The admin's pages.
      expect((await page.goto(`${rig.consoleUrl}/workspaces`))?.status()).toBe(403);
      expect((await page.goto(`${rig.consoleUrl}/installation/events`))?.status()).toBe(403);
    } finally {
      await context.close();
    }
  });

  it('sees connections read-only: no Pause button, and a forged pause is refused', async () => {
    const { context, page } = await signedIn(rig, tokenA);
    try {
      await page.goto(`${rig.consoleUrl}/workspaces/${A}/connections`);
      await page.getByRole('rowheader', { name: connectionA }).waitFor();
      expect(await page.getByRole('button', { name: /Pause/ }).count()).toBe(0);
      const csrf = await page.locator('input[name=csrf]').first().inputValue();
      const response = await page.request.post(`${rig.consoleUrl}/workspaces/${A}/connections/${connectionA}/state`, {
        form: { csrf, state: 'PAUSED' }, headers: { origin: new URL(rig.consoleUrl).origin }, maxRedirects: 0,
      });
      expect(response.status()).toBe(403);
      const { rows } = await rig.db.pool.query<{ state: string }>('SELECT state FROM wharf.connection WHERE id = $1', [connectionA]);
      expect(rows[0]!.state).toBe('ACTIVE');
    } finally {
      await context.close();
    }
  });

  it('stops working at the next page once revoked', async () => {
    const revocable = await createApiToken(rig.db.pool, String(A), 'revocable');
    const { context, page } = await signedIn(rig, revocable.token);
    try {
      await page.goto(`${rig.consoleUrl}/workspaces/${A}/events`);
      await page.getByRole('link', { name: eventA, exact: true }).waitFor();
      expect(await revokeApiToken(rig.db.pool, String(A), String(revocable.id))).toBe(true);
      await page.goto(`${rig.consoleUrl}/workspaces/${A}/events`);
      expect(new URL(page.url()).pathname).toBe('/console/login');
      await page.getByRole('alert').filter({ hasText: 'no longer valid' }).waitFor();
    } finally {
      await context.close();
    }
  });
});

describe('writes', () => {
  it('refuse a POST without the CSRF token, from a form or from elsewhere, and change nothing', async () => {
    const { context, page } = await signedIn(rig, adminToken);
    try {
      await page.goto(`${rig.consoleUrl}/workspaces/${A}/connections`);
      // The console's own form, with its CSRF field taken out.
      await page.locator(`form[action$="/connections/${connectionA}/state"] input[name=csrf]`).evaluate((input) => input.remove());
      await page.getByRole('button', { name: `Pause connection ${connectionA}` }).click();
      await page.getByRole('alert').filter({ hasText: 'CSRF' }).waitFor();
      expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Not allowed');

      // The session cookie alone (a same-origin request without the field).
      const bare = await page.request.post(`${rig.consoleUrl}/workspaces/${A}/connections/${connectionA}/state`, {
        form: { state: 'PAUSED' }, headers: { origin: new URL(rig.consoleUrl).origin }, maxRedirects: 0,
      });
      expect(bare.status()).toBe(403);
      // The right field from another origin: hono/csrf's Origin check.
      await page.goto(`${rig.consoleUrl}/workspaces/${A}/connections`);
      const csrf = await page.locator('input[name=csrf]').first().inputValue();
      const crossSite = await page.request.post(`${rig.consoleUrl}/workspaces/${A}/connections/${connectionA}/state`, {
        form: { csrf, state: 'PAUSED' }, headers: { origin: 'https://evil.example' }, maxRedirects: 0,
      });
      expect(crossSite.status()).toBe(403);
      // A JSON body carries no form field.
      const json = await page.request.post(`${rig.consoleUrl}/workspaces/${A}/connections/${connectionA}/state`, {
        data: { csrf, state: 'PAUSED' }, headers: { origin: new URL(rig.consoleUrl).origin }, maxRedirects: 0,
      });
      expect(json.status()).toBe(403);

      const { rows } = await rig.db.pool.query<{ state: string }>('SELECT state FROM wharf.connection WHERE id = $1', [connectionA]);
      expect(rows[0]!.state).toBe('ACTIVE');
      expect(await stateOf(rig.db.pool, eventA)).toBe('QUEUED');
    } finally {
      await context.close();
    }
  });
});

describe('signing out', () => {
  it('clears the cookie and sends later pages to the sign-in form', async () => {
    const { context, page } = await signedIn(rig, tokenA);
    try {
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByRole('heading', { name: 'Sign in to the Wharf console' }).waitFor();
      expect((await context.cookies()).map((cookie) => cookie.name)).not.toContain('wharf_console');
      await page.goto(`${rig.consoleUrl}/workspaces/${A}/events`);
      expect(new URL(page.url()).pathname).toBe('/console/login');
      // And signing in again works from there.
      await signIn(page, rig.consoleUrl, tokenA);
    } finally {
      await context.close();
    }
  });
});

describe('every page', () => {
  it('forbids inline script without its nonce, framing and caching', async () => {
    const { context, page } = await signedIn(rig, adminToken);
    try {
      const response = await page.goto(`${rig.consoleUrl}/workspaces/${A}/events`);
      const headers = response!.headers();
      const csp = headers['content-security-policy'] ?? '';
      expect(csp).toMatch(/script-src 'nonce-[A-Za-z0-9+/=]+'/);
      expect(csp).not.toContain('unsafe-inline');
      expect(csp).toContain("frame-ancestors 'none'");
      expect(headers['x-frame-options']).toBe('DENY');
      expect(headers['cache-control']).toBe('no-store');
      const login = await context.request.get(`${rig.consoleUrl}/login`);
      expect(login.headers()['cache-control']).toBe('no-store');
    } finally {
      await context.close();
    }
  });
});
