// wharf.admit under real concurrent sessions: deduplication across 16
// connections, lifecycle changes racing admissions (the source's lifecycle
// lock), fan-out through App and PAT connections, and bad input.
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { admit, type Admission, type Receipt } from '../../edge/sql/admission.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { githubPush } from '../support/github-push.js';
import { backendPid, blockedOnLock } from '../support/sessions.js';
import { sqlstateOf } from '../support/sqlstate.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

/** One GitHub push to `source` through App installation `installationId`. */
function push(source: string, installationId: string, deliveryKey: string, subjects: string[]): Admission {
  return githubPush({
    source, installationId, deliveryKey, subjects,
    payload: { ref: 'refs/heads/main' }, headers: { 'x-github-event': 'push' },
  });
}

async function sql<Row extends object>(text: string, params: unknown[] = []): Promise<Row[]> {
  return (await db.pool.query<Row & pg.QueryResultRow>(text, params)).rows;
}

async function connection(
  workspaceId: number,
  source: string,
  kind: string,
  externalId: string,
  subjects: string[],
  pool: pg.Pool = db.pool,
): Promise<number> {
  await pool.query('SELECT wharf.upsert_workspace($1)', [workspaceId]);
  const { rows: [row] } = await pool.query<{ id: string }>(
    `SELECT wharf.upsert_connection($1, 'github', $2, $3, $4) AS id`,
    [workspaceId, source, kind, externalId],
  );
  const id = Number(row!.id);
  for (const subject of subjects) await pool.query('SELECT wharf.subscribe($1, $2)', [id, subject]);
  return id;
}

async function storedWorkspaces(source: string, deliveryKey: string): Promise<number[]> {
  const rows = await sql<{ workspace_id: string }>(
    `SELECT workspace_id FROM wharf.provider_event WHERE source = $1 AND delivery_key = $2 ORDER BY workspace_id`,
    [source, deliveryKey],
  );
  return rows.map((row) => Number(row.workspace_id));
}

describe('the same delivery from 16 connections at once', () => {
  it('stores one row per workspace; every other call reports duplicate with the stored id', async () => {
    const source = 'https://dedupe.example.com';
    await connection(101, source, 'app_installation', '1', ['org:acme']);
    await connection(102, source, 'pat', 'p', ['repo:acme/api']);
    const clients = await Promise.all(Array.from({ length: 16 }, () => db.connect()));

    const receipts = await Promise.all(
      clients.map((client) => admit(client, push(source, '1', 'same', ['repo:acme/api', 'org:acme']))),
    );

    expect(await storedWorkspaces(source, 'same')).toEqual([101, 102]);
    const stored = await sql<{ workspace_id: string; id: string }>(
      `SELECT workspace_id, id FROM wharf.provider_event WHERE source = $1 AND delivery_key = 'same'`,
      [source],
    );
    for (const { workspace_id, id } of stored) {
      const entries = receipts.flatMap((receipt) =>
        receipt.events.filter((event) => event.workspace_id === Number(workspace_id)),
      );
      expect(entries).toHaveLength(16);
      expect(entries.every((event) => event.event_id === Number(id))).toBe(true);
      expect(entries.filter((event) => event.outcome === 'stored')).toHaveLength(1);
      expect(entries.filter((event) => event.outcome === 'duplicate')).toHaveLength(15);
    }
    await Promise.all(clients.map((client) => client.end()));
  });
});

/**
 * Runs `count` admissions over `sessions` connections and fires `change` in its
 * own transaction once `after` of them returned. Inside that transaction, once
 * the change holds its lock, it reads which rows exist: a row committed later
 * was stored after the change committed. Both sides of the race are pinned,
 * not left to the machine's speed: the first `after` return before the change
 * starts, the last `afterChange` start only once it committed, and those
 * between race it.
 */
