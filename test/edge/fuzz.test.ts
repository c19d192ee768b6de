// A seeded fuzz of the edge receiver (issue 15; DESIGN.md "Edge receiver"):
// a few thousand requests through the in-process Hono app against a real
// PostgreSQL. Valid signed deliveries for every provider, and mutations of
// them: bodies changed after signing, hostile bodies re-signed (numbers and
// nesting PostgreSQL refuses, NUL and lone-surrogate escapes, invalid UTF-8,
// non-objects), missing, garbled and duplicated signature headers, stale
// timestamps, over-long delivery ids and event types, unknown routes and
// methods, odd content types and header values, oversized bodies, a database
// that is down, and small concurrent bursts (the same delivery racing itself,
// a route changing meanwhile). Whatever comes in:
//   - no 5xx but a documented 503 (edge-busy, route-changed,
//     database-unavailable, secret-unreadable) carrying Retry-After;
//   - a request answered anything but 202 stores nothing (provider_event and
//     admission_log counted around each request, and afterwards no delivery
//     key that only refused requests carried is in provider_event);
//   - a 202 stores exactly what its receipt says, and every event it names
//     exists; every provider_event row belongs to a 202 receipt;
//   - where the outcome is certain (a valid delivery, a body changed after
//     signing, a stale timestamp, a number out of numeric's range…), it is
//     that outcome.
//
//   FUZZ_SEED=<seed> npx vitest run test/edge/fuzz.test.ts   replays a run
//   FUZZ_COUNT=<n>                                            requests (default 4000)
//   FUZZ_VERBOSE=1                                            prints the answers by kind
// A failure names the seed and each failing request's index, kind and answer.
// The requests are drawn by test/support/edge-fuzz-requests.ts.
import type { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../db/database.js';
import { encryptSecret, parseKeyRing } from '../../db/secret-box.js';
import { createEdgeApp } from '../../edge/app.js';
import { utf8 } from '../../edge/crypto.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import {
  Generator, mixTable, type Accepted, type Answer, type FuzzWorld, type Json, type Plan, type Target,
} from '../support/edge-fuzz-requests.js';
import { fileSeed, Rng } from '../support/random.js';
import {
  edgeEnv, freshId, providers, recorder, scenario, seedConnection,
} from '../support/edge-fixtures.js';

// FUZZ_SEED as before, or the suites' WHARF_TEST_SEED; printed on failure.
const seed = fileSeed(import.meta.url, ['FUZZ_SEED', 'WHARF_TEST_SEED']);
const requestCount = readCount();
const replay = `FUZZ_SEED=${seed} npx vitest run test/edge/fuzz.test.ts`;
const maxBodyBytes = 1024 * 1024;
// Room for two bodies at the limit: a sequential request is never turned
// away busy unless bytes leak from the budget; a concurrent one may be.
const env = { ...edgeEnv, WHARF_MAX_BODY_BYTES: String(maxBodyBytes), WHARF_MAX_INFLIGHT_BYTES: String(2.5 * maxBodyBytes) };
/** Past this a request counts as hung. */
const answerWithinMs = 15_000;
/** The 503s DESIGN.md documents, each with Retry-After. */
const documented503 = new Set(['edge-busy', 'route-changed', 'database-unavailable', 'secret-unreadable']);

function readCount(): number {
  const given = Number(process.env.FUZZ_COUNT ?? 4000);
  if (!Number.isInteger(given) || given < 1) throw new Error(`FUZZ_COUNT is a positive integer, not ${process.env.FUZZ_COUNT}`);
  return given;
}
// ---------------------------------------------------------------------------

let db: TestDatabase;
let app: Hono;
let downApp: Hono;
const recorded = recorder();
let targets: Target[];
const byName = new Map<string, Target>();
/** The GitHub and Slack recipients' connections: ids no connection route of another provider answers to. */
let foreignConnections: number[];
let secretlessConnection: number;
let unreadableConnection: number;
/** Every connection, for route churn. */
let connectionIds: number[];

