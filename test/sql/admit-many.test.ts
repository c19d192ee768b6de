// wharf.admit_many admits an array as wharf.admit would admit its elements
// one after another (sql/80-admission.sql): random batches go into one
// database through admit_many and, element by element, into a twin through
// admit, and everything admission writes must come out the same. Then
// overlapping batches race from eight sessions while a workspace is
// suspended and resumed: no deadlock, the suspension is never starved, and
// no row is stored for the workspace after its suspension committed.
import { createHash } from 'node:crypto';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { fileSeed, Rng } from '../support/random.js';

const github = 'https://github.com';
const hooks = 'https://hooks.example.test';

interface Fixture {
  /** Connection ids by name; the same in both twins (made in one order). */
  connections: Record<string, number>;
}

/**
 * Workspaces 1-4: two GitHub App installations (one in a paused workspace),
 * a PAT that also subscribes (fan-out), a suspended connection, a
 * suspended workspace, and two connection-signed connections (one with
 * subject prefixes).
 */
async function makeFixture(db: pg.Pool): Promise<Fixture> {
  const one = async (sql: string, params: unknown[] = []) => Number(Object.values((await db.query(sql, params)).rows[0])[0]);
  for (const ws of [1, 2, 3, 4]) await db.query('SELECT wharf.upsert_workspace($1)', [ws]);
  const connections: Record<string, number> = {
    app1: await one(`SELECT wharf.upsert_connection(1, 'github', $1, 'app_installation', '100')`, [github]),
    app2: await one(`SELECT wharf.upsert_connection(2, 'github', $1, 'app_installation', '200')`, [github]),
    pat3: await one(`SELECT wharf.upsert_connection(3, 'github', $1, 'pat', 'p3')`, [github]),
    off1: await one(`SELECT wharf.upsert_connection(3, 'github', $1, 'pat', 'off')`, [github]),
    app4: await one(`SELECT wharf.upsert_connection(4, 'github', $1, 'app_installation', '400')`, [github]),
    gen1: await one(`SELECT wharf.upsert_connection(1, 'generic', $1, 'webhook', 'g1', '{"subject_prefixes": ["customer:"]}')`, [hooks]),
    gen2: await one(`SELECT wharf.upsert_connection(2, 'generic', $1, 'webhook', 'g2')`, [hooks]),
  };
  const subscribe = (name: string, subject: string) => db.query('SELECT wharf.subscribe($1, $2)', [connections[name], subject]);
  for (const subject of ['repo:acme/a', 'repo:acme/b', 'org:acme']) await subscribe('app1', subject);
  for (const subject of ['repo:acme/a', 'repo:beta/c']) await subscribe('app2', subject);
  await subscribe('pat3', 'repo:acme/b');
  await subscribe('off1', 'repo:acme/a');
  await subscribe('app4', 'repo:acme/a');
  for (const subject of ['customer:1', 'customer:2']) await subscribe('gen1', subject);
  for (const subject of ['customer:1', 'order:9']) await subscribe('gen2', subject);
  await db.query(`SELECT wharf.set_connection_state($1, 'SUSPENDED')`, [connections.off1]);
  await db.query(`SELECT wharf.set_workspace_state(2, 'PAUSED')`);
  await db.query(`SELECT wharf.set_workspace_state(4, 'SUSPENDED')`);
  return { connections };
}

interface Delivery {
  provider: string | null;
  source: string;
  delivery_key: string | null;
  event_type: string | null;
  route: unknown;
  subjects: string[];
  payload: unknown;
  headers: Record<string, string>;
  body_sha256: string | null;
}

/** The random batches' seed: printed on failure, WHARF_TEST_SEED replays it. */
const seed = fileSeed(import.meta.url);

