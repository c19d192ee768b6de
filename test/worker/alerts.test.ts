// The alert sender against a local receiver: a rule fires once into it with
// a Standard Webhooks signature that the `standardwebhooks` package verifies,
// and a Slack rule gets its text; nothing carries a payload, a header or a
// secret; a refused delivery is recorded and retried under the same
// webhook-id until it goes through; two hosts racing deliver each alert once;
// with the console's URL an alert links to its issue's page; a test alert
// goes through the rule's channel, signed, marked as a test.
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alertLink, startAlertSender, type AlertSender } from '../../worker/alerts.js';
import type { DueAlert } from '../../worker/sql/alerts.js';
import { workerRegistry } from '../../worker/metrics.js';
import { admitEvent, createConnection, createWorkspace } from '../support/api-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

let db: TestDatabase;
let receiver: Server;
let base: string;
const received: Received[] = [];
/** Answers for the next requests to a path, first first; then 204. */
const answers = new Map<string, number[]>();
const secret = `whsec_${randomBytes(32).toString('base64')}`;
const W = 701;
let connection: number;
const senders: AlertSender[] = [];

function sender(holder: string, consoleUrl?: string): AlertSender {
  // everyMs far away: the test runs each turn itself.
  const started = startAlertSender({
    pool: db.pool, holder, everyMs: 3_600_000, retryBaseMs: 20, ...(consoleUrl !== undefined ? { consoleUrl } : {}),
  });
  senders.push(started);
  return started;
}

async function failEvent(errorClass: string): Promise<number> {
  const id = await admitEvent(db.pool, connection, { payload: { secret_token: 'payload-secret-42' }, headers: { 'x-trace': 'header-secret-43' } });
  const { rows } = await db.pool.query<{ id: string; lease_epoch: string }>(`SELECT id, lease_epoch FROM wharf.claim('fixture', 10000)`);
  for (const row of rows) {
    if (Number(row.id) === id) await db.pool.query(`SELECT wharf.fail($1, $2, 'permanent', $3)`, [row.id, row.lease_epoch, errorClass]);
    else await db.pool.query('SELECT wharf.release($1, $2)', [row.id, row.lease_epoch]);
  }
  return id;
}

async function rule(name: string, destination: 'webhook' | 'slack', path: string): Promise<number> {
  const { rows } = await db.pool.query<{ rule: { id: number } }>(
    `SELECT wharf.create_alert_rule($1, $2, 'issue_opened', NULL, NULL, $3, $4, $5, 'ops') AS rule`,
    [W, name, destination, `${base}${path}`, destination === 'webhook' ? secret : null]);
  return rows[0]!.rule.id;
}

/** The Standard Webhooks body of a request, verified with the rule's secret. */
function verified(request: Received): { type: string; data: Record<string, unknown> & { facts: Record<string, unknown> } } {
  const headers = Object.fromEntries(['webhook-id', 'webhook-timestamp', 'webhook-signature']
    .map((name) => [name, String(request.headers[name])]));
  return new Webhook(secret).verify(request.body, headers) as { type: string; data: Record<string, unknown> & { facts: Record<string, unknown> } };
}

async function alertsOf(ruleId: number) {
  const { rows } = await db.pool.query<{ id: string; state: string; attempts: number; last_status: number | null }>(
    'SELECT id, state, attempts, last_status FROM wharf.alert WHERE rule_id = $1 ORDER BY id', [ruleId]);
  return rows;
}

beforeAll(async () => {
  db = await createTestDatabase();
  receiver = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      received.push({ path: request.url ?? '', headers: request.headers, body: Buffer.concat(chunks).toString('utf8') });
      const status = answers.get(request.url ?? '')?.shift() ?? 204;
      response.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  await createWorkspace(db.pool, W);
  connection = await createConnection(db.pool, W);
}, 120_000);

afterAll(async () => {
  await Promise.all(senders.map((s) => s.stop()));
  await new Promise((resolve) => receiver?.close(resolve));
  await db?.drop();
});

