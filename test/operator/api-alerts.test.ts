// Alert rules through the operator API: a webhook rule gets a generated
// Standard Webhooks secret shown once; listings never show a rule's URL or
// secret; bad rules are a clear 400 and store nothing; another workspace's
// token gets a 403; the alerts a rule recorded are listed with their
// delivery outcome and what each was about, and an instance rule is the
// admin's alone; a rule is edited in place, validated as a new one, keeping
// its alerts, URL and secret; a test alert is recorded, marked, for the
// sender.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiToken } from '../../operator/sql/operator.js';
import type { Alert, AlertRule } from '../../operator/sql/alerts.js';
import { adminToken, apiClient, type ApiCall } from '../support/api-client.js';
import { createWorkspace, createConnection, deadEvent } from '../support/api-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

let db: TestDatabase;
let api: ApiCall;
let tokenA: string;
let tokenB: string;
const A = 801;
const B = 802;

beforeAll(async () => {
  db = await createTestDatabase();
  api = apiClient({ db: db.pool, adminToken });
  await createWorkspace(db.pool, A);
  await createWorkspace(db.pool, B);
  tokenA = (await createApiToken(db.pool, String(A), 'ops')).token;
  tokenB = (await createApiToken(db.pool, String(B), 'ops')).token;
}, 120_000);

afterAll(async () => {
  await db?.drop();
});