beforeAll(async () => {
  db = await createTestDatabase();
  const pool = db.pool;
  targets = [];
  foreignConnections = [];
  for (const provider of providers) {
    const s = await scenario(pool, provider, freshId());
    targets.push({ name: provider, provider, s });
    if (provider === 'github' || provider === 'slack') {
      // Fan-out: another active workspace, and a suspended one (refused in the receipt).
      foreignConnections.push(await s.seedRecipient(pool, freshId()));
      const suspended = freshId();
      foreignConnections.push(await s.seedRecipient(pool, suspended));
      await pool.query(`SELECT wharf.set_workspace_state($1, 'SUSPENDED')`, [suspended]);
    }
  }
  const suspended = freshId();
  targets.push({ name: 'generic-suspended', provider: 'generic', s: await scenario(pool, 'generic', suspended) });
  await pool.query(`SELECT wharf.set_workspace_state($1, 'SUSPENDED')`, [suspended]);
  for (const t of targets) byName.set(t.name, t);

  secretlessConnection = await seedConnection(pool, {
    workspace: freshId(), provider: 'outline', source: 'https://outline-secretless.example.com', kind: 'webhook',
    externalId: 'secretless', subjects: ['document:x'],
  });
  unreadableConnection = await seedConnection(pool, {
    workspace: freshId(), provider: 'generic', source: 'https://unreadable.example.com', kind: 'webhook',
    externalId: 'unreadable', subjects: ['customer_id:x'], route: { subject_pointers: ['/data/customer_id'] },
  });
  // Encrypted under a key the edge's ring lacks.
  const otherRing = (await parseKeyRing(`elsewhere:${Buffer.alloc(32, 9).toString('base64')}`))!;
  await pool.query('SELECT wharf.set_connection_secret($1, $2)',
    [unreadableConnection, await encryptSecret(otherRing, unreadableConnection, `whsec_${Buffer.alloc(24, 3).toString('base64')}`)]);

  connectionIds = (await pool.query<{ id: string }>('SELECT id FROM wharf.connection ORDER BY id')).rows.map((row) => Number(row.id));
  app = createEdgeApp({ database: pool, env, logger: recorded.logger, metrics: recorded.metrics });
  // What pg answers when nothing listens on the database's port.
  const down: Database = {
    query: () => Promise.reject(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })),
  };
  downApp = createEdgeApp({ database: down, env, logger: recorded.logger, metrics: recorded.metrics });
});

afterAll(async () => {
  await db?.drop();
});

/** What the generator draws against, once beforeAll has seeded it. */
const world = (): FuzzWorld => ({ seed, maxBodyBytes, targets, foreignConnections, secretlessConnection, unreadableConnection });

// ---------------------------------------------------------------------------
// Sending and judging.

