// The admission log: deliveries refused or dropped at admission, which never
// became an event (the provider got its 202 all the same). A workspace sees
// what concerns it; the admin's installation view shows every entry.
import type { Context, Hono } from 'hono';
import { listAdmissions } from '../../sql/operator.js';
import type { ConsoleEnv, RouteDeps } from '../env.js';
import { optionalCursor, pageSize } from '../filters.js';
import { frameOf } from '../frame.js';
import { Page, Time } from '../layout.js';
import { installationScope, workspaceScope, type Scope } from '../scope.js';

export function registerAdmissionPages(app: Hono<ConsoleEnv>, deps: RouteDeps): void {
  const { db, basePath } = deps;
  const page = async (c: Context<ConsoleEnv>, scope: Scope) => {
    const before = optionalCursor(c.req.query('cursor'));
    const result = await listAdmissions(db, scope.owner, { limit: pageSize, ...(before ? { before } : {}) });
    const path = `${scope.base}/admissions`;
    return c.html(
      <Page {...frameOf(c, basePath, scope, 'admissions')} title={`Admission log · ${scope.label}`}>
        <p>Deliveries that were refused or dropped when they arrived: no event was stored for them.</p>
        {result.entries.length === 0 ? <p role="status">Nothing was refused or dropped.</p> : (
          <table>
            <caption class="visually-hidden">Refused and dropped deliveries</caption>
            <thead>
              <tr>
                <th scope="col">At</th><th scope="col">Reason</th><th scope="col">Provider</th><th scope="col">Source</th>
                <th scope="col">Delivery key</th><th scope="col" class="num">Connection</th><th scope="col" class="num">Workspace</th>
              </tr>
            </thead>
            <tbody>
              {result.entries.map((entry) => (
                <tr>
                  <th scope="row"><Time at={entry.at} /></th>
                  <td>{entry.reason}</td>
                  <td>{entry.provider ?? '—'}</td>
                  <td>{entry.source ?? '—'}</td>
                  <td>{entry.delivery_key ?? '—'}</td>
                  <td class="num">{entry.connection_id === null ? '—' : String(entry.connection_id)}</td>
                  <td class="num">{entry.workspace_id === null ? '—' : String(entry.workspace_id)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        <nav class="pager" aria-label="Pages">
          {before && <a href={path}>Newest</a>}
          {before && result.next_cursor !== null && ' · '}
          {result.next_cursor !== null && <a href={`${path}?cursor=${result.next_cursor}`} rel="next">Older</a>}
        </nav>
      </Page>,
    );
  };
  app.get('/workspaces/:ws/admissions', (c) => page(c, workspaceScope(c, basePath)));
  app.get('/installation/admissions', (c) => page(c, installationScope(c, basePath)));
}