describe('alert rules', () => {
  it('a webhook rule gets a generated secret once; listings show neither URL nor secret', async () => {
    const created = await api('POST', `/workspaces/${A}/alert-rules`, {
      token: tokenA, body: { name: 'pager', kind: 'dead_letter_rate', threshold: 5, window_seconds: 600, destination: 'webhook', url: 'https://alerts.example.test/in/abc' },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body).toMatchObject({ name: 'pager', kind: 'dead_letter_rate', threshold: 5, window_seconds: 600,
      destination: 'webhook', destination_host: 'alerts.example.test', created_by: 'token:ops', workspace_id: A });
    expect(created.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);

    const slack = await api('POST', `/workspaces/${A}/alert-rules`, {
      token: tokenA, body: { name: 'chat', kind: 'issue_opened', destination: 'slack', url: 'https://hooks.slack.test/services/T/B/sekrit' },
    });
    expect(slack.status).toBe(201);
    expect(slack.body.secret).toBeUndefined();

    const listed = await api('GET', `/workspaces/${A}/alert-rules`, { token: tokenA });
    expect((listed.body as unknown as AlertRule[]).map((rule) => rule.name)).toEqual(['pager', 'chat']);
    expect(JSON.stringify(listed.body)).not.toMatch(/whsec_|sekrit|\/in\/abc/);
  });

  it('refuses a bad rule with a clear 400 and stores nothing', async () => {
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ name: 'x', kind: 'issue_closed', destination: 'slack', url: 'https://h.test/' }, /kind must be one of/],
      [{ name: 'x', kind: 'dead_letter_rate', destination: 'slack', url: 'https://h.test/' }, /threshold is required/],
      [{ name: 'x', kind: 'issue_opened', destination: 'slack', url: 'http://h.test/' }, /https/],
      [{ name: 'x', kind: 'issue_opened', destination: 'webhook', url: 'https://h.test/', secret: 'hunter2' }, /whsec_/],
      [{ name: 'x', kind: 'issue_opened', destination: 'slack', url: 'https://h.test/', extra: true }, /./],
    ];
    for (const [body, message] of bad) {
      const response = await api('POST', `/workspaces/${A}/alert-rules`, { token: tokenA, body });
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(String(response.body.message)).toMatch(message);
    }
    const { rows } = await db.pool.query("SELECT 1 FROM wharf.alert_rule WHERE name = 'x'");
    expect(rows).toEqual([]);
  });

  it('keeps each workspace to its own rules and alerts; instance rules are the admin\'s', async () => {
    const [rule] = (await api('GET', `/workspaces/${A}/alert-rules`, { token: tokenA })).body as unknown as AlertRule[];
    for (const [method, path] of [['GET', `/workspaces/${A}/alert-rules`], ['GET', `/workspaces/${A}/alerts`],
      ['DELETE', `/workspaces/${A}/alert-rules/${rule!.id}`], ['GET', '/alert-rules'], ['GET', '/alerts']] as const) {
      expect((await api(method, path, { token: tokenB })).status, `${method} ${path}`).toBe(403);
    }
    expect((await api('DELETE', `/workspaces/${B}/alert-rules/${rule!.id}`, { token: tokenB })).status).toBe(404);
    expect((await api('GET', `/workspaces/${A}/alert-rules`, { token: tokenA })).body).toHaveLength(2);

    const instance = await api('POST', '/alert-rules', { token: adminToken, body: { name: 'all', kind: 'issue_opened', destination: 'slack', url: 'https://hooks.slack.test/all' } });
    expect(instance.body).toMatchObject({ workspace_id: null, created_by: 'admin' });
    expect((await api('POST', '/alert-rules', { token: tokenA, body: { name: 'all', kind: 'issue_opened', destination: 'slack', url: 'https://hooks.slack.test/all' } })).status).toBe(403);
  });

  it('lists the alerts a rule recorded with how their delivery went, and deletes a rule with them', async () => {
    const connection = await createConnection(db.pool, A);
    await deadEvent(db.pool, connection);
    const token = (await db.pool.query<{ token: string }>("SELECT wharf.take_alert_sender('test', '1 minute') AS token")).rows[0]!.token;
    await db.pool.query('SELECT wharf.evaluate_alert_rules($1)', [token]);
    const alerts = (await api('GET', `/workspaces/${A}/alerts`, { token: tokenA })).body as unknown as Alert[];
    expect(alerts).toEqual([expect.objectContaining({ rule_name: 'chat', kind: 'issue_opened', state: 'pending', attempts: 0,
      facts: { issue: expect.objectContaining({ error_class: 'SyntaxError' }) } })]);
    // The list names the issue each alert was about, not only its kind.
    const issueId = (await db.pool.query<{ id: string }>('SELECT id FROM wharf.issue WHERE workspace_id = $1', [A])).rows[0]!.id;
    expect(alerts[0]).toMatchObject({ test: false, issue_id: Number(issueId), scope_key: null,
      about: expect.stringMatching(new RegExp(`^issue ${issueId}: generic \\S+ SyntaxError$`)) });
    const instanceAlerts = (await api('GET', '/alerts', { token: adminToken })).body as unknown as Alert[];
    expect(instanceAlerts.map((a) => a.rule_name)).toEqual(['all']);

    const deleted = await api('DELETE', `/workspaces/${A}/alert-rules/${alerts[0]!.rule_id}`, { token: tokenA });
    expect(deleted.body).toEqual({ id: alerts[0]!.rule_id, deleted: true });
    expect((await api('GET', `/workspaces/${A}/alerts`, { token: tokenA })).body).toEqual([]);
  });
});

