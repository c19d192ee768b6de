// The frame of every signed-in page: a skip link, the site header with the
// scope's navigation and sign-out, and one <main> with the page's <h1>.
import type { Child } from 'hono/jsx';
import type { Principal } from '../api/auth.js';
import { liveScript } from './live-script.js';
import { rowKeysScript } from './row-keys-script.js';
import type { Scope } from './scope.js';

export type Section = 'dashboard' | 'events' | 'dead' | 'bulk' | 'admissions' | 'connections' | 'workspaces' | 'issues' | 'stuck' | 'alerts' | 'destinations';

export interface PageFrame {
  basePath: string;
  principal: Principal;
  csrfToken: string;
  /** The page's CSP nonce: its scripts (the tables' keys) run only under it. */
  nonce?: string | undefined;
  scope?: Scope;
  section?: Section;
}

export function Document(props: { title: string; basePath: string; head?: Child; children?: Child }) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="referrer" content="no-referrer" />
        <title>{`${props.title} · Wharf console`}</title>
        <link rel="stylesheet" href={`${props.basePath}/assets/console.css`} />
        {props.head}
      </head>
      <body>{props.children}</body>
    </html>
  );
}

function navItems(frame: PageFrame): { section: Section; label: string; href: string }[] {
  const scope = frame.scope;
  const items: { section: Section; label: string; href: string }[] = [];
  if (frame.principal.kind === 'admin') items.push({ section: 'workspaces', label: 'Workspaces', href: `${frame.basePath}/workspaces` });
  if (!scope) return items;
  if (scope.workspaceId !== undefined) items.push({ section: 'dashboard', label: 'Dashboard', href: scope.base });
  items.push({ section: 'events', label: 'Events', href: `${scope.base}/events` });
  items.push({ section: 'dead', label: 'Dead letters', href: `${scope.base}/dead` });
  if (scope.workspaceId !== undefined) items.push({ section: 'issues', label: 'Issues', href: `${scope.base}/issues` });
  if (scope.workspaceId !== undefined) items.push({ section: 'stuck', label: 'Stuck scopes', href: `${scope.base}/stuck` });
  if (scope.workspaceId !== undefined) items.push({ section: 'alerts', label: 'Alerts', href: `${scope.base}/alerts` });
  if (scope.workspaceId !== undefined) items.push({ section: 'bulk', label: 'Bulk replay', href: `${scope.base}/bulk-replays` });
  items.push({ section: 'admissions', label: 'Admission log', href: `${scope.base}/admissions` });
  if (scope.workspaceId !== undefined) items.push({ section: 'connections', label: 'Connections', href: `${scope.base}/connections` });
  if (scope.workspaceId !== undefined) items.push({ section: 'destinations', label: 'Destinations', href: `${scope.base}/destinations` });
  return items;
}

export function Page(props: PageFrame & { title: string; head?: Child; children?: Child }) {
  const who = props.principal.kind === 'admin' ? 'instance admin' : `workspace ${props.principal.workspaceId}`;
  return (
    <Document title={props.title} basePath={props.basePath} head={props.head}>
      <a class="skip" href="#main">Skip to content</a>
      <header class="site">
        <a class="brand" href={props.basePath}>Wharf{props.scope ? ` · ${props.scope.label}` : ''}</a>
        <nav aria-label="Console">
          <ul>
            {navItems(props).map((item) => (
              <li>
                <a href={item.href} aria-current={item.section === props.section ? 'page' : undefined}>{item.label}</a>
              </li>
            ))}
          </ul>
        </nav>
        <div class="who">
          <span>Signed in as {who}</span>
          <form method="post" action={`${props.basePath}/logout`} class="inline">
            <input type="hidden" name="csrf" value={props.csrfToken} />
            <button type="submit">Sign out</button>
          </form>
        </div>
      </header>
      <main id="main">
        <h1>{props.title}</h1>
        {props.children}
      </main>
      {props.nonce && <script nonce={props.nonce} dangerouslySetInnerHTML={{ __html: rowKeysScript }} />}
    </Document>
  );
}

/** A fixed message chosen by a query parameter (never the parameter's text itself). */
export function Notice(props: { text: string | undefined }) {
  return props.text ? <p class="notice" role="status">{props.text}</p> : null;
}

export function Problem(props: { text: string | undefined }) {
  return props.text ? <p class="problem" role="alert">{props.text}</p> : null;
}

export function StateBadge(props: { state: string }) {
  return <span class={`state state-${props.state}`}>{props.state}</span>;
}

/** An issue's status, or a stuck scope's reason, as a badge. */
export function Badge(props: { kind: string; text: string }) {
  return <span class={`badge badge-${props.kind}`}>{props.text}</span>;
}

/** How long ago (or from now) `at` is, in the largest unit that says it: "3 min ago", "in 2 h". */
export function relativeTime(at: Date, now: Date = new Date()): string {
  const seconds = Math.round((at.getTime() - now.getTime()) / 1000);
  const size = Math.abs(seconds);
  const [value, unit] = size < 45 ? [size, 's'] : size < 45 * 60 ? [Math.round(size / 60), 'min']
    : size < 36 * 3600 ? [Math.round(size / 3600), 'h'] : [Math.round(size / 86400), 'd'];
  if (size < 5) return 'just now';
  return seconds < 0 ? `${value} ${unit} ago` : `in ${value} ${unit}`;
}

/**
 * A timestamp in a <time> element: how long ago it is, with the exact UTC
 * time on hover (title) and in its datetime; an em dash when there is none.
 */
export function Time(props: { at: string | null | undefined }) {
  if (!props.at) return <span aria-label="none">—</span>;
  const date = new Date(props.at);
  if (Number.isNaN(date.getTime())) return <span>{props.at}</span>;
  const exact = date.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
  return <time datetime={date.toISOString()} title={exact}>{relativeTime(date)}</time>;
}

/** The live lists' script (live-script.ts), under the page's CSP nonce, and the line that says it is live. */
export function LiveUpdates(props: { nonce: string | undefined }) {
  if (!props.nonce) return null;
  return (
    <>
      <p class="live" id="live-status" role="status" aria-live="off">Live: updates every few seconds</p>
      <script nonce={props.nonce} dangerouslySetInnerHTML={{ __html: liveScript }} />
    </>
  );
}

/** The hidden CSRF field of a form. */
export function Csrf(props: { token: string }) {
  return <input type="hidden" name="csrf" value={props.token} />;
}
