// Forwarding end to end: events admitted through wharf.admit to a workspace
// with destinations and rules reach a real HTTP receiver that verifies every
// request with the Standard Webhooks library, sent by real forwarders
// (createWorker with forwarding) against real PostgreSQL. Nothing here
// depends on speed: assertions are on what arrived, in which order, and on
// the database's own claim times.
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { encryptSecret, generateKeyRingEntry, parseKeyRing, type KeyRing } from '../../db/secret-box.js';
import { createWorker, type Worker } from '../../worker/create-worker.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { admitDelivery, buildConnection } from '../support/inbox-fixtures.js';
import { setSettings, waitFor } from '../support/worker-inbox.js';

const workspace = 1;
const source = 'https://hooks.example.test';
let db: TestDatabase;
let ring: KeyRing;
let secretKeys: string;
let connectionId: number;
const workers: Worker[] = [];

/** What the receiver got: one entry per request, verified or not. */
interface Arrival {
  path: string;
  webhookId: string;
  eventId: string;
  subject: string;
  attempt: number;
  verified: boolean;
  body: string;
  headers: IncomingMessage['headers'];
}

type Answer = (arrival: Arrival, res: ServerResponse) => void;

let server: Server;
let base: string;
const arrivals: Arrival[] = [];
/** Per path: the destination's secret and how it answers (200 by default). */
const endpoints = new Map<string, { secret: string; answer?: Answer }>();

beforeAll(async () => {
  db = await createTestDatabase();
  secretKeys = generateKeyRingEntry('t1');
  ring = (await parseKeyRing(secretKeys))!;
  await setSettings(db.pool, { base_delay: '100 milliseconds', max_delay: '1 second', poll_every: '1 second' });
  server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      const endpoint = endpoints.get(req.url!);
      let verified = false;
      try {
        if (endpoint) {
          new Webhook(endpoint.secret).verify(body, req.headers as Record<string, string>);
          verified = true;
        }
      } catch {
        verified = false;
      }
      const arrival: Arrival = {
        path: req.url!, webhookId: String(req.headers['webhook-id']), eventId: String(req.headers['wharf-event-id']),
        subject: String(req.headers['wharf-subject']), attempt: Number(req.headers['wharf-attempt']), verified, body,
        headers: req.headers,
      };
      arrivals.push(arrival);
      if (endpoint?.answer) endpoint.answer(arrival, res);
      else res.writeHead(endpoint ? 200 : 404).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  connectionId = await buildConnection(db.pool, { workspace, provider: 'github', source, subjects: [] });
});

afterEach(async () => {
  await Promise.all(workers.splice(0).map((worker) => worker.stop()));
  // Each test's destinations go, and their deliveries with them.
  await db.pool.query('DELETE FROM wharf.destination');
  arrivals.length = 0;
  endpoints.clear();
});

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  await db?.drop();
});

/** A destination of the workspace with a signing secret sealed by the key ring, and a rule routing every event of the connection to it. */
async function destination(name: string, spec: Record<string, unknown> = {}, answer?: Answer): Promise<string> {
  const path = `/${name}`;
  const secret = `whsec_${randomBytes(24).toString('base64')}`;
  const client = await db.pool.connect();
  let id: string;
  try {
    await client.query('BEGIN');
    const { rows } = await client.query<{ d: { id: number } }>('SELECT wharf.create_destination($1, $2) AS d',
      [workspace, { name, url: `${base}${path}`, ...spec }]);
    id = String(rows[0]!.d.id);
    await client.query('SELECT wharf.set_destination_secret($1, $2, $3)', [workspace, id, await encryptSecret(ring, { destinationId: id }, secret)]);
    await client.query('SELECT wharf.create_destination_rule($1, $2)', [workspace, { destination_id: Number(id), forward_only: true }]);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  } finally {
    client.release();
  }
  endpoints.set(path, { secret, ...(answer ? { answer } : {}) });
  return id;
}

let keys = 0;
/** Admits events in order, one per statement (ids follow it); their event ids. */
async function admit(events: { subject: string; payload?: unknown; headers?: Record<string, string> }[]): Promise<string[]> {
  const ids: string[] = [];
  for (const event of events) {
    await db.pool.query('SELECT wharf.subscribe($1, $2)', [connectionId, event.subject]);
    const admitted = await admitDelivery(db.pool, {
      provider: 'github', source, deliveryKey: `fwd-${process.pid}-${(keys += 1)}`, eventType: 'push',
      route: { connection_id: connectionId }, subjects: [event.subject], payload: event.payload ?? { n: keys },
      ...(event.headers ? { headers: event.headers } : {}),
    });
    ids.push(admitted.id);
  }
  return ids;
}

