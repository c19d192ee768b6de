// The Worker's two paths to PostgreSQL (server/worker-database.ts), run in
// Node against the local stand-ins: which path the bindings choose, that each
// keeps a PostgreSQL error's SQLSTATE, and that an unreachable, hanging or
// failing database rejects in bounded time with no SQLSTATE, which the edge
// answers 503 (db/database.ts classifyDatabaseError). The same paths run
// inside workerd in cloudflare-worker.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyDatabaseError, DatabaseUnavailableError, type Database } from '../../db/database.js';
import { readTimeoutMs, withDeadline } from '../../server/database-deadline.js';
import { corkable } from '../../server/corkable-socket.js';
import { createHyperdriveDatabase } from '../../server/hyperdrive-database.js';
import { createNeonHttpDatabase } from '../../server/neon-http-database.js';
import { chooseDatabasePath, createWorkerDatabase } from '../../server/worker-database.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startDelayProxy, type DelayProxy } from '../support/delay-proxy.js';
import { startHyperdriveStandIn, type HyperdriveStandIn } from '../support/hyperdrive-stand-in.js';
import { allowedTarget, startNeonHttpStandIn, type NeonHttpStandIn } from '../support/neon-http-stand-in.js';

const timeoutMs = 1_000;
/**
 * How late past its deadline a call may reject on a loaded machine: a bound
 * on "it gave up" (a hang would wait for the test's timeout), generous, never
 * a speed. That it was the deadline that gave up is told by the error's
 * message and the lower bound, not by how soon it came.
 */
const lateMarginMs = 10_000;

let db: TestDatabase;
let standIn: NeonHttpStandIn;
/** Between a path and PostgreSQL: stopped, hung or cut by the tests. */
let link: DelayProxy;
let hyperdrive: HyperdriveStandIn;
const deferred: Promise<unknown>[] = [];

function urlThrough(proxy: DelayProxy): string {
  const url = new URL(db.url);
  url.host = proxy.address;
  return url.href;
}

beforeAll(async () => {
  db = await createTestDatabase({ migrate: false });
  standIn = await startNeonHttpStandIn();
  const server = new URL(db.url);
  link = await startDelayProxy({ target: { host: server.hostname, port: Number(server.port || 5432) } });
  hyperdrive = await startHyperdriveStandIn({ upstream: urlThrough(link) });
});

afterAll(async () => {
  await Promise.all(deferred);
  await hyperdrive?.close();
  await standIn?.close();
  await link?.close();
  await db?.drop();
});

async function failure(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the statement to fail');
}

/** Rejects as unavailable (no SQLSTATE), within the deadline plus a generous margin; how long it took and the error. */
async function expectUnavailable(database: Database, sql = 'SELECT 1'): Promise<{ elapsed: number; error: unknown }> {
  const started = performance.now();
  const error = await failure(database.query(sql));
  const elapsed = performance.now() - started;
  expect(error).toBeInstanceOf(DatabaseUnavailableError);
  expect(error).not.toHaveProperty('code');
  expect(classifyDatabaseError(error)).toBe('database-unavailable');
  expect(elapsed).toBeLessThan(timeoutMs + lateMarginMs);
  return { elapsed, error };
}

async function withLink<T>(change: (proxy: DelayProxy) => Promise<void> | void, work: () => Promise<T>): Promise<T> {
  await change(link);
  try {
    return await work();
  } finally {
    link.mode = 'pass';
    link.cut();
    await link.start();
  }
}