async function send(plan: Plan): Promise<Answer> {
  const headers = new Headers();
  for (const [name, value] of plan.headers) headers.append(name, value);
  let body: BodyInit | null = plan.body as Uint8Array<ArrayBuffer> | null;
  if (plan.body && plan.chunks) {
    const source = plan.body;
    const sizes = plan.chunks;
    body = new ReadableStream<Uint8Array>({
      start(controller) {
        let at = 0;
        for (const size of sizes) {
          controller.enqueue(source.slice(at, at + size));
          at += size;
        }
        controller.close();
      },
    });
  }
  let request: Request;
  try {
    request = new Request(`http://localhost${plan.path}`, { method: plan.method, headers, body, duplex: 'half' } as RequestInit);
  } catch (error) {
    return { status: 0, retryAfter: null, text: '', json: undefined, failure: `could not build the request: ${(error as Error).message}` };
  }
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${answerWithinMs} ms`)), answerWithinMs);
  });
  try {
    const response = await Promise.race([(plan.down ? downApp : app).request(request), timeout]);
    const text = await Promise.race([response.text(), timeout]);
    let json: Json | undefined;
    try {
      json = text ? (JSON.parse(text) as Json) : undefined;
    } catch {
      json = undefined;
    }
    return { status: response.status, retryAfter: response.headers.get('retry-after'), text, json };
  } catch (error) {
    return { status: 0, retryAfter: null, text: '', json: undefined, failure: (error as Error).message };
  } finally {
    clearTimeout(timer);
  }
}

/** Bumps a connection's generation, leaving its subscriptions as they were. */
async function churnRoute(rng: Rng): Promise<void> {
  const id = rng.pick(connectionIds);
  const subject = `churn:${rng.token(8)}`;
  await db.pool.query('SELECT wharf.subscribe($1, $2)', [id, subject]);
  await db.pool.query('SELECT wharf.unsubscribe($1, $2)', [id, subject]);
}

interface Counts {
  events: number;
  logs: number;
}

async function counts(): Promise<Counts> {
  const { rows } = await db.pool.query<{ events: string; logs: string }>(
    'SELECT (SELECT count(*) FROM wharf.provider_event) AS events, (SELECT count(*) FROM wharf.admission_log) AS logs');
  return { events: Number(rows[0]!.events), logs: Number(rows[0]!.logs) };
}

/** What a 202 receipt says it wrote: event rows stored and admission_log rows (refusals and a drop). */
function writesOf(answer: Answer): Counts {
  if (answer.status !== 202 || !answer.json) return { events: 0, logs: 0 };
  const events = Array.isArray(answer.json.events) ? answer.json.events : [];
  const refused = Array.isArray(answer.json.refused) ? answer.json.refused : [];
  return {
    events: events.filter((e: Json) => e?.outcome === 'stored').length,
    logs: refused.length + (answer.json.dropped ? 1 : 0),
  };
}

/** The problems with one answer, on its own (storage is judged by the caller). */
function judge(plan: Plan, answer: Answer, concurrent: boolean): string[] {
  if (answer.failure) return [answer.failure];
  const problems: string[] = [];
  const { status, json } = answer;
  const error = typeof json?.error === 'string' ? json.error : undefined;
  // Concurrent requests may find the edge busy, or a route changed under them.
  const busy = status === 503 && (error === 'edge-busy' || error === 'route-changed') && concurrent;
  if (status >= 500) {
    if (status !== 503 || !error || !documented503.has(error)) problems.push(`${status} is not a documented answer`);
    else if (!answer.retryAfter || !(Number(answer.retryAfter) > 0)) problems.push(`503 ${error} without a Retry-After`);
  }
  if (plan.statuses && !plan.statuses.includes(status) && !busy) problems.push(`expected ${plan.statuses.join(' or ')}`);
  if (plan.error && status >= 400 && !busy && error !== plan.error) problems.push(`expected error ${plan.error}, got ${error}`);
  if (status >= 400 && plan.method !== 'HEAD' && !error) problems.push('a refusal without an error code');
  if (status === 202) {
    if (json?.status !== 'accepted' || !Array.isArray(json.events) || !Array.isArray(json.refused)
        || typeof json.delivery_key !== 'string' || json.delivery_id !== json.delivery_key) {
      problems.push('a 202 without a receipt');
      return problems;
    }
    const outcomes = json.events.map((e: Json) => e.outcome);
    if (plan.stores && 'fresh' in plan.stores && outcomes.some((o: string) => o !== 'stored')) problems.push(`a fresh delivery came back ${outcomes.join(',')}`);
    if (plan.stores && 'duplicateOf' in plan.stores) {
      const ids = json.events.map((e: Json) => e.event_id).sort((a: number, b: number) => a - b);
      if (outcomes.some((o: string) => o !== 'duplicate')) problems.push(`a redelivery came back ${outcomes.join(',')}`);
      if (JSON.stringify(ids) !== JSON.stringify(plan.stores.duplicateOf)) problems.push(`a redelivery names events ${ids} instead of ${plan.stores.duplicateOf}`);
    }
    if (plan.stores && plan.key !== undefined && json.delivery_key !== plan.key) {
      problems.push(`receipt for delivery ${JSON.stringify(json.delivery_key.slice(0, 40))}, sent ${JSON.stringify(plan.key.slice(0, 40))}`);
    }
  }
  const extra = plan.extra?.(json ?? {});
  if (extra && status < 300) problems.push(extra);
  return problems;
}

function describePlan(index: number, plan: Plan, answer: Answer): string {
  const path = plan.path.length > 80 ? `${plan.path.slice(0, 80)}…` : plan.path;
  const text = answer.text.length > 200 ? `${answer.text.slice(0, 200)}…` : answer.text;
  return `#${index} ${plan.kind} (${plan.note}) ${plan.method} ${path} [${plan.body?.length ?? 0} bytes] → ${answer.status} ${text}`;
}

