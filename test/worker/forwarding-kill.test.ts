// `kill -9` of a `wharf worker` process (forwarding on by default) in the
// middle of a request: after its lease expires another host's reaper gives
// the delivery back and it arrives again under the same webhook-id; nothing
// the killed host had finished is sent twice, and the scope's order holds.
import { randomBytes } from 'node:crypto';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { encryptSecret, generateKeyRingEntry, parseKeyRing } from '../../db/secret-box.js';
import { createWorker, type Worker } from '../../worker/create-worker.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { admitDelivery, buildConnection } from '../support/inbox-fixtures.js';
import { setSettings, waitFor } from '../support/worker-inbox.js';
import { fixtureHandlers, killSpawnedWorkers, spawnWorker } from '../support/worker-process.js';

const workspace = 1;
const source = 'https://hooks.example.test';
let db: TestDatabase;
let server: Server;
let survivor: Worker | undefined;
const held: ServerResponse[] = [];

interface Arrival { webhookId: string; eventId: number; subject: string; attempt: number; verified: boolean }
const arrivals: Arrival[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  await setSettings(db.pool, { lease: '2 seconds', base_delay: '100 milliseconds', poll_every: '500 milliseconds' });
});

afterAll(async () => {
  await killSpawnedWorkers();
  await survivor?.stop();
  for (const res of held) res.destroy();
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  await db?.drop();
});

it('a forwarder killed mid-request: the delivery arrives again with the same webhook-id, and nothing else twice', async () => {
  const secretKeys = generateKeyRingEntry('k1');
  const ring = (await parseKeyRing(secretKeys))!;
  const secret = `whsec_${randomBytes(24).toString('base64')}`;
  let holdFirstOf: number | undefined;

  server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      let verified = true;
      try {
        new Webhook(secret).verify(body, req.headers as Record<string, string>);
      } catch {
        verified = false;
      }
      const arrival = {
        webhookId: String(req.headers['webhook-id']), eventId: Number(req.headers['wharf-event-id']),
        subject: String(req.headers['wharf-subject']), attempt: Number(req.headers['wharf-attempt']), verified,
      };
      arrivals.push(arrival);
      // The first request for the held event never gets an answer: its host is killed meanwhile.
      if (arrival.eventId === holdFirstOf && arrivals.filter((a) => a.eventId === holdFirstOf).length === 1) held.push(res);
      else res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const connectionId = await buildConnection(db.pool, { workspace, provider: 'generic', source, subjects: ['held', 'free'] });
  const { rows } = await db.pool.query<{ d: { id: number } }>('SELECT wharf.create_destination($1, $2) AS d',
    // A lease covers the destination's timeout and 5 s (13 s here): long enough that the held
    // request is still open when its host is killed, short enough for the reaper's wait.
    [workspace, { name: 'app', url: `${base}/hook`, ordered: true, timeout_ms: 8000 }]);
  const destinationId = String(rows[0]!.d.id);
  await db.pool.query('SELECT wharf.set_destination_secret($1, $2, $3)',
    [workspace, destinationId, await encryptSecret(ring, { destinationId }, secret)]);
  await db.pool.query('SELECT wharf.create_destination_rule($1, $2)', [workspace, { destination_id: Number(destinationId), forward_only: true }]);

  const host = spawnWorker({
    databaseUrl: db.url,
    args: ['--handlers', fixtureHandlers('by-type.ts'), '--forward-allow-private', '--reap-every', '500ms', '--no-alerts'],
    env: { WHARF_SECRET_KEYS: secretKeys, HANDLES: '' },
  });
  await waitFor(async () => host.output().includes('"msg":"worker started"'), 30_000, 'the worker process');

  const ids: number[] = [];
  for (const [index, subject] of ['held', 'held', 'held', 'free', 'free', 'free'].entries()) {
    const admitted = await admitDelivery(db.pool, {
      provider: 'generic', source, deliveryKey: `kill-${process.pid}-${index}`, eventType: 'test',
      route: { connection_id: connectionId }, subjects: [subject], payload: { index },
    });
    ids.push(Number(admitted.id));
    if (index === 0) holdFirstOf = ids[0];
  }
  const doneCount = async (): Promise<number> => {
    const { rows: done } = await db.pool.query<{ count: number }>(
      `SELECT count(*)::int AS count FROM wharf.destination_delivery WHERE destination_id = $1 AND state = 'DONE'`, [destinationId]);
    return done[0]!.count;
  };
  // The held request is open, the free scope is delivered and recorded.
  await waitFor(async () => held.length === 1 && (await doneCount()) === 3, 30_000, 'the held request and the free scope');
  host.child.kill('SIGKILL');
  expect(await host.exited).toMatchObject({ signal: 'SIGKILL' });

  survivor = createWorker({
    connectionString: db.url, handlers: {}, logger: pino({ level: 'silent' }),
    settings: { reapEvery: 500 },
    forward: { secretKeys: ring, addresses: { allowPrivate: true } },
  });
  await survivor.start();
  await waitFor(async () => (await doneCount()) === 6, 60_000, 'every delivery DONE');

  expect(arrivals.every((arrival) => arrival.verified)).toBe(true);
  const byEvent = (id: number) => arrivals.filter((arrival) => arrival.eventId === id);
  // The held one twice, under one webhook-id, its second attempt counted as such.
  expect(byEvent(ids[0]!).map((arrival) => arrival.attempt)).toEqual([1, 2]);
  expect(new Set(byEvent(ids[0]!).map((arrival) => arrival.webhookId)).size).toBe(1);
  // Every other exactly once.
  for (const id of ids.slice(1)) expect(byEvent(id)).toHaveLength(1);
  // The held scope's order: its later events only after the held one's redelivery.
  const heldOrder = arrivals.filter((arrival) => arrival.subject === 'held').map((arrival) => arrival.eventId);
  expect(heldOrder).toEqual([ids[0], ids[0], ids[1], ids[2]]);
  const { rows: reaped } = await db.pool.query<{ ended: string; error_class: string | null }>(
    `SELECT a.ended, a.error_class FROM wharf.delivery_attempt a JOIN wharf.destination_delivery q ON q.id = a.delivery_id
      WHERE q.event_id = $1 ORDER BY a.ended_at`, [ids[0]]);
  expect(reaped).toEqual([{ ended: 'expired', error_class: 'LeaseExpired' }, { ended: 'handled', error_class: null }]);
}, 150_000);
