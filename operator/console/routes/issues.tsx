// What an on-call engineer opens first: the workspace's issues (failures
// grouped by provider, event type and error class, with their status, who
// set it and when, where it was thrown, its failures per hour over the last
// two days, and the events affected) and its stuck scopes (held behind a
// head that has waited too long, with what waits behind it and the actions
// that unblock it; moving a head to the dead letters asks to confirm first,
// as it gives up on that event). Both lists update themselves
// (live-script.ts); every change is a CSRF-protected form post through
// operator/sql, as the API makes it, recorded with the signed-in account.
import type { Context, Hono } from 'hono';
import {
  issueEvents, issueHistory, issueStatuses, listIssues, setIssueStatus, showIssue, type Issue, type IssueStatus,
} from '../../sql/issues.js';
import {
  deadLetterScopeHead, listScopeActions, listStuckScopes, pauseScopeConnection, retryScopeHead, scopeActions,
  type ScopeActionName, type StuckScope,
} from '../../sql/stuck-scopes.js';
import { EventTable } from '../components/event-table.js';
import { Frames } from '../components/frames.js';
import { dayClock, LineChart } from '../components/line-chart.js';
import type { ConsoleEnv, RouteDeps } from '../env.js';
import { ConsoleError } from '../errors.js';
import { optionalCursor, optionalText } from '../filters.js';
import { frameOf } from '../frame.js';
import { Badge, Csrf, LiveUpdates, Notice, Page, Problem, Time } from '../layout.js';
import { isIdText, rejectNul } from '../../api/params.js';
import { rowFocus, rowKeysHint } from '../row-keys-script.js';
import { workspaceScope, type WorkspaceScope } from '../scope.js';

type Ctx = Context<ConsoleEnv>;

/** The buttons of an issue: the statuses it can move to, and what each is called. */
const statusActions: [IssueStatus, string][] = [
  ['acknowledged', 'Acknowledge'], ['resolved', 'Resolve'], ['ignored', 'Ignore'], ['open', 'Reopen'],
];

const actionLabels: Record<ScopeActionName, string> = {
  retry_head: 'Retry head now', dead_letter_head: 'Move head to dead letters', pause_connection: 'Pause connection',
};

const actionNotices: Record<string, string> = {
  retry_head: 'The head is due now: the next claim takes it.',
  dead_letter_head: 'The head is in the dead letters: the events behind it run now. Replay it from its page when it is fixed.',
  pause_connection: 'The connection is paused: its deliveries are stored and wait.',
  dead_letter_after_lease: 'A handler is retrying the head now: if that attempt fails, the head goes to the dead letters instead of waiting for another retry.',
};

function issueId(c: Ctx): string {
  const id = c.req.param('id');
  if (!isIdText(id)) throw new ConsoleError(404, 'There is no such issue.');
  return id;
}

function statusFilter(value: string | undefined): IssueStatus | undefined {
  if (!value) return undefined;
  if (!(issueStatuses as readonly string[]).includes(value)) throw new ConsoleError(400, 'That status is not one of open, acknowledged, resolved, ignored.');
  return value as IssueStatus;
}