async function raceChange(options: {
  source: string;
  count: number;
  sessions: number;
  after: number;
  /** Admissions held until the change committed (default 10). */
  afterChange?: number;
  admission: (index: number) => Admission;
  change: (client: pg.Client) => Promise<void>;
}): Promise<{ results: (Receipt | 'WH409')[]; visibleToChange: Set<string>; storedKeys: Set<string> }> {
  const clients = await Promise.all(Array.from({ length: options.sessions }, () => db.connect()));
  const changer = await db.connect();
  const results: (Receipt | 'WH409')[] = new Array(options.count);
  let next = 0;
  let done = 0;
  let changeDone: Promise<Set<string>> | undefined;

  const runChange = async (): Promise<Set<string>> => {
    await changer.query('BEGIN');
    await options.change(changer);
    const { rows } = await changer.query<{ delivery_key: string }>(
      'SELECT delivery_key FROM wharf.provider_event WHERE source = $1',
      [options.source],
    );
    await changer.query('COMMIT');
    return new Set(rows.map((row) => row.delivery_key));
  };

  await Promise.all(
    clients.map(async (client) => {
      while (next < options.count) {
        const index = next++;
        // Taken once at least index - sessions admissions returned, past `after`: the change has begun.
        if (index >= options.count - (options.afterChange ?? 10)) await changeDone;
        try {
          results[index] = await admit(client, options.admission(index));
        } catch (error) {
          if (sqlstateOf(error) !== 'WH409') throw error;
          results[index] = 'WH409';
        }
        done += 1;
        if (done === options.after) changeDone = runChange();
      }
    }),
  );
  const visibleToChange = await changeDone!;
  const storedKeys = new Set(
    (
      await sql<{ delivery_key: string }>('SELECT delivery_key FROM wharf.provider_event WHERE source = $1', [
        options.source,
      ])
    ).map((row) => row.delivery_key),
  );
  await Promise.all([...clients, changer].map((client) => client.end()));
  return { results, visibleToChange, storedKeys };
}

describe('a suspension racing 100 admissions', () => {
  it('set_workspace_state: each admission was stored before it committed or refused after it', async () => {
    const source = 'https://race-workspace.example.com';
    await connection(201, source, 'app_installation', '1', []);
    await connection(202, source, 'pat', 'p', ['repo:acme/api']);

    const { results, visibleToChange, storedKeys } = await raceChange({
      source,
      count: 100,
      sessions: 8,
      after: 30,
      admission: (index) => push(source, '1', `w-${index}`, ['repo:acme/api']),
      change: async (client) => {
        await client.query(`SELECT wharf.set_workspace_state(202, 'SUSPENDED')`);
      },
    });

    const stored = results.filter((result) => result !== 'WH409' && result.events.length === 1);
    const refused = results.filter(
      (result) => result !== 'WH409' && result.refused.some((entry) => entry.reason === 'workspace-inactive'),
    );
    expect(stored.length + refused.length).toBe(100);
    // Both sides of the race happened: the change fired after 30 returned.
    expect(stored.length).toBeGreaterThanOrEqual(30);
    expect(refused.length).toBeGreaterThan(0);
    // Never stored after the suspension committed: every row was already
    // committed when the suspension, holding its lock, looked.
    expect([...storedKeys].sort()).toEqual([...visibleToChange].sort());
    expect(storedKeys.size).toBe(stored.length);
    const [logged] = await sql<{ count: string }>(
      `SELECT count(*) FROM wharf.admission_log WHERE source = $1 AND reason = 'workspace-inactive'`,
      [source],
    );
    expect(Number(logged!.count)).toBe(refused.length);
  });

  it('set_connection_state: stored before it committed, else dropped, never stored after, never told to retry', async () => {
    const source = 'https://race-connection.example.com';
    const app = await connection(301, source, 'app_installation', '1', ['repo:acme/api']);

    const { results, visibleToChange, storedKeys } = await raceChange({
      source,
      count: 100,
      sessions: 8,
      after: 30,
      admission: (index) => push(source, '1', `c-${index}`, ['repo:acme/api']),
      change: async (client) => {
        await client.query(`SELECT wharf.set_connection_state($1, 'SUSPENDED')`, [app]);
      },
    });

    const stored = results.filter((result) => result !== 'WH409' && result.events.length === 1);
    const dropped = results.filter((result) => result !== 'WH409' && result.dropped === 'source-inactive');
    const retried = results.filter((result) => result === 'WH409');
    expect(stored.length + dropped.length + retried.length).toBe(100);
    expect(stored.length).toBeGreaterThanOrEqual(30);
    expect(dropped.length).toBeGreaterThan(0);
    // Read once under the source's lock (contract v6): no admission is told
    // its route changed.
    expect(retried).toEqual([]);
    expect([...storedKeys].sort()).toEqual([...visibleToChange].sort());
    expect(storedKeys.size).toBe(stored.length);
    expect(await sql('SELECT 1 FROM wharf.provider_event WHERE source = $1', [source])).toHaveLength(storedKeys.size);
  });
});