/** Random deliveries over the fixture: duplicates by key and by body, refusals, drops, control events and bad elements. */
function deliveries(fixture: Fixture, rand: () => number, count: number): Delivery[] {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(rand() * items.length)]!;
  const c = fixture.connections;
  // Each body comes with the route and subjects it was signed with, as a
  // provider's redelivery of one body does.
  const bodies: Omit<Delivery, 'delivery_key' | 'event_type' | 'headers'>[] = [
    { provider: 'github', source: github, route: { installation_id: '100' }, subjects: ['repo:acme/a', 'org:acme'], payload: { n: 1 }, body_sha256: null },
    { provider: 'github', source: github, route: { installation_id: '100' }, subjects: ['repo:acme/b', 'org:acme'], payload: { n: 2 }, body_sha256: null },
    { provider: 'github', source: github, route: { installation_id: '200' }, subjects: ['repo:beta/c'], payload: { n: 3 }, body_sha256: null },
    { provider: 'github', source: github, route: { installation_id: '400' }, subjects: ['repo:acme/a'], payload: { n: 4 }, body_sha256: null },
    { provider: 'github', source: github, route: { installation_id: '999' }, subjects: ['repo:acme/a'], payload: { n: 5 }, body_sha256: null },
    { provider: 'github', source: github, route: { installation_id: '100' }, subjects: ['repo:nobody/x'], payload: { n: 6 }, body_sha256: null },
    { provider: 'github', source: github, route: {}, subjects: ['repo:acme/a'], payload: { n: 7 }, body_sha256: null },
    { provider: 'github', source: github, route: { installation_id: '100' }, subjects: [], payload: { n: 8 }, body_sha256: null },
    { provider: 'github', source: github, route: { installation_id: '100', control: true },
      subjects: ['org:acme'], payload: { action: 'created', installation: { id: 100 } }, body_sha256: null },
    { provider: 'github', source: github, route: { installation_id: '100', control: true },
      subjects: ['org:acme'], payload: { installation: { id: 100 } }, body_sha256: null },
    { provider: 'generic', source: hooks, route: { connection_id: c.gen1 }, subjects: ['customer:1'], payload: { n: 11 }, body_sha256: null },
    { provider: 'generic', source: hooks, route: { connection_id: c.gen1 }, subjects: ['order:9'], payload: { n: 12 }, body_sha256: null },
    { provider: 'generic', source: hooks, route: { connection_id: c.gen2 }, subjects: ['customer:1'], payload: { n: 13 }, body_sha256: null },
    { provider: 'generic', source: hooks, route: { connection_id: 987654 }, subjects: ['customer:1'], payload: { n: 14 }, body_sha256: null },
  ];
  for (const body of bodies) {
    // GitHub signs the body alone: about half of its deliveries carry the digest.
    if (body.provider === 'github' && (body.payload as { n?: number }).n! % 2 === 1) {
      body.body_sha256 = createHash('sha256').update(JSON.stringify(body.payload)).digest('hex');
    }
  }
  // Bodies of this batch alone, each carried by several of its GitHub
  // deliveries through whatever route they drew (a redelivery through another
  // installation, a captured body replayed with other unsigned headers): the
  // first copy in the batch is then often dropped, refused or a duplicate by
  // key, the shapes that must not move a later copy behind the deliveries
  // after it (issue 52). New to the batch, so no earlier batch answers them.
  const shared = Array.from({ length: 3 }, () => {
    const payload = { shared: Math.floor(rand() * 1e9) };
    return { payload, body_sha256: createHash('sha256').update(JSON.stringify(payload)).digest('hex') };
  });
  return Array.from({ length: count }, () => {
    let body = pick(bodies);
    if (body.provider === 'github' && !(body.route as { control?: boolean }).control && rand() < 0.5) {
      body = { ...body, ...pick(shared) };
    }
    const delivery: Delivery = {
      ...body, delivery_key: `key-${Math.floor(rand() * 80)}`, event_type: body.route && (body.route as { control?: boolean }).control ? 'installation' : 'push',
      headers: { 'x-request-id': `r-${Math.floor(rand() * 1000)}`, authorization: 'Bearer secret' },
    };
    const flaw = rand();
    if (flaw < 0.04) return { ...delivery, event_type: null };
    if (flaw < 0.07) return { ...delivery, provider: 'nosuch' };
    if (flaw < 0.1) return { ...delivery, route: ['not', 'an', 'object'] };
    if (flaw < 0.12) return { ...delivery, body_sha256: 'NOT-HEX' };
    if (flaw < 0.14) return { ...delivery, delivery_key: 'k'.repeat(300) };
    return delivery;
  });
}