interface Sent {
  index: number;
  plan: Plan;
  answer: Answer;
}

/**
 * The stored rows against the answers: every row belongs to a 202 receipt
 * that says it stored it, under the receipt's delivery key and provider;
 * every event a receipt names exists; no delivery key that only refused
 * requests carried is stored.
 */
function audit(sent: Sent[], rows: { id: number; delivery_key: string; provider: string }[]): string[] {
  const problems: string[] = [];
  const byId = new Map(rows.map((row) => [row.id, row]));
  const storedBy = new Map<number, Sent>();
  const acceptedKeys = new Set<string>();
  for (const s of sent) {
    if (s.answer.status !== 202 || !Array.isArray(s.answer.json?.events)) continue;
    acceptedKeys.add(s.answer.json.delivery_key);
    for (const event of s.answer.json.events as Json[]) {
      const row = byId.get(event.event_id);
      if (!row) problems.push(`#${s.index}: its receipt names event ${event.event_id}, which does not exist`);
      if (event.outcome !== 'stored') continue;
      if (storedBy.has(event.event_id)) problems.push(`#${s.index} and #${storedBy.get(event.event_id)!.index} both say they stored event ${event.event_id}`);
      storedBy.set(event.event_id, s);
      if (row && (row.delivery_key !== s.answer.json.delivery_key || row.provider !== byName.get(s.plan.target ?? '')?.provider)) {
        problems.push(`#${s.index}: event ${row.id} is stored as ${row.provider} ${JSON.stringify(row.delivery_key.slice(0, 40))}`);
      }
    }
  }
  for (const row of rows) {
    if (storedBy.has(row.id)) continue;
    const carriers = sent.filter((s) => s.plan.key === row.delivery_key).map((s) => `#${s.index} (${s.plan.kind}, ${s.answer.status})`);
    problems.push(`event ${row.id} (${row.provider} ${JSON.stringify(row.delivery_key.slice(0, 40))}) was stored by no 202; carried by ${carriers.join(', ') || 'no request'}`);
  }
  const storedKeys = new Set(rows.map((row) => row.delivery_key));
  for (const s of sent) {
    if (s.answer.status === 202 || s.plan.key === undefined || acceptedKeys.has(s.plan.key)) continue;
    if (storedKeys.has(s.plan.key)) problems.push(`#${s.index} ${s.plan.kind} (${s.plan.note}) answered ${s.answer.status}, yet its delivery key is stored`);
  }
  return problems;
}

// ---------------------------------------------------------------------------