describe('the alert sender', () => {
  it('sends a new issue once, signed with Standard Webhooks, and to Slack as text, without payloads, headers or secrets', async () => {
    const webhookRule = await rule('on-call webhook', 'webhook', '/hooks/wharf');
    const slackRule = await rule('on-call slack', 'slack', '/services/T000/B000/XXXX');
    const host = sender('host-a');
    await failEvent('TypeError');

    const turn = await host.runOnce();
    expect(turn).toMatchObject({ held: true, created: 2, delivered: 2, failed: 0 });
    const webhook = received.filter((r) => r.path === '/hooks/wharf');
    expect(webhook).toHaveLength(1);
    const headers = Object.fromEntries(['webhook-id', 'webhook-timestamp', 'webhook-signature']
      .map((name) => [name, String(webhook[0]!.headers[name])]));
    const verified = new Webhook(secret).verify(webhook[0]!.body, headers) as { type: string; data: Record<string, unknown> };
    expect(verified).toMatchObject({
      type: 'wharf.alert.issue_opened',
      data: { rule: { id: webhookRule, name: 'on-call webhook' }, workspace_id: W, test: false,
        facts: { issue: { provider: 'generic', event_type: 'ping', error_class: 'TypeError', failures: 1, dead: 1 } } },
    });
    expect(verified.data, 'no console URL here: no link').not.toHaveProperty('link');
    // A wrong key does not verify it.
    expect(() => new Webhook(`whsec_${randomBytes(32).toString('base64')}`).verify(webhook[0]!.body, headers)).toThrow();

    const slack = received.filter((r) => r.path === '/services/T000/B000/XXXX');
    expect(slack).toHaveLength(1);
    expect(JSON.parse(slack[0]!.body)).toEqual({
      text: expect.stringMatching(/^Wharf alert "on-call slack": issue \d+ opened in workspace 701: generic ping failing with TypeError/),
    });
    for (const request of received) {
      expect(request.body).not.toMatch(/payload-secret-42|header-secret-43|whsec_|XXXX/);
    }
    expect((await alertsOf(webhookRule)).map((a) => a.state)).toEqual(['delivered']);
    expect((await alertsOf(slackRule)).map((a) => a.state)).toEqual(['delivered']);

    // The sender's series on /metrics: bounded labels (outcome, status), no workspace.
    const metrics = await workerRegistry.metrics();
    expect(metrics).toMatch(/^integration_consumer_alert_deliveries_total\{outcome="delivered"\} 2$/m);
    expect(metrics).toMatch(/^integration_consumer_issues\{status="open"\} 1$/m);

    // Deduplicated: the same issue failing again fires nothing new.
    await failEvent('TypeError');
    expect(await host.runOnce()).toMatchObject({ created: 0, delivered: 0 });
    expect(received).toHaveLength(2);
  });

  it('records a refused delivery and retries it, under the same webhook-id, until it goes through', async () => {
    await Promise.all(senders.map((s) => s.stop()));
    const retried = await rule('flaky receiver', 'webhook', '/flaky');
    answers.set('/flaky', [503, 500]);
    const host = sender('host-a2');
    await failEvent('RangeError');

    await host.runOnce();
    expect(await alertsOf(retried)).toEqual([expect.objectContaining({ state: 'pending', attempts: 1, last_status: 503 })]);
    // The backoff (20 ms, then 40 ms, with jitter): turns until it is delivered.
    for (let turn = 0; turn < 50 && (await alertsOf(retried))[0]!.state !== 'delivered'; turn += 1) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      await host.runOnce();
    }
    expect(await alertsOf(retried)).toEqual([expect.objectContaining({ state: 'delivered', attempts: 3, last_status: 204 })]);
    const attempts = received.filter((r) => r.path === '/flaky');
    expect(attempts).toHaveLength(3);
    expect(new Set(attempts.map((r) => r.headers['webhook-id'])).size).toBe(1);
    for (const attempt of attempts) {
      const headers = Object.fromEntries(['webhook-id', 'webhook-timestamp', 'webhook-signature']
        .map((name) => [name, String(attempt.headers[name])]));
      expect(() => new Webhook(secret).verify(attempt.body, headers)).not.toThrow();
    }
  });

  it('lets one host at a time send: two racing hosts deliver each alert once', async () => {
    await Promise.all(senders.map((s) => s.stop()));
    const raced = await rule('raced', 'webhook', '/raced');
    const [a, b] = [sender('host-b'), sender('host-c')];
    await failEvent('SyntaxError');
    const turns = await Promise.all([a.runOnce(), b.runOnce(), a.runOnce(), b.runOnce()]);
    const holders = new Set(turns.flatMap((t, i) => (t.held ? [i % 2 === 0 ? 'a' : 'b'] : [])));
    expect(holders.size, 'exactly one of them held the lease').toBe(1);
    expect(received.filter((r) => r.path === '/raced')).toHaveLength(1);
    expect(await alertsOf(raced)).toEqual([expect.objectContaining({ state: 'delivered', attempts: 1 })]);

    // The holder stops and gives the lease back: the other takes over.
    const holder = turns[0]!.held ? a : b;
    const other = holder === a ? b : a;
    await holder.stop();
    expect((await other.runOnce()).held).toBe(true);
  });
});

