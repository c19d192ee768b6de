// Signing in and out. The sign-in form has no session to bind a CSRF token
// to, so it binds one to a random value in a cookie of its own (a cross-site
// form can neither read that cookie nor, SameSite=Strict, send it).
import type { Context, Hono } from 'hono';
import { clearLoginSecret, clearSession, loginCookie, readCookie, setLoginSecret, setSession } from '../cookies.js';
import { randomSecret, type CsrfSigner } from '../csrf-token.js';
import type { ConsoleEnv } from '../env.js';
import { ConsoleError } from '../errors.js';
import { Document, Problem } from '../layout.js';
import type { Identifier } from '../session.js';

interface SignInDeps {
  basePath: string;
  csrf: CsrfSigner;
  identify: Identifier;
}

const maxTokenLength = 512;

async function signInPage(c: Context<ConsoleEnv>, deps: SignInDeps, problem?: string, status: 200 | 401 = 200) {
  const secret = readCookie(c, loginCookie) ?? randomSecret();
  setLoginSecret(c, deps.basePath, secret);
  const expired = c.req.query('expired') === '1' && !problem ? 'Your session ended: the token is no longer valid.' : undefined;
  return c.html(
    <Document title="Sign in" basePath={deps.basePath}>
      <main id="main">
        <h1>Sign in to the Wharf console</h1>
        <Problem text={problem ?? expired} />
        <form method="post" action={`${deps.basePath}/login`} class="stack">
          <input type="hidden" name="csrf" value={await deps.csrf.sign(`login\u0000${secret}`)} />
          <label>
            Admin or workspace token
            <input type="password" name="token" required autocomplete="current-password" spellcheck={false} />
          </label>
          <button type="submit" class="primary">Sign in</button>
        </form>
        <p>The token is kept in an HttpOnly cookie of this browser until you sign out.</p>
      </main>
    </Document>,
    status,
  );
}

export function registerSignIn(app: Hono<ConsoleEnv>, deps: SignInDeps): void {
  app.get('/login', (c) => signInPage(c, deps));

  app.post('/login', async (c) => {
    const form = await c.req.parseBody();
    const secret = readCookie(c, loginCookie);
    const csrfField = typeof form.csrf === 'string' ? form.csrf : undefined;
    if (!secret || !(await deps.csrf.verify(`login\u0000${secret}`, csrfField))) {
      throw new ConsoleError(403, 'This sign-in form has expired or did not come from this console; reload it and try again.');
    }
    const token = typeof form.token === 'string' ? form.token.trim() : '';
    if (token === '' || token.length > maxTokenLength) return signInPage(c, deps, 'Enter a token.', 401);
    const principal = await deps.identify(c, token);
    if (!principal) return signInPage(c, deps, 'That token is not valid.', 401);
    clearLoginSecret(c, deps.basePath);
    setSession(c, deps.basePath, token);
    return c.redirect(principal.kind === 'admin' ? `${deps.basePath}/workspaces` : `${deps.basePath}/workspaces/${principal.workspaceId}`, 303);
  });
}

/** Sign-out is a POST (with the CSRF token, checked before it runs): a link could be followed by anyone's page. */
export function registerSignOut(app: Hono<ConsoleEnv>, basePath: string): void {
  app.post('/logout', (c) => {
    clearSession(c, basePath);
    return c.redirect(`${basePath}/login`, 303);
  });
}