describe('a lifecycle change committed while an admission waits for its lock', () => {
  // Each test its own source and workspaces: an App connection and a PAT
  // subscribed to repo:acme/api, and a PAT subscribed to nothing yet. No test
  // sees another's changes.
  let source: string;
  let app: number;
  let pat: number;
  let late: number;
  /** The workspaces of app, pat and late. */
  let ws: { app: number; pat: number; late: number };
  let holder: pg.Client;
  let admitter: pg.Client;
  let fixtures = 0;

  beforeAll(async () => {
    holder = await db.connect();
    admitter = await db.connect();
  });

  beforeEach(async () => {
    fixtures += 1;
    source = `https://route-change-${fixtures}.example.com`;
    ws = { app: 4000 + 10 * fixtures + 1, pat: 4000 + 10 * fixtures + 2, late: 4000 + 10 * fixtures + 3 };
    app = await connection(ws.app, source, 'app_installation', '1', ['repo:acme/api']);
    pat = await connection(ws.pat, source, 'pat', 'p', ['repo:acme/api']);
    late = await connection(ws.late, source, 'pat', 'p', []);
  });

  /**
   * Holds `change` uncommitted, starts the admission, and commits once the
   * admission waits for the change's lock: the admission must wait (it reads
   * nothing of its source before it holds that source's lock), so the test
   * fails if it settles first.
   */
  async function admitDuring(change: string, params: unknown[], deliveryKey: string): Promise<Receipt> {
    await holder.query('BEGIN');
    await holder.query(change, params);
    const pid = await backendPid(admitter);
    const admission = admit(admitter, push(source, '1', deliveryKey, ['repo:acme/api']));
    const settled = admission.then(
      () => 'settled' as const,
      () => 'settled' as const,
    );
    const first = await Promise.race([blockedOnLock(db.pool, pid).then(() => 'waited' as const), settled]);
    await holder.query('COMMIT');
    expect(first).toBe('waited');
    return admission;
  }

  // Contract v6: the route is read once, after the source's lock, so an
  // admission that waited for a change reads what the change committed; no
  // WH409, no retry needed.
  it('a new subscription committed while the admission waits: the admission reaches it', async () => {
    const receipt = await admitDuring('SELECT wharf.subscribe($1, $2)', [late, 'repo:acme/api'], 'sub-1');
    expect(receipt.events.map((event) => [event.workspace_id, event.outcome])).toEqual([
      [ws.app, 'stored'],
      [ws.pat, 'stored'],
      [ws.late, 'stored'],
    ]);
    expect(await storedWorkspaces(source, 'sub-1')).toEqual([ws.app, ws.pat, ws.late]);
  });

  it('an unsubscription committed while the admission waits: no row for the recipient it removed', async () => {
    const receipt = await admitDuring('SELECT wharf.unsubscribe($1, $2)', [pat, 'repo:acme/api'], 'unsub-1');
    expect(receipt.events.map((event) => event.workspace_id)).toEqual([ws.app]);
    expect(await storedWorkspaces(source, 'unsub-1')).toEqual([ws.app]);
  });

  it('a recipient suspended while the admission waits is refused, and nothing is stored for it', async () => {
    const receipt = await admitDuring(`SELECT wharf.set_connection_state($1, 'SUSPENDED')`, [pat], 'suspend-1');
    expect(receipt.events.map((event) => event.workspace_id)).toEqual([ws.app]);
    expect(receipt.refused).toEqual([{ connection_id: pat, workspace_id: ws.pat, reason: 'connection-inactive' }]);
    expect(await storedWorkspaces(source, 'suspend-1')).toEqual([ws.app]);
  });

  it('the source suspended while the admission waits: dropped source-inactive', async () => {
    const receipt = await admitDuring(`SELECT wharf.set_connection_state($1, 'SUSPENDED')`, [app], 'source-1');
    expect(receipt).toMatchObject({ events: [], refused: [], dropped: 'source-inactive' });
    expect(await storedWorkspaces(source, 'source-1')).toEqual([]);
  });

  it('a workspace suspended while the admission waits is refused by the read after it', async () => {
    const receipt = await admitDuring(`SELECT wharf.set_workspace_state($1, 'SUSPENDED')`, [ws.app], 'ws-1');
    expect(receipt.events.map((event) => [event.workspace_id, event.outcome])).toEqual([[ws.pat, 'stored']]);
    expect(receipt.refused).toEqual([{ connection_id: app, workspace_id: ws.app, reason: 'workspace-inactive' }]);
    expect(await storedWorkspaces(source, 'ws-1')).toEqual([ws.pat]);
  });

  it('a connection created in a workspace while its suspension waits: the suspension locks the new source too', async () => {
    // The creation holds the workspace's lock shared: the suspension waits
    // for it, then finds the new connection and locks its source, so an
    // admission through it waits for the suspension and is refused.
    const other = `${source}/other`;
    const creator = holder;
    await creator.query('BEGIN');
    const { rows } = await creator.query<{ id: string }>(
      `SELECT wharf.upsert_connection($1, 'github', $2, 'app_installation', '77') AS id`, [ws.late, other]);
    const created = Number(rows[0]!.id);
    await creator.query('SELECT wharf.subscribe($1, $2)', [created, 'repo:acme/api']);
    const suspender = await db.connect();
    try {
      await suspender.query('BEGIN');
      const suspenderPid = await backendPid(suspender);
      const suspension = suspender.query(`SELECT wharf.set_workspace_state($1, 'SUSPENDED')`, [ws.late]);
      await blockedOnLock(db.pool, suspenderPid, { timeout: 10_000, what: 'the suspension to wait for the creation' });
      await creator.query('COMMIT');
      await suspension;
      const pid = await backendPid(admitter);
      const admission = admit(admitter, push(other, '77', 'created-1', ['repo:acme/api']));
      await blockedOnLock(db.pool, pid, { timeout: 10_000, what: 'the admission to wait for the suspension' });
      await suspender.query('COMMIT');
      const receipt = await admission;
      expect(receipt.events).toEqual([]);
      expect(receipt.refused).toEqual([{ connection_id: created, workspace_id: ws.late, reason: 'workspace-inactive' }]);
    } finally {
      await suspender.end();
    }
  });

  afterAll(async () => {
    await holder?.end();
    await admitter?.end();
  });
});

