// Bulk replay: a form of the filter (provider, event type, subject, error
// class, dead between), which starts a replay of every matching DEAD event in
// the background and sends the browser to its progress page; that page shows
// a <progress> bar that follows the run until it is finished.
import type { Context, Hono } from 'hono';
import { followBulkReplay, startBulkReplayInBackground } from '../../bulk-replay-runner.js';
import { cancelBulkReplay, listBulkReplays, type BulkReplay, type BulkReplayFilter } from '../../sql/bulk-replay.js';
import type { ConsoleEnv, RouteDeps } from '../env.js';
import { ConsoleError } from '../errors.js';
import { optionalText, optionalTime } from '../filters.js';
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
  return filter;
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
    return c.html(<BulkReplayForm c={c} basePath={basePath} scope={scope} replays={replays} />);
  });

  app.post('/workspaces/:ws/bulk-replays', async (c) => {
    const scope = workspaceScope(c, basePath);
    const form = await c.req.parseBody();
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

function BulkReplayForm(props: { c: Ctx; basePath: string; scope: WorkspaceScope; replays: BulkReplay[] }) {
  const { scope } = props;
  return (
    <Page {...frameOf(props.c, props.basePath, scope, 'bulk')} title={`Bulk replay · ${scope.label}`}>
      <p>Replays every DEAD event of this workspace that matches, in id order, in small batches. Empty fields match anything.</p>
      <form method="post" action={`${scope.base}/bulk-replays`} class="stack" aria-label="Start a bulk replay">
        <Csrf token={props.c.get('csrfToken')} />
        <label>Provider<input name="provider" placeholder="github" /></label>
        <label>Event type<input name="event_type" placeholder="push" /></label>
        <label>Subject<input name="subject" placeholder="repo:acme/api" /></label>
        <label>Error class<input name="error_class" placeholder="SyntaxError" /></label>
        <label>Dead from (UTC)<input type="datetime-local" step="1" name="dead_after" /></label>
        <label>Dead before (UTC)<input type="datetime-local" step="1" name="dead_before" /></label>
        <label class="check"><input type="checkbox" name="force" /> Also replay events whose outcome is uncertain (force)</label>
        <button type="submit" class="primary">Start bulk replay</button>
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
