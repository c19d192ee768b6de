// Least privilege: the edge, a worker, a handler and the operator surface
// each run as their own role, with exactly the GRANTs that docs/sql.md
// documents (read from it, so the two cannot drift), and every path works;
// and each role is refused what is not its job.
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { onServer } from '../../cli/scratch-database.js';
import { parseKeyRing } from '../../db/secret-box.js';
import { createEdgeApp } from '../../edge/app.js';
import { createApiToken } from '../../operator/sql/operator.js';
import { createWorker, startAlertSender } from '../../worker/index.js';
import { finishEvent } from '../support/api-fixtures.js';
import { adminToken, apiClient } from '../support/api-client.js';
import { deadEvent, fixtureSource } from '../support/api-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { edgeEnv, freshId, newDeliveryKey, recorder, scenario, testSecretKeys } from '../support/edge-fixtures.js';
import { waitFor } from '../support/worker-inbox.js';
import { sqlstate } from '../support/sqlstate.js';


const roleNames = ['wharf_edge', 'wharf_worker', 'wharf_handler', 'wharf_operator'] as const;
type Role = (typeof roleNames)[number];

/** The GRANT block of docs/sql.md, between its roles markers. */
async function documentedGrants(): Promise<string> {
  const guide = await readFile(new URL('../../docs/sql.md', import.meta.url), 'utf8');
  const block = /<!-- roles:begin -->\s*```sql\n([\s\S]*?)```\s*<!-- roles:end -->/.exec(guide);
  if (!block) throw new Error('docs/sql.md has no roles block between <!-- roles:begin --> and <!-- roles:end -->');
  return block[1]!;
}

let db: TestDatabase;
const suffix = randomBytes(4).toString('hex');
const password = randomBytes(12).toString('hex');
const role = (name: Role) => `${name}_${suffix}`;
const pools = new Map<Role, pg.Pool>();
const poolOf = (name: Role) => pools.get(name)!;

beforeAll(async () => {
  db = await createTestDatabase();
  for (const name of roleNames) await db.pool.query(`CREATE ROLE ${role(name)} LOGIN PASSWORD '${password}'`);
  // The guide's lines, with this run's role names (roles are per server).
  let grants = await documentedGrants();
  for (const name of roleNames) grants = grants.replaceAll(new RegExp(`\\b${name}\\b`, 'g'), role(name));
  await db.pool.query(grants);
  for (const name of roleNames) {
    const url = new URL(db.url);
    url.username = role(name);
    url.password = password;
    const pool = new pg.Pool({ connectionString: url.toString(), max: 4 });
    pool.on('error', () => {});
    pools.set(name, pool);
  }
});

afterAll(async () => {
  await Promise.all([...pools.values()].map((pool) => pool.end()));
  await db?.drop();
  await onServer(inject('postgresUrl'), async (client) => {
    for (const name of roleNames) await client.query(`DROP ROLE IF EXISTS ${role(name)}`);
  });
});

describe('the edge as wharf_edge', () => {
  it('admits GitHub, GitLab and Standard Webhooks deliveries', async () => {
    const app = createEdgeApp({ database: poolOf('wharf_edge'), env: edgeEnv, ...recorder() });
    for (const provider of ['github', 'gitlab', 'generic'] as const) {
      const s = await scenario(db.pool, provider, freshId());
      const key = newDeliveryKey();
      const body = JSON.stringify(s.payload(key));
      const response = await app.request(s.path, {
        method: 'POST', body, headers: { 'content-type': 'application/json', ...(await s.sign(body, { deliveryKey: key })) },
      });
      expect(response.status, `${provider}: ${await response.clone().text()}`).toBe(202);
      expect(((await response.json()) as { events: { outcome: string }[] }).events[0]?.outcome).toBe('stored');
    }
  });

  it('may not read the inbox, claim, or change a connection', async () => {
    const edge = poolOf('wharf_edge');
    expect(await sqlstate(edge.query('SELECT * FROM wharf.provider_event'))).toBe('42501');
    expect(await sqlstate(edge.query(`SELECT * FROM wharf.claim('edge', 1)`))).toBe('42501');
    expect(await sqlstate(edge.query(`SELECT wharf.set_connection_state(1, 'ACTIVE')`))).toBe('42501');
  });
});