describe('editing a rule and testing it', () => {
  async function newRule(name: string) {
    const created = await api('POST', `/workspaces/${A}/alert-rules`, {
      token: tokenA, body: { name, kind: 'issue_opened', destination: 'webhook', url: 'https://alerts.example.test/edit/abc', secret: 'whsec_c2VjcmV0LXNlY3JldA==' },
    });
    expect(created.status).toBe(201);
    return created.body as unknown as AlertRule;
  }

  it('sends a test alert, recorded and marked for the sender; only the owner can', async () => {
    const rule = await newRule('tried');
    expect((await api('POST', `/workspaces/${A}/alert-rules/${rule.id}/test`, { token: tokenB })).status).toBe(403);
    expect((await api('POST', `/workspaces/${B}/alert-rules/${rule.id}/test`, { token: tokenB })).status).toBe(404);
    const sent = await api('POST', `/workspaces/${A}/alert-rules/${rule.id}/test`, { token: tokenA });
    expect(sent.status, JSON.stringify(sent.body)).toBe(202);
    expect(sent.body).toMatchObject({ rule_id: rule.id, rule_name: 'tried', test: true, about: 'test alert', state: 'pending',
      facts: { test: true, requested_by: 'token:ops' } });
    const listed = (await api('GET', `/workspaces/${A}/alerts`, { token: tokenA })).body as unknown as Alert[];
    expect(listed[0]).toMatchObject({ id: sent.body.id, test: true });
    const { rows } = await db.pool.query<{ test: boolean }>('SELECT test FROM wharf.alert WHERE id = $1', [sent.body.id]);
    expect(rows).toEqual([{ test: true }]);
  });

  it('edits a rule in place, validated as a new one, keeping its alerts, URL and secret', async () => {
    const rule = await newRule('before');
    const test = await api('POST', `/workspaces/${A}/alert-rules/${rule.id}/test`, { token: tokenA });
    const edit = { name: 'after', kind: 'stuck_scope', window_seconds: 900, destination: 'webhook' };

    expect((await api('PUT', `/workspaces/${A}/alert-rules/${rule.id}`, { token: tokenB, body: edit })).status).toBe(403);
    expect((await api('PUT', `/workspaces/${B}/alert-rules/${rule.id}`, { token: tokenB, body: edit })).status).toBe(404);
    expect((await api('PUT', `/alert-rules/${rule.id}`, { token: tokenA, body: edit })).status).toBe(403);
    for (const [body, message] of [
      [{ ...edit, window_seconds: undefined }, /window_seconds is required/],
      [{ ...edit, destination: 'slack' }, /new destination needs its URL/],
      [{ ...edit, url: 'http://h.test/' }, /https/],
      [{ ...edit, extra: true }, /./],
    ] as const) {
      const refused = await api('PUT', `/workspaces/${A}/alert-rules/${rule.id}`, { token: tokenA, body });
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect(String(refused.body.message)).toMatch(message);
    }

    const edited = await api('PUT', `/workspaces/${A}/alert-rules/${rule.id}`, { token: tokenA, body: edit });
    expect(edited.status, JSON.stringify(edited.body)).toBe(200);
    expect(edited.body).toMatchObject({ id: rule.id, name: 'after', kind: 'stuck_scope', window_seconds: 900,
      destination_host: 'alerts.example.test', created_by: 'token:ops', created_at: rule.created_at, updated_by: 'token:ops' });
    expect(JSON.stringify(edited.body)).not.toMatch(/whsec_|\/edit\/abc/);
    const { rows } = await db.pool.query('SELECT url, secret FROM wharf.alert_rule WHERE id = $1', [rule.id]);
    expect(rows).toEqual([{ url: 'https://alerts.example.test/edit/abc', secret: 'whsec_c2VjcmV0LXNlY3JldA==' }]);
    const listed = (await api('GET', `/workspaces/${A}/alerts`, { token: tokenA })).body as unknown as Alert[];
    expect(listed.find((a) => a.id === test.body.id), 'its alerts stay, under its new name').toMatchObject({ rule_id: rule.id, rule_name: 'after' });

    const instance = await api('POST', '/alert-rules', { token: adminToken, body: { name: 'all2', kind: 'issue_opened', destination: 'slack', url: 'https://hooks.slack.test/all2' } });
    const moved = await api('PUT', `/alert-rules/${instance.body.id}`, {
      token: adminToken, body: { name: 'all2', kind: 'issue_reopened', destination: 'slack', url: 'https://hooks.slack.test/elsewhere' } });
    expect(moved.body).toMatchObject({ id: instance.body.id, kind: 'issue_reopened', workspace_id: null, updated_by: 'admin' });
  });
});
