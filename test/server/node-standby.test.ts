// The Node receiver whose database URL names a server that is a standby now
// (a DNS name that has not moved yet): the admission's write answers 25006,
// and the provider gets 503 with Retry-After, never a 500, nothing logged as
// a failure of Wharf's. Once that server is promoted, the same receiver
// stores the same delivery (the provider's retry).
import { afterAll, beforeAll, expect, it } from 'vitest';
import pg from 'pg';
import { Registry } from 'prom-client';
import { migrate } from '../../db/migrate.js';
import { startNodeServer, type NodeServer } from '../../server/node.js';
import { edgeEnv, freshId, newDeliveryKey, recorder, scenario } from '../support/edge-fixtures.js';
import { createOwnPostgres, type OwnPostgres } from '../support/own-postgres.js';
import { waitFor } from '../support/worker-inbox.js';

let primary: OwnPostgres;
let standby: OwnPostgres;
let server: NodeServer | undefined;

beforeAll(async () => {
  primary = await createOwnPostgres({ binaries: 'system', settings: { wal_level: 'replica' } });
  await primary.start();
  await migrate({ databaseUrl: primary.url });
  standby = await createOwnPostgres({ binaries: 'system', standbyOf: primary });
  await standby.start();
}, 120_000);

afterAll(async () => {
  await server?.close().catch(() => {});
  await standby?.stop();
  await primary?.stop();
}, 60_000);

it('answers 503 with Retry-After while its database is a standby, and stores the delivery once it is promoted', async () => {
  const seeding = new pg.Pool({ connectionString: primary.url, max: 1 });
  const sender = await scenario(seeding, 'generic', freshId());
  const { rows } = await seeding.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
  await seeding.end();
  // The standby has the connection once it has replayed what the primary wrote (it may lag on a loaded machine).
  const onStandby = new pg.Pool({ connectionString: standby.url, max: 1 });
  await waitFor(async () => (await onStandby.query<{ caught_up: boolean }>(
    'SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS caught_up', [rows[0]!.lsn])).rows[0]!.caught_up, 30_000, 'the standby to replay the seeding');
  await onStandby.end();
  const log = recorder();
  server = await startNodeServer({ databaseUrl: standby.url, env: edgeEnv, registry: new Registry(), logger: log.logger });
  const key = newDeliveryKey();
  const body = JSON.stringify(sender.payload(key));
  const post = async (): Promise<Response> => fetch(`${server!.url}${sender.path}`, {
    method: 'POST', body, signal: AbortSignal.timeout(20_000),
    headers: { 'content-type': 'application/json', ...(await sender.sign(body, { deliveryKey: key })) },
  });

  for (let attempt = 0; attempt < 3; attempt += 1) {
    const refused = await post();
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).not.toBeNull();
  }
  expect(log.lines.filter((line) => line.level === 'error')).toEqual([]);

  await primary.halt();
  await standby.promote();
  const stored = await post();
  expect(stored.status).toBe(202);
  expect(((await stored.json()) as { events: Array<{ outcome: string }> }).events).toMatchObject([{ outcome: 'stored' }]);
}, 60_000);
