// The permission matrix of every operator API route: the instance admin, a
// token of the named workspace, a token of another workspace, no token and a
// wrong token. A refused call changes nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Authenticator } from '../../operator/api/authenticator.js';
import { startBulkReplay } from '../../operator/sql/bulk-replay.js';
import { createDestination, createDestinationRule } from '../../operator/sql/destinations.js';
import { createApiToken, revokeApiToken } from '../../operator/sql/operator.js';
import { adminToken, apiClient, type ApiCall } from '../support/api-client.js';
import {
  admitEvent, createConnection, createWorkspace, deadEvent, deadInstallationEvent,
} from '../support/api-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { parseKeyRing } from '../../db/secret-box.js';
import { testSecretKeys } from '../support/edge-fixtures.js';

type Caller = 'admin' | 'own' | 'other' | 'none' | 'garbage' | 'unknown' | 'revoked';
const callers: Caller[] = ['admin', 'own', 'other', 'none', 'garbage', 'unknown', 'revoked'];

interface Route {
  name: string;
  method: string;
  /** Builds a fresh target, so that each caller acts on a row of its own. */
  path: () => Promise<string>;
  body?: () => unknown;
  success: number;
  /** Whether a token of workspace A (the workspace in the path) may call it. */
  workspaceToken: boolean;
}

let db: TestDatabase;
let api: ApiCall;
const tokens: Partial<Record<Caller, string>> = {};
const A = 101;
const B = 102;
let connectionA: number;
/** A stored event of A, for the filter test. */
let eventOfA = 0;
let seq = 1000;
/** The scope and head the last stuck-scope action's path made, for its body. */
let head = { scope_key: '', event_id: 0 };

/** The id of an issue of workspace A (a fresh dead letter opens or counts into one). */
async function issueOfA(): Promise<number> {
  await deadEvent(db.pool, connectionA);
  const { rows } = await db.pool.query<{ id: string }>('SELECT id FROM wharf.issue WHERE workspace_id = $1 LIMIT 1', [A]);
  return Number(rows[0]!.id);
}

async function installationIssue(): Promise<number> {
  await deadInstallationEvent(db.pool);
  const { rows } = await db.pool.query<{ id: string }>('SELECT id FROM wharf.issue WHERE workspace_id IS NULL LIMIT 1');
  return Number(rows[0]!.id);
}

/** A new Slack rule of workspace `ws`, or of the instance (null); its id. */
async function alertRule(ws: number | null): Promise<number> {
  const { rows } = await db.pool.query<{ rule: { id: number } }>(ws === null
    ? `SELECT wharf.create_instance_alert_rule('r', 'issue_opened', NULL, NULL, 'slack', 'https://hooks.slack.test/x', NULL, 'test') AS rule`
    : `SELECT wharf.create_alert_rule($1, 'r', 'issue_opened', NULL, NULL, 'slack', 'https://hooks.slack.test/x', NULL, 'test') AS rule`,
  ws === null ? [] : [ws]);
  return rows[0]!.rule.id;
}

/** A new destination of workspace A (with its sealed secret); its id. */
async function destinationOfA(): Promise<number> {
  return (await createDestination(db.pool, parseKeyRing(testSecretKeys), String(A), { name: `d${++seq}`, url: 'https://app.example.test/in' })).id;
}

/** A new rule of a new destination of A; its id. */
async function destinationRuleOfA(): Promise<number> {
  // Routes nothing (and so makes no event of A forward-only when an edit says so).
  return (await createDestinationRule(db.pool, String(A), String(await destinationOfA()), { event_types: ['never.*'] })).id;
}

/**
 * A DEAD delivery of workspace A: a destination with a rule taking one
 * subject, an event of it admitted after, its delivery claimed and failed for good.
 * Other deliveries the claim hands out go back.
 */