describe('a worker as wharf_worker, its handlers as wharf_handler', () => {
  it('claims, runs a fenced step and completes an admitted event', async () => {
    const s = await scenario(db.pool, 'github', freshId());
    const key = newDeliveryKey();
    const app = createEdgeApp({ database: poolOf('wharf_edge'), env: edgeEnv, ...recorder() });
    const body = JSON.stringify(s.payload(key));
    await app.request(s.path, { method: 'POST', body, headers: { 'content-type': 'application/json', ...(await s.sign(body, { deliveryKey: key })) } });

    const stepped: string[] = [];
    const worker = createWorker({
      pool: poolOf('wharf_worker'),
      handlerPool: poolOf('wharf_handler'),
      handlers: {
        'github:*': async (ctx) => {
          await ctx.step(`roles:${ctx.event.id}`, async () => { stepped.push(ctx.event.deliveryKey); });
        },
      },
      logger: pino({ level: 'silent' }),
    });
    await worker.start();
    try {
      const row = await waitFor(async () => {
        const { rows } = await db.pool.query<{ state: string }>('SELECT state FROM wharf.provider_event WHERE delivery_key = $1', [key]);
        return rows[0]?.state === 'DONE' ? rows[0] : undefined;
      }, 15_000, 'the event to be handled under the roles');
      expect(row.state).toBe('DONE');
      expect(stepped.filter((deliveryKey) => deliveryKey === key)).toEqual([key]);
      const { rows: recorded } = await db.pool.query(
        `SELECT s.step_name FROM wharf.provider_event_step s JOIN wharf.provider_event e ON e.id = s.event_id
          WHERE e.delivery_key = $1`, [key]);
      expect(recorded).toHaveLength(1);
    } finally {
      await worker.stop();
    }
  });

  it('a handler role may use the token overloads only, and nothing else of the inbox', async () => {
    const handler = poolOf('wharf_handler');
    expect(await sqlstate(handler.query('SELECT wharf.step(1, 1, $1)', ['guess']))).toBe('42501');
    expect(await sqlstate(handler.query('SELECT wharf.fence(1, 1)'))).toBe('42501');
    expect(await sqlstate(handler.query(`SELECT * FROM wharf.claim('h', 1)`))).toBe('42501');
    expect(await sqlstate(handler.query('SELECT * FROM wharf.provider_event_step'))).toBe('42501');
    // With a guessed token, the id and epoch of a real lease reach nothing.
    const s = await scenario(db.pool, 'github', freshId());
    const key = newDeliveryKey();
    const app = createEdgeApp({ database: db.pool, env: edgeEnv, ...recorder() });
    const body = JSON.stringify(s.payload(key));
    await app.request(s.path, { method: 'POST', body, headers: { 'content-type': 'application/json', ...(await s.sign(body, { deliveryKey: key })) } });
    const { rows: [stored] } = await db.pool.query<{ id: string }>('SELECT id FROM wharf.provider_event WHERE delivery_key = $1', [key]);
    // Claimed as the worker role; every other row the claim takes goes back.
    const leased = { id: stored!.id, lease_epoch: await finishEvent(poolOf('wharf_worker'), stored!.id, 'LEASED') };
    expect(await sqlstate(handler.query('SELECT wharf.step($1, $2, $3, gen_random_uuid())', [leased!.id, leased!.lease_epoch, 'planted'])))
      .toBe('WH412');
    const { rows: recorded } = await db.pool.query('SELECT 1 FROM wharf.provider_event_step WHERE event_id = $1', [leased!.id]);
    expect(recorded).toEqual([]);
  });

  it('sends alerts and purges the on-call records as the worker role', async () => {
    const worker = poolOf('wharf_worker');
    const sender = startAlertSender({ pool: worker, holder: `roles-${suffix}`, everyMs: 3_600_000 });
    try {
      expect((await sender.runOnce()).held).toBe(true);
    } finally {
      await sender.stop();
    }
    for (const purge of ['purge_issues', 'purge_scope_actions', 'purge_alerts']) {
      await worker.query(`SELECT wharf.${purge}(100)`);
    }
    expect(await sqlstate(worker.query('SELECT * FROM wharf.alert_rule'))).toBe('42501');
  });

  it('a worker role may not read the tables or admit', async () => {
    const worker = poolOf('wharf_worker');
    expect(await sqlstate(worker.query('SELECT * FROM wharf.connection_secret'))).toBe('42501');
    expect(await sqlstate(worker.query(`SELECT wharf.admit('generic', 'x', 'k', 't', '{}', '{}', '{}', '{}')`))).toBe('42501');
  });
});

