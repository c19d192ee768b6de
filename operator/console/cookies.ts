// The console's cookies: the session (the token itself, which every request
// identifies again, so a revoked token stops working at once) and the
// sign-in form's CSRF secret. HttpOnly (no script reads them), SameSite=Strict
// (no other site's request carries them), Path limited to the console, and
// Secure whenever the browser reached us over https.
import type { Context } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import type { CookieOptions } from 'hono/utils/cookie';

export const sessionCookie = 'wharf_console';
export const loginCookie = 'wharf_console_login';

/** A signed-in browser keeps its session this long at most (seconds). */
const sessionMaxAge = 12 * 60 * 60;

function options(c: Context, basePath: string, maxAge: number): CookieOptions {
  return { httpOnly: true, sameSite: 'Strict', path: basePath, secure: isHttps(c), maxAge };
}

/**
 * https as the browser sees it: the request URL, or a TLS-terminating proxy's
 * X-Forwarded-Proto. Trusting the header only ever adds Secure, which a
 * client could only use to lose its own session.
 */
function isHttps(c: Context): boolean {
  return new URL(c.req.url).protocol === 'https:' || c.req.header('x-forwarded-proto')?.split(',')[0]?.trim() === 'https';
}

export function readCookie(c: Context, name: string): string | undefined {
  const value = getCookie(c, name);
  return value === undefined || value === '' ? undefined : value;
}

export function setSession(c: Context, basePath: string, token: string): void {
  setCookie(c, sessionCookie, token, options(c, basePath, sessionMaxAge));
}

export function clearSession(c: Context, basePath: string): void {
  deleteCookie(c, sessionCookie, options(c, basePath, 0));
}

export function setLoginSecret(c: Context, basePath: string, secret: string): void {
  setCookie(c, loginCookie, secret, options(c, basePath, 60 * 60));
}

export function clearLoginSecret(c: Context, basePath: string): void {
  deleteCookie(c, loginCookie, options(c, basePath, 0));
}