describe('fan-out through App and PAT connections', () => {
  const source = 'https://fanout.example.com';
  let app: number;
  let suspendedPat: number;

  beforeAll(async () => {
    app = await connection(501, source, 'app_installation', '1', ['org:acme']);
    await connection(502, source, 'pat', 'p', ['repo:acme/api']);
    suspendedPat = await connection(503, source, 'pat', 'p', ['repo:acme/api']);
    await sql(`SELECT wharf.set_connection_state($1, 'SUSPENDED')`, [suspendedPat]);
  });

  it('three recipient workspaces, one suspended: two rows and one refusal in the log', async () => {
    const receipt = await admit(db.pool, push(source, '1', 'fan-1', ['repo:acme/api', 'org:acme']));
    expect(receipt.events.map((event) => [event.workspace_id, event.outcome])).toEqual([
      [501, 'stored'],
      [502, 'stored'],
    ]);
    expect(receipt.refused).toEqual([
      { connection_id: suspendedPat, workspace_id: 503, reason: 'connection-inactive' },
    ]);
    expect(await storedWorkspaces(source, 'fan-1')).toEqual([501, 502]);
    expect(
      await sql(`SELECT connection_id, workspace_id, reason FROM wharf.admission_log WHERE delivery_key = 'fan-1'`),
    ).toEqual([{ connection_id: String(suspendedPat), workspace_id: '503', reason: 'connection-inactive' }]);
  });

  it('with the source App suspended: no row at all', async () => {
    await sql(`SELECT wharf.set_connection_state($1, 'SUSPENDED')`, [app]);
    try {
      const receipt = await admit(db.pool, push(source, '1', 'fan-2', ['repo:acme/api', 'org:acme']));
      expect(receipt).toMatchObject({ events: [], refused: [], dropped: 'source-inactive' });
      expect(await storedWorkspaces(source, 'fan-2')).toEqual([]);
    } finally {
      // The other tests of this block find the App active, whatever happened here.
      await sql(`SELECT wharf.set_connection_state($1, 'ACTIVE')`, [app]);
    }
  });

  it('a subscription added: the next delivery after its commit reaches the new workspace', async () => {
    const before = await admit(db.pool, push(source, '1', 'sub-before', ['repo:acme/web', 'org:acme']));
    expect(before.events.map((event) => event.workspace_id)).toEqual([501]);

    const late = await connection(504, source, 'pat', 'p', []);
    expect(await sql('SELECT wharf.subscribe($1, $2) AS changed', [late, 'repo:acme/web'])).toEqual([{ changed: true }]);

    const after = await admit(db.pool, push(source, '1', 'sub-after', ['repo:acme/web', 'org:acme']));
    expect(after.events.map((event) => event.workspace_id)).toEqual([501, 504]);
    expect(await storedWorkspaces(source, 'sub-after')).toEqual([501, 504]);
  });
});