/** A forwarding host on a pool of its own. */
async function forwarder(options: { concurrency?: number } = {}): Promise<Worker> {
  const worker = createWorker({
    connectionString: db.url,
    handlers: {},
    logger: pino({ level: 'silent' }),
    settings: { reapEvery: 1_000, drainTimeout: 2_000 },
    forward: { secretKeys: ring, addresses: { allowPrivate: true }, ...(options.concurrency ? { concurrency: options.concurrency } : {}) },
  });
  workers.push(worker);
  await worker.start();
  return worker;
}

async function deliveryStates(destinationId: string): Promise<Record<string, number>> {
  const { rows } = await db.pool.query<{ state: string; count: number }>(
    'SELECT state, count(*)::int AS count FROM wharf.destination_delivery WHERE destination_id = $1 GROUP BY state', [destinationId]);
  return Object.fromEntries(rows.map((row) => [row.state, row.count]));
}

function waitForDone(destinationId: string, count: number, timeout = 30_000): Promise<true> {
  return waitFor(async () => (await deliveryStates(destinationId)).DONE === count || undefined, timeout, `${count} deliveries DONE`);
}

it('every event arrives verified, its payload as stored, the provider\'s headers kept, and its webhook-id the same on a retry and a replay', async () => {
  const tried = new Set<string>();
  // Each delivery's first attempt answers 503, the rest 200.
  const id = await destination('retrying', {}, (arrival, res) => {
    const first = !tried.has(arrival.webhookId);
    tried.add(arrival.webhookId);
    res.writeHead(first ? 503 : 200).end();
  });
  await forwarder();
  const big = '{"amount": 12345678901234567890123.5, "id": 98765432109876543210}';
  const events = await admit([
    { subject: 'repo:a', headers: { 'x-github-event': 'push', 'x-github-delivery': 'd-1' } },
    { subject: 'repo:a' },
    { subject: 'repo:b' },
  ]);
  // A payload with numbers no double holds, admitted as raw JSON text.
  await db.pool.query('SELECT wharf.subscribe($1, $2)', [connectionId, 'repo:big']);
  const { rows } = await db.pool.query<{ receipt: { events: { event_id: number }[] } }>(
    'SELECT wharf.admit($1, $2, $3, $4, $5, $6, $7, $8) AS receipt',
    ['github', source, `fwd-big-${process.pid}`, 'push', { connection_id: connectionId }, ['repo:big'], big, {}]);
  events.push(String(rows[0]!.receipt.events[0]!.event_id));
  await waitForDone(id, 4);

  expect(arrivals.every((arrival) => arrival.verified)).toBe(true);
  for (const eventId of events) {
    const mine = arrivals.filter((arrival) => arrival.eventId === eventId);
    expect(mine.map((arrival) => arrival.attempt)).toEqual([1, 2]);
    expect(new Set(mine.map((arrival) => arrival.webhookId)).size).toBe(1);
    expect(mine[0]!.webhookId).toMatch(/^wd_\d+$/);
  }
  const bigArrival = arrivals.find((arrival) => arrival.eventId === events[3])!;
  expect(bigArrival.body).toContain('12345678901234567890123.5');
  expect(bigArrival.body).toContain('98765432109876543210');
  const { rows: stored } = await db.pool.query<{ payload: string }>('SELECT payload::text AS payload FROM wharf.provider_event WHERE id = $1', [events[3]]);
  expect(bigArrival.body).toBe(stored[0]!.payload);
  expect(arrivals.find((arrival) => arrival.eventId === events[0])!.headers).toMatchObject({
    'x-github-event': 'push', 'x-github-delivery': 'd-1', 'wharf-provider': 'github', 'wharf-event-type': 'push', 'wharf-subject': 'repo:a',
  });

  // A replay of a delivered event's delivery (made DEAD here by hand: the route there is a 400) keeps its webhook-id.
  const { rows: [delivery] } = await db.pool.query<{ id: string }>(
    'SELECT id FROM wharf.destination_delivery WHERE destination_id = $1 AND event_id = $2', [id, events[0]]);
  await db.pool.query(`UPDATE wharf.destination_delivery SET state = 'DEAD', dead_at = now() WHERE id = $1`, [delivery!.id]);
  const before = arrivals.length;
  const { rows: [replayed] } = await db.pool.query<{ ok: boolean }>('SELECT wharf.replay_delivery($1, $2, $3) AS ok', [workspace, delivery!.id, 'test']);
  expect(replayed!.ok).toBe(true);
  await waitForDone(id, 4);
  await waitFor(async () => arrivals.length > before || undefined, 20_000, 'the replay');
  const replay = arrivals.at(-1)!;
  expect(replay).toMatchObject({ webhookId: `wd_${delivery!.id}`, eventId: events[0], verified: true });
});