describe('the path the bindings choose', () => {
  it('prefers a Hyperdrive binding, else DATABASE_URL over Neon HTTP, else none', () => {
    const hyperdriveBinding = { connectionString: 'postgres://u:p@abc.hyperdrive.local:5432/db' };
    expect(chooseDatabasePath({ HYPERDRIVE: hyperdriveBinding, DATABASE_URL: 'postgres://neon' }))
      .toEqual({ kind: 'hyperdrive', connectionString: hyperdriveBinding.connectionString });
    expect(chooseDatabasePath({ DATABASE_URL: 'postgres://u:p@ep-x.neon.tech/db' }))
      .toEqual({ kind: 'neon-http', connectionString: 'postgres://u:p@ep-x.neon.tech/db' });
    expect(chooseDatabasePath({ DATABASE_URL: 'postgres://u@127.0.0.1/db', NEON_HTTP_ENDPOINT: 'http://127.0.0.1:4444/sql' }))
      .toMatchObject({ kind: 'neon-http', fetchEndpoint: 'http://127.0.0.1:4444/sql' });
    expect(chooseDatabasePath({ HYPERDRIVE: 'not a binding', DATABASE_URL: '' })).toEqual({ kind: 'unconfigured' });
  });

  it('answers every statement as unavailable when nothing is configured', async () => {
    const database = createWorkerDatabase({ kind: 'unconfigured' }, { timeoutMs: undefined, defer: () => {} });
    const error = await failure(database.query('SELECT 1'));
    expect(classifyDatabaseError(error)).toBe('database-unavailable');
    expect((error as Error).message).toMatch(/HYPERDRIVE|DATABASE_URL/);
  });

  it('reads WHARF_DATABASE_TIMEOUT_MS, else 5 s', () => {
    expect(readTimeoutMs('2500')).toBe(2500);
    for (const value of [undefined, '', '0', '-1', '1.5', 'soon']) expect(readTimeoutMs(value)).toBe(5_000);
  });
});

describe('withDeadline', () => {
  it('rejects at the deadline and aborts the work, even work that ignores its signal', async () => {
    let signal: AbortSignal | undefined;
    const started = performance.now();
    const error = await failure(withDeadline(100, (s) => {
      signal = s;
      return new Promise(() => {});
    }));
    expect(error).toBeInstanceOf(DatabaseUnavailableError);
    expect((error as Error).message).toBe('no answer from the database within 100 ms');
    expect(performance.now() - started).toBeGreaterThanOrEqual(99);
    expect(performance.now() - started).toBeLessThan(100 + lateMarginMs);
    expect(signal?.aborted).toBe(true);
  });

  it('starts a lazy thenable once', async () => {
    let runs = 0;
    const lazy = { then: (resolve: (value: string) => void) => { runs += 1; resolve('done'); } };
    // The cast stands for the Neon driver's NeonQueryPromise, a thenable that runs its query per then().
    expect(await withDeadline(1_000, () => lazy as unknown as Promise<string>)).toBe('done');
    expect(runs).toBe(1);
  });
});

describe('Neon HTTP (against the /sql stand-in)', () => {
  const neonDatabase = (connectionString = db.url, fetchEndpoint = standIn.endpoint) =>
    createNeonHttpDatabase({ connectionString, fetchEndpoint, timeoutMs });

  it('answers rows typed as pg types them, sending each statement once', async () => {
    const before = standIn.statements;
    const { rows } = await neonDatabase().query<{ n: number; j: object; b: string; a: string[] }>(
      'SELECT $1::int + 1 AS n, $2::jsonb AS j, 5::bigint AS b, $3::text[] AS a', [41, '{"k":[1]}', ['x', 'y,z']]);
    expect(rows).toEqual([{ n: 42, j: { k: [1] }, b: '5', a: ['x', 'y,z'] }]);
    expect(standIn.statements - before).toBe(1);
  });

  it('keeps a PostgreSQL error with its SQLSTATE (WH409, 22003)', async () => {
    const database = neonDatabase();
    const routeChanged = await failure(database.query(
      "DO $$ BEGIN RAISE EXCEPTION 'route changed' USING ERRCODE = 'WH409'; END $$"));
    expect(routeChanged).toMatchObject({ code: 'WH409' });
    expect(classifyDatabaseError(routeChanged)).toBe('route-changed');
    const overflow = await failure(database.query('SELECT $1::numeric AS n', ['1e999999']));
    expect(overflow).toMatchObject({ code: '22003' });
    expect(classifyDatabaseError(overflow)).toBe('database-error');
  });

  it('is unavailable when the endpoint cannot be reached, or the database behind it', async () => {
    const closed = await startDelayProxy({ target: { host: '127.0.0.1', port: 9 } });
    await closed.stop();
    await expectUnavailable(neonDatabase(db.url, `http://${closed.address}/sql`));
    await expectUnavailable(neonDatabase(urlThrough(closed)));
  });

  it('gives up at the deadline when the database does not answer', async () => {
    const database = neonDatabase(urlThrough(link));
    await database.query('SELECT 1');
    const { elapsed, error } = await withLink((proxy) => { proxy.mode = 'hang'; }, () => expectUnavailable(database));
    expect((error as Error).message).toBe(`no answer from the database within ${timeoutMs} ms`);
    expect(elapsed).toBeGreaterThanOrEqual(timeoutMs - 50);
  });

  it('the stand-in reaches loopback databases only', async () => {
    expect(allowedTarget('postgres://u@127.0.0.1:5432/db')).toBe('127.0.0.1');
    expect(allowedTarget('postgresql://u@[::1]:5432/db')).toBe('::1');
    for (const target of ['postgres://u@10.0.0.1/db', 'postgres://u@db.example.com/db', 'http://127.0.0.1/db', 'nonsense', undefined]) {
      expect(allowedTarget(target)).toBeUndefined();
    }
    const response = await fetch(standIn.endpoint, {
      method: 'POST', body: JSON.stringify({ query: 'SELECT 1', params: [] }),
      headers: { 'Neon-Connection-String': 'postgres://u:p@db.example.com:5432/db' },
    });
    expect(response.status).toBe(403);
  });
});