/** What admission wrote, comparable across the twins (times left out). */
async function written(db: pg.Pool) {
  const events = (await db.query(
    `SELECT id, workspace_id, provider, delivery_key, event_type, subject, scope_key, source, connection_id,
            payload, headers, encode(body_sha256, 'hex') AS body_sha256, state
       FROM wharf.provider_event ORDER BY id`)).rows;
  const scopes = (await db.query(
    'SELECT scope_key, workspace_id, head_id, leased_id, active FROM wharf.scope ORDER BY scope_key')).rows;
  const log = (await db.query(
    `SELECT provider, source, delivery_key, connection_id, workspace_id, reason FROM wharf.admission_log
      ORDER BY delivery_key, reason, provider, source, connection_id NULLS FIRST, workspace_id NULLS FIRST`)).rows;
  return { events, scopes, log };
}

/** Admits `items` with wharf.admit, one after another; each receipt, or the error admit raised as admit_many reports it. */
async function admitOneAfterAnother(db: pg.Pool, items: Delivery[]): Promise<unknown[]> {
  const receipts: unknown[] = [];
  for (const item of items) {
    try {
      const { rows } = await db.query<{ receipt: unknown }>(
        'SELECT wharf.admit($1, $2, $3, $4, $5, $6, $7, $8, $9) AS receipt',
        [item.provider, item.source, item.delivery_key, item.event_type, JSON.stringify(item.route), item.subjects,
         JSON.stringify(item.payload), JSON.stringify(item.headers), item.body_sha256]);
      receipts.push(rows[0]!.receipt);
    } catch (error) {
      const { code, message } = error as { code: string; message: string };
      receipts.push({ error: { code, message } });
    }
  }
  return receipts;
}

describe('admit_many against admit, one element after another', () => {
  let many: TestDatabase;
  let single: TestDatabase;
  let fixture: Fixture;
  beforeAll(async () => {
    [many, single] = await Promise.all([createTestDatabase(), createTestDatabase()]);
    fixture = await makeFixture(many.pool);
    expect(await makeFixture(single.pool)).toEqual(fixture);
  });
  afterAll(async () => {
    await Promise.all([many?.drop(), single?.drop()]);
  });

  it('writes the same rows, receipts and admission log for random batches', async () => {
    const generator = Rng.seeded(seed);
    const rand = () => generator.float();
    const seen = new Set<string>();
    for (let batch = 0; batch < 20; batch += 1) {
      const items = deliveries(fixture, rand, 4 + Math.floor(rand() * 20));
      const { rows } = await many.pool.query<{ receipts: unknown[] }>('SELECT wharf.admit_many($1) AS receipts',
        [JSON.stringify(items)]);
      const receipts = await admitOneAfterAnother(single.pool, items);
      expect(rows[0]!.receipts).toEqual(receipts);
      for (const receipt of receipts as Array<{ error?: { code: string }; events?: Array<{ outcome: string }> }>) {
        if (receipt.error) seen.add(receipt.error.code);
        for (const event of receipt.events ?? []) seen.add(event.outcome);
      }
      expect(await written(many.pool)).toEqual(await written(single.pool));
    }
    // The batches did meet every case.
    const { events, log } = await written(many.pool);
    expect(seen).toEqual(new Set(['stored', 'duplicate', '22004', '22023']));
    expect(events.some((e) => e.workspace_id === null)).toBe(true);
    expect(new Set(log.map((row) => row.reason))).toEqual(new Set([
      'unknown-source', 'no-subscriber', 'work-event-without-source', 'work-event-without-subject',
      'invalid-event-route', 'route-mismatch', 'connection-inactive', 'workspace-inactive',
    ]));
    expect(events.every((e) => !('authorization' in (e.headers as object)))).toBe(true);
  });

  it('answers a repeated delivery and a repeated body within one array as duplicates of the first', async () => {
    const body = { action: 'opened', n: 'twice' };
    const digest = createHash('sha256').update(JSON.stringify(body)).digest('hex');
    const delivery = (key: string) => ({
      provider: 'github', source: github, delivery_key: key, event_type: 'issues', route: { installation_id: '100' },
      subjects: ['repo:acme/a'], payload: body, headers: {}, body_sha256: digest,
    });
    const { rows } = await many.pool.query<{ receipts: Array<{ events: Array<{ event_id: number; outcome: string }> }> }>(
      'SELECT wharf.admit_many($1) AS receipts', [JSON.stringify([delivery('twice-1'), delivery('twice-1'), delivery('twice-2')])]);
    const [first, second, third] = rows[0]!.receipts;
    // Workspaces 1 and 2 (paused: it stores and holds) receive it.
    expect(first!.events.map((e) => e.outcome)).toEqual(['stored', 'stored']);
    const duplicates = first!.events.map((e) => ({ ...e, outcome: 'duplicate' }));
    expect(second!.events).toEqual(duplicates);
    expect(third!.events).toEqual(duplicates);
  });
});

