// Bulk replay: a form of the filter (provider, event type, subject, error
// class, dead between, payload by JSON containment), which first shows how
// many DEAD events match (wharf.count_bulk_replay, the filter the replay
// takes) and asks to confirm; confirmed, it starts a replay of them in the
// background and sends the browser to its progress page; that page shows a
// <progress> bar that follows the run until it is finished.
import type { Context, Hono } from 'hono';
import { followBulkReplay, startBulkReplayInBackground } from '../../bulk-replay-runner.js';
import {
  cancelBulkReplay, countBulkReplay, listBulkReplays, type BulkReplay, type BulkReplayFilter,
} from '../../sql/bulk-replay.js';
import type { ConsoleEnv, RouteDeps } from '../env.js';
import { ConsoleError } from '../errors.js';
import { optionalJsonObject, optionalText, optionalTime, type FormValues } from '../filters.js';
import { frameOf } from '../frame.js';
import { Csrf, Page, Time } from '../layout.js';
import { progressScript } from '../progress-script.js';
import { isIdText } from '../../api/params.js';
import { workspaceScope, type WorkspaceScope } from '../scope.js';

type Ctx = Context<ConsoleEnv>;

function readFilter(form: Record<string, unknown>): BulkReplayFilter {
  const text = (name: string) => (typeof form[name] === 'string' ? (form[name] as string) : undefined);
  const filter: BulkReplayFilter = {};
  const fields: [Exclude<keyof BulkReplayFilter, 'payload' | 'headers'>, string | undefined][] = [
    ['provider', optionalText(text('provider'), 'Provider')],
    ['event_type', optionalText(text('event_type'), 'Event type')],
    ['subject', optionalText(text('subject'), 'Subject')],
    ['error_class', optionalText(text('error_class'), 'Error class')],
    ['dead_after', optionalTime(text('dead_after'), 'Dead from')],
    ['dead_before', optionalTime(text('dead_before'), 'Dead before')],
  ];
  for (const [key, value] of fields) if (value !== undefined) filter[key] = value;
  const payload = optionalJsonObject(text('payload'), 'Payload contains');
  if (payload) filter.payload = payload;
  return filter;
}

/** The filter as form fields: what the confirm form posts back, and what "Change the filter" puts back in the form. */
function filterValues(filter: BulkReplayFilter, force: boolean): FormValues {
  const values: FormValues = {};
  for (const [key, value] of Object.entries(filter)) values[key] = typeof value === 'string' ? value : JSON.stringify(value);
  if (force) values.force = 'on';
  return values;
}

function describeFilter(filter: BulkReplayFilter): string {
  const parts = Object.entries(filter)
    .map(([key, value]) => `${key.replace('_', ' ')} ${typeof value === 'string' ? value : JSON.stringify(value)}`);
  return parts.length === 0 ? 'every dead letter' : parts.join(', ');
}

function statusText(replay: BulkReplay): string {
  return `Replayed ${replay.replayed} of ${replay.matched} matched (${replay.skipped} skipped), ${replay.state}.`;
}