describe('pause and resume', () => {
  // Each test in a database of its own: its claims see its rows alone (none
  // left by another test, leased or queued), and what it paused is paused
  // for it only.
  const source = 'https://paused.example.com';
  let own: TestDatabase;
  let app: number;

  beforeEach(async () => {
    own = await createTestDatabase();
    app = await connection(701, source, 'app_installation', '1', ['repo:acme/api'], own.pool);
    await connection(702, source, 'pat', 'p', ['repo:acme/api'], own.pool);
  });

  afterEach(async () => {
    await own?.drop();
  });

  async function claimedWorkspaces(): Promise<number[]> {
    const { rows } = await own.pool.query<{ workspace_id: string }>(
      `SELECT workspace_id FROM wharf.claim('pause-test', 10) ORDER BY workspace_id`);
    return rows.map((row) => Number(row.workspace_id));
  }

  it('a paused connection stores its deliveries and none is claimed until it resumes', async () => {
    await own.pool.query(`SELECT wharf.set_connection_state($1, 'PAUSED')`, [app]);
    const receipt = await admit(own.pool, push(source, '1', 'paused-1', ['repo:acme/api']));
    expect(receipt.events.map((event) => [event.workspace_id, event.outcome])).toEqual([
      [701, 'stored'],
      [702, 'stored'],
    ]);
    expect(await claimedWorkspaces()).toEqual([702]);

    await own.pool.query(`SELECT wharf.set_connection_state($1, 'ACTIVE')`, [app]);
    expect(await claimedWorkspaces()).toEqual([701]);
  });

  it('a paused workspace stores and holds; resumed, its rows are claimed', async () => {
    await own.pool.query(`SELECT wharf.set_workspace_state(702, 'PAUSED')`);
    const receipt = await admit(own.pool, push(source, '1', 'paused-2', ['repo:acme/api']));
    expect(receipt.events.map((event) => event.workspace_id)).toEqual([701, 702]);
    expect(receipt.refused).toEqual([]);
    expect(await claimedWorkspaces()).toEqual([701]);

    await own.pool.query(`SELECT wharf.set_workspace_state(702, 'ACTIVE')`);
    expect(await claimedWorkspaces()).toEqual([702]);
  });
});

