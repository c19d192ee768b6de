// Who is told, and who was: the workspace's alert rules, made, edited,
// tried and deleted here as through the API (operator/sql/alerts.ts, the
// same body schemas), and the alerts they sent, each with what it was about
// (linked to its issue or the stuck scopes) and how its delivery went. A
// rule's URL and secret are never shown again; a secret Wharf generates is
// shown once, on the page that answers the form, never in a URL or a
// redirect; an edit leaves them as they are unless new ones are given.
import type { Context, Hono } from 'hono';
import { alertRuleBody, alertRuleEditBody } from '../../api/schemas.js';
import { isIdText } from '../../api/params.js';
import {
  alertDestinations, alertKinds, createAlertRule, deleteAlertRule, editAlertRule, listAlertRules, listAlerts, sendTestAlert,
  type Alert, type AlertRule,
} from '../../sql/alerts.js';
import type { ConsoleEnv, RouteDeps } from '../env.js';
import { ConsoleError } from '../errors.js';
import { formField } from '../filters.js';
import { frameOf } from '../frame.js';
import { Badge, Csrf, LiveUpdates, Notice, Page, Time } from '../layout.js';
import { workspaceScope, type WorkspaceScope } from '../scope.js';

type Ctx = Context<ConsoleEnv>;

const notices: Record<string, string> = {
  created: 'The rule is saved: a worker host evaluates it within seconds.',
  deleted: 'The rule is deleted, with the alerts it raised.',
  edited: 'The rule is changed; its alerts stay with it.',
  tested: 'A test alert is on its way: a worker host sends it within seconds, and it is listed below as a test.',
};

/** The fields of a posted rule form, as the API's body would have them (an empty field is absent). */
function fieldsOf(body: Record<string, unknown>) {
  const number = (name: string) => (formField(body, name) === '' ? undefined : Number(formField(body, name)));
  return {
    name: formField(body, 'name'), kind: formField(body, 'kind'), destination: formField(body, 'destination'),
    ...(formField(body, 'url') !== '' ? { url: formField(body, 'url') } : {}),
    ...(number('threshold') !== undefined ? { threshold: number('threshold') } : {}),
    ...(number('window_seconds') !== undefined ? { window_seconds: number('window_seconds') } : {}),
    ...(formField(body, 'secret') !== '' ? { secret: formField(body, 'secret') } : {}),
  };
}

/** The rule a posted form describes, checked by the API's own schema; a 400 that says what is wrong. */
function ruleOf(body: Record<string, unknown>) {
  const parsed = alertRuleBody.safeParse({ url: '', ...fieldsOf(body) });
  if (!parsed.success) throw new ConsoleError(400, parsed.error.issues[0]?.message ?? 'That rule is not valid.');
  return parsed.data;
}

/** An edit a posted form describes (URL and secret left empty: kept), checked by the API's schema. */
function editOf(body: Record<string, unknown>) {
  const parsed = alertRuleEditBody.safeParse(fieldsOf(body));
  if (!parsed.success) throw new ConsoleError(400, parsed.error.issues[0]?.message ?? 'That rule is not valid.');
  return parsed.data;
}

/** A rule id of the path, or the console's 404. */
function ruleIdOf(c: Ctx): string {
  const id = c.req.param('id');
  if (id === undefined || !isIdText(id)) throw new ConsoleError(404, 'There is no such rule.');
  return id;
}