async function deadDeliveryOfA(): Promise<number> {
  const destination = await destinationOfA();
  // Only this event: a subject of its own.
  const subject = `repo:acme/delivery-${++seq}`;
  await createDestinationRule(db.pool, String(A), String(destination), { subject_prefix: subject });
  await admitEvent(db.pool, connectionA, { subject });
  const { rows } = await db.pool.query<{ delivery_id: string; epoch: string; destination_id: string }>(
    `SELECT delivery_id, epoch, destination_id FROM wharf.claim_deliveries('fixture', 1000)`);
  let dead: number | undefined;
  for (const row of rows) {
    if (Number(row.destination_id) === destination) {
      await db.pool.query(`SELECT wharf.fail_delivery($1, $2, 'permanent', 'HttpStatus400', 400, 1, '')`, [row.delivery_id, row.epoch]);
      dead = Number(row.delivery_id);
    } else {
      await db.pool.query('SELECT wharf.release_delivery($1, $2)', [row.delivery_id, row.epoch]);
    }
  }
  if (dead === undefined) throw new Error('fixture: no delivery was claimed');
  return dead;
}

/** A fresh QUEUED event heading a scope of its own in workspace A: the target of a head action. */
async function freshHead(): Promise<void> {
  const id = await admitEvent(db.pool, connectionA);
  const { rows } = await db.pool.query<{ scope_key: string }>('SELECT scope_key FROM wharf.provider_event WHERE id = $1', [id]);
  head = { scope_key: rows[0]!.scope_key, event_id: id };
}

beforeAll(async () => {
  db = await createTestDatabase();
  // The matrix presents wrong tokens on purpose, some seventy times, from one
  // client (in process: no address); the throttle is api-auth.test.ts's.
  api = apiClient({
    db: db.pool, adminToken, authenticator: new Authenticator(db.pool, { throttle: { maxFailures: 10_000, slowAfter: 10_000 } }),
  });
  await createWorkspace(db.pool, A);
  await createWorkspace(db.pool, B);
  connectionA = await createConnection(db.pool, A);
  eventOfA = await admitEvent(db.pool, connectionA);
  tokens.admin = adminToken;
  tokens.own = (await createApiToken(db.pool, String(A), 'own')).token;
  tokens.other = (await createApiToken(db.pool, String(B), 'other')).token;
  tokens.garbage = 'not-a-token';
  tokens.unknown = `wharf_ws_${'0'.repeat(64)}`;
  const revoked = await createApiToken(db.pool, String(A), 'revoked');
  await revokeApiToken(db.pool, String(A), String(revoked.id));
  tokens.revoked = revoked.token;
});

afterAll(async () => {
  await db?.drop();
});