describe('bad input', () => {
  const source = 'https://bad-input.example.com';

  beforeAll(async () => {
    await connection(601, source, 'app_installation', '1', ['repo:acme/api']);
  });

  async function admitRaw(params: unknown[]): Promise<Receipt> {
    const { rows } = await db.pool.query<{ receipt: Receipt }>(
      'SELECT wharf.admit($1, $2, $3, $4, $5::jsonb, $6::text[], $7::jsonb, $8::jsonb) AS receipt',
      params,
    );
    return rows[0]!.receipt;
  }

  const good = ['github', source, 'bad-1', 'push', '{"installation_id": "1"}', ['repo:acme/api'], '{}', '{}'];

  /** How many rows and admission-log entries the source has: "writes nothing" is no change, whatever ran before. */
  async function written(): Promise<{ rows: number; logged: number }> {
    const [counts] = await sql<{ rows: number; logged: number }>(
      `SELECT (SELECT count(*)::int FROM wharf.provider_event WHERE source = $1) AS rows,
              (SELECT count(*)::int FROM wharf.admission_log WHERE source = $1) AS logged`, [source]);
    return counts!;
  }
  const withArgument = (index: number, value: unknown): unknown[] =>
    good.map((argument, position) => (position === index ? value : argument));

  it.each([
    ['a NULL provider', withArgument(0, null), '22004'],
    ['an unknown provider', withArgument(0, 'nosuch'), '22023'],
    ['a NULL delivery key', withArgument(2, null), '22004'],
    ['a route that is not an object', withArgument(4, '["installation_id"]'), '22023'],
  ])('%s is a clear error and writes nothing', async (_name, params, code) => {
    const before = await written();
    await expect(admitRaw(params)).rejects.toMatchObject({ code });
    expect(await written()).toEqual(before);
  });

  it.each([
    ['a route that names no source', withArgument(4, '{"repo": "acme/api"}'), 'work-event-without-source'],
    [
      'a control event without an installation',
      ['github', source, 'bad-2', 'installation', '{"control": true}', null, '{"action": "created"}', '{}'],
      'invalid-event-route',
    ],
  ])('%s is dropped with its reason and stores no row', async (_name, params, reason) => {
    const before = await written();
    const receipt = await admitRaw(params);
    expect(receipt).toMatchObject({ events: [], refused: [], dropped: reason });
    expect((await written()).rows).toBe(before.rows);
    expect(
      await sql('SELECT reason FROM wharf.admission_log WHERE source = $1 AND delivery_key = $2', [
        source,
        params[2],
      ]),
    ).toEqual([{ reason }]);
  });

  it('a control event is stored (the inputs above were refused for their flaw alone)', async () => {
    const receipt = await admitRaw([
      'github',
      source,
      'good-control',
      'installation',
      '{"control": true, "installation_id": "1"}',
      null,
      '{"action": "created", "installation": {"id": 1}}',
      '{}',
    ]);
    expect(receipt.events).toMatchObject([{ workspace_id: null, outcome: 'stored' }]);
    const work = await admitRaw(withArgument(2, 'good-work'));
    expect(work.events).toMatchObject([{ workspace_id: 601, outcome: 'stored' }]);
  });
});
