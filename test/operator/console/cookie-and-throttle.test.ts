// What a browser test cannot easily show: over https the console's cookies
// are Secure, and failed sign-ins are throttled (slowed, then 429) while
// the right token still signs in. In process, no browser.
import { Hono } from 'hono';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Authenticator } from '../../../operator/api/authenticator.js';
import { consoleApp } from '../../../operator/console/app.js';
import { adminToken } from '../../support/api-client.js';
import { createTestDatabase, type TestDatabase } from '../../support/database.js';

let db: TestDatabase;
const origin = 'https://wharf.example';

beforeAll(async () => {
  db = await createTestDatabase();
});

afterAll(async () => {
  await db?.drop();
});

function app(): Hono {
  return new Hono().route('/console', consoleApp({ db: db.pool, adminToken }));
}

/** The sign-in form's cookie and CSRF field, as a browser would get them. */
async function signInForm(console: Hono): Promise<{ cookie: string; csrf: string; setCookie: string }> {
  const response = await console.request(`${origin}/console/login`);
  const setCookie = response.headers.get('set-cookie') ?? '';
  const csrf = /name="csrf" value="([^"]+)"/.exec(await response.text())?.[1];
  if (!csrf) throw new Error('no CSRF field on the sign-in form');
  return { cookie: setCookie.split(';')[0]!, csrf, setCookie };
}

async function post(console: Hono, form: { cookie: string; csrf: string }, token: string): Promise<Response> {
  return console.request(`${origin}/console/login`, {
    method: 'POST',
    headers: { cookie: form.cookie, origin, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ csrf: form.csrf, token }).toString(),
  });
}

it('sets Secure, HttpOnly, SameSite=Strict cookies limited to /console over https', async () => {
  const web = app();
  const form = await signInForm(web);
  expect(form.setCookie).toMatch(/; Secure/);
  const response = await post(web, form, adminToken);
  expect(response.status).toBe(303);
  expect(response.headers.get('location')).toBe('/console/workspaces');
  const session = response.headers.getSetCookie().find((cookie) => cookie.startsWith('wharf_console='));
  expect(session).toBeDefined();
  for (const flag of ['HttpOnly', 'Secure', 'SameSite=Strict', 'Path=/console']) expect(session).toContain(flag);
});

it('refuses a sign-in without the form\'s CSRF field', async () => {
  const web = app();
  const form = await signInForm(web);
  const response = await post(web, { ...form, csrf: 'forged' }, adminToken);
  expect(response.status).toBe(403);
  expect(response.headers.getSetCookie().some((cookie) => cookie.startsWith('wharf_console='))).toBe(false);
});

it('throttles failed sign-ins: five at once, five slowed, then 429; the right token still signs in', async () => {
  const waited: number[] = [];
  const authenticator = new Authenticator(db.pool, { throttle: { sleep: async (ms) => { waited.push(ms); } } });
  const web = new Hono().route('/console', consoleApp({ db: db.pool, adminToken, authenticator }));
  const form = await signInForm(web);
  for (let i = 0; i < 10; i++) expect((await post(web, form, `wrong-token-${i}`)).status).toBe(401);
  expect(waited).toEqual([250, 500, 1000, 2000, 2000]);
  const blocked = await post(web, form, 'wrong-token-10');
  expect(blocked.status).toBe(429);
  expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
  expect(blocked.headers.getSetCookie().some((cookie) => cookie.startsWith('wharf_console='))).toBe(false);

  const signedIn = await post(web, form, adminToken);
  expect(signedIn.status).toBe(303);
  expect(signedIn.headers.getSetCookie().some((cookie) => cookie.startsWith('wharf_console='))).toBe(true);
  expect(waited).toHaveLength(5);
});