export function registerBulkReplayPages(app: Hono<ConsoleEnv>, deps: RouteDeps): void {
  const { db, basePath } = deps;

  app.get('/workspaces/:ws/bulk-replays', async (c) => {
    const scope = workspaceScope(c, basePath);
    const replays = await listBulkReplays(db, scope.workspaceId);
    return c.html(<BulkReplayForm c={c} basePath={basePath} scope={scope} replays={replays} values={c.req.query()} />);
  });

  // The count first: how many a replay with this filter would take now; nothing is replayed.
  app.get('/workspaces/:ws/bulk-replays/confirm', async (c) => {
    const scope = workspaceScope(c, basePath);
    const query = c.req.query();
    const filter = readFilter(query);
    const force = query.force === 'on';
    const matched = await countBulkReplay(db, scope.workspaceId, filter, force);
    const values = filterValues(filter, force);
    const noun = matched === 1 ? 'dead letter' : 'dead letters';
    return c.html(
      <Page {...frameOf(c, basePath, scope, 'bulk')} title="Confirm bulk replay">
        <p id="bulk-count" role="status">
          <strong>{String(matched)}</strong> {noun} {matched === 1 ? 'matches' : 'match'}: {describeFilter(filter)}{force ? ' (forced)' : ''}.
        </p>
        {matched > 0 ? (
          <form method="post" action={`${scope.base}/bulk-replays`} class="stack" aria-label="Confirm the bulk replay">
            <Csrf token={c.get('csrfToken')} />
            {Object.entries(values).map(([name, value]) => <input type="hidden" name={name} value={value} />)}
            <input type="hidden" name="confirmed" value={String(matched)} />
            <button type="submit" class="primary">{`Replay ${matched} ${noun}`}</button>
          </form>
        ) : <p>Nothing to replay.</p>}
        <p><a href={`${scope.base}/bulk-replays?${new URLSearchParams(values).toString()}`}>Change the filter</a></p>
      </Page>,
    );
  });

  app.post('/workspaces/:ws/bulk-replays', async (c) => {
    const scope = workspaceScope(c, basePath);
    const form = await c.req.parseBody();
    // Started only from the confirm page, after the operator saw the count.
    if (typeof form.confirmed !== 'string') throw new ConsoleError(400, 'Count the matching dead letters first, then confirm.');
    const replay = await startBulkReplayInBackground(db, scope.workspaceId, readFilter(form), c.get('principal').account, {
      force: form.force === 'on',
      onError: deps.onUnexpectedError,
    });
    return c.redirect(`${scope.base}/bulk-replays/${replay.id}`, 303);
  });

  const find = async (c: Ctx, scope: WorkspaceScope): Promise<BulkReplay> => {
    const id = c.req.param('id');
    const replay = isIdText(id) ? await followBulkReplay(db, scope.workspaceId, id, { onError: deps.onUnexpectedError }) : null;
    if (!replay) throw new ConsoleError(404, 'There is no such bulk replay in this workspace.');
    return replay;
  };

  // Stops a running bulk replay after the batch it is in (wharf.cancel_bulk_replay), as the signed-in account.
  app.post('/workspaces/:ws/bulk-replays/:id/cancel', async (c) => {
    const scope = workspaceScope(c, basePath);
    const id = c.req.param('id');
    if (!isIdText(id)) throw new ConsoleError(404, 'There is no such bulk replay in this workspace.');
    await cancelBulkReplay(db, scope.workspaceId, id, c.get('principal').account);
    return c.redirect(`${scope.base}/bulk-replays/${id}`, 303);
  });

  app.get('/workspaces/:ws/bulk-replays/:id/progress', async (c) => {
    const replay = await find(c, workspaceScope(c, basePath));
    const { state, matched, replayed, skipped } = replay;
    return c.json({ state, matched, replayed, skipped });
  });

  app.get('/workspaces/:ws/bulk-replays/:id', async (c) => {
    const scope = workspaceScope(c, basePath);
    const replay = await find(c, scope);
    const running = replay.state === 'running';
    const nonce = c.get('secureHeadersNonce');
    const done = replay.replayed + replay.skipped;
    return c.html(
      <Page {...frameOf(c, basePath, scope, 'bulk')} title={`Bulk replay ${replay.id}`}
        head={running ? <noscript><meta http-equiv="refresh" content="2" /></noscript> : undefined}>
        <p>Filter: {describeFilter(replay.filter)}{replay.force ? ' (forced)' : ''}. Started <Time at={replay.started_at} /> by {replay.requested_by}.</p>
        <label for="bulk-progress">Progress</label>{' '}
        <progress id="bulk-progress" max={Math.max(replay.matched, 1)} value={replay.matched === 0 ? (running ? 0 : 1) : done}
          data-poll={running ? `${scope.base}/bulk-replays/${replay.id}/progress` : undefined}>
          {`${done} of ${replay.matched}`}
        </progress>
        <p id="bulk-status" role="status" aria-live="polite">{statusText(replay)}</p>
        {running && (
          <form method="post" action={`${scope.base}/bulk-replays/${replay.id}/cancel`} class="inline">
            <Csrf token={c.get('csrfToken')} />
            <button type="submit">Cancel bulk replay</button>
          </form>
        )}
        {replay.state === 'finished' && <p>Finished <Time at={replay.finished_at} />. <a href={`${scope.base}/events`}>See the events</a>.</p>}
        {replay.state === 'cancelled' && (
          <p>Cancelled by {replay.cancelled_by} <Time at={replay.cancelled_at} />: the events replayed before stay replayed, the rest stay dead letters. <a href={`${scope.base}/events`}>See the events</a>.</p>
        )}
        {running && nonce && <script nonce={nonce} dangerouslySetInnerHTML={{ __html: progressScript }} />}
      </Page>,
    );
  });
}