const routes: Route[] = [
  { name: 'list events', method: 'GET', path: async () => `/workspaces/${A}/events`, success: 200, workspaceToken: true },
  { name: 'show event', method: 'GET', path: async () => `/workspaces/${A}/events/${await admitEvent(db.pool, connectionA)}`, success: 200, workspaceToken: true },
  { name: 'list dead', method: 'GET', path: async () => `/workspaces/${A}/dead`, success: 200, workspaceToken: true },
  { name: 'replay', method: 'POST', path: async () => `/workspaces/${A}/events/${await deadEvent(db.pool, connectionA)}/replay`, success: 202, workspaceToken: true },
  { name: 'list admissions', method: 'GET', path: async () => `/workspaces/${A}/admissions`, success: 200, workspaceToken: true },
  { name: 'start bulk replay', method: 'POST', path: async () => `/workspaces/${A}/replays`, body: () => ({ error_class: 'NoSuchError' }), success: 202, workspaceToken: true },
  { name: 'count bulk replay', method: 'POST', path: async () => `/workspaces/${A}/replays/count`, body: () => ({ payload: { n: 1 } }), success: 200, workspaceToken: true },
  { name: 'list bulk replays', method: 'GET', path: async () => `/workspaces/${A}/replays`, success: 200, workspaceToken: true },
  { name: 'show bulk replay', method: 'GET', path: async () => `/workspaces/${A}/replays/${(await startBulkReplay(db.pool, String(A), {}, 'test')).id}`, success: 200, workspaceToken: true },
  { name: 'cancel bulk replay', method: 'POST', path: async () => `/workspaces/${A}/replays/${(await startBulkReplay(db.pool, String(A), {}, 'test')).id}/cancel`, success: 200, workspaceToken: true },
  { name: 'queue history', method: 'GET', path: async () => `/workspaces/${A}/queue-history?hours=1`, success: 200, workspaceToken: true },
  { name: 'list issues', method: 'GET', path: async () => `/workspaces/${A}/issues`, success: 200, workspaceToken: true },
  { name: 'show issue', method: 'GET', path: async () => `/workspaces/${A}/issues/${await issueOfA()}`, success: 200, workspaceToken: true },
  { name: 'issue events', method: 'GET', path: async () => `/workspaces/${A}/issues/${await issueOfA()}/events`, success: 200, workspaceToken: true },
  { name: 'issue history', method: 'GET', path: async () => `/workspaces/${A}/issues/${await issueOfA()}/history`, success: 200, workspaceToken: true },
  { name: 'set issue status', method: 'POST', path: async () => `/workspaces/${A}/issues/${await issueOfA()}/status`, body: () => ({ status: 'acknowledged' }), success: 200, workspaceToken: true },
  { name: 'list installation issues', method: 'GET', path: async () => '/installation-issues', success: 200, workspaceToken: false },
  { name: 'set installation issue status', method: 'POST', path: async () => `/installation-issues/${await installationIssue()}/status`, body: () => ({ status: 'resolved' }), success: 200, workspaceToken: false },
  { name: 'delivery history', method: 'GET', path: async () => `/workspaces/${A}/delivery-history?hours=1`, success: 200, workspaceToken: true },
  { name: 'failure history', method: 'GET', path: async () => `/workspaces/${A}/failure-history?hours=1`, success: 200, workspaceToken: true },
  { name: 'list stuck scopes', method: 'GET', path: async () => `/workspaces/${A}/stuck-scopes?older_than=0`, success: 200, workspaceToken: true },
  { name: 'stuck scope action', method: 'POST', path: async () => { await freshHead(); return `/workspaces/${A}/stuck-scopes/actions`; }, body: () => ({ action: 'retry_head', ...head }), success: 200, workspaceToken: true },
  { name: 'list scope actions', method: 'GET', path: async () => `/workspaces/${A}/scope-actions`, success: 200, workspaceToken: true },
  { name: 'list alert rules', method: 'GET', path: async () => `/workspaces/${A}/alert-rules`, success: 200, workspaceToken: true },
  { name: 'create alert rule', method: 'POST', path: async () => `/workspaces/${A}/alert-rules`, body: () => ({ name: `r${++seq}`, kind: 'issue_opened', destination: 'slack', url: 'https://hooks.slack.test/x' }), success: 201, workspaceToken: true },
  { name: 'edit alert rule', method: 'PUT', path: async () => `/workspaces/${A}/alert-rules/${await alertRule(A)}`, body: () => ({ name: `e${++seq}`, kind: 'issue_opened', destination: 'slack' }), success: 200, workspaceToken: true },
  { name: 'send a test alert', method: 'POST', path: async () => `/workspaces/${A}/alert-rules/${await alertRule(A)}/test`, success: 202, workspaceToken: true },
  { name: 'delete alert rule', method: 'DELETE', path: async () => `/workspaces/${A}/alert-rules/${await alertRule(A)}`, success: 200, workspaceToken: true },
  { name: 'list alerts', method: 'GET', path: async () => `/workspaces/${A}/alerts`, success: 200, workspaceToken: true },
  { name: 'list destinations', method: 'GET', path: async () => `/workspaces/${A}/destinations`, success: 200, workspaceToken: true },
  { name: 'create destination', method: 'POST', path: async () => `/workspaces/${A}/destinations`, body: () => ({ name: `n${++seq}`, url: 'https://app.example.test/in' }), success: 201, workspaceToken: true },
  { name: 'test a filter', method: 'POST', path: async () => `/workspaces/${A}/destinations/filter-test`, body: () => ({ filter: { payload: { hello: 'world' } }, event_id: eventOfA }), success: 200, workspaceToken: true },
  { name: 'pause destination', method: 'POST', path: async () => `/workspaces/${A}/destinations/${await destinationOfA()}/pause`, success: 200, workspaceToken: true },
  { name: 'resume destination', method: 'POST', path: async () => `/workspaces/${A}/destinations/${await destinationOfA()}/resume`, success: 200, workspaceToken: true },
  { name: 'rotate destination secret', method: 'POST', path: async () => `/workspaces/${A}/destinations/${await destinationOfA()}/rotate-secret`, success: 200, workspaceToken: true },
  { name: 'set destination credentials', method: 'PUT', path: async () => `/workspaces/${A}/destinations/${await destinationOfA()}/credentials`, body: () => ({ type: 'bearer', token: 't' }), success: 200, workspaceToken: true },
  { name: 'clear destination credentials', method: 'DELETE', path: async () => `/workspaces/${A}/destinations/${await destinationOfA()}/credentials`, success: 200, workspaceToken: true },
  { name: "list a destination's rules", method: 'GET', path: async () => `/workspaces/${A}/destinations/${await destinationOfA()}/rules`, success: 200, workspaceToken: true },
  { name: 'create destination rule', method: 'POST', path: async () => `/workspaces/${A}/destinations/${await destinationOfA()}/rules`, body: () => ({ event_types: ['push'] }), success: 201, workspaceToken: true },
  { name: 'list destination rules', method: 'GET', path: async () => `/workspaces/${A}/destination-rules`, success: 200, workspaceToken: true },
  { name: 'edit destination rule', method: 'PATCH', path: async () => `/workspaces/${A}/destination-rules/${await destinationRuleOfA()}`, body: () => ({ forward_only: true }), success: 200, workspaceToken: true },
  { name: 'delete destination rule', method: 'DELETE', path: async () => `/workspaces/${A}/destination-rules/${await destinationRuleOfA()}`, success: 200, workspaceToken: true },
  { name: "list a destination's deliveries", method: 'GET', path: async () => `/workspaces/${A}/destinations/${await destinationOfA()}/deliveries`, success: 200, workspaceToken: true },
  { name: "list a destination's dead letters", method: 'GET', path: async () => `/workspaces/${A}/destinations/${await destinationOfA()}/dead`, success: 200, workspaceToken: true },
  { name: 'count dead deliveries', method: 'POST', path: async () => `/workspaces/${A}/destinations/${await destinationOfA()}/replays/count`, success: 200, workspaceToken: true },
  { name: 'replay dead deliveries', method: 'POST', path: async () => `/workspaces/${A}/destinations/${await destinationOfA()}/replays`, success: 200, workspaceToken: true },
  { name: 'show delivery', method: 'GET', path: async () => `/workspaces/${A}/deliveries/${await deadDeliveryOfA()}`, success: 200, workspaceToken: true },
  { name: 'replay delivery', method: 'POST', path: async () => `/workspaces/${A}/deliveries/${await deadDeliveryOfA()}/replay`, success: 202, workspaceToken: true },
  { name: "an event's deliveries", method: 'GET', path: async () => `/workspaces/${A}/events/${await admitEvent(db.pool, connectionA)}/deliveries`, success: 200, workspaceToken: true },
  { name: 'show destination', method: 'GET', path: async () => `/workspaces/${A}/destinations/${await destinationOfA()}`, success: 200, workspaceToken: true },
  { name: 'edit destination', method: 'PATCH', path: async () => `/workspaces/${A}/destinations/${await destinationOfA()}`, body: () => ({ timeout_ms: 3000 }), success: 200, workspaceToken: true },
  { name: 'delete destination', method: 'DELETE', path: async () => `/workspaces/${A}/destinations/${await destinationOfA()}`, success: 200, workspaceToken: true },
  { name: 'list instance alert rules', method: 'GET', path: async () => '/alert-rules', success: 200, workspaceToken: false },
  { name: 'create instance alert rule', method: 'POST', path: async () => '/alert-rules', body: () => ({ name: `i${++seq}`, kind: 'stuck_scope', window_seconds: 600, destination: 'webhook', url: 'https://alerts.example.test/in' }), success: 201, workspaceToken: false },
  { name: 'edit instance alert rule', method: 'PUT', path: async () => `/alert-rules/${await alertRule(null)}`, body: () => ({ name: `ie${++seq}`, kind: 'issue_opened', destination: 'slack' }), success: 200, workspaceToken: false },
  { name: 'send a test alert of an instance rule', method: 'POST', path: async () => `/alert-rules/${await alertRule(null)}/test`, success: 202, workspaceToken: false },
  { name: 'delete instance alert rule', method: 'DELETE', path: async () => `/alert-rules/${await alertRule(null)}`, success: 200, workspaceToken: false },
  { name: 'list instance alerts', method: 'GET', path: async () => '/alerts', success: 200, workspaceToken: false },
  { name: 'list installation admissions', method: 'GET', path: async () => '/admissions', success: 200, workspaceToken: false },
  { name: 'list installation events', method: 'GET', path: async () => '/installation-events', success: 200, workspaceToken: false },
  { name: 'list installation dead', method: 'GET', path: async () => '/installation-events/dead', success: 200, workspaceToken: false },
  { name: 'show installation event', method: 'GET', path: async () => `/installation-events/${await deadInstallationEvent(db.pool)}`, success: 200, workspaceToken: false },
  { name: 'replay installation event', method: 'POST', path: async () => `/installation-events/${await deadInstallationEvent(db.pool)}/replay`, success: 202, workspaceToken: false },
  { name: 'list workspaces', method: 'GET', path: async () => '/workspaces', success: 200, workspaceToken: false },
  { name: 'create workspace', method: 'POST', path: async () => '/workspaces', body: () => ({ id: ++seq }), success: 201, workspaceToken: false },
  { name: 'suspend workspace', method: 'POST', path: async () => `/workspaces/${await createWorkspace(db.pool, ++seq)}/suspend`, success: 200, workspaceToken: false },
  { name: 'pause workspace', method: 'POST', path: async () => `/workspaces/${await createWorkspace(db.pool, ++seq)}/pause`, success: 200, workspaceToken: false },
  { name: 'resume workspace', method: 'POST', path: async () => `/workspaces/${await createWorkspace(db.pool, ++seq)}/resume`, success: 200, workspaceToken: false },
  { name: 'activate workspace', method: 'POST', path: async () => `/workspaces/${await createWorkspace(db.pool, ++seq)}/activate`, success: 200, workspaceToken: false },
  { name: 'list every connection', method: 'GET', path: async () => '/connections', success: 200, workspaceToken: false },
  { name: 'list connections', method: 'GET', path: async () => `/workspaces/${A}/connections`, success: 200, workspaceToken: true },
  { name: 'create connection', method: 'POST', path: async () => `/workspaces/${A}/connections`, body: () => ({ provider: 'gitlab', source: 'https://gitlab.example.test', kind: 'webhook', external_id: `hook-${++seq}` }), success: 201, workspaceToken: false },
  { name: 'suspend connection', method: 'POST', path: async () => `/connections/${await createConnection(db.pool, A)}/suspend`, success: 200, workspaceToken: false },
  { name: 'pause connection', method: 'POST', path: async () => `/connections/${await createConnection(db.pool, A)}/pause`, success: 200, workspaceToken: false },
  { name: 'resume connection', method: 'POST', path: async () => `/connections/${await createConnection(db.pool, A)}/resume`, success: 200, workspaceToken: false },
  { name: 'activate connection', method: 'POST', path: async () => `/connections/${await createConnection(db.pool, A)}/activate`, success: 200, workspaceToken: false },
  { name: 'rotate connection secret', method: 'POST', path: async () => `/connections/${await createConnection(db.pool, A)}/rotate-secret`, success: 200, workspaceToken: false },
  { name: 'subscribe', method: 'POST', path: async () => `/connections/${connectionA}/subscriptions`, body: () => ({ subject: `repo:acme/s${++seq}` }), success: 200, workspaceToken: false },
  { name: 'unsubscribe', method: 'DELETE', path: async () => `/connections/${connectionA}/subscriptions`, body: () => ({ subject: 'repo:acme/none' }), success: 200, workspaceToken: false },
  { name: 'list tokens', method: 'GET', path: async () => `/workspaces/${A}/tokens`, success: 200, workspaceToken: false },
  { name: 'create token', method: 'POST', path: async () => `/workspaces/${A}/tokens`, body: () => ({ name: `t${++seq}` }), success: 201, workspaceToken: false },
  { name: 'revoke token', method: 'DELETE', path: async () => `/workspaces/${A}/tokens/${(await createApiToken(db.pool, String(A), `r${++seq}`)).id}`, success: 200, workspaceToken: false },
];

