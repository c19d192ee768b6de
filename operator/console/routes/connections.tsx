// A workspace's connections with their subscriptions, and its own state.
// Pausing and resuming (a connection or the whole workspace) is the instance
// admin's, as in the API; a workspace token sees the same page read-only.
import type { Hono } from 'hono';
import { createConnection, setConnectionState, setWorkspaceState } from '../../sql/connections.js';
import { listConnections, showConnection, showWorkspace } from '../../sql/operator.js';
import type { ConsoleEnv, RouteDeps } from '../env.js';
import { ConsoleError } from '../errors.js';
import { formField } from '../filters.js';
import { frameOf } from '../frame.js';
import { Csrf, Notice, Page, StateBadge } from '../layout.js';
import { isIdText } from '../../api/params.js';
import { requireAdmin, workspaceScope } from '../scope.js';

type Switchable = 'PAUSED' | 'ACTIVE';

const notices: Record<string, string> = {
  'connection-PAUSED': 'Connection paused: its deliveries are stored and wait until it is resumed.',
  'connection-ACTIVE': 'Connection resumed: its held events run in their usual order.',
  'workspace-PAUSED': 'Workspace paused: its deliveries are stored and wait until it is resumed.',
  'workspace-ACTIVE': 'Workspace resumed.',
  'hmac-added': 'Configured HMAC source saved: give the sender its secret (rotate-secret) and its endpoint.',
};

const exampleScheme = '{"header": "X-Signature", "prefix": "sha256=", "algorithm": "sha256", "encoding": "hex", '
  + '"signed": "{body}", "event_type": {"pointer": "/type"}, "delivery_id": {"header": "X-Delivery"}}';

/**
 * The instance admin's form for a signed source configured without code
 * (docs/configured-hmac.md): its scheme is data, validated when saved.
 */
