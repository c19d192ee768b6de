// Events and dead letters of a scope (a workspace, or the installation rows
// for the admin): filtered lists with keyset paging, one event with payload,
// headers, attempts and steps (and, in a workspace, its deliveries to the
// workspace's destinations), and replaying a DEAD one.
import type { Context, Hono } from 'hono';
import type { EventDetail } from '../../sql/operator.js';
import { listEvents, showEvent } from '../../sql/operator.js';
import { replayEvent } from '../../sql/replay-retention.js';
import { eventDeliveries, type EventDelivery } from '../../sql/destinations.js';
import { EventTable } from '../components/event-table.js';
import { FilterForm } from '../components/filter-form.js';
import { Frames } from '../components/frames.js';
import { JsonBlock } from '../components/json-block.js';
import type { Database } from '../../../db/database.js';
import type { ConsoleEnv, RouteDeps } from '../env.js';
import { ConsoleError } from '../errors.js';
import { olderLink, readEventFilter } from '../filters.js';
import { frameOf } from '../frame.js';
import { Csrf, LiveUpdates, Notice, Page, Problem, StateBadge, Time } from '../layout.js';
import { searchEvents } from '../../sql/event-search.js';
import { isIdText } from '../../api/params.js';
import { installationScope, workspaceScope, type Scope } from '../scope.js';

type Ctx = Context<ConsoleEnv>;
type ScopeOf = (c: Ctx) => Scope;

export function registerEventPages(app: Hono<ConsoleEnv>, deps: RouteDeps): void {
  const { db, basePath } = deps;
  const scopes: [string, ScopeOf][] = [
    ['/workspaces/:ws', (c) => workspaceScope(c, basePath)],
    ['/installation', (c) => installationScope(c, basePath)],
  ];
  for (const [prefix, scopeOf] of scopes) {
    app.get(`${prefix}/events`, (c) => listPage(c, db, basePath, scopeOf(c), false));
    app.get(`${prefix}/dead`, (c) => listPage(c, db, basePath, scopeOf(c), true));
    app.get(`${prefix}/events/:id`, async (c) => {
      const scope = scopeOf(c);
      const event = await findEvent(c, db, scope);
      const deliveries = scope.workspaceId === undefined ? [] : (await eventDeliveries(db, scope.workspaceId, String(event.id))) ?? [];
      const notice = c.req.query('replayed') === '1' ? 'Replayed: the event is queued again.' : undefined;
      return c.html(<EventPage c={c} basePath={basePath} scope={scope} event={event} notice={notice} deliveries={deliveries} />);
    });
    app.post(`${prefix}/events/:id/replay`, async (c) => {
      const scope = scopeOf(c);
      const id = eventId(c);
      const form = await c.req.parseBody();
      const force = form.force === 'on';
      const result = await replayEvent(db, scope.owner, id, c.get('principal').account, force);
      if (result.replayed) return c.redirect(`${scope.base}/events/${id}?replayed=1`, 303);
      if (result.reason === 'not_found') throw new ConsoleError(404, `There is no event ${id} here.`);
      const event = await findEvent(c, db, scope);
      const problem = result.reason === 'uncertain_outcome'
        ? 'The handler may have had an external effect: check it, then replay with "the outcome is known" ticked.'
        : `Only a DEAD event can be replayed; this one is ${result.state}.`;
      return c.html(<EventPage c={c} basePath={basePath} scope={scope} event={event} problem={problem} />, 409);
    });
  }
}

function eventId(c: Ctx): string {
  const id = c.req.param('id');
  if (!isIdText(id)) throw new ConsoleError(404, 'There is no such event.');
  return id;
}

async function findEvent(c: Ctx, db: Database, scope: Scope): Promise<EventDetail> {
  const id = eventId(c);
  const event = await showEvent(db, scope.owner, id);
  if (!event) throw new ConsoleError(404, `There is no event ${id} here.`);
  return event;
}

async function listPage(c: Ctx, db: Database, basePath: string, scope: Scope, dead: boolean) {
  const { filter, values, search } = readEventFilter((name) => c.req.query(name), { withState: !dead });
  const listed = dead ? { ...filter, state: 'DEAD' as const } : filter;
  if (search && scope.workspaceId === undefined) throw new ConsoleError(400, 'A payload or headers search is made within one workspace.');
  const page = search && scope.workspaceId !== undefined
    ? await searchEvents(db, scope.workspaceId, search, listed)
    : await listEvents(db, scope.owner, listed);
  const path = `${scope.base}/${dead ? 'dead' : 'events'}`;
  const title = dead ? 'Dead letters' : 'Events';
  return c.html(
    <Page {...frameOf(c, basePath, scope, dead ? 'dead' : 'events')} title={`${title} · ${scope.label}`}>
      <FilterForm action={path} values={values} withState={!dead} />
      {!filter.before && <LiveUpdates nonce={c.get('secureHeadersNonce')} />}
      <div id="live-events" data-live>
        <EventTable events={page.events} base={scope.base} caption={title} />
        <nav class="pager" aria-label="Pages">
          {filter.before && <a href={`${path}?${new URLSearchParams(values).toString()}`}>Newest</a>}
          {filter.before && page.next_cursor !== null && ' · '}
          {page.next_cursor !== null && <a href={olderLink(path, values, page.next_cursor)} rel="next">Older</a>}
        </nav>
      </div>
    </Page>,
  );
}