describe('the operator surface as wharf_operator', () => {
  it('lists, replays, creates workspaces and connections, rotates secrets and verifies tokens', async () => {
    const operator = poolOf('wharf_operator');
    const api = apiClient({ db: operator, adminToken, keyRing: parseKeyRing(testSecretKeys) });
    const workspace = freshId();
    expect((await api('POST', '/workspaces', { token: adminToken, body: { id: workspace } })).status).toBe(201);
    const created = await api('POST', `/workspaces/${workspace}/connections`, {
      token: adminToken, body: { provider: 'generic', source: fixtureSource, kind: 'webhook', external_id: 'ops' },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const connection = Number(created.body.id);
    expect((await api('POST', `/connections/${connection}/subscriptions`, { token: adminToken, body: { subject: 'project:a/b' } })).status).toBe(200);
    expect((await api('POST', `/connections/${connection}/rotate-secret`, { token: adminToken })).status).toBe(200);

    const dead = await deadEvent(db.pool, connection);
    const token = (await createApiToken(operator, String(workspace), 'ops')).token;
    const listed = await api('GET', `/workspaces/${workspace}/dead`, { token });
    expect(listed.status).toBe(200);
    expect((listed.body.events as { id: number }[]).map((event) => event.id)).toEqual([dead]);
    expect((await api('POST', `/workspaces/${workspace}/events/${dead}/replay`, { token, body: {} })).status).toBe(202);
  });

  it('runs the on-call routes: issues, stuck scopes, search, bulk replay counts, alert rules and histories', async () => {
    const operator = poolOf('wharf_operator');
    const api = apiClient({ db: operator, adminToken, keyRing: parseKeyRing(testSecretKeys) });
    const workspace = freshId();
    await db.pool.query('SELECT wharf.upsert_workspace($1)', [workspace]);
    const { rows } = await db.pool.query<{ id: string }>(
      `SELECT wharf.upsert_connection($1, 'generic', $2, 'webhook', 'on-call') AS id`, [workspace, fixtureSource]);
    const dead = await deadEvent(db.pool, Number(rows[0]!.id));
    const ok = async (method: string, path: string, body?: unknown) => {
      const response = await api(method, path, { token: adminToken, ...(body ? { body } : {}) });
      expect(response.status, `${method} ${path}: ${JSON.stringify(response.body)}`).toBeLessThan(300);
      return response.body;
    };
    const [issue] = await ok('GET', `/workspaces/${workspace}/issues`) as unknown as { id: number }[];
    await ok('GET', `/workspaces/${workspace}/issues/${issue!.id}/events`);
    await ok('POST', `/workspaces/${workspace}/issues/${issue!.id}/status`, { status: 'acknowledged' });
    await ok('GET', `/workspaces/${workspace}/stuck-scopes?older_than=0`);
    await ok('GET', `/workspaces/${workspace}/scope-actions`);
    await ok('GET', `/workspaces/${workspace}/events?payload=${encodeURIComponent('{"hello":"world"}')}`);
    expect(await ok('POST', `/workspaces/${workspace}/replays/count`, {})).toEqual({ matched: 1 });
    await ok('POST', `/workspaces/${workspace}/alert-rules`, { name: 'ops', kind: 'issue_opened', destination: 'slack', url: 'https://hooks.slack.test/x' });
    await ok('GET', `/workspaces/${workspace}/alert-rules`);
    await ok('GET', `/workspaces/${workspace}/alerts`);
    await ok('GET', `/workspaces/${workspace}/failure-history?hours=1`);
    await ok('GET', `/workspaces/${workspace}/delivery-history?hours=1`);
    const { rows: heads } = await db.pool.query<{ scope_key: string }>('SELECT scope_key FROM wharf.provider_event WHERE id = $1', [dead]);
    // A dead event heads nothing: the action is refused for that, not for a privilege.
    const refused = await api('POST', `/workspaces/${workspace}/stuck-scopes/actions`, {
      token: adminToken, body: { action: 'retry_head', scope_key: heads[0]!.scope_key, event_id: dead },
    });
    expect(refused.status).toBe(409);
    // The sender's functions, which read the rules' URLs and secrets, are not the operator's.
    expect(await sqlstate(operator.query(`SELECT wharf.take_alert_sender('ops', '1 minute')`))).toBe('42501');
    expect(await sqlstate(operator.query(`SELECT wharf.due_alerts(gen_random_uuid(), 10)`))).toBe('42501');
  });

  it('may not claim, admit or read the tables', async () => {
    const operator = poolOf('wharf_operator');
    expect(await sqlstate(operator.query(`SELECT * FROM wharf.claim('ops', 1)`))).toBe('42501');
    expect(await sqlstate(operator.query('SELECT * FROM wharf.api_token'))).toBe('42501');
    expect(await sqlstate(operator.query('SELECT * FROM wharf.connection_endpoint(1)'))).toBe('42501');
  });
});