function HmacSourceForm(props: { action: string; csrfToken: string }) {
  return (
    <form method="post" action={props.action} class="stack" aria-label="Add a configured HMAC source">
      <h2>Add a configured HMAC source</h2>
      <Csrf token={props.csrfToken} />
      <label>Source (the sender's URL)<input name="source" required placeholder="https://sender.example.com" /></label>
      <label>External id (optional)<input name="external_id" /></label>
      <label>Signature scheme (JSON)<textarea name="signature" rows={5} required placeholder={exampleScheme}></textarea></label>
      <label>Subject pointers (comma-separated JSON pointers)<input name="subject_pointers" placeholder="/data/customer_id" /></label>
      <button type="submit">Save the source</button>
    </form>
  );
}

/** A form field as text ('' when absent or a file). */
function switchTo(value: unknown): Switchable {
  if (value !== 'PAUSED' && value !== 'ACTIVE') throw new ConsoleError(400, 'The state must be PAUSED or ACTIVE.');
  return value;
}

/** The button that flips a PAUSED or ACTIVE row; nothing for any other state (suspended, revoked, deleting). */
function StateButton(props: { action: string; state: string; csrfToken: string; what: string }) {
  if (props.state !== 'ACTIVE' && props.state !== 'PAUSED') return null;
  const next = props.state === 'ACTIVE' ? 'PAUSED' : 'ACTIVE';
  const label = props.state === 'ACTIVE' ? 'Pause' : 'Resume';
  return (
    <form method="post" action={props.action} class="inline">
      <Csrf token={props.csrfToken} />
      <input type="hidden" name="state" value={next} />
      <button type="submit" aria-label={`${label} ${props.what}`}>{label}</button>
    </form>
  );
}

export function registerConnectionPages(app: Hono<ConsoleEnv>, deps: RouteDeps): void {
  const { db, basePath } = deps;

  app.get('/workspaces/:ws/connections', async (c) => {
    const scope = workspaceScope(c, basePath);
    const workspaceId = scope.workspaceId;
    const workspace = await showWorkspace(db, workspaceId);
    if (!workspace) throw new ConsoleError(404, `There is no workspace ${workspaceId}.`);
    const connections = await listConnections(db, workspaceId);
    const admin = c.get('principal').kind === 'admin';
    const csrfToken = c.get('csrfToken');
    return c.html(
      <Page {...frameOf(c, basePath, scope, 'connections')} title={`Connections · ${scope.label}`}>
        <Notice text={notices[c.req.query('changed') ?? '']} />
        {/* A div, not a p: a form may not sit inside a paragraph. */}
        <div class="facts-line">
          Workspace state: <StateBadge state={workspace.state} />{' '}
          {admin && <StateButton action={`${scope.base}/state`} state={workspace.state} csrfToken={csrfToken} what={`workspace ${workspaceId}`} />}
        </div>
        {!admin && <p>Only the instance admin may pause or resume; this view is read-only.</p>}
        {connections.length === 0 ? <p>No connection.</p> : (
          <table>
            <caption class="visually-hidden">Connections</caption>
            <thead>
              <tr>
                <th scope="col" class="num">Id</th><th scope="col">Provider</th><th scope="col">Source</th><th scope="col">Kind</th>
                <th scope="col">External id</th><th scope="col">State</th><th scope="col">Subscriptions</th>
                {admin && <th scope="col">Action</th>}
              </tr>
            </thead>
            <tbody>
              {connections.map((connection) => (
                <tr>
                  <th scope="row" class="num">{String(connection.id)}</th>
                  <td>{connection.provider}</td>
                  <td>{connection.source}</td>
                  <td>{connection.kind}</td>
                  <td>{connection.external_id ?? '—'}</td>
                  <td><StateBadge state={connection.state} /></td>
                  <td>
                    {connection.subscriptions.length === 0 ? 'none' : (
                      <ul>{connection.subscriptions.map((subject) => <li>{subject}</li>)}</ul>
                    )}
                  </td>
                  {admin && (
                    <td>
                      <StateButton action={`${scope.base}/connections/${connection.id}/state`} state={connection.state}
                        csrfToken={csrfToken} what={`connection ${connection.id}`} />
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {admin && <HmacSourceForm action={`${scope.base}/connections/hmac`} csrfToken={csrfToken} />}
      </Page>,
    );
  });

  app.post('/workspaces/:ws/connections/hmac', async (c) => {
    const scope = workspaceScope(c, basePath);
    requireAdmin(c);
    const body = await c.req.parseBody();
    let signature: unknown;
    try {
      signature = JSON.parse(formField(body, 'signature'));
    } catch {
      throw new ConsoleError(400, 'The signature scheme must be a JSON object, e.g. ' + exampleScheme);
    }
    const pointers = formField(body, 'subject_pointers').split(',').map((pointer) => pointer.trim()).filter((pointer) => pointer !== '');
    // createConnection validates the scheme (a 400 that says what is wrong) before anything is saved.
    await createConnection(db, {
      workspaceId: scope.workspaceId, provider: 'hmac', source: formField(body, 'source'), kind: 'hmac',
      externalId: formField(body, 'external_id') || null,
      route: { signature, ...(pointers.length > 0 ? { subject_pointers: pointers } : {}) },
    });
    return c.redirect(`${scope.base}/connections?changed=hmac-added`, 303);
  });

  app.post('/workspaces/:ws/connections/:id/state', async (c) => {
    const scope = workspaceScope(c, basePath);
    requireAdmin(c);
    const id = c.req.param('id');
    const state = switchTo((await c.req.parseBody()).state);
    // The connection must be this workspace's: the URL names both.
    const connection = isIdText(id) ? await showConnection(db, id) : null;
    if (!connection || String(connection.workspace_id) !== scope.workspaceId) {
      throw new ConsoleError(404, 'There is no such connection in this workspace.');
    }
    await setConnectionState(db, id!, state);
    return c.redirect(`${scope.base}/connections?changed=connection-${state}`, 303);
  });

  app.post('/workspaces/:ws/state', async (c) => {
    const scope = workspaceScope(c, basePath);
    requireAdmin(c);
    const state = switchTo((await c.req.parseBody()).state);
    await setWorkspaceState(db, scope.workspaceId, state);
    return c.redirect(`${scope.base}/connections?changed=workspace-${state}`, 303);
  });
}