export function registerAlertPages(app: Hono<ConsoleEnv>, deps: RouteDeps): void {
  const { db, basePath } = deps;

  async function alertsPage(c: Ctx, scope: WorkspaceScope, created?: { name: string; secret: string }) {
    const owner = { workspaceId: scope.workspaceId };
    const [rules, alerts] = await Promise.all([listAlertRules(db, owner), listAlerts(db, owner, 100)]);
    const csrfToken = c.get('csrfToken');
    return c.html(
      <Page {...frameOf(c, basePath, scope, 'alerts')} title={`Alerts · ${scope.label}`}>
        <Notice text={notices[c.req.query('changed') ?? '']} />
        {created && (
          <div class="notice" role="status">
            <p>The rule “{created.name}” is saved. Its signing secret, shown this once: give it to the receiver, which verifies each alert with it (Standard Webhooks).</p>
            <p><code id="new-secret">{created.secret}</code></p>
          </div>
        )}
        <p>Rules say whom to tell, and when; a worker host sends the alerts and records how each delivery went. The API has them too (<code>/api/workspaces/{scope.workspaceId}/alert-rules</code>), and the CLI (<code>wharf alerts</code>).</p>
        <h2 id="rules">Rules</h2>
        <RuleTable rules={rules} scope={scope} csrfToken={csrfToken} />
        <h2 id="new-rule">New rule</h2>
        <form method="post" action={`${scope.base}/alert-rules`} class="stack" aria-labelledby="new-rule">
          <Csrf token={csrfToken} />
          <RuleFields />
          <label>URL (https; for slack, the incoming webhook's) <input name="url" type="url" required maxlength={2000} /></label>
          <label>Secret (webhook, whsec_…; empty: Wharf makes one and shows it once)
            <input name="secret" autocomplete="off" maxlength={200} />
          </label>
          <button type="submit" class="primary">Save rule</button>
        </form>
        <LiveUpdates nonce={c.get('secureHeadersNonce')} />
        <div id="live-alerts" data-live>
          <h2 id="sent">Alerts</h2>
          {alerts.length === 0 ? <p role="status">No alert yet.</p> : (
            <table aria-labelledby="sent">
              <thead>
                <tr><th scope="col">Raised</th><th scope="col">Rule</th><th scope="col">What</th><th scope="col">Delivery</th>
                  <th scope="col" class="num">Attempts</th><th scope="col">Last answer</th></tr>
              </thead>
              <tbody>
                {alerts.map((alert) => (
                  <tr>
                    <th scope="row"><Time at={alert.created_at} /></th>
                    <td>{alert.rule_name}</td>
                    <td><About alert={alert} scope={scope} /></td>
                    <td><Badge kind={alert.state} text={alert.state} />{alert.delivered_at ? <>{' '}<Time at={alert.delivered_at} /></> : ''}</td>
                    <td class="num">{String(alert.attempts)}</td>
                    <td>{alert.last_status !== null ? `HTTP ${alert.last_status}` : alert.last_error ?? '—'}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </div>
      </Page>,
    );
  }

  app.get('/workspaces/:ws/alerts', (c) => alertsPage(c, workspaceScope(c, basePath)));

  app.post('/workspaces/:ws/alert-rules', async (c) => {
    const scope = workspaceScope(c, basePath);
    const rule = ruleOf(await c.req.parseBody());
    const created = await createAlertRule(db, { workspaceId: scope.workspaceId }, rule, c.get('principal').account);
    // A generated secret is answered here, once: a redirect would carry it in a URL.
    if (created.secret) return alertsPage(c, scope, { name: created.name, secret: created.secret });
    return c.redirect(`${scope.base}/alerts?changed=created`, 303);
  });

  app.get('/workspaces/:ws/alert-rules/:id/edit', async (c) => {
    const scope = workspaceScope(c, basePath);
    const id = ruleIdOf(c);
    const rule = (await listAlertRules(db, { workspaceId: scope.workspaceId })).find((r) => String(r.id) === id);
    if (!rule) throw new ConsoleError(404, `There is no rule ${id} here.`);
    return c.html(
      <Page {...frameOf(c, basePath, scope, 'alerts')} title={`Edit rule ${rule.name} · ${scope.label}`}>
        <p>The rule keeps its id and the alerts it raised. Its URL and secret are not shown: leave them empty to keep them (a new destination needs its URL).</p>
        <form method="post" action={`${scope.base}/alert-rules/${rule.id}`} class="stack" aria-label="Edit rule">
          <Csrf token={c.get('csrfToken')} />
          <RuleFields rule={rule} />
          <label>URL (empty: kept, {rule.destination_host}) <input name="url" type="url" maxlength={2000} /></label>
          <label>Secret (webhook, whsec_…; empty: kept)
            <input name="secret" autocomplete="off" maxlength={200} />
          </label>
          <button type="submit" class="primary">Save changes</button>
        </form>
        <p><a href={`${scope.base}/alerts`}>Back to the alerts</a></p>
      </Page>,
    );
  });

  app.post('/workspaces/:ws/alert-rules/:id', async (c) => {
    const scope = workspaceScope(c, basePath);
    const id = ruleIdOf(c);
    const edit = editOf(await c.req.parseBody());
    if (!(await editAlertRule(db, { workspaceId: scope.workspaceId }, id, edit, c.get('principal').account))) {
      throw new ConsoleError(404, `There is no rule ${id} here.`);
    }
    return c.redirect(`${scope.base}/alerts?changed=edited`, 303);
  });

  app.post('/workspaces/:ws/alert-rules/:id/test', async (c) => {
    const scope = workspaceScope(c, basePath);
    const id = ruleIdOf(c);
    if (!(await sendTestAlert(db, { workspaceId: scope.workspaceId }, id, c.get('principal').account))) {
      throw new ConsoleError(404, `There is no rule ${id} here.`);
    }
    return c.redirect(`${scope.base}/alerts?changed=tested`, 303);
  });

  app.post('/workspaces/:ws/alert-rules/:id/delete', async (c) => {
    const scope = workspaceScope(c, basePath);
    const id = c.req.param('id');
    if (!isIdText(id)) throw new ConsoleError(404, 'There is no such rule.');
    if (!(await deleteAlertRule(db, { workspaceId: scope.workspaceId }, id))) throw new ConsoleError(404, `There is no rule ${id} here.`);
    return c.redirect(`${scope.base}/alerts?changed=deleted`, 303);
  });
}

function RuleTable(props: { rules: AlertRule[]; scope: WorkspaceScope; csrfToken: string }) {
  if (props.rules.length === 0) return <p>No rule: nobody is told.</p>;
  return (
    <table aria-labelledby="rules">
      <thead><tr><th scope="col">Name</th><th scope="col">When</th><th scope="col">To</th><th scope="col">By</th><th scope="col">Since</th><th scope="col">Action</th></tr></thead>
      <tbody>
        {props.rules.map((rule) => (
          <tr>
            <th scope="row">{rule.name}</th>
            <td>{rule.kind}{rule.threshold !== null ? ` ≥ ${rule.threshold}` : ''}{rule.window_seconds !== null ? ` in ${rule.window_seconds}s` : ''}</td>
            <td>{rule.destination} · {rule.destination_host}</td>
            <td>{rule.created_by}</td>
            <td><Time at={rule.created_at} /></td>
            <td>
              <a href={`${props.scope.base}/alert-rules/${rule.id}/edit`} aria-label={`Edit rule ${rule.name}`}>Edit</a>{' '}
              <form method="post" action={`${props.scope.base}/alert-rules/${rule.id}/test`} class="inline">
                <Csrf token={props.csrfToken} />
                <button type="submit" aria-label={`Send a test alert of rule ${rule.name}`}>Send a test alert</button>
              </form>{' '}
              <form method="post" action={`${props.scope.base}/alert-rules/${rule.id}/delete`} class="inline">
                <Csrf token={props.csrfToken} />
                <button type="submit" aria-label={`Delete rule ${rule.name}`}>Delete</button>
              </form>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** What a rule is and when it fires, shared by the new and the edit form; an edit starts from the rule. */
function RuleFields(props: { rule?: AlertRule }) {
  const { rule } = props;
  return (
    <>
      <label>Name <input name="name" required maxlength={64} value={rule?.name ?? ''} /></label>
      <label>When
        <select name="kind">{alertKinds.map((kind) => <option value={kind} selected={rule?.kind === kind}>{kind}</option>)}</select>
      </label>
      <label>Threshold (dead_letter_rate: dead letters in the window)
        <input name="threshold" inputmode="numeric" size={8} value={rule?.threshold?.toString() ?? ''} />
      </label>
      <label>Window in seconds (dead_letter_rate, oldest_due_age, stuck_scope)
        <input name="window_seconds" inputmode="numeric" size={8} value={rule?.window_seconds?.toString() ?? ''} />
      </label>
      <label>To
        <select name="destination">{alertDestinations.map((d) => <option value={d} selected={rule?.destination === d}>{d}</option>)}</select>
      </label>
    </>
  );
}

/** What an alert was about: its issue's page or the stuck scopes, linked; a test marked. */
function About(props: { alert: Alert; scope: WorkspaceScope }) {
  const { alert, scope } = props;
  if (alert.test) return <><Badge kind="test" text="test" /> {alert.kind}</>;
  const about = alert.issue_id !== null ? <a href={`${scope.base}/issues/${alert.issue_id}`}>{alert.about}</a>
    : alert.scope_key !== null ? <a href={`${scope.base}/stuck`}>{alert.about}</a>
    : alert.about;
  return <>{alert.kind}: {about}</>;
}