function EventPage(props: {
  c: Ctx; basePath: string; scope: Scope; event: EventDetail; notice?: string; problem?: string; deliveries?: EventDelivery[];
}) {
  const { event, scope } = props;
  return (
    <Page {...frameOf(props.c, props.basePath, scope, event.state === 'DEAD' ? 'dead' : 'events')} title={`Event ${event.id}`}>
      <Notice text={props.notice} />
      <Problem text={props.problem} />
      <LiveUpdates nonce={props.c.get('secureHeadersNonce')} />
      <div id="live-event" data-live>
      <dl class="facts">
        <dt>State</dt><dd><StateBadge state={event.state} />{event.outcome ? ` (${event.outcome})` : ''}</dd>
        <dt>Provider</dt><dd>{event.provider}</dd>
        <dt>Event type</dt><dd>{event.event_type}</dd>
        <dt>Subject</dt><dd>{event.subject ?? '—'}</dd>
        <dt>Source</dt><dd>{event.source}</dd>
        <dt>Delivery key</dt><dd>{event.delivery_key}</dd>
        <dt>Connection</dt><dd>{event.connection_id === null ? '—' : String(event.connection_id)}</dd>
        <dt>Received</dt><dd><Time at={event.received_at} /></dd>
        <dt>Attempt / failures</dt><dd>{`${event.attempt} / ${event.failures}`}</dd>
        <dt>Last error class</dt><dd>{event.error_class ?? '—'}</dd>
        <dt>Thrown at</dt><dd><Frames frames={event.error_frames ?? []} label="Where the last failure was thrown, innermost first" /></dd>
        <dt>Next attempt</dt><dd><Time at={event.next_attempt_at} /></dd>
        <dt>Handled</dt><dd><Time at={event.handled_at} /></dd>
        <dt>Dead since</dt><dd><Time at={event.dead_at} /></dd>
        <dt>Replayed</dt><dd>{event.replayed_at ? <><Time at={event.replayed_at} /> by {event.replayed_by ?? '?'}</> : '—'}</dd>
      </dl>
      {event.state === 'DEAD' && <ReplayForm action={`${scope.base}/events/${event.id}/replay`} csrfToken={props.c.get('csrfToken')} uncertain={event.outcome === 'uncertain'} />}
      <h2 id="attempts">Attempts</h2>
      <AttemptsTable attempts={event.attempts ?? []} />
      {props.deliveries && props.deliveries.length > 0 && <ForwardedTo deliveries={props.deliveries} base={scope.base} />}
      </div>
      <h2 id="steps">Steps</h2>
      {event.steps.length === 0 ? <p>No step committed.</p> : (
        <table aria-labelledby="steps">
          <thead><tr><th scope="col">Step</th><th scope="col">Committed</th></tr></thead>
          <tbody>{event.steps.map((step) => <tr><th scope="row">{step.name}</th><td><Time at={step.committed_at} /></td></tr>)}</tbody>
        </table>
      )}
      <h2 id="payload">Payload</h2>
      <JsonBlock value={event.payload} label="Payload" />
      <h2 id="headers">Headers</h2>
      <JsonBlock value={event.headers} label="Headers" />
    </Page>
  );
}

function ReplayForm(props: { action: string; csrfToken: string; uncertain: boolean }) {
  return (
    <form method="post" action={props.action} class="stack" aria-label="Replay this event">
      <Csrf token={props.csrfToken} />
      {props.uncertain && (
        <label class="check">
          <input type="checkbox" name="force" />
          The outcome is known: replay even though the handler may have had an effect (force)
        </label>
      )}
      <button type="submit" class="primary">Replay</button>
    </form>
  );
}

function AttemptsTable(props: { attempts: EventDetail['attempts'] }) {
  if (props.attempts.length === 0) return <p>No attempt yet.</p>;
  return (
    <table aria-labelledby="attempts">
      <thead>
        <tr>
          <th scope="col" class="num">Attempt</th><th scope="col" class="num">Epoch</th><th scope="col">Worker</th>
          <th scope="col">Started</th><th scope="col">Ended</th><th scope="col">How it ended</th><th scope="col">Error class</th>
          <th scope="col">Thrown at</th>
        </tr>
      </thead>
      <tbody>
        {props.attempts.map((attempt) => (
          <tr>
            <th scope="row" class="num">{String(attempt.attempt)}</th>
            <td class="num">{String(attempt.epoch)}</td>
            <td>{attempt.worker}</td>
            <td><Time at={attempt.started_at} /></td>
            <td><Time at={attempt.ended_at} /></td>
            <td>{attempt.ended}</td>
            <td>{attempt.error_class ?? '—'}</td>
            <td><Frames frames={attempt.frames ?? []} label={`Where attempt ${attempt.attempt} failed, innermost first`} /></td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** The event's deliveries to the workspace's destinations, each with its own state and attempts. */
function ForwardedTo(props: { deliveries: EventDelivery[]; base: string }) {
  return (
    <>
      <h2 id="forwarded">Forwarded to</h2>
      <table aria-labelledby="forwarded">
        <thead>
          <tr><th scope="col">Destination</th><th scope="col">Delivery</th><th scope="col">State</th>
            <th scope="col" class="num">Attempt</th><th scope="col">Last answer</th><th scope="col">Handled or dead</th></tr>
        </thead>
        <tbody>
          {props.deliveries.map((delivery) => (
            <tr>
              <th scope="row"><a href={`${props.base}/destinations/${delivery.destination_id}`}>{delivery.destination_name}</a></th>
              <td><a href={`${props.base}/deliveries/${delivery.id}`}>{String(delivery.id)}</a></td>
              <td><StateBadge state={delivery.state} /></td>
              <td class="num">{String(delivery.attempt)}</td>
              <td>{delivery.last_status === null ? '—' : `HTTP ${delivery.last_status}`}{delivery.error_class ? ` · ${delivery.error_class}` : ''}</td>
              <td><Time at={delivery.dead_at ?? delivery.handled_at} /></td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}