describe('links and test alerts', () => {
  it("links an issue alert to its issue's console page, in the signed body and the Slack text, when the console URL is set", async () => {
    await Promise.all(senders.map((s) => s.stop()));
    await rule('linked webhook', 'webhook', '/linked');
    await rule('linked slack', 'slack', '/services/T1/B1/LINK');
    const host = sender('host-l', 'https://wharf.example.com/console/');
    await failEvent('URIError');
    await host.runOnce();

    const webhook = received.filter((r) => r.path === '/linked');
    expect(webhook).toHaveLength(1);
    const body = verified(webhook[0]!);
    const issueId = (body.data.facts.issue as { id: number }).id;
    expect(body.data.link).toBe(`https://wharf.example.com/console/workspaces/${W}/issues/${issueId}`);
    const slack = received.filter((r) => r.path === '/services/T1/B1/LINK');
    expect(slack).toHaveLength(1);
    expect((JSON.parse(slack[0]!.body) as { text: string }).text)
      .toMatch(new RegExp(` <https://wharf\\.example\\.com/console/workspaces/${W}/issues/${issueId}\\|Open in Wharf>$`));
    for (const request of [...webhook, ...slack]) expect(request.body).not.toMatch(/payload-secret-42|header-secret-43|whsec_|LINK/);
  });

  it("links a stuck scope to its workspace's stuck scopes, and what has no page (a rate, the installation rows) to nothing", () => {
    const base: DueAlert = {
      id: 1, rule_id: 1, rule_name: 'r', workspace_id: W, kind: 'stuck_scope', test: false,
      facts: { scope_key: `${W}:generic:repo:a`, head: { id: 9 } }, created_at: '', attempts: 0, destination: 'slack', url: '', secret: null,
    };
    expect(alertLink(base, 'https://wharf.example.com/console')).toBe(`https://wharf.example.com/console/workspaces/${W}/stuck`);
    expect(alertLink(base, undefined)).toBeUndefined();
    expect(alertLink({ ...base, kind: 'dead_letter_rate', facts: { dead: 3 } }, 'https://wharf.example.com/console')).toBeUndefined();
    expect(alertLink({ ...base, kind: 'issue_opened', workspace_id: null, facts: { issue: { id: 4 } } }, 'https://wharf.example.com/console'))
      .toBeUndefined();
  });

  it("sends a test alert through the rule's channel, signed as usual, marked as a test, and records it", async () => {
    await Promise.all(senders.map((s) => s.stop()));
    const tested = await rule('tested webhook', 'webhook', '/tested');
    const testedSlack = await rule('tested slack', 'slack', '/services/T2/B2/TEST');
    const host = sender('host-t', 'https://wharf.example.com/console');
    for (const id of [tested, testedSlack]) await db.pool.query('SELECT wharf.send_test_alert($1, $2, $3)', [W, id, 'token:7']);
    await host.runOnce();

    const webhook = received.filter((r) => r.path === '/tested');
    expect(webhook).toHaveLength(1);
    const body = verified(webhook[0]!);
    expect(body).toMatchObject({
      type: 'wharf.alert.test',
      data: { test: true, kind: 'issue_opened', rule: { id: tested, name: 'tested webhook' }, facts: { test: true, requested_by: 'token:7' } },
    });
    expect(body.data, 'a test is about nothing: no link').not.toHaveProperty('link');
    const slack = received.filter((r) => r.path === '/services/T2/B2/TEST');
    expect((JSON.parse(slack[0]!.body) as { text: string }).text)
      .toBe('[TEST] Wharf alert "tested slack": a test of this issue_opened rule, sent on request by token:7; nothing is wrong.');
    const { rows } = await db.pool.query<{ state: string; test: boolean }>(
      'SELECT state, test FROM wharf.alert WHERE rule_id = ANY($1) ORDER BY id', [[tested, testedSlack]]);
    expect(rows).toEqual([{ state: 'delivered', test: true }, { state: 'delivered', test: true }]);
  });
});

