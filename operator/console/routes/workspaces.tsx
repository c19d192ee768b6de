// The instance admin's starting page: every workspace, and the installation
// rows that belong to none. A workspace token starts at its own dashboard.
import type { Hono } from 'hono';
import { listWorkspaces } from '../../sql/operator.js';
import type { ConsoleEnv, RouteDeps } from '../env.js';
import { frameOf } from '../frame.js';
import { Page, StateBadge, Time } from '../layout.js';
import { requireAdmin } from '../scope.js';

export function registerWorkspacePages(app: Hono<ConsoleEnv>, deps: RouteDeps): void {
  const { db, basePath } = deps;

  app.get('/', (c) => {
    const principal = c.get('principal');
    return c.redirect(principal.kind === 'admin' ? `${basePath}/workspaces` : `${basePath}/workspaces/${principal.workspaceId}`, 303);
  });

  app.get('/workspaces', async (c) => {
    requireAdmin(c);
    const workspaces = await listWorkspaces(db);
    return c.html(
      <Page {...frameOf(c, basePath, undefined, 'workspaces')} title="Workspaces">
        {workspaces.length === 0 ? <p>No workspace yet.</p> : (
          <table>
            <caption class="visually-hidden">Workspaces</caption>
            <thead>
              <tr><th scope="col" class="num">Workspace</th><th scope="col">State</th><th scope="col" class="num">Connections</th><th scope="col">Created</th></tr>
            </thead>
            <tbody>
              {workspaces.map((workspace) => (
                <tr>
                  <th scope="row" class="num"><a href={`${basePath}/workspaces/${workspace.id}`}>{String(workspace.id)}</a></th>
                  <td><StateBadge state={workspace.state} /></td>
                  <td class="num">{String(workspace.connections)}</td>
                  <td><Time at={workspace.created_at} /></td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        <h2>Installation</h2>
        <p>
          Rows that belong to no workspace (GitHub App installation events):{' '}
          <a href={`${basePath}/installation/events`}>events</a>, <a href={`${basePath}/installation/dead`}>dead letters</a>,{' '}
          and the <a href={`${basePath}/installation/admissions`}>admission log of every workspace</a>.
        </p>
      </Page>,
    );
  });
}