it('a 400 is a dead letter at once; a 410 pauses the destination, whose delivery waits', async () => {
  const bad = await destination('bad', {}, (_arrival, res) => res.writeHead(400).end('{"error":"no such tenant"}'));
  const gone = await destination('gone', {}, (_arrival, res) => res.writeHead(410).end());
  await forwarder();
  await admit([{ subject: 'repo:c' }]);
  await waitFor(async () => (await deliveryStates(bad)).DEAD === 1 || undefined, 20_000, 'the 400 to be dead');
  await waitFor(async () => {
    const { rows } = await db.pool.query<{ state: string; paused_reason: string }>('SELECT state, paused_reason FROM wharf.destination WHERE id = $1', [gone]);
    return rows[0]?.state === 'PAUSED' && rows[0].paused_reason === 'gone' || undefined;
  }, 20_000, 'the 410 to pause its destination');
  expect(await deliveryStates(gone)).toEqual({ QUEUED: 1 });
  const { rows: attempts } = await db.pool.query<{ ended: string; status: number; error_class: string; response: string | null }>(
    'SELECT ended, status, error_class, response FROM wharf.delivery_attempt WHERE destination_id = $1', [bad]);
  expect(attempts).toEqual([{ ended: 'permanent', status: 400, error_class: 'HTTP:400', response: '{"error":"no such tenant"}' }]);
});

it('keeps order per scope with two forwarders and eight scopes', async () => {
  const id = await destination('ordered', { ordered: true, max_in_flight: 16 }, (_arrival, res) => {
    // A little jitter, so the two hosts interleave differently.
    setTimeout(() => res.writeHead(200).end(), Math.random() * 4);
  });
  await forwarder({ concurrency: 8 });
  await forwarder({ concurrency: 8 });
  const scopes = Array.from({ length: 8 }, (_, index) => `repo:scope-${index}`);
  const events: { subject: string }[] = [];
  for (let round = 0; round < 8; round += 1) for (const subject of scopes) events.push({ subject });
  await admit(events);
  await waitForDone(id, 64, 60_000);

  expect(arrivals).toHaveLength(64);
  expect(arrivals.every((arrival) => arrival.verified)).toBe(true);
  for (const subject of scopes) {
    const order = arrivals.filter((arrival) => arrival.subject === subject).map((arrival) => Number(arrival.eventId));
    expect(order).toHaveLength(8);
    expect(order).toEqual([...order].sort((a, b) => a - b));
  }
});

it('a rate limit of 20/s holds across two forwarders', async () => {
  const id = await destination('limited', { ordered: false, rate_limit: 20, rate_period: 'second', max_in_flight: 50 });
  await forwarder();
  await forwarder();
  await admit(Array.from({ length: 60 }, (_, index) => ({ subject: `repo:r${index % 6}` })));
  await waitForDone(id, 60, 60_000);
  // The claims' times on the database's clock: the limiter's own.
  const { rows } = await db.pool.query<{ at: number }>(
    `SELECT extract(epoch FROM started_at)::float8 AS at FROM wharf.delivery_attempt
      WHERE destination_id = $1 AND ended = 'handled' ORDER BY started_at`, [id]);
  const times = rows.map((row) => row.at);
  expect(times).toHaveLength(60);
  // A full bucket (20) at once, then 20 a second: the other 40 need at least 2 s, however fast the hosts.
  expect(times.at(-1)! - times[0]!).toBeGreaterThanOrEqual(2 - 0.05);
  // No window of one second holds more than the bucket plus a second's refill (and one for rounding).
  for (let i = 0; i < times.length; i += 1) {
    const inWindow = times.filter((time) => time >= times[i]! && time < times[i]! + 1).length;
    expect(inWindow).toBeLessThanOrEqual(20 + 20 + 1);
  }
  // Past the first bucket, the measured rate is at most 20/s + 1.
  expect((times.length - 20) / (times.at(-1)! - times[0]!)).toBeLessThanOrEqual(21);
});