describe('delivery gauges', () => {
  it("report the last complete minute's deliveries by connection, outcome and reason; the host that loses the lease stops", async () => {
    await Promise.all(senders.map((s) => s.stop()));
    const host = sender('host-d');
    const own = await createConnection(db.pool, W);
    const gauge = async (labels: Record<string, string>) => {
      const { values } = await workerRegistry.getSingleMetric('integration_consumer_deliveries_last_minute')!.get();
      return values.find((v) => Object.entries(labels).every(([k, x]) => String(v.labels[k]) === x))?.value;
    };
    const ids = [await admitEvent(db.pool, own), await admitEvent(db.pool, own)];
    // A delivery about a subject nobody subscribes to: dropped, naming the connection.
    await db.pool.query(`SELECT wharf.admit('generic', s.source, 'gauge-drop', 'ping', jsonb_build_object('connection_id', s.id),
                                           ARRAY['repo:nobody'], '{}', '{}')
                           FROM wharf.connection s WHERE s.id = $1`, [own]);
    // Pinned to the minute before the turn's: taken again should a minute end in between.
    for (;;) {
      const { rows: [pinned] } = await db.pool.query<{ minute: Date }>(
        `SELECT date_trunc('minute', now()) - interval '1 minute' AS minute`);
      await db.pool.query(`UPDATE wharf.provider_event SET received_at = $2::timestamptz + interval '10 seconds' WHERE id = ANY($1)`, [ids, pinned!.minute]);
      await db.pool.query(`UPDATE wharf.admission_log SET at = $1::timestamptz + interval '20 seconds' WHERE delivery_key = 'gauge-drop'`, [pinned!.minute]);
      expect((await host.runOnce()).held).toBe(true);
      const { rows: [after] } = await db.pool.query<{ minute: Date }>(
        `SELECT date_trunc('minute', now()) - interval '1 minute' AS minute`);
      if (after!.minute.getTime() === pinned!.minute.getTime()) break;
    }
    expect(await gauge({ connection: String(own), outcome: 'accepted', reason: '' })).toBe(2);
    expect(await gauge({ connection: String(own), outcome: 'dropped', reason: 'no-subscriber' })).toBe(1);
    expect(await gauge({ connection: String(own), outcome: 'refused' })).toBeUndefined();

    // Another host, without the lease, reports none (in its own process;
    // here the registry is shared, so the series go).
    expect((await sender('host-e').runOnce()).held).toBe(false);
    expect(await gauge({ connection: String(own), outcome: 'accepted' })).toBeUndefined();
  });
});