describe('edge fuzz', () => {
  it(`answers ${requestCount} seeded requests with no undocumented 5xx and stores nothing it refuses (FUZZ_SEED=${seed})`, async () => {
    const sent: Sent[] = [];
    const violations: string[] = [];
    const accepted: Accepted[] = [];
    const tally = new Map<string, number>();
    const started = Date.now();
    const note = (index: number, plan: Plan, answer: Answer, problems: string[]) => {
      tally.set(`${plan.kind} ${answer.status}`, (tally.get(`${plan.kind} ${answer.status}`) ?? 0) + 1);
      for (const problem of problems) violations.push(`${describePlan(index, plan, answer)}: ${problem}`);
    };
    const remember = (index: number, plan: Plan, answer: Answer) => {
      sent.push({ index, plan, answer });
      const events = answer.json?.events;
      if (answer.status === 202 && plan.origin && plan.stores && 'fresh' in plan.stores && Array.isArray(events) && plan.key !== undefined) {
        accepted.push({ index, target: plan.origin.target, key: plan.key, body: plan.origin.body,
                        eventIds: events.map((e: Json) => e.event_id).sort((a: number, b: number) => a - b) });
      }
    };

    let before = await counts();
    let index = 0;
    while (index < requestCount) {
      const batchRng = Rng.for(seed, 1, index);
      const shape = batchRng.weighted([[94, 'one'], [3, 'race'], [3, 'burst']] as const);
      if (shape === 'one') {
        const generator = new Generator(world(), index, Rng.for(seed, 0, index), accepted);
        const plan = await generator.generate(generator.rng.weighted(mixTable));
        const answer = await send(plan);
        const after = await counts();
        const problems = judge(plan, answer, false);
        const wrote = writesOf(answer);
        const grew = { events: after.events - before.events, logs: after.logs - before.logs };
        if (grew.events !== wrote.events || grew.logs !== wrote.logs) {
          problems.push(answer.status === 202
            ? `the receipt says ${wrote.events} events and ${wrote.logs} admission_log rows; the tables grew by ${grew.events} and ${grew.logs}`
            : `refused, yet stored ${grew.events} events and ${grew.logs} admission_log rows`);
        }
        note(index, plan, answer, problems);
        remember(index, plan, answer);
        before = after;
        index += 1;
        continue;
      }
      // Concurrent: judged one by one, storage by the batch (and by the audit).
      const size = Math.min(batchRng.int(2, 6), requestCount - index);
      const plans: Plan[] = [];
      if (shape === 'race') {
        // The same delivery k times at once, or (GitHub, Forgejo) one body under k delivery ids: stored once.
        const generator = new Generator(world(), index, Rng.for(seed, 0, index), accepted);
        const t = generator.target((x) => x.name !== 'generic-suspended');
        const key = generator.newKey();
        const body = utf8(JSON.stringify(generator.payload(t, key)));
        const relabelled = (t.provider === 'github' || t.provider === 'forgejo') && batchRng.chance(0.5);
        for (let j = 0; j < size; j++) {
          const k = relabelled && j > 0 ? `${key}-${j}` : key;
          plans.push(generator.post(t, t.s.path, body, await generator.sign(t, body, k), {
            kind: 'race', note: `${t.name} ×${size}${relabelled ? ' relabelled' : ''}`, key: k, statuses: [202],
          }));
        }
      } else {
        for (let j = 0; j < size; j++) {
          const generator = new Generator(world(), index + j, Rng.for(seed, 0, index + j), accepted);
          const plan = await generator.generate(generator.rng.weighted(mixTable));
          plans.push({ ...plan, kind: `burst/${plan.kind}` });
        }
      }
      // Half the time an operator changes a route meanwhile (a subscription
      // added and removed): admit may then answer WH409, a 503 route-changed.
      const churn = batchRng.chance(0.5) ? churnRoute(batchRng) : Promise.resolve();
      const [answers] = await Promise.all([Promise.all(plans.map(send)), churn]);
      const after = await counts();
      const wrote = answers.map(writesOf).reduce((a, b) => ({ events: a.events + b.events, logs: a.logs + b.logs }), { events: 0, logs: 0 });
      const grew = { events: after.events - before.events, logs: after.logs - before.logs };
      const batchProblems: string[] = [];
      if (grew.events !== wrote.events || grew.logs !== wrote.logs) {
        batchProblems.push(`the batch's receipts say ${wrote.events} events and ${wrote.logs} admission_log rows; the tables grew by ${grew.events} and ${grew.logs}`);
      }
      if (shape === 'race' && answers.every((a) => a.status === 202)) {
        const ids = new Set(answers.flatMap((a) => (a.json?.events ?? []).map((e: Json) => e.event_id)));
        const perAnswer = answers[0]!.json?.events?.length ?? 0;
        if (ids.size !== perAnswer || wrote.events !== ids.size) batchProblems.push(`a race stored ${wrote.events} events, ${ids.size} distinct, ${perAnswer} per answer`);
      }
      plans.forEach((plan, j) => {
        note(index + j, plan, answers[j]!, [...judge(plan, answers[j]!, true), ...(j === 0 ? batchProblems : [])]);
        remember(index + j, plan, answers[j]!);
      });
      before = after;
      index += size;
    }

    const { rows } = await db.pool.query<{ id: string; delivery_key: string; provider: string }>(
      'SELECT id, delivery_key, provider FROM wharf.provider_event');
    violations.push(...audit(sent, rows.map((row) => ({ ...row, id: Number(row.id) }))));
    const errors = recorded.lines.filter((line) => line.level === 'error' && line.fields.event !== 'secret_unreadable');
    for (const line of errors.slice(0, 5)) violations.push(`logged at error level: ${JSON.stringify(line)}`);

    if (process.env.FUZZ_VERBOSE) console.log(`fuzz seed ${seed}, ${sent.length} requests in ${Date.now() - started} ms:`, Object.fromEntries([...tally].sort()));
    expect(violations.slice(0, 30), `seed ${seed}: ${violations.length} violation(s); replay with ${replay}`).toEqual([]);
    // The run exercised what it is about.
    const statuses = new Set(sent.map((s) => s.answer.status));
    if (requestCount >= 1000) {
      for (const status of [200, 202, 400, 401, 404, 405, 413, 503]) expect(statuses, `seed ${seed}: no ${status} answered`).toContain(status);
    }
  }, 240_000);

  // Found by this fuzz (e.g. FUZZ_SEED=32, request #266): GitLab with an empty
  // or blank Idempotency-Key or X-Gitlab-Event-UUID header. The adapter takes
  // '' for the delivery key (`??` keeps an empty string), wharf.admit raises
  // 22004 and the edge answers 500 "The delivery could not be stored.".
  it.each([
    ['idempotency-key', ''], ['idempotency-key', ' '], ['x-gitlab-event-uuid', ''], ['x-gitlab-event-uuid', '\t'],
  ])('answers GitLab with %s %j without a 500, storing nothing if it refuses', async (header, value) => {
    const t = byName.get('gitlab')!;
    const key = `found-${header}-${value.length}`;
    const body = JSON.stringify({ ...t.s.payload(key), fuzz_nonce: `found ${header} ${JSON.stringify(value)}` });
    const headers = new Headers(await t.s.sign(body, { deliveryKey: key }));
    headers.set(header, value);
    const before = await counts();
    const response = await app.request(t.s.path, { method: 'POST', body, headers });
    const text = await response.text();
    const after = await counts();
    expect(response.status, `${header}: ${JSON.stringify(value)} → ${response.status} ${text}`).toBeLessThan(500);
    if (response.status !== 202) expect(after).toEqual(before);
  });

  it('audits a row no 202 stored, and a refused request whose key is stored, as violations', () => {
    // The audit can fail: a stored row that no receipt claims, and a refused request's key among the rows.
    const plan: Plan = { kind: 'valid', note: '', method: 'POST', path: '/', headers: [], body: null, key: 'k1' };
    const refused: Sent = { index: 7, plan, answer: { status: 401, retryAfter: null, text: '', json: { error: 'bad-signature' } } };
    expect(audit([refused], [{ id: 1, delivery_key: 'k1', provider: 'github' }])).toEqual([
      expect.stringContaining('was stored by no 202; carried by #7'),
      expect.stringContaining('#7 valid () answered 401, yet its delivery key is stored'),
    ]);
  });
});