it('a destination answering 503 opens its breaker while another keeps receiving; after it recovers, everything arrives in order', async () => {
  let failing = true;
  const broken = await destination('broken', { breaker_failures: 3, ordered: true }, (_arrival, res) => {
    res.writeHead(failing ? 503 : 200).end();
  });
  const healthy = await destination('healthy', { ordered: true });
  await forwarder();
  const events = await admit(Array.from({ length: 10 }, (_, index) => ({ subject: `repo:h${index % 2}` })));
  await waitForDone(healthy, 10);
  await waitFor(async () => {
    const { rows } = await db.pool.query<{ state: string }>('SELECT state FROM wharf.destination WHERE id = $1', [broken]);
    return rows[0]?.state === 'BREAKER_OPEN' || undefined;
  }, 30_000, 'the breaker to open');
  // Its deliveries wait; none is dead-lettered for it; an issue says so.
  expect((await deliveryStates(broken)).DEAD).toBeUndefined();
  const { rows: issues } = await db.pool.query<{ error_class: string }>(
    `SELECT error_class FROM wharf.issue WHERE fingerprint = $1 ORDER BY error_class`, [`destination:${broken}`]);
  expect(issues.map((issue) => issue.error_class)).toEqual(['DestinationBreakerOpen', 'HTTP:503']);
  const healthyArrivals = arrivals.filter((arrival) => arrival.path === '/healthy');
  expect(healthyArrivals.map((arrival) => arrival.eventId).sort()).toEqual([...events].sort());

  failing = false;
  // A probe closes the breaker; the rest follow, each scope in order.
  await waitForDone(broken, 10, 60_000);
  const { rows: [state] } = await db.pool.query<{ state: string }>('SELECT state FROM wharf.destination WHERE id = $1', [broken]);
  expect(state!.state).toBe('ACTIVE');
  const delivered = arrivals.filter((arrival) => arrival.path === '/broken');
  for (const subject of ['repo:h0', 'repo:h1']) {
    // First receipt of each event, in arrival order: the scope's order.
    const firsts: number[] = [];
    for (const arrival of delivered) {
      const eventId = Number(arrival.eventId);
      if (arrival.subject === subject && !firsts.includes(eventId)) firsts.push(eventId);
    }
    expect(firsts).toHaveLength(5);
    expect(firsts).toEqual([...firsts].sort((a, b) => a - b));
  }
});

it('signs with both secrets while a rotation overlaps, and sends the destination\'s sealed credentials', async () => {
  const id = await destination('rotated');
  const oldSecret = endpoints.get('/rotated')!.secret;
  const newSecret = `whsec_${randomBytes(24).toString('base64')}`;
  await db.pool.query('SELECT wharf.set_destination_secret($1, $2, $3)', [workspace, id, await encryptSecret(ring, { destinationId: id }, newSecret)]);
  await db.pool.query('SELECT wharf.set_destination_credentials($1, $2, $3, $4)',
    [workspace, id, await encryptSecret(ring, { destinationId: id }, JSON.stringify({ type: 'bearer', token: 'tok_from_the_database' })), 'bearer']);
  await forwarder();
  await admit([{ subject: 'repo:rotated' }]);
  await waitForDone(id, 1);
  const arrival = arrivals.find((candidate) => candidate.path === '/rotated')!;
  // A receiver that still holds the old secret verifies, and so does one that holds the new one.
  for (const secret of [oldSecret, newSecret]) new Webhook(secret).verify(arrival.body, arrival.headers as Record<string, string>);
  expect(String(arrival.headers['webhook-signature']).split(' ')).toHaveLength(2);
  expect(arrival.headers.authorization).toBe('Bearer tok_from_the_database');
  // Nothing the database recorded of the attempt holds the token.
  const { rows } = await db.pool.query('SELECT * FROM wharf.delivery_attempt WHERE destination_id = $1', [id]);
  expect(JSON.stringify(rows)).not.toContain('tok_from_the_database');
});
