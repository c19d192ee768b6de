// Destinations (contract v6): the workspace's own application endpoints that
// `wharf worker` forwards events to. The list shows each one's state, breaker
// and figures; one destination's page its settings, rules, recent
// deliveries and dead letters, with pause/resume, a new signing secret, the
// credentials, replay of one dead letter and of many (the count first, then
// confirmed). Everything goes through operator/sql/destinations.ts and the
// API's own body schemas, so the console refuses and accepts exactly what
// the API does (a bad URL or filter: a 400 page naming the bad part, nothing
// saved). A signing secret is shown once, on the page that answers the form
// that drew it, never in a URL or a redirect; credentials are never shown.
import type { Context, Hono } from 'hono';
import type { z } from '@hono/zod-openapi';
import { isIdText } from '../../api/params.js';
import {
  credentialsBody, deliveryReplayFilterBody, destinationEditBody, destinationRuleEditBody, newDestinationBody, newDestinationRuleBody,
} from '../../api/schemas.js';
import {
  clearDestinationCredentials, countDeadDeliveries, createDestination, createDestinationRule, deleteDestination,
  deleteDestinationRule, listDeliveries, listDestinationRules, listDestinations, replayDeadDeliveries, replayDelivery,
  rotateDestinationSecret, setDestinationCredentials, setDestinationState, showDelivery, showDestination,
  testDestinationFilter, updateDestination, updateDestinationRule, ratePeriods, type Delivery, type DeliveryReplayFilter, type Destination,
  type DestinationRule,
} from '../../sql/destinations.js';
import type { ConsoleEnv, RouteDeps } from '../env.js';
import { ConsoleError } from '../errors.js';
import { formField } from '../filters.js';
import { frameOf } from '../frame.js';
import { Csrf, Notice, Page, StateBadge, Time } from '../layout.js';
import { workspaceScope, type WorkspaceScope } from '../scope.js';

type Ctx = Context<ConsoleEnv>;
type Form = Record<string, unknown>;

const notices: Record<string, string> = {
  paused: 'The destination is paused: its deliveries are kept and wait until it is resumed.',
  resumed: 'The destination is resumed: its deliveries go again.',
  edited: 'The destination is changed.',
  'credentials-set': 'The credentials are saved, encrypted; they are not shown again.',
  'credentials-cleared': 'The credentials are cleared.',
  'rule-added': 'The rule is saved: events admitted from now on that match it are forwarded.',
  'rule-edited': 'The rule is changed: it routes the events admitted from now on.',
  'rule-deleted': 'The rule is deleted.',
  replayed: 'The delivery is back in the queue, due now, with the same webhook-id.',
  deleted: 'The destination is deleted, with its rules and deliveries.',
};

/** The first thing the API's schema refused in a form, as the console's 400. */
function parsed<T extends z.ZodType>(schema: T, value: unknown): z.infer<T> {
  const result = schema.safeParse(value);
  if (!result.success) {
    const issue = result.error.issues[0];
    const where = issue && issue.path.length > 0 && !issue.message.startsWith(String(issue.path[0])) ? `${issue.path.join('.')}: ` : '';
    throw new ConsoleError(400, `${where}${issue?.message ?? 'That form is not valid.'}`);
  }
  return result.data;
}

/** A whole number field: absent when empty, else the number (NaN is refused by the schema). */
function numberField(form: Form, name: string): number | undefined {
  const text = formField(form, name);
  return text === '' ? undefined : Number(text);
}

/** A JSON object field (a filter): absent when empty; a 400 naming the field when it is not JSON. */
function jsonField(form: Form, name: string, label: string): Record<string, unknown> | undefined {
  const text = formField(form, name);
  if (text === '') return undefined;
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // reported below
  }
  throw new ConsoleError(400, `${label} must be a JSON object, e.g. {"payload": {"action": "opened"}}.`);
}