function expectedStatus(route: Route, caller: Caller): number {
  if (caller === 'admin') return route.success;
  if (caller === 'own') return route.workspaceToken ? route.success : 403;
  if (caller === 'other') return 403;
  return 401;
}

describe('operator API permissions', () => {
  it('covers every route the API registers', async () => {
    const { operatorApi } = await import('../../operator/api/app.js');
    const registered = new Set(
      operatorApi({ db: db.pool, adminToken }).routes
        // The OpenAPI document is public (api-openapi.test.ts).
        .filter((route) => route.method !== 'ALL' && route.path !== '/openapi.json')
        .map((route) => `${route.method} ${route.path}`),
    );
    expect(registered.size).toBe(routes.length);
  });

  for (const route of routes) {
    for (const caller of callers) {
      const expected = expectedStatus(route, caller);
      it(`${route.name} as ${caller}: ${expected}`, async () => {
        const response = await api(route.method, await route.path(), {
          token: tokens[caller],
          body: route.body?.(),
        });
        expect(response.status, JSON.stringify(response.body)).toBe(expected);
        if (expected >= 400) {
          expect(response.body.error).toBe(expected === 401 ? 'unauthorized' : 'forbidden');
          expect(typeof response.body.message).toBe('string');
        }
        if (expected === 401) expect(response.headers.get('www-authenticate')).toBe('Bearer');
      });
    }
  }

  it('a refused replay leaves the dead letter as it was', async () => {
    const id = await deadEvent(db.pool, connectionA);
    for (const caller of ['other', 'none', 'unknown'] as const) {
      const response = await api('POST', `/workspaces/${A}/events/${id}/replay`, { token: tokens[caller] });
      expect(response.status).toBeGreaterThanOrEqual(401);
    }
    const { rows } = await db.pool.query('SELECT state, replayed_by FROM wharf.provider_event WHERE id = $1', [id]);
    expect(rows[0]).toEqual({ state: 'DEAD', replayed_by: null });
  });

  it('a refused issue status change or scope action changes and records nothing', async () => {
    const issue = await issueOfA();
    await freshHead();
    for (const caller of ['other', 'none', 'unknown'] as const) {
      const status = await api('POST', `/workspaces/${A}/issues/${issue}/status`, { token: tokens[caller], body: { status: 'ignored' } });
      expect(status.status).toBeGreaterThanOrEqual(401);
      const action = await api('POST', `/workspaces/${A}/stuck-scopes/actions`, { token: tokens[caller], body: { action: 'dead_letter_head', ...head } });
      expect(action.status).toBeGreaterThanOrEqual(401);
    }
    const issues = await db.pool.query("SELECT 1 FROM wharf.issue WHERE id = $1 AND status = 'ignored'", [issue]);
    expect(issues.rows).toEqual([]);
    const events = await db.pool.query('SELECT state FROM wharf.provider_event WHERE id = $1', [head.event_id]);
    expect(events.rows).toEqual([{ state: 'QUEUED' }]);
    const actions = await db.pool.query('SELECT 1 FROM wharf.scope_action WHERE event_id = $1', [head.event_id]);
    expect(actions.rows).toEqual([]);
  });

  it('a refused workspace creation creates nothing', async () => {
    const response = await api('POST', '/workspaces', { token: tokens.own, body: { id: 999 } });
    expect(response.status).toBe(403);
    const { rows } = await db.pool.query('SELECT 1 FROM wharf.workspace WHERE id = 999');
    expect(rows).toEqual([]);
  });

  it('accepts no token at all when WHARF_ADMIN_TOKEN is empty', async () => {
    const noAdmin = apiClient({ db: db.pool, adminToken: '' });
    expect((await noAdmin('GET', '/workspaces', { token: '' })).status).toBe(401);
    expect((await noAdmin('GET', '/workspaces', { token: adminToken })).status).toBe(401);
    expect((await noAdmin('GET', `/workspaces/${A}/events`, { token: tokens.own })).status).toBe(200);
  });
});