function BulkReplayForm(props: { c: Ctx; basePath: string; scope: WorkspaceScope; replays: BulkReplay[]; values: FormValues }) {
  const { scope } = props;
  const v = props.values;
  // The times as a datetime-local field shows them: stored in UTC, ISO with a zone.
  const local = (time: string | undefined) => time?.replace(/(\.\d+)?Z$/, '') ?? '';
  return (
    <Page {...frameOf(props.c, props.basePath, scope, 'bulk')} title={`Bulk replay · ${scope.label}`}>
      <p>Replays every DEAD event of this workspace that matches, in id order, in small batches. Empty fields match anything. You see how many match before it starts.</p>
      <form method="get" action={`${scope.base}/bulk-replays/confirm`} class="stack" aria-label="Start a bulk replay">
        <label>Provider<input name="provider" value={v.provider ?? ''} placeholder="github" /></label>
        <label>Event type<input name="event_type" value={v.event_type ?? ''} placeholder="push" /></label>
        <label>Subject<input name="subject" value={v.subject ?? ''} placeholder="repo:acme/api" /></label>
        <label>Error class<input name="error_class" value={v.error_class ?? ''} placeholder="SyntaxError" /></label>
        <label>Dead from (UTC)<input type="datetime-local" step="1" name="dead_after" value={local(v.dead_after)} /></label>
        <label>Dead before (UTC)<input type="datetime-local" step="1" name="dead_before" value={local(v.dead_before)} /></label>
        <label class="search">Payload contains (JSON)
          <input type="search" name="payload" value={v.payload ?? ''} placeholder='{"repository": {"full_name": "acme/api"}}' spellcheck={false} />
        </label>
        <label class="check"><input type="checkbox" name="force" checked={v.force === 'on'} /> Also replay events whose outcome is uncertain (force)</label>
        <button type="submit" class="primary">Count matching dead letters</button>
      </form>
      <h2 id="recent">Recent bulk replays</h2>
      {props.replays.length === 0 ? <p>None yet.</p> : (
        <table aria-labelledby="recent">
          <thead>
            <tr>
              <th scope="col" class="num">Id</th><th scope="col">Filter</th><th scope="col">State</th>
              <th scope="col" class="num">Replayed</th><th scope="col" class="num">Matched</th><th scope="col">Started</th>
            </tr>
          </thead>
          <tbody>
            {props.replays.map((replay) => (
              <tr>
                <th scope="row" class="num"><a href={`${scope.base}/bulk-replays/${replay.id}`}>{String(replay.id)}</a></th>
                <td>{describeFilter(replay.filter)}</td>
                <td>{replay.state}</td>
                <td class="num">{String(replay.replayed)}</td>
                <td class="num">{String(replay.matched)}</td>
                <td><Time at={replay.started_at} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Page>
  );
}
