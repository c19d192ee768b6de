// Where a failure was thrown, end to end: the worker passes the top frames of
// the handler's own code to wharf.fail, so two TypeErrors of one event type
// thrown in two places are two issues and the same one thrown again in the
// same place counts into its issue; the frames are shown on the issue, the
// attempt and the dead letter through the API; the error's message, holding
// a secret-looking string, reaches neither the database, the API nor the logs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Issue } from '../../operator/sql/issues.js';
import { createApiToken, type EventDetail } from '../../operator/sql/operator.js';
import { appFrames } from '../../worker/sanitize.js';
import { createWorker, type HandlerMap, type RunOutcome, type Worker } from '../../worker/index.js';
import { adminToken, apiClient, type ApiCall } from '../support/api-client.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { captureLogs, type CapturedLogs } from '../support/worker-logs.js';
import { admitEvents, setSettings, testWorkspace, waitFor } from '../support/worker-inbox.js';

let db: TestDatabase;
let worker: Worker;
let logs: CapturedLogs;
let api: ApiCall;
let token: string;
const outcomes = new Map<string, RunOutcome>();
const secret = 'sk_live_51HfRameSecretValue0123456789';
const thisFile = 'test/worker/failure-frames.test.ts';

function chargeCard(payload: { card?: { number: string } }): string {
  if (!payload.card) throw new TypeError(`card missing for ${secret}`);
  return payload.card.number;
}

function shipParcel(payload: { address?: string }): string {
  if (!payload.address) throw new TypeError(`address missing for ${secret}`);
  return payload.address;
}

const handlers: HandlerMap = {
  'generic:order': (ctx) => {
    const payload = ctx.event.payload as { step: string };
    if (payload.step === 'charge') chargeCard({});
    else shipParcel({});
  },
};

async function settle(steps: string[]): Promise<string[]> {
  const ids = await admitEvents(db.pool, steps.map((step, n) => ({ scope: `order-${step}-${n}-${Date.now()}`, eventType: 'order', payload: { step } })));
  for (const id of ids) await waitFor(async () => outcomes.get(id), 10_000, `event ${id} to settle`);
  return ids;
}

async function orderIssues(): Promise<Issue[]> {
  const response = await api('GET', `/workspaces/${testWorkspace}/issues`, { token });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return (response.body as unknown as Issue[]).filter((issue) => issue.event_type === 'order' && issue.error_class === 'TypeError');
}

beforeAll(async () => {
  db = await createTestDatabase();
  // An unknown failure is DEAD at once: the dead letter is there to look at, and no retry counts again.
  await setSettings(db.pool, { max_attempts: '1' });
  logs = captureLogs();
  worker = createWorker({ pool: db.pool, handlers, concurrency: 2, logger: logs.logger, settings: { pollEvery: 100 } });
  worker.on('settled', ({ eventId, outcome }) => outcomes.set(eventId, outcome));
  await worker.start();
  api = apiClient({ db: db.pool, adminToken });
  await db.pool.query('SELECT wharf.upsert_workspace($1)', [testWorkspace]);
  token = (await createApiToken(db.pool, String(testWorkspace), 'ops')).token;
});

afterAll(async () => {
  await worker?.stop();
  await db?.drop();
});

describe('failure frames', () => {
  it('keeps only the application’s own frames, relative, with line, column and function', () => {
    let frames: string[] = [];
    try {
      chargeCard({});
    } catch (error) {
      frames = appFrames(error);
    }
    expect(frames[0]).toMatch(new RegExp(`^${thisFile.replace(/\./g, '\\.')}:\\d+:\\d+ chargeCard$`));
    expect(frames.length).toBeLessThanOrEqual(8);
    expect(frames.filter((frame) => /^node:|node_modules|^worker\/|^db\/|^\//.test(frame))).toEqual([]);
    expect(frames.join('\n')).not.toContain(secret);
    expect(appFrames(new Error(secret))).not.toContain(secret);
    expect(appFrames('not an error')).toEqual([]);
  });

  it('makes two issues of TypeErrors from two places and counts the same place into one', async () => {
    const [charged, shipped] = await settle(['charge', 'ship']);
    await settle(['charge']);
    expect(outcomes.get(charged!)).toBe('dead');
    const issues = await orderIssues();
    expect(issues.map((issue) => [issue.frames[0]?.replace(/:\d+:\d+/, ''), issue.failures]).sort())
      .toEqual([[`${thisFile} chargeCard`, 2], [`${thisFile} shipParcel`, 1]]);

    const { rows } = await db.pool.query<{ frames: string[] | null }>(
      'SELECT frames FROM wharf.event_attempt WHERE event_id = $1', [shipped]);
    expect(rows[0]?.frames?.[0]).toMatch(/ shipParcel$/);

    const shown = await api('GET', `/workspaces/${testWorkspace}/issues/${issues.find((issue) => issue.frames[0]?.endsWith('shipParcel'))!.id}`, { token });
    expect((shown.body as unknown as Issue).frames[0]).toMatch(/^test\/worker\/failure-frames\.test\.ts:\d+:\d+ shipParcel$/);
    const event = (await api('GET', `/workspaces/${testWorkspace}/events/${shipped}`, { token })).body as unknown as EventDetail;
    expect(event.state).toBe('DEAD');
    expect(event.error_frames[0]).toMatch(/ shipParcel$/);
    expect(event.attempts[0]?.frames).toEqual(event.error_frames);
  });

  it('an old worker passing no frames keeps the grouping by class alone', async () => {
    const [id] = await admitEvents(db.pool, [{ scope: `old-${Date.now()}`, eventType: 'legacy' }]);
    const { rows } = await db.pool.query<{ id: string; lease_epoch: string }>(
      `SELECT id, lease_epoch FROM wharf.claim('old-worker', 10, ARRAY['generic:legacy'])`);
    const lease = rows.find((row) => row.id === id)!;
    expect(lease).toBeDefined();
    await db.pool.query('SELECT wharf.fail($1, $2, $3, $4)', [lease.id, lease.lease_epoch, 'permanent', 'TypeError']);
    const issues = ((await api('GET', `/workspaces/${testWorkspace}/issues`, { token })).body as unknown as Issue[])
      .filter((issue) => issue.event_type === 'legacy');
    expect(issues.map((issue) => [issue.error_class, issue.frames, issue.failures])).toEqual([['TypeError', [], 1]]);
  });

  it('never lets the message reach the database, the API or the logs', async () => {
    const { rows } = await db.pool.query<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = 'wharf' AND table_type = 'BASE TABLE'`);
    for (const { table_name } of rows) {
      const { rows: found } = await db.pool.query(
        `SELECT 1 FROM wharf.${table_name} t WHERE t::text LIKE '%' || $1 || '%' LIMIT 1`, [secret.slice(0, 12)]);
      expect(found, `wharf.${table_name}`).toEqual([]);
    }
    const issues = await api('GET', `/workspaces/${testWorkspace}/issues`, { token });
    expect(JSON.stringify(issues.body)).not.toContain('sk_live');
    for (const issue of issues.body as unknown as Issue[]) {
      const events = await api('GET', `/workspaces/${testWorkspace}/issues/${issue.id}/events`, { token });
      for (const event of (events.body as unknown as { events: { id: number }[] }).events) {
        const detail = await api('GET', `/workspaces/${testWorkspace}/events/${event.id}`, { token });
        expect(JSON.stringify(detail.body)).not.toContain('sk_live');
      }
    }
    expect(logs.text(), 'the logs keep their sanitized frames').toContain(thisFile);
    expect(logs.text()).not.toContain('sk_live');
  });
});