describe('admit_many racing', () => {
  let db: TestDatabase;
  let fixture: Fixture;
  beforeAll(async () => {
    db = await createTestDatabase();
    fixture = await makeFixture(db.pool);
    await db.pool.query(`SELECT wharf.set_workspace_state(2, 'ACTIVE')`);
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('overlapping batches from 8 sessions neither deadlock nor starve a suspension, which no row passes', async () => {
    const subjects = ['repo:acme/a', 'repo:acme/b', 'repo:beta/c', 'org:acme'];
    const sessions = await Promise.all(Array.from({ length: 8 }, () => db.connect()));
    const suspender = await db.connect();
    let running = true;
    let batches = 0;
    const errors: string[] = [];
    try {
      const admitters = sessions.map(async (session, s) => {
        for (let n = 0; running; n += 1) {
          // Each batch names its scopes in an order of its own: the locks must not follow it.
          const items = Array.from({ length: 16 }, (_, k) => ({
            provider: 'github', source: github, delivery_key: `race-${s}-${n}-${k}`, event_type: 'push',
            route: { installation_id: (k + s) % 2 === 0 ? '100' : '200' },
            subjects: [subjects[(k * 7 + s * 3 + n) % subjects.length]!], payload: { s, n, k }, headers: {},
            body_sha256: null,
          }));
          try {
            await session.query('SELECT wharf.admit_many($1)', [JSON.stringify(items)]);
            batches += 1;
          } catch (error) {
            errors.push((error as { code?: string }).code ?? String(error));
          }
        }
      });
      // Suspend and resume workspace 1 a few times while they run; after
      // each suspension commits, no row of workspace 1 may be stored.
      const violations: number[] = [];
      for (let round = 0; round < 5; round += 1) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        await suspender.query(`SELECT wharf.set_workspace_state(1, 'SUSPENDED')`);
        const { rows } = await suspender.query<{ max: string }>('SELECT coalesce(max(id), 0) AS max FROM wharf.provider_event');
        await new Promise((resolve) => setTimeout(resolve, 100));
        const { rows: late } = await suspender.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM wharf.provider_event WHERE workspace_id = 1 AND id > $1', [rows[0]!.max]);
        violations.push(late[0]!.n);
        await suspender.query(`SELECT wharf.set_workspace_state(1, 'ACTIVE')`);
      }
      running = false;
      await Promise.all(admitters);
      expect(errors).toEqual([]);
      expect(violations).toEqual([0, 0, 0, 0, 0]);
      expect(batches).toBeGreaterThan(8);
      // Workspace 1's deliveries while suspended were refused and logged.
      const { rows: refused } = await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM wharf.admission_log WHERE workspace_id = 1 AND reason = 'workspace-inactive'`);
      expect(refused[0]!.n).toBeGreaterThan(0);
      // Every scope's head is its oldest queued row.
      const { rows: drift } = await db.pool.query(
        `SELECT s.scope_key FROM wharf.scope s
          WHERE s.head_id IS DISTINCT FROM (SELECT min(id) FROM wharf.provider_event e WHERE e.scope_key = s.scope_key AND e.state = 'QUEUED')`);
      expect(drift).toEqual([]);
    } finally {
      running = false;
      await Promise.all([...sessions, suspender].map((client) => client.end()));
    }
  });
});

describe('every scope keeps the order of the batch, whatever its shape', () => {
  // Workspace 10: App installation 1000 subscribed to repo:o/s; workspace 11:
  // a PAT subscribed to repo:o/s too (fan-out); workspace 12, suspended:
  // installation 1200 subscribed to repo:o/u. Workspaces 10 and 11 also have
  // a connection-signed (generic) connection each, subscribed to customer:1.
  const digest = (payload: unknown) => createHash('sha256').update(JSON.stringify(payload)).digest('hex');
  const P = { body: 'P' };
  const Q = { body: 'Q' };
  const R = { body: 'R' };
  let many: TestDatabase;
  let single: TestDatabase;
  let generic: { ws10: number; ws11: number };

  async function orderFixture(db: pg.Pool): Promise<{ ws10: number; ws11: number }> {
    const one = async (sql: string, params: unknown[] = []) => Number(Object.values((await db.query(sql, params)).rows[0])[0]);
    for (const ws of [10, 11, 12]) await db.query('SELECT wharf.upsert_workspace($1)', [ws]);
    const app = await one(`SELECT wharf.upsert_connection(10, 'github', $1, 'app_installation', '1000')`, [github]);
    const pat = await one(`SELECT wharf.upsert_connection(11, 'github', $1, 'pat', 'p11')`, [github]);
    const off = await one(`SELECT wharf.upsert_connection(12, 'github', $1, 'app_installation', '1200')`, [github]);
    const g10 = await one(`SELECT wharf.upsert_connection(10, 'generic', $1, 'webhook', 'g10')`, [hooks]);
    const g11 = await one(`SELECT wharf.upsert_connection(11, 'generic', $1, 'webhook', 'g11')`, [hooks]);
    for (const [connection, subject] of [[app, 'repo:o/s'], [pat, 'repo:o/s'], [off, 'repo:o/u'], [g10, 'customer:1'], [g11, 'customer:1']] as const) {
      await db.query('SELECT wharf.subscribe($1, $2)', [connection, subject]);
    }
    await db.query(`SELECT wharf.set_workspace_state(12, 'SUSPENDED')`);
    return { ws10: g10, ws11: g11 };
  }

  beforeEach(async () => {
    [many, single] = await Promise.all([createTestDatabase(), createTestDatabase()]);
    generic = await orderFixture(many.pool);
    expect(await orderFixture(single.pool)).toEqual(generic);
  });
  afterEach(async () => {
    await Promise.all([many?.drop(), single?.drop()]);
  });

  /** A GitHub delivery through installation `installation` about `subject`, signed over `payload` alone (its digest passed). */
  function push(installation: string, key: string, payload: unknown, subject = 'repo:o/s', eventType = 'push'): Delivery {
    return {
      provider: 'github', source: github, delivery_key: key, event_type: eventType,
      route: { installation_id: installation }, subjects: [subject], payload, headers: {}, body_sha256: digest(payload),
    };
  }

  /** A generic (connection-signed) delivery through connection `connection`, with a body digest. */
  function hook(connection: number, key: string, payload: unknown): Delivery {
    return {
      provider: 'generic', source: hooks, delivery_key: key, event_type: 'customer.updated',
      route: { connection_id: connection }, subjects: ['customer:1'], payload, headers: {}, body_sha256: digest(payload),
    };
  }

  /** Admits `batch` into `many` with admit_many and into `single` element by element; both must write the same. */
  async function admitBoth(batch: Delivery[]): Promise<void> {
    const { rows } = await many.pool.query<{ receipts: unknown[] }>('SELECT wharf.admit_many($1) AS receipts', [JSON.stringify(batch)]);
    expect(rows[0]!.receipts).toEqual(await admitOneAfterAnother(single.pool, batch));
    expect(await written(many.pool)).toEqual(await written(single.pool));
  }

  /** Claims and completes everything claimable in `many`; each scope's delivery keys in the order they were handed out. */
  async function handlingOrder(): Promise<Record<string, string[]>> {
    const order: Record<string, string[]> = {};
    for (;;) {
      const { rows } = await many.pool.query<{ id: string; lease_epoch: string; scope_key: string; delivery_key: string }>(
        `SELECT id, lease_epoch, scope_key, delivery_key FROM wharf.claim('order-test', 100)`);
      if (rows.length === 0) return order;
      for (const row of rows) {
        (order[row.scope_key] ??= []).push(row.delivery_key);
        await many.pool.query('SELECT wharf.complete($1, $2)', [row.id, row.lease_epoch]);
      }
    }
  }

  it('a body whose first copy is dropped (an unknown installation): the second copy before the next delivery', async () => {
    await admitBoth([push('9999', 'k1', P), push('1000', 'k2', P), push('1000', 'k3', Q)]);
    expect(await handlingOrder()).toEqual({ '10:github:repo:o/s': ['k2', 'k3'], '11:github:repo:o/s': ['k2', 'k3'] });
  });

  it('a body whose first copy is stored: the repeat is its duplicate, the rest in order', async () => {
    await admitBoth([push('1000', 'k1', P), push('1000', 'k2', Q), push('1000', 'k3', P), push('1000', 'k4', R)]);
    expect(await handlingOrder()).toEqual({
      '10:github:repo:o/s': ['k1', 'k2', 'k4'], '11:github:repo:o/s': ['k1', 'k2', 'k4'],
    });
  });

  it('a body whose first copy is refused (its workspace suspended)', async () => {
    await admitBoth([push('1200', 'k1', P, 'repo:o/u'), push('1000', 'k2', P), push('1000', 'k3', Q)]);
    expect(await handlingOrder()).toEqual({ '10:github:repo:o/s': ['k2', 'k3'], '11:github:repo:o/s': ['k2', 'k3'] });
  });

  it('a body whose first copy is a delivery-key duplicate of an earlier body', async () => {
    await admitBoth([push('1000', 'k0', R)]);
    await admitBoth([push('1000', 'k0', P), push('1000', 'k2', P), push('1000', 'k3', Q)]);
    expect(await handlingOrder()).toEqual({
      '10:github:repo:o/s': ['k0', 'k2', 'k3'], '11:github:repo:o/s': ['k0', 'k2', 'k3'],
    });
  });

  it('a redelivery whose first key is older than replay_window', async () => {
    await admitBoth([push('1000', 'k0', P)]);
    for (const db of [many, single]) {
      await db.pool.query(`UPDATE wharf.provider_event SET received_at = now() - interval '4 days' WHERE delivery_key = 'k0'`);
    }
    await admitBoth([push('1000', 'k0', P), push('1000', 'k7', P), push('1000', 'k8', Q)]);
    expect(await handlingOrder()).toEqual({
      '10:github:repo:o/s': ['k0', 'k7', 'k8'], '11:github:repo:o/s': ['k0', 'k7', 'k8'],
    });
  });

  it('a copy relabelled by an unsigned event header and dropped', async () => {
    const relabelled = { ...push('1000', 'k1', P, 'repo:o/s', 'installation'), route: { installation_id: '1000', control: true } };
    await admitBoth([relabelled, push('1000', 'k2', P), push('1000', 'k3', Q)]);
    expect(await handlingOrder()).toEqual({ '10:github:repo:o/s': ['k2', 'k3'], '11:github:repo:o/s': ['k2', 'k3'] });
  });

  it('a key repeated inside the batch', async () => {
    await admitBoth([push('1000', 'k1', Q), push('1000', 'k1', R), push('1000', 'k2', P)]);
    expect(await handlingOrder()).toEqual({ '10:github:repo:o/s': ['k1', 'k2'], '11:github:repo:o/s': ['k1', 'k2'] });
  });

  it('two connection-signed connections with identical bodies, one repeated', async () => {
    await admitBoth([
      hook(generic.ws10, 'k1', P), hook(generic.ws11, 'k2', P), hook(generic.ws10, 'k5', P), hook(generic.ws11, 'k6', R),
      hook(generic.ws10, 'k7', Q),
    ]);
    expect(await handlingOrder()).toEqual({
      '10:generic:customer:1': ['k1', 'k7'], '11:generic:customer:1': ['k2', 'k6'],
    });
  });
});
