// The forwarder runs as the worker role with exactly the GRANTs docs/sql.md
// documents: it claims, sends, records a success and a failure, and reaps,
// and the role still reads no table (the secrets it opens come only through
// claim_deliveries).
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { encryptSecret, generateKeyRingEntry, parseKeyRing } from '../../db/secret-box.js';
import { createWorker, type Worker } from '../../worker/create-worker.js';
import { reapDeliveries } from '../../worker/sql/reap-deliveries.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { admitDelivery, buildConnection } from '../support/inbox-fixtures.js';
import { waitFor } from '../support/worker-inbox.js';

const workspace = 1;
const source = 'https://hooks.example.test';
let db: TestDatabase;
let server: Server;
let rolePool: pg.Pool;
let worker: Worker | undefined;
const suffix = randomBytes(4).toString('hex');
const password = randomBytes(12).toString('hex');

beforeAll(async () => {
  db = await createTestDatabase();
  const guide = await readFile(new URL('../../docs/sql.md', import.meta.url), 'utf8');
  const grants = /<!-- roles:begin -->\s*```sql\n([\s\S]*?)```\s*<!-- roles:end -->/.exec(guide)![1]!;
  const names = ['wharf_edge', 'wharf_worker', 'wharf_handler', 'wharf_operator'];
  for (const name of names) await db.pool.query(`CREATE ROLE ${name}_${suffix} LOGIN PASSWORD '${password}'`);
  let renamed = grants;
  for (const name of names) renamed = renamed.replaceAll(new RegExp(`\\b${name}\\b`, 'g'), `${name}_${suffix}`);
  await db.pool.query(renamed);
  const url = new URL(db.url);
  url.username = `wharf_worker_${suffix}`;
  url.password = password;
  rolePool = new pg.Pool({ connectionString: url.toString(), max: 5 });
  rolePool.on('error', () => {});
});

afterAll(async () => {
  await worker?.stop();
  await rolePool?.end();
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  await db?.drop();
});

it('forwards as wharf_worker with the documented grants, and the role reads no destination table', async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(req.url === '/ok' ? 200 : 503).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const ring = (await parseKeyRing(generateKeyRingEntry('k1')))!;
  const connectionId = await buildConnection(db.pool, { workspace, provider: 'generic', source, subjects: ['s'] });
  const ids: Record<string, string> = {};
  for (const name of ['ok', 'failing']) {
    const { rows } = await db.pool.query<{ d: { id: number } }>('SELECT wharf.create_destination($1, $2) AS d',
      [workspace, { name, url: `${base}/${name}` }]);
    const id = String(rows[0]!.d.id);
    ids[name] = id;
    await db.pool.query('SELECT wharf.set_destination_secret($1, $2, $3)',
      [workspace, id, await encryptSecret(ring, { destinationId: id }, `whsec_${randomBytes(24).toString('base64')}`)]);
    await db.pool.query('SELECT wharf.create_destination_rule($1, $2)', [workspace, { destination_id: Number(id), forward_only: true }]);
  }
  await admitDelivery(db.pool, {
    provider: 'generic', source, deliveryKey: `role-${process.pid}`, eventType: 'test',
    route: { connection_id: connectionId }, subjects: ['s'], payload: {},
  });

  worker = createWorker({
    pool: rolePool, handlers: {}, logger: pino({ level: 'silent' }),
    forward: { secretKeys: ring, addresses: { allowPrivate: true }, pool: rolePool },
  });
  const forwarded: string[] = [];
  worker.on('forwarded', (delivery) => forwarded.push(`${delivery.destinationId}:${delivery.outcome}`));
  await worker.start();
  await waitFor(async () => forwarded.includes(`${ids.ok}:handled`) && forwarded.includes(`${ids.failing}:retried`) || undefined,
    20_000, 'a success and a failure recorded');

  // The reaper's statement too (its first round comes 1-3 s after the start: called here rather than waited for).
  await expect(reapDeliveries(rolePool)).resolves.toBe(0);
  await expect(rolePool.query('SELECT signing_secret FROM wharf.destination')).rejects.toMatchObject({ code: '42501' });
  await expect(rolePool.query('SELECT 1 FROM wharf.destination_delivery')).rejects.toMatchObject({ code: '42501' });
});