describe('corkable', () => {
  it("gives a socket without cork one write per statement, as pg's cork does for Node's sockets", () => {
    const writes: Uint8Array[] = [];
    const socket: Parameters<typeof corkable>[0] = { write: (data) => { writes.push(data as Uint8Array); return true; } };
    corkable(socket);
    socket.write(Buffer.from('P'));
    socket.cork!();
    for (const message of ['B', 'D', 'E', 'S']) socket.write(Buffer.from(message));
    expect(writes).toHaveLength(1);
    socket.uncork!();
    expect(writes.map((chunk) => Buffer.from(chunk).toString())).toEqual(['P', 'BDES']);
    const nodeLike = { write: () => true, cork: () => {}, uncork: () => {} };
    const { cork } = nodeLike;
    corkable(nodeLike);
    expect(nodeLike.cork).toBe(cork);
  });
});

describe('pg through Hyperdrive (against the Hyperdrive stand-in)', () => {
  const hyperdriveDatabase = (connectionString = hyperdrive.connectionString) =>
    createHyperdriveDatabase({ connectionString, timeoutMs, defer: (work) => deferred.push(work) });

  it('answers rows, and closes its client after answering, not before', async () => {
    const closes: Promise<unknown>[] = [];
    const database = createHyperdriveDatabase({
      connectionString: hyperdrive.connectionString, timeoutMs, defer: (work) => closes.push(work),
    });
    const { rows } = await database.query('SELECT $1::int + 1 AS n, $2::jsonb AS j', [1, '{"a":true}']);
    expect(rows).toEqual([{ n: 2, j: { a: true } }]);
    expect(closes).toHaveLength(1);
    await Promise.all(closes);
  });

  it('keeps a PostgreSQL error with its SQLSTATE (WH409, 22003)', async () => {
    const database = hyperdriveDatabase();
    const routeChanged = await failure(database.query(
      "DO $$ BEGIN RAISE EXCEPTION 'route changed' USING ERRCODE = 'WH409'; END $$"));
    expect(classifyDatabaseError(routeChanged)).toBe('route-changed');
    expect(await failure(database.query('SELECT $1::numeric AS n', ['1e999999']))).toMatchObject({ code: '22003' });
  });

  it("reads Hyperdrive's own 58000 (the database unreachable) as unavailable", async () => {
    await withLink((proxy) => proxy.stop(), async () => {
      hyperdrive.drain();
      const error = await failure(hyperdriveDatabase().query('SELECT 1'));
      expect(error).toBeInstanceOf(DatabaseUnavailableError);
      expect((error as Error).cause).toMatchObject({ code: '58000' });
      expect(classifyDatabaseError(error)).toBe('database-unavailable');
    });
  });

  it('is unavailable when Hyperdrive cannot be reached, hangs, or drops the connection mid-statement', async () => {
    const closed = await startDelayProxy({ target: { host: '127.0.0.1', port: 9 } });
    await closed.stop();
    await expectUnavailable(hyperdriveDatabase(urlThrough(closed)));

    const direct = hyperdriveDatabase(urlThrough(link));
    await withLink((proxy) => { proxy.mode = 'hang'; }, () => expectUnavailable(direct));
    const statement = direct.query('SELECT pg_sleep(5)');
    await new Promise((resolve) => setTimeout(resolve, 200));
    link.cut();
    const error = await failure(statement);
    expect(error).toBeInstanceOf(DatabaseUnavailableError);
    expect(classifyDatabaseError(error)).toBe('database-unavailable');
  });
});