/** "Name: value" lines as headers. */
function headersField(form: Form): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const line of formField(form, 'headers').split(/\r?\n/)) {
    if (line.trim() === '') continue;
    const at = line.indexOf(':');
    if (at <= 0) throw new ConsoleError(400, `headers: write each as "Name: value", not ${JSON.stringify(line.trim())}.`);
    headers[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return headers;
}

/** The destination a form describes: every field, for a new one (empty: the default) or an edit (empty rate limit: none). */
function specOf(form: Form, edit: boolean) {
  const spec = {
    name: formField(form, 'name'), url: formField(form, 'url'),
    timeout_ms: numberField(form, 'timeout_ms'),
    rate_limit: numberField(form, 'rate_limit') ?? (edit ? null : undefined),
    rate_period: formField(form, 'rate_period') || undefined,
    max_in_flight: numberField(form, 'max_in_flight'),
    ordered: form.ordered === 'on',
    headers: headersField(form),
    breaker_failures: numberField(form, 'breaker_failures'),
    breaker_minutes: numberField(form, 'breaker_minutes'),
  };
  const given = Object.fromEntries(Object.entries(spec).filter(([, value]) => value !== undefined));
  return edit ? parsed(destinationEditBody, given) : parsed(newDestinationBody, given);
}

/** The rule a form describes; an empty field is no criterion (left out of a new rule, cleared by an edit). */
function ruleOf(form: Form, edit = false) {
  const eventTypes = formField(form, 'event_types').split(',').map((pattern) => pattern.trim()).filter((pattern) => pattern !== '');
  const filter = jsonField(form, 'filter', 'Filter');
  const criteria = {
    connection_id: formField(form, 'connection_id') || null,
    provider: formField(form, 'provider') || null,
    event_types: eventTypes.length > 0 ? eventTypes : null,
    subject_prefix: formField(form, 'subject_prefix') || null,
    filter: filter ?? null,
  };
  const rule = {
    ...Object.fromEntries(Object.entries(criteria).filter(([, value]) => edit || value !== null)),
    forward_only: form.forward_only === 'on',
  };
  return parsed(edit ? destinationRuleEditBody : newDestinationRuleBody, rule);
}

function replayFilterOf(values: Form): DeliveryReplayFilter {
  const filter = {
    ...(formField(values, 'event_type') ? { event_type: formField(values, 'event_type') } : {}),
    ...(formField(values, 'error_class') ? { error_class: formField(values, 'error_class') } : {}),
  };
  return parsed(deliveryReplayFilterBody, filter);
}

function idOf(c: Ctx, name: string, what: string): string {
  const id = c.req.param(name);
  if (id === undefined || !isIdText(id)) throw new ConsoleError(404, `There is no such ${what}.`);
  return id;
}

function percent(rate: number | null): string {
  return rate === null ? '—' : `${Math.round(rate * 1000) / 10} %`;
}

function ms(value: number | null): string {
  return value === null ? '—' : `${Math.round(value)} ms`;
}

/** A count that stopped at its cap, as "10000+". */
function counted(value: number, capped: boolean): string {
  return capped ? `${value}+` : String(value);
}

/** The state, with why it is paused and, for the breaker, how it stands. */
function DestinationState(props: { destination: Destination }) {
  const d = props.destination;
  return (
    <>
      <StateBadge state={d.state} />
      {d.paused_reason && d.state !== 'ACTIVE' ? ` (${d.paused_reason === 'gone' ? 'the endpoint answered 410 Gone' : d.paused_reason === 'breaker' ? 'circuit breaker open' : `by ${d.paused_by ?? 'an operator'}`})` : ''}
      {d.consecutive_failures > 0 ? ` · ${d.consecutive_failures} failed in a row` : ''}
    </>
  );
}

export function registerDestinationPages(app: Hono<ConsoleEnv>, deps: RouteDeps): void {
  const { db, basePath } = deps;
  const keyRing = deps.keyRing ?? Promise.resolve(undefined);

  async function find(scope: WorkspaceScope, id: string): Promise<Destination> {
    const destination = await showDestination(db, scope.workspaceId, id);
    if (!destination) throw new ConsoleError(404, `There is no destination ${id} here.`);
    return destination;
  }

  app.get('/workspaces/:ws/destinations', async (c) => {
    const scope = workspaceScope(c, basePath);
    const destinations = await listDestinations(db, scope.workspaceId);
    return c.html(
      <Page {...frameOf(c, basePath, scope, 'destinations')} title={`Destinations · ${scope.label}`}>
        <Notice text={notices[c.req.query('changed') ?? '']} />
        <p>Wharf forwards the events that your rules route to each destination: a signed POST to your application, retried, throttled and in order. The API (<code>/api/workspaces/{scope.workspaceId}/destinations</code>) and the CLI (<code>wharf destinations</code>) have them too.</p>
        <p class="actions">
          <a href={`${scope.base}/destinations/new`}>New destination</a>
          <a href={`${scope.base}/destinations/filter-test`}>Test a filter against an event</a>
        </p>
        {destinations.length === 0 ? <p role="status">No destination yet: events go to the workspace's handlers only.</p> : (
          <table aria-label="Destinations">
            <thead>
              <tr>
                <th scope="col">Name</th><th scope="col">State</th><th scope="col">URL</th>
                <th scope="col" class="num">Per minute</th><th scope="col" class="num">Success (1 h)</th>
                <th scope="col" class="num">p50</th><th scope="col" class="num">p99</th>
                <th scope="col" class="num">Queued</th><th scope="col" class="num">Dead</th>
              </tr>
            </thead>
            <tbody>
              {destinations.map((d) => (
                <tr>
                  <th scope="row"><a href={`${scope.base}/destinations/${d.id}`}>{d.name}</a></th>
                  <td><DestinationState destination={d} /></td>
                  <td>{d.url}</td>
                  <td class="num">{String(d.stats.per_minute)}</td>
                  <td class="num">{percent(d.stats.success_rate)}</td>
                  <td class="num">{ms(d.stats.latency_p50_ms)}</td>
                  <td class="num">{ms(d.stats.latency_p99_ms)}</td>
                  <td class="num">{counted(d.stats.queued, d.stats.queued_capped)}</td>
                  <td class="num">{d.stats.dead > 0 ? <a href={`${scope.base}/destinations/${d.id}#dead`}>{counted(d.stats.dead, d.stats.dead_capped)}</a> : '0'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Page>,
    );
  });

  app.get('/workspaces/:ws/destinations/new', (c) => {
    const scope = workspaceScope(c, basePath);
    return c.html(
      <Page {...frameOf(c, basePath, scope, 'destinations')} title={`New destination · ${scope.label}`}>
        <p>Wharf draws the signing secret and shows it once, on the next page: your application verifies each request with it (Standard Webhooks).</p>
        <form method="post" action={`${scope.base}/destinations`} class="stack" aria-label="New destination">
          <Csrf token={c.get('csrfToken')} />
          <DestinationFields />
          <button type="submit" class="primary">Create destination</button>
        </form>
        <p><a href={`${scope.base}/destinations`}>Back to the destinations</a></p>
      </Page>,
    );
  });

  app.post('/workspaces/:ws/destinations', async (c) => {
    const scope = workspaceScope(c, basePath);
    const spec = specOf(await c.req.parseBody(), false) as z.infer<typeof newDestinationBody>;
    const created = await createDestination(db, keyRing, scope.workspaceId, spec);
    // The secret is answered here, once: a redirect would carry it in a URL.
    return destinationPage(c, scope, created.id, { secret: created.secret, text: 'The destination is created. Its signing secret, shown this once:' });
  });

  // Read-only: a GET form, so a result can be linked; nothing is saved.
  app.get('/workspaces/:ws/destinations/filter-test', async (c) => {
    const scope = workspaceScope(c, basePath);
    const query = c.req.query();
    const filterText = query.filter ?? '';
    const eventText = query.event_id ?? '';
    let result: { matched: boolean } | undefined;
    if (filterText.trim() !== '' || eventText.trim() !== '') {
      const filter = jsonField(query, 'filter', 'Filter');
      if (!filter) throw new ConsoleError(400, 'Give the filter to test.');
      if (!isIdText(eventText.trim())) throw new ConsoleError(400, 'The event id must be a positive integer.');
      const tested = await testDestinationFilter(db, scope.workspaceId, filter, eventText.trim());
      if (!tested) throw new ConsoleError(404, `There is no event ${eventText.trim()} here.`);
      result = tested;
    }
    return c.html(
      <Page {...frameOf(c, basePath, scope, 'destinations')} title={`Test a filter · ${scope.label}`}>
        <p>A rule's filter is matched against the stored event's <code>{'{"payload": …, "headers": …}'}</code>. Nothing is saved.</p>
        <form method="get" action={`${scope.base}/destinations/filter-test`} class="stack" aria-label="Test a filter">
          <label>Filter (JSON)
            <textarea name="filter" rows={5} cols={60} required spellcheck={false} placeholder='{"payload": {"action": {"$in": ["opened", "closed"]}}}'>{filterText}</textarea>
          </label>
          <label>Event id <input name="event_id" inputmode="numeric" required value={eventText} /></label>
          <button type="submit" class="primary">Test</button>
        </form>
        {result && (
          <p id="filter-result" role="status" class={result.matched ? 'notice' : 'problem'}>
            {result.matched ? `The filter matches event ${eventText.trim()}.` : `The filter does not match event ${eventText.trim()}.`}{' '}
            <a href={`${scope.base}/events/${eventText.trim()}`}>See the event</a>
          </p>
        )}
      </Page>,
    );
  });

  async function destinationPage(c: Ctx, scope: WorkspaceScope, id: string | number, secret?: { secret: string; text: string }) {
    const destination = await find(scope, String(id));
    const [rules, recent, dead] = await Promise.all([
      listDestinationRules(db, scope.workspaceId, String(id)),
      listDeliveries(db, scope.workspaceId, String(id), { limit: 20 }),
      listDeliveries(db, scope.workspaceId, String(id), { limit: 50, state: 'DEAD' }),
    ]);
    const csrfToken = c.get('csrfToken');
    const base = `${scope.base}/destinations/${destination.id}`;
    const replayed = c.req.query('replayed');
    const d = destination;
    return c.html(
      <Page {...frameOf(c, basePath, scope, 'destinations')} title={`Destination ${d.name}`}>
        <Notice text={notices[c.req.query('changed') ?? '']} />
        {replayed !== undefined && /^\d{1,9}$/.test(replayed) && (
          <p class="notice" role="status">{`${replayed} dead ${replayed === '1' ? 'delivery is' : 'deliveries are'} back in the queue.`}</p>
        )}
        {secret && (
          <div class="notice" role="status">
            <p>{secret.text} give it to your application, which verifies each request with it (Standard Webhooks). It is not shown again.</p>
            <p><code id="new-secret">{secret.secret}</code></p>
          </div>
        )}
        <dl class="facts">
          <dt>State</dt><dd><DestinationState destination={d} /></dd>
          <dt>URL</dt><dd>{d.url}</dd>
          <dt>Order</dt><dd>{d.ordered ? 'ordered: one at a time per scope' : 'unordered'}</dd>
          <dt>Rate limit</dt><dd>{d.rate_limit === null ? 'none' : `${d.rate_limit} per ${d.rate_period}`}</dd>
          <dt>In flight at most</dt><dd>{String(d.max_in_flight)}</dd>
          <dt>Timeout</dt><dd>{`${d.timeout_ms} ms`}</dd>
          <dt>Circuit breaker</dt><dd>{`opens after ${d.breaker_failures} failed attempts in a row or ${d.breaker_minutes} min failing`}{d.failing_since ? <> · failing since <Time at={d.failing_since} /></> : ''}{d.probe_at ? <> · probe <Time at={d.probe_at} /></> : ''}</dd>
          <dt>Extra headers</dt><dd>{Object.keys(d.headers).length === 0 ? '—' : Object.entries(d.headers).map(([name, value]) => `${name}: ${value}`).join(', ')}</dd>
          <dt>Credentials</dt><dd>{d.has_credentials ? `${d.credentials_type} (stored encrypted, not shown)` : 'none'}</dd>
          <dt>Signing secret</dt><dd>{d.secret_rotating_until ? <>rotated; the previous one signs too until <Time at={d.secret_rotating_until} /></> : 'set (not shown)'}</dd>
          <dt>{d.stats.last_hour_sampled ? 'Latest 10000 attempts' : 'Last hour'}</dt><dd>{`${d.stats.delivered_last_hour} delivered, ${d.stats.failed_last_hour} failed, success ${percent(d.stats.success_rate)}, p50 ${ms(d.stats.latency_p50_ms)}, p99 ${ms(d.stats.latency_p99_ms)}, ${d.stats.filtered_last_hour} left out by filters`}</dd>
          <dt>Now</dt><dd>{`${d.stats.per_minute} delivered in the last minute, ${counted(d.stats.queued, d.stats.queued_capped)} queued, ${d.stats.leased} in flight, ${counted(d.stats.dead, d.stats.dead_capped)} dead`}</dd>
        </dl>
        <div class="actions">
          <a href={`${base}/edit`}>Edit</a>
          <form method="post" action={`${base}/state`} class="inline">
            <Csrf token={csrfToken} />
            <input type="hidden" name="state" value={d.state === 'ACTIVE' ? 'PAUSED' : 'ACTIVE'} />
            <button type="submit">{d.state === 'ACTIVE' ? 'Pause' : 'Resume'}</button>
          </form>
          <form method="post" action={`${base}/rotate-secret`} class="inline">
            <Csrf token={csrfToken} />
            <button type="submit">Rotate secret</button>
          </form>
          <form method="post" action={`${base}/delete`} class="inline">
            <Csrf token={csrfToken} />
            <button type="submit">Delete destination</button>
          </form>
        </div>

        <h2 id="rules">Rules</h2>
        <RuleTable rules={rules} base={scope.base} csrfToken={csrfToken} />
        <details>
          <summary>Add a rule</summary>
          <form method="post" action={`${base}/rules`} class="stack" aria-label="Add a rule">
            <Csrf token={csrfToken} />
            <RuleFields />
            <button type="submit" class="primary">Add rule</button>
          </form>
        </details>

        <h2 id="credentials">Credentials</h2>
        <p>For an endpoint behind an API gateway. Stored encrypted and never shown again.</p>
        <form method="post" action={`${base}/credentials`} class="stack" aria-label="Set credentials">
          <Csrf token={csrfToken} />
          <label>Kind
            <select name="type">
              <option value="bearer">bearer token</option>
              <option value="basic">basic (user and password)</option>
              <option value="header">API-key header</option>
            </select>
          </label>
          <label>Token, password or header value <input name="secret" type="password" autocomplete="off" required /></label>
          <label>User (basic) or header name (header) <input name="name" autocomplete="off" /></label>
          <button type="submit">Save credentials</button>
        </form>
        {d.has_credentials && (
          <form method="post" action={`${base}/credentials/clear`} class="inline">
            <Csrf token={csrfToken} />
            <button type="submit">Clear credentials</button>
          </form>
        )}

        <h2 id="dead">Dead letters</h2>
        {dead && dead.deliveries.length > 0 ? (
          <>
            <DeliveryTable deliveries={dead.deliveries} base={scope.base} csrfToken={csrfToken} label="Dead letters" replay />
            <form method="get" action={`${base}/replays/confirm`} class="filters" aria-label="Replay dead letters">
              <label>Event type <input name="event_type" /></label>
              <label>Error class <input name="error_class" /></label>
              <button type="submit">Count matching dead letters</button>
            </form>
          </>
        ) : <p>No dead letter.</p>}

        <h2 id="recent">Recent deliveries</h2>
        {recent && recent.deliveries.length > 0 ? <DeliveryTable deliveries={recent.deliveries} base={scope.base} csrfToken={csrfToken} label="Recent deliveries" />
          : <p>No delivery yet.</p>}
        <p><a href={`${scope.base}/destinations`}>Back to the destinations</a></p>
      </Page>,
    );
  }

  app.get('/workspaces/:ws/destinations/:id', (c) => destinationPage(c, workspaceScope(c, basePath), idOf(c, 'id', 'destination')));

  app.get('/workspaces/:ws/destinations/:id/edit', async (c) => {
    const scope = workspaceScope(c, basePath);
    const destination = await find(scope, idOf(c, 'id', 'destination'));
    return c.html(
      <Page {...frameOf(c, basePath, scope, 'destinations')} title={`Edit destination ${destination.name}`}>
        <form method="post" action={`${scope.base}/destinations/${destination.id}`} class="stack" aria-label="Edit destination">
          <Csrf token={c.get('csrfToken')} />
          <DestinationFields destination={destination} />
          <button type="submit" class="primary">Save changes</button>
        </form>
        <p><a href={`${scope.base}/destinations/${destination.id}`}>Back to the destination</a></p>
      </Page>,
    );
  });

  app.post('/workspaces/:ws/destinations/:id', async (c) => {
    const scope = workspaceScope(c, basePath);
    const id = idOf(c, 'id', 'destination');
    const spec = specOf(await c.req.parseBody(), true);
    if (!(await updateDestination(db, scope.workspaceId, id, spec))) throw new ConsoleError(404, `There is no destination ${id} here.`);
    return c.redirect(`${scope.base}/destinations/${id}?changed=edited`, 303);
  });

  app.post('/workspaces/:ws/destinations/:id/state', async (c) => {
    const scope = workspaceScope(c, basePath);
    const id = idOf(c, 'id', 'destination');
    const state = (await c.req.parseBody()).state;
    if (state !== 'PAUSED' && state !== 'ACTIVE') throw new ConsoleError(400, 'The state must be PAUSED or ACTIVE.');
    if (!(await setDestinationState(db, scope.workspaceId, id, state, c.get('principal').account))) {
      throw new ConsoleError(404, `There is no destination ${id} here.`);
    }
    return c.redirect(`${scope.base}/destinations/${id}?changed=${state === 'PAUSED' ? 'paused' : 'resumed'}`, 303);
  });

  app.post('/workspaces/:ws/destinations/:id/rotate-secret', async (c) => {
    const scope = workspaceScope(c, basePath);
    const id = idOf(c, 'id', 'destination');
    const rotated = await rotateDestinationSecret(db, keyRing, scope.workspaceId, id);
    if (!rotated) throw new ConsoleError(404, `There is no destination ${id} here.`);
    return destinationPage(c, scope, id, {
      secret: rotated.secret,
      text: 'A new signing secret, shown this once (the previous one keeps signing beside it for 24 hours):',
    });
  });

  app.post('/workspaces/:ws/destinations/:id/credentials', async (c) => {
    const scope = workspaceScope(c, basePath);
    const id = idOf(c, 'id', 'destination');
    const form = await c.req.parseBody();
    const type = formField(form, 'type');
    const secret = typeof form.secret === 'string' ? form.secret : '';
    const name = formField(form, 'name');
    const credentials = parsed(credentialsBody, type === 'bearer' ? { type, token: secret }
      : type === 'basic' ? { type, username: name, password: secret } : { type, name, value: secret });
    if (!(await setDestinationCredentials(db, keyRing, scope.workspaceId, id, credentials))) {
      throw new ConsoleError(404, `There is no destination ${id} here.`);
    }
    return c.redirect(`${scope.base}/destinations/${id}?changed=credentials-set`, 303);
  });

  app.post('/workspaces/:ws/destinations/:id/credentials/clear', async (c) => {
    const scope = workspaceScope(c, basePath);
    const id = idOf(c, 'id', 'destination');
    if (!(await clearDestinationCredentials(db, scope.workspaceId, id))) throw new ConsoleError(404, `There is no destination ${id} here.`);
    return c.redirect(`${scope.base}/destinations/${id}?changed=credentials-cleared`, 303);
  });

  app.post('/workspaces/:ws/destinations/:id/delete', async (c) => {
    const scope = workspaceScope(c, basePath);
    const id = idOf(c, 'id', 'destination');
    if (!(await deleteDestination(db, scope.workspaceId, id))) throw new ConsoleError(404, `There is no destination ${id} here.`);
    return c.redirect(`${scope.base}/destinations?changed=deleted`, 303);
  });

  app.post('/workspaces/:ws/destinations/:id/rules', async (c) => {
    const scope = workspaceScope(c, basePath);
    const id = idOf(c, 'id', 'destination');
    const rule = ruleOf(await c.req.parseBody());
    await find(scope, id);
    await createDestinationRule(db, scope.workspaceId, id, rule);
    return c.redirect(`${scope.base}/destinations/${id}?changed=rule-added#rules`, 303);
  });

  app.get('/workspaces/:ws/destination-rules/:rule/edit', async (c) => {
    const scope = workspaceScope(c, basePath);
    const id = idOf(c, 'rule', 'rule');
    const rule = (await listDestinationRules(db, scope.workspaceId)).find((candidate) => String(candidate.id) === id);
    if (!rule) throw new ConsoleError(404, `There is no rule ${id} here.`);
    return c.html(
      <Page {...frameOf(c, basePath, scope, 'destinations')} title={`Edit rule ${rule.id}`}>
        <p>Every criterion given must hold; an empty field is no criterion. It routes the events admitted after it is saved.</p>
        <form method="post" action={`${scope.base}/destination-rules/${rule.id}`} class="stack" aria-label="Edit rule">
          <Csrf token={c.get('csrfToken')} />
          <RuleFields rule={rule} />
          <button type="submit" class="primary">Save rule</button>
        </form>
        <p><a href={`${scope.base}/destinations/${rule.destination_id}#rules`}>Back to the destination</a></p>
      </Page>,
    );
  });

  app.post('/workspaces/:ws/destination-rules/:rule', async (c) => {
    const scope = workspaceScope(c, basePath);
    const id = idOf(c, 'rule', 'rule');
    const edited = await updateDestinationRule(db, scope.workspaceId, id, ruleOf(await c.req.parseBody(), true));
    if (!edited) throw new ConsoleError(404, `There is no rule ${id} here.`);
    return c.redirect(`${scope.base}/destinations/${edited.destination_id}?changed=rule-edited#rules`, 303);
  });

  app.post('/workspaces/:ws/destination-rules/:rule/delete', async (c) => {
    const scope = workspaceScope(c, basePath);
    const rule = idOf(c, 'rule', 'rule');
    const destinationId = formField(await c.req.parseBody(), 'destination_id');
    if (!(await deleteDestinationRule(db, scope.workspaceId, rule))) throw new ConsoleError(404, `There is no rule ${rule} here.`);
    return c.redirect(isIdText(destinationId) ? `${scope.base}/destinations/${destinationId}?changed=rule-deleted#rules`
      : `${scope.base}/destinations?changed=rule-deleted`, 303);
  });

  // The count first: how many a replay with this filter would take now; nothing is replayed.
  app.get('/workspaces/:ws/destinations/:id/replays/confirm', async (c) => {
    const scope = workspaceScope(c, basePath);
    const destination = await find(scope, idOf(c, 'id', 'destination'));
    const filter = replayFilterOf(c.req.query());
    const matched = await countDeadDeliveries(db, scope.workspaceId, String(destination.id), filter);
    const noun = matched === 1 ? 'dead delivery' : 'dead deliveries';
    const described = Object.entries(filter).map(([key, value]) => `${key.replace('_', ' ')} ${value}`).join(', ') || 'every dead letter';
    return c.html(
      <Page {...frameOf(c, basePath, scope, 'destinations')} title={`Replay dead letters of ${destination.name}`}>
        <p id="replay-count" role="status"><strong>{String(matched)}</strong> {noun} {matched === 1 ? 'matches' : 'match'}: {described}.</p>
        {matched > 0 ? (
          <form method="post" action={`${scope.base}/destinations/${destination.id}/replays`} class="stack" aria-label="Confirm the replay">
            <Csrf token={c.get('csrfToken')} />
            {Object.entries(filter).map(([name, value]) => <input type="hidden" name={name} value={String(value)} />)}
            <input type="hidden" name="confirmed" value={String(matched)} />
            <button type="submit" class="primary">{`Replay ${matched} ${noun}`}</button>
          </form>
        ) : <p>Nothing to replay.</p>}
        <p><a href={`${scope.base}/destinations/${destination.id}#dead`}>Back to the destination</a></p>
      </Page>,
    );
  });

  app.post('/workspaces/:ws/destinations/:id/replays', async (c) => {
    const scope = workspaceScope(c, basePath);
    const id = idOf(c, 'id', 'destination');
    const form = await c.req.parseBody();
    // Started only from the confirm page, after the operator saw the count; at most that many.
    const confirmed = formField(form, 'confirmed');
    if (!/^\d{1,9}$/.test(confirmed)) throw new ConsoleError(400, 'Count the matching dead letters first, then confirm.');
    await find(scope, id);
    const replayed = await replayDeadDeliveries(db, scope.workspaceId, id, replayFilterOf(form), c.get('principal').account,
      { upTo: Number(confirmed) });
    return c.redirect(`${scope.base}/destinations/${id}?replayed=${replayed}#dead`, 303);
  });

  app.get('/workspaces/:ws/deliveries/:id', async (c) => {
    const scope = workspaceScope(c, basePath);
    const id = idOf(c, 'id', 'delivery');
    const delivery = await showDelivery(db, scope.workspaceId, id);
    if (!delivery) throw new ConsoleError(404, `There is no delivery ${id} here.`);
    return c.html(
      <Page {...frameOf(c, basePath, scope, 'destinations')} title={`Delivery ${delivery.id}`}>
        <dl class="facts">
          <dt>State</dt><dd><StateBadge state={delivery.state} />{delivery.outcome ? ` (${delivery.outcome})` : ''}</dd>
          <dt>Destination</dt><dd><a href={`${scope.base}/destinations/${delivery.destination_id}`}>{String(delivery.destination_id)}</a></dd>
          <dt>Event</dt><dd><a href={`${scope.base}/events/${delivery.event_id}`}>{`${delivery.event_id}: ${delivery.provider} ${delivery.event_type}`}</a></dd>
          <dt>webhook-id</dt><dd><code>{delivery.webhook_id}</code></dd>
          <dt>Attempt / failures</dt><dd>{`${delivery.attempt} / ${delivery.failures}`}</dd>
          <dt>Last answer</dt><dd>{delivery.last_status === null ? '—' : `HTTP ${delivery.last_status}`}{delivery.error_class ? ` · ${delivery.error_class}` : ''}</dd>
          <dt>Next attempt</dt><dd>{delivery.waiting_behind_head ? 'after the delivery before it in its scope' : <Time at={delivery.next_attempt_at} />}</dd>
          <dt>Dead since</dt><dd><Time at={delivery.dead_at} /></dd>
          <dt>Replayed</dt><dd>{delivery.replayed_at ? <><Time at={delivery.replayed_at} /> by {delivery.replayed_by ?? '?'}</> : '—'}</dd>
        </dl>
        {delivery.state === 'DEAD' && (
          <form method="post" action={`${scope.base}/deliveries/${delivery.id}/replay`} class="inline">
            <Csrf token={c.get('csrfToken')} />
            <button type="submit" class="primary">Replay</button>
          </form>
        )}
        <h2 id="attempts">Attempts</h2>
        {delivery.attempts.length === 0 ? <p>No attempt yet.</p> : (
          <table aria-labelledby="attempts">
            <thead><tr><th scope="col" class="num">Attempt</th><th scope="col">Worker</th><th scope="col">Started</th><th scope="col">Ended</th>
              <th scope="col" class="num">Status</th><th scope="col" class="num">Duration</th><th scope="col">Error class</th><th scope="col">Answer (first 1 KB)</th></tr></thead>
            <tbody>
              {delivery.attempts.map((attempt) => (
                <tr>
                  <th scope="row" class="num">{String(attempt.attempt)}</th>
                  <td>{attempt.worker}</td>
                  <td><Time at={attempt.started_at} /></td>
                  <td><Time at={attempt.ended_at} />{attempt.ended ? ` (${attempt.ended})` : ''}</td>
                  <td class="num">{attempt.status === null ? '—' : String(attempt.status)}</td>
                  <td class="num">{attempt.duration_ms === null ? '—' : `${attempt.duration_ms} ms`}</td>
                  <td>{attempt.error_class ?? '—'}</td>
                  <td>{attempt.response ? <code>{attempt.response}</code> : '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Page>,
    );
  });

  app.post('/workspaces/:ws/deliveries/:id/replay', async (c) => {
    const scope = workspaceScope(c, basePath);
    const id = idOf(c, 'id', 'delivery');
    const replayed = await replayDelivery(db, scope.workspaceId, id, c.get('principal').account);
    const delivery = await showDelivery(db, scope.workspaceId, id);
    if (!delivery) throw new ConsoleError(404, `There is no delivery ${id} here.`);
    if (!replayed) throw new ConsoleError(409, `Only a DEAD delivery can be replayed; this one is ${delivery.state}.`);
    return c.redirect(`${scope.base}/destinations/${delivery.destination_id}?changed=replayed#dead`, 303);
  });
}

/** A destination's settings, shared by the new and the edit form; an edit starts from the destination. */
function DestinationFields(props: { destination?: Destination }) {
  const d = props.destination;
  return (
    <>
      <label>Name <input name="name" required maxlength={100} value={d?.name ?? ''} /></label>
      <label>URL (https://… of your application) <input name="url" type="url" required maxlength={2048} value={d?.url ?? ''} /></label>
      <label>Timeout in ms (100 to 60000; empty: 10000) <input name="timeout_ms" inputmode="numeric" value={d ? String(d.timeout_ms) : ''} /></label>
      <label>Rate limit (deliveries per period; empty: none) <input name="rate_limit" inputmode="numeric" value={d?.rate_limit?.toString() ?? ''} /></label>
      <label>Per
        <select name="rate_period">{ratePeriods.map((period) => <option value={period} selected={d?.rate_period === period}>{period}</option>)}</select>
      </label>
      <label>In flight at most (1 to 1000; empty: 10) <input name="max_in_flight" inputmode="numeric" value={d ? String(d.max_in_flight) : ''} /></label>
      <label class="check"><input type="checkbox" name="ordered" checked={d ? d.ordered : true} /> Ordered: one delivery at a time per scope</label>
      <label>Extra headers (not secret; one "Name: value" a line)
        <textarea name="headers" rows={3} spellcheck={false}>{d ? Object.entries(d.headers).map(([name, value]) => `${name}: ${value}`).join('\n') : ''}</textarea>
      </label>
      <label>Breaker: failed attempts in a row (empty: 20) <input name="breaker_failures" inputmode="numeric" value={d ? String(d.breaker_failures) : ''} /></label>
      <label>Breaker: minutes failing (empty: 10) <input name="breaker_minutes" inputmode="numeric" value={d ? String(d.breaker_minutes) : ''} /></label>
    </>
  );
}

/** A rule's criteria, shared by the add and the edit form; an edit starts from the rule. */
function RuleFields(props: { rule?: DestinationRule }) {
  const r = props.rule;
  return (
    <>
      <label>Event types (patterns, comma-separated, * for any run) <input name="event_types" placeholder="pull_request.*, issues" value={r?.event_types?.join(', ') ?? ''} /></label>
      <label>Provider <input name="provider" placeholder="github" value={r?.provider ?? ''} /></label>
      <label>Connection id <input name="connection_id" inputmode="numeric" value={r?.connection_id?.toString() ?? ''} /></label>
      <label>Subject prefix <input name="subject_prefix" placeholder="repo:acme/" value={r?.subject_prefix ?? ''} /></label>
      <label>Filter (JSON over payload and headers)
        <textarea name="filter" rows={4} spellcheck={false} placeholder='{"payload": {"action": "opened"}}'>{r?.filter ? JSON.stringify(r.filter) : ''}</textarea>
      </label>
      <label class="check"><input type="checkbox" name="forward_only" checked={r?.forward_only ?? false} /> Forward only: the workspace's own handlers do not receive these events</label>
    </>
  );
}

function RuleTable(props: { rules: DestinationRule[]; base: string; csrfToken: string }) {
  if (props.rules.length === 0) return <p>No rule: no event is forwarded here yet.</p>;
  return (
    <table aria-labelledby="rules">
      <thead><tr><th scope="col" class="num">Id</th><th scope="col">Matches</th><th scope="col">Filter</th><th scope="col">Handlers</th>
        <th scope="col" class="num">Left out (1 h)</th><th scope="col">Action</th></tr></thead>
      <tbody>
        {props.rules.map((rule) => (
          <tr>
            <th scope="row" class="num">{String(rule.id)}</th>
            <td>{[
              rule.event_types ? `event types ${rule.event_types.join(', ')}` : '',
              rule.provider ? `provider ${rule.provider}` : '',
              rule.connection_id !== null ? `connection ${rule.connection_id}` : '',
              rule.subject_prefix ? `subjects ${rule.subject_prefix}…` : '',
            ].filter((part) => part !== '').join('; ') || 'every event'}</td>
            <td>{rule.filter ? <code>{JSON.stringify(rule.filter)}</code> : '—'}</td>
            <td>{rule.forward_only ? 'forward only' : 'also receive them'}</td>
            <td class="num">{String(rule.filtered_last_hour)}</td>
            <td>
              <a href={`${props.base}/destination-rules/${rule.id}/edit`} aria-label={`Edit rule ${rule.id}`}>Edit</a>{' '}
              <form method="post" action={`${props.base}/destination-rules/${rule.id}/delete`} class="inline">
                <Csrf token={props.csrfToken} />
                <input type="hidden" name="destination_id" value={String(rule.destination_id)} />
                <button type="submit" aria-label={`Delete rule ${rule.id}`}>Delete</button>
              </form>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function DeliveryTable(props: { deliveries: Delivery[]; base: string; csrfToken: string; label: string; replay?: boolean }) {
  return (
    <table aria-label={props.label}>
      <thead>
        <tr><th scope="col" class="num">Delivery</th><th scope="col">State</th><th scope="col">Event</th><th scope="col">Subject</th>
          <th scope="col" class="num">Attempt</th><th scope="col">Last answer</th><th scope="col">When</th>{props.replay && <th scope="col">Action</th>}</tr>
      </thead>
      <tbody>
        {props.deliveries.map((delivery) => (
          <tr>
            <th scope="row" class="num"><a href={`${props.base}/deliveries/${delivery.id}`}>{String(delivery.id)}</a></th>
            <td><StateBadge state={delivery.state} /></td>
            <td><a href={`${props.base}/events/${delivery.event_id}`}>{`${delivery.event_id} ${delivery.event_type}`}</a></td>
            <td>{delivery.subject ?? '—'}</td>
            <td class="num">{String(delivery.attempt)}</td>
            <td>{delivery.last_status === null ? '—' : `HTTP ${delivery.last_status}`}{delivery.error_class ? ` · ${delivery.error_class}` : ''}</td>
            <td>{delivery.waiting_behind_head ? 'waits behind the one before it' : <Time at={delivery.dead_at ?? delivery.handled_at ?? delivery.next_attempt_at} />}</td>
            {props.replay && (
              <td>
                <form method="post" action={`${props.base}/deliveries/${delivery.id}/replay`} class="inline">
                  <Csrf token={props.csrfToken} />
                  <button type="submit" aria-label={`Replay delivery ${delivery.id}`}>Replay</button>
                </form>
              </td>
            )}
          </tr>
        ))}
      </tbody>
    </table>
  );
}