export function registerIssuePages(app: Hono<ConsoleEnv>, deps: RouteDeps): void {
  const { db, basePath } = deps;

  app.get('/workspaces/:ws/issues', async (c) => {
    const scope = workspaceScope(c, basePath);
    const status = statusFilter(c.req.query('status'));
    const issues = await listIssues(db, scope.owner, { limit: 200, ...(status ? { status } : {}) });
    return c.html(
      <Page {...frameOf(c, basePath, scope, 'issues')} title={`Issues · ${scope.label}`}>
        <p>Failures grouped by what is fixed once: provider, event type, error class and where it was thrown. A resolved issue reopens by itself when its failure returns.</p>
        <form method="get" action={`${scope.base}/issues`} class="filters" role="search" aria-label="Filter issues">
          <label>Status
            <select name="status">
              <option value="">any</option>
              {issueStatuses.map((s) => <option value={s} selected={s === status}>{s}</option>)}
            </select>
          </label>
          <button type="submit">Filter</button>
        </form>
        <LiveUpdates nonce={c.get('secureHeadersNonce')} />
        <div id="live-issues" data-live>
          <IssueTable issues={issues} scope={scope} />
        </div>
      </Page>,
    );
  });

  app.get('/workspaces/:ws/issues/:id', async (c) => {
    const scope = workspaceScope(c, basePath);
    const id = issueId(c);
    const issue = await showIssue(db, scope.workspaceId, id);
    if (!issue) throw new ConsoleError(404, `There is no issue ${id} here.`);
    const before = optionalCursor(c.req.query('cursor'));
    const [events, hours] = await Promise.all([
      issueEvents(db, scope.workspaceId, id, { limit: 50, ...(before ? { before } : {}) }),
      issueHistory(db, scope.workspaceId, id, 48),
    ]);
    const changed = c.req.query('changed');
    return c.html(
      <Page {...frameOf(c, basePath, scope, 'issues')} title={`Issue ${issue.id}: ${issue.error_class}`}>
        <Notice text={changed && (issueStatuses as readonly string[]).includes(changed) ? `The issue is ${changed} now.` : undefined} />
        <LiveUpdates nonce={c.get('secureHeadersNonce')} />
        <div id="live-issue" data-live>
          <dl class="facts">
            <dt>Status</dt><dd><Badge kind={issue.status} text={issue.status} />{' '}{issue.status_by ? <>by {issue.status_by}, </> : <>by Wharf, </>}<Time at={issue.status_at} /></dd>
            <dt>Provider</dt><dd>{issue.provider}</dd>
            <dt>Event type</dt><dd>{issue.event_type === '*' ? '* (every type past the issue limit)' : issue.event_type}</dd>
            <dt>Error class</dt><dd>{issue.error_class}</dd>
            <dt>Thrown at</dt><dd><Frames frames={issue.frames} label="Where it was thrown, innermost first" /></dd>
            <dt>Failures</dt><dd>{`${issue.failures} (${issue.dead} dead)`}</dd>
            <dt>First seen</dt><dd><Time at={issue.first_seen_at} /></dd>
            <dt>Last seen</dt><dd><Time at={issue.last_seen_at} /></dd>
            <dt>Reopened</dt><dd>{issue.reopened === 0 ? 'never' : <>{`${issue.reopened} time${issue.reopened === 1 ? '' : 's'}, last `}<Time at={issue.reopened_at} /></>}</dd>
            <dt>Sample event</dt><dd><a href={`${scope.base}/events/${issue.sample_event_id}`}>{String(issue.sample_event_id)}</a></dd>
          </dl>
          {hours && (
            <LineChart id="issue-failures" title="Failures per hour, last 48 hours" unit="per hour" totals time={dayClock}
              minutes={hours.map((hour) => hour.at)}
              series={[{ name: 'Failures', values: hours.map((hour) => hour.failures) }, { name: 'Dead letters', values: hours.map((hour) => hour.dead) }]} />
          )}
          <div class="actions" role="group" aria-label="Change the status">
            {statusActions.filter(([target]) => target !== issue.status).map(([target, label]) => (
              <form method="post" action={`${scope.base}/issues/${issue.id}/status`} class="inline">
                <Csrf token={c.get('csrfToken')} />
                <input type="hidden" name="status" value={target} />
                <button type="submit" class={target === 'resolved' ? 'primary' : undefined}>{label}</button>
              </form>
            ))}
          </div>
        </div>
        <h2 id="affected">Events failing with it</h2>
        <p>
          <a href={`${scope.base}/events?${new URLSearchParams({ provider: issue.provider, ...(issue.event_type === '*' ? {} : { event_type: issue.event_type }) }).toString()}`}>All events of this provider and type</a>
          {' · '}
          <a href={`${scope.base}/bulk-replays?${new URLSearchParams({ provider: issue.provider, ...(issue.event_type === '*' ? {} : { event_type: issue.event_type }), error_class: issue.error_class }).toString()}`}>Bulk replay its dead letters</a>
        </p>
        <EventTable events={events?.events ?? []} base={scope.base} caption="Events failing with this issue's class" />
        {events?.next_cursor !== null && events?.next_cursor !== undefined && (
          <nav class="pager" aria-label="Pages"><a href={`${scope.base}/issues/${issue.id}?cursor=${events.next_cursor}`} rel="next">Older</a></nav>
        )}
      </Page>,
    );
  });

  app.post('/workspaces/:ws/issues/:id/status', async (c) => {
    const scope = workspaceScope(c, basePath);
    const id = issueId(c);
    const form = await c.req.parseBody();
    const status = statusFilter(typeof form.status === 'string' ? form.status : undefined);
    if (!status) throw new ConsoleError(400, 'Choose a status.');
    const changed = await setIssueStatus(db, scope.owner, id, status, c.get('principal').account);
    if (!changed) throw new ConsoleError(404, `There is no issue ${id} here.`);
    return c.redirect(`${scope.base}/issues/${id}?changed=${status}`, 303);
  });

  app.get('/workspaces/:ws/stuck', async (c) => {
    const scope = workspaceScope(c, basePath);
    const minutesText = optionalText(c.req.query('minutes'), 'Minutes');
    if (minutesText !== undefined && !/^\d{1,6}$/.test(minutesText)) throw new ConsoleError(400, 'Minutes must be a whole number.');
    const minutes = minutesText === undefined ? undefined : Number(minutesText);
    const [scopes, actions] = await Promise.all([
      listStuckScopes(db, scope.workspaceId, { limit: 100, ...(minutes !== undefined ? { olderThanSeconds: minutes * 60 } : {}) }),
      listScopeActions(db, scope.workspaceId, 20),
    ]);
    const done = c.req.query('done');
    const problem = c.req.query('problem');
    return c.html(
      <Page {...frameOf(c, basePath, scope, 'stuck')} title={`Stuck scopes · ${scope.label}`}>
        <Notice text={done ? actionNotices[done] : undefined} />
        <Problem text={problem === 'leased' ? 'A handler is retrying that head now: wait for its attempt to end.'
          : problem === 'not_head' ? 'That event no longer heads its scope: the list below is the current one.' : undefined} />
        <p>Scopes whose head has been failing, or due and waiting for a claimer, longer than the threshold: every later event of the scope waits behind it, in order. A paused connection's scopes are held on purpose and not listed.</p>
        <form method="get" action={`${scope.base}/stuck`} class="filters" role="search" aria-label="Threshold">
          <label>Waiting at least (minutes; empty: the setting stuck_after)
            <input name="minutes" inputmode="numeric" value={minutesText ?? ''} size={6} />
          </label>
          <button type="submit">Show</button>
        </form>
        <LiveUpdates nonce={c.get('secureHeadersNonce')} />
        <div id="live-stuck" data-live>
          <StuckTable scopes={scopes} scope={scope} csrfToken={c.get('csrfToken')} />
          <h2 id="actions">Recent actions</h2>
          {actions.length === 0 ? <p>None yet.</p> : (
            <table aria-labelledby="actions">
              <thead><tr><th scope="col">At</th><th scope="col">Action</th><th scope="col">Scope</th><th scope="col" class="num">Event</th><th scope="col">By</th></tr></thead>
              <tbody>
                {actions.map((a) => (
                  <tr>
                    <th scope="row"><Time at={a.at} /></th>
                    <td>{actionLabels[a.action]}</td>
                    <td>{a.scope_key}</td>
                    <td class="num">{a.event_id === null ? '—' : <a href={`${scope.base}/events/${a.event_id}`}>{String(a.event_id)}</a>}</td>
                    <td>{a.account}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </div>
      </Page>,
    );
  });

  // Moving a head to the dead letters gives up on it until someone replays
  // it: the table's button leads here, and only this page's form does it.
  app.get('/workspaces/:ws/stuck/confirm', async (c) => {
    const scope = workspaceScope(c, basePath);
    const scopeText = c.req.query('scope_key');
    // A scope key holds its subject (up to 1000 characters) after the workspace and provider.
    const scopeKey = scopeText !== undefined && scopeText.length > 0 && scopeText.length <= 1200 ? rejectNul(scopeText, 'Scope') : undefined;
    const eventId = c.req.query('event_id');
    if (!scopeKey || !isIdText(eventId)) throw new ConsoleError(400, 'That action names no scope or head.');
    const retrying = c.req.query('leased') === 'yes';
    return c.html(
      <Page {...frameOf(c, basePath, scope, 'stuck')} title="Move the head to the dead letters?">
        <p>
          {'Event '}<a href={`${scope.base}/events/${eventId}`}>{eventId}</a>{retrying
            ? ` heads scope ${scopeKey}, and a handler is retrying it now. If that attempt fails, the event goes to the dead letters instead of waiting for another retry, and the events behind it run; if it succeeds, nothing changes.`
            : ` heads scope ${scopeKey}. Moved to the dead letters, it is not tried again until someone replays it, and the events behind it run now.`}
        </p>
        <form method="post" action={`${scope.base}/stuck`} class="stack" aria-label="Confirm moving the head to the dead letters">
          <Csrf token={c.get('csrfToken')} />
          <input type="hidden" name="action" value="dead_letter_head" />
          <input type="hidden" name="scope_key" value={scopeKey} />
          <input type="hidden" name="event_id" value={eventId} />
          <input type="hidden" name="confirmed" value="yes" />
          <button type="submit" class="primary">Move head to dead letters</button>
        </form>
        <p><a href={`${scope.base}/stuck`}>Cancel</a></p>
      </Page>,
    );
  });

  app.post('/workspaces/:ws/stuck', async (c) => {
    const scope = workspaceScope(c, basePath);
    const form = await c.req.parseBody();
    const action = typeof form.action === 'string' && (scopeActions as readonly string[]).includes(form.action)
      ? form.action as ScopeActionName : undefined;
    // A scope key holds its subject (up to 1000 characters) after the workspace and provider.
    const scopeKey = typeof form.scope_key === 'string' && form.scope_key.length > 0 && form.scope_key.length <= 1200
      ? rejectNul(form.scope_key, 'Scope') : undefined;
    const eventId = typeof form.event_id === 'string' && isIdText(form.event_id) ? form.event_id : undefined;
    if (!action || !scopeKey || !eventId) throw new ConsoleError(400, 'That action names no scope, head or action.');
    if (action === 'dead_letter_head' && form.confirmed !== 'yes') throw new ConsoleError(400, 'Confirm moving the head to the dead letters on its page first.');
    const account = c.get('principal').account;
    if (action === 'pause_connection') {
      await pauseScopeConnection(db, scope.workspaceId, scopeKey, eventId, account);
    } else {
      const act = action === 'retry_head' ? retryScopeHead : deadLetterScopeHead;
      const result = await act(db, scope.workspaceId, scopeKey, eventId, account);
      if (!result.done) return c.redirect(`${scope.base}/stuck?problem=${result.reason}`, 303);
      if (result.after_lease) return c.redirect(`${scope.base}/stuck?done=dead_letter_after_lease`, 303);
    }
    return c.redirect(`${scope.base}/stuck?done=${action}`, 303);
  });
}

function IssueTable(props: { issues: Issue[]; scope: WorkspaceScope }) {
  if (props.issues.length === 0) return <p role="status">No issues: nothing has failed.</p>;
  return (
    <table data-rows>
      <caption class="visually-hidden">{`Issues, latest seen first. ${rowKeysHint}`}</caption>
      <thead>
        <tr>
          <th scope="col">Issue</th><th scope="col">Status</th><th scope="col">Provider</th><th scope="col">Event type</th>
          <th scope="col" class="num">Failures</th><th scope="col" class="num">Dead</th><th scope="col">First seen</th>
          <th scope="col">Last seen</th><th scope="col">Changed by</th>
        </tr>
      </thead>
      <tbody>
        {props.issues.map((issue, index) => (
          <tr {...rowFocus(index)}>
            <th scope="row">
              <a href={`${props.scope.base}/issues/${issue.id}`}>{issue.error_class}</a>
              {issue.frames[0] !== undefined && <> <span class="muted">at <code>{issue.frames[0]}</code></span></>}
            </th>
            <td><Badge kind={issue.status} text={issue.status} />{issue.reopened > 0 ? ` (reopened ${issue.reopened}×)` : ''}</td>
            <td>{issue.provider}</td>
            <td>{issue.event_type}</td>
            <td class="num">{String(issue.failures)}</td>
            <td class="num">{String(issue.dead)}</td>
            <td><Time at={issue.first_seen_at} /></td>
            <td><Time at={issue.last_seen_at} /></td>
            <td>{issue.status_by ?? '—'}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function StuckTable(props: { scopes: StuckScope[]; scope: WorkspaceScope; csrfToken: string }) {
  if (props.scopes.length === 0) return <p role="status">No scope is stuck.</p>;
  return (
    <table data-rows>
      <caption class="visually-hidden">{`Stuck scopes, longest stuck first; Enter opens the head. ${rowKeysHint}`}</caption>
      <thead>
        <tr>
          <th scope="col">Scope</th><th scope="col">Why</th><th scope="col" class="num">Head</th><th scope="col">Event type</th>
          <th scope="col">Error class</th><th scope="col">Waiting since</th><th scope="col" class="num">Behind it</th><th scope="col">Unblock</th>
        </tr>
      </thead>
      <tbody>
        {props.scopes.map((stuck, index) => (
          <tr {...rowFocus(index)}>
            <th scope="row">{stuck.subject ?? stuck.scope_key}</th>
            <td><Badge kind={stuck.reason} text={stuck.reason} /></td>
            <td class="num"><a href={`${props.scope.base}/events/${stuck.head.id}`}>{String(stuck.head.id)}</a></td>
            <td>{stuck.head.event_type}</td>
            <td>{stuck.head.error_class ?? '—'}</td>
            <td><Time at={stuck.waiting_since} /></td>
            <td class="num">
              {stuck.subject === null || stuck.behind === 0
                ? (stuck.behind_capped ? `${stuck.behind}+` : String(stuck.behind))
                : (
                  <a href={`${props.scope.base}/events?${new URLSearchParams({ state: 'QUEUED', provider: stuck.head.provider, subject: stuck.subject }).toString()}`}
                    aria-label={`The events waiting behind the head of ${stuck.subject}`}>
                    {stuck.behind_capped ? `${stuck.behind}+` : String(stuck.behind)}
                  </a>
                )}
            </td>
            <td>
              <div class="actions" role="group" aria-label={`Unblock ${stuck.subject ?? stuck.scope_key}`}>
                {stuck.head.dead_letter_pending ? <span class="muted">To the dead letters if this attempt fails</span> : null}
                {scopeActions.filter((action) => action === 'pause_connection' ? stuck.connection.state === 'ACTIVE'
                  // While a handler retries the head, a move to the dead letters waits for that attempt.
                  : action === 'dead_letter_head' ? !stuck.head.dead_letter_pending
                  : stuck.head.state === 'QUEUED').map((action) => action === 'dead_letter_head' ? (
                  <form method="get" action={`${props.scope.base}/stuck/confirm`} class="inline">
                    <input type="hidden" name="scope_key" value={stuck.scope_key} />
                    <input type="hidden" name="event_id" value={String(stuck.head.id)} />
                    {stuck.head.state === 'LEASED' ? <input type="hidden" name="leased" value="yes" /> : null}
                    <button type="submit">{actionLabels[action]}</button>
                  </form>
                ) : (
                  <form method="post" action={`${props.scope.base}/stuck`} class="inline">
                    <Csrf token={props.csrfToken} />
                    <input type="hidden" name="action" value={action} />
                    <input type="hidden" name="scope_key" value={stuck.scope_key} />
                    <input type="hidden" name="event_id" value={String(stuck.head.id)} />
                    <button type="submit">{actionLabels[action]}</button>
                  </form>
                ))}
              </div>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
