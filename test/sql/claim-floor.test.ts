// The claim line's floor (sql/30-claim-lease.sql): a claim starts where its
// session's last claim with the same handles saw the oldest due head, so that
// under a held snapshot it passes over the dead index entries of served heads
// inside the index (and it fetches its candidates' scope rows at the versions
// the line showed, not by key); a head that becomes claimable below the floor is served
// at the next read of the line from its start, at most ten seconds later.
// Time is pinned by writing the session's line (wharf.claim_line) directly,
// never waited for; the index walk is judged by the index entries it read,
// never by how long it took.
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { readsOfOwnTransaction } from '../support/statistics.js';
import { admitEvents } from '../support/worker-inbox.js';

let db: TestDatabase;
const opened: pg.PoolClient[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
});
afterEach(async () => {
  for (const client of opened.splice(0)) {
    await client.query('ROLLBACK').catch(() => {});
    client.release(true);
  }
  await db.pool.query(`UPDATE wharf.provider_event SET state = 'DONE', leased_until = NULL, handled_at = clock_timestamp()
                        WHERE state IN ('QUEUED', 'LEASED')`);
});
afterAll(async () => {
  await db?.drop();
});

/** A session of its own, as a worker's claiming connection is. */
async function session(): Promise<pg.PoolClient> {
  const client = await db.pool.connect();
  opened.push(client);
  return client;
}

async function claim(client: pg.ClientBase, max: number, handles: string[] | null = null): Promise<string[]> {
  const { rows } = await client.query<{ id: string }>('SELECT id FROM wharf.claim($1, $2, $3)', ['floor-test', max, handles]);
  return rows.map((row) => row.id);
}

/** The floor of the session's line (handles digest / floor / last rescan / reset generation), in epoch seconds. */
async function floorOf(client: pg.ClientBase): Promise<number> {
  const { rows } = await client.query<{ line: string | null }>(`SELECT current_setting('wharf.claim_line', true) AS line`);
  return Number((rows[0]!.line ?? '').split('/')[1]);
}

/** Moves the session's last rescan `seconds` into the past, as if that much time had passed since. */
async function ageLine(client: pg.ClientBase, seconds: number): Promise<void> {
  await client.query(
    `SELECT set_config('wharf.claim_line', concat_ws('/', l[1], l[2], l[3]::numeric - $1, l[4]), false)
       FROM string_to_array(current_setting('wharf.claim_line'), '/') l`, [seconds]);
}

/** Makes the scope of event `id` claimable an hour ago, as a late commit or a resumed connection leaves it. */
async function readyAnHourAgo(id: string): Promise<void> {
  await db.pool.query(`UPDATE wharf.scope SET ready_at = clock_timestamp() - interval '1 hour' WHERE head_id = $1`, [id]);
}

describe('the claim line\'s floor', () => {
  it('starts the next claim at the oldest due head the last one saw, less a second', async () => {
    const [first, second] = await admitEvents(db.pool, [{ scope: 'floor:a' }, { scope: 'floor:b' }]);
    const client = await session();
    const { rows } = await db.pool.query<{ ready: number }>(
      'SELECT extract(epoch FROM ready_at)::float8 AS ready FROM wharf.scope WHERE head_id = $1', [first]);
    expect(await claim(client, 1)).toEqual([first]);
    // It saw both heads: the floor is a second below the older one's.
    expect(await floorOf(client)).toBeCloseTo(rows[0]!.ready - 1, 3);
    expect(await claim(client, 1)).toEqual([second]);
  });

  it('serves a head made claimable below the floor at the next read from the start, and other sessions at once', async () => {
    const [early] = await admitEvents(db.pool, [{ scope: 'floor:c' }]);
    const client = await session();
    expect(await claim(client, 1)).toEqual([early]);
    const [late] = await admitEvents(db.pool, [{ scope: 'floor:d' }]);
    await readyAnHourAgo(late!);

    // Below this session's floor, within ten seconds of its last rescan: passed over.
    expect(await claim(client, 1)).toEqual([]);
    // A session with no line, or this one with other handles, reads from the start.
    const other = await session();
    await other.query('BEGIN');
    expect(await claim(other, 1)).toEqual([late]);
    await other.query('ROLLBACK');
    await client.query('BEGIN');
    expect(await claim(client, 1, ['generic:test'])).toEqual([late]);
    await client.query('ROLLBACK');
    // Ten seconds after its last rescan, this session reads from the start too.
    await ageLine(client, 10);
    expect(await claim(client, 1)).toEqual([late]);
  });

  it('reads the line from the start after a connection leaves PAUSED, whose parked scopes keep their ready_at', async () => {
    // A connection of its own (the other tests' events share one): a GitHub one.
    const [held] = await admitEvents(db.pool, [{ scope: 'floor:held', provider: 'github' }]);
    const { rows } = await db.pool.query<{ connection_id: string }>('SELECT connection_id FROM wharf.provider_event WHERE id = $1', [held]);
    const connection = rows[0]!.connection_id;
    await db.pool.query(`SELECT wharf.set_connection_state($1, 'PAUSED')`, [connection]);
    const client = await session();
    // The claim meets the paused head and parks its scope.
    expect(await claim(client, 1)).toEqual([]);
    const [other] = await admitEvents(db.pool, [{ scope: 'floor:after' }]);
    expect(await claim(client, 1)).toEqual([other]);
    // Resumed, the parked scope is claimable with the ready_at it had, older than this session's floor.
    await db.pool.query(`SELECT wharf.set_connection_state($1, 'ACTIVE')`, [connection]);
    expect(await claim(client, 1)).toEqual([held]);
  });

  it('reads the line from the start after wharf.reset_claim_lines(), as a DBA calls it after moving ready_at back', async () => {
    const client = await session();
    const [early] = await admitEvents(db.pool, [{ scope: 'floor:h' }]);
    expect(await claim(client, 1)).toEqual([early]);
    const [late] = await admitEvents(db.pool, [{ scope: 'floor:i' }]);
    await readyAnHourAgo(late!);
    expect(await claim(client, 1)).toEqual([]);
    await db.pool.query('SELECT wharf.reset_claim_lines()');
    expect(await claim(client, 1)).toEqual([late]);
  });

  it('never rises above a due head it saw, however many claims pass', async () => {
    const ids = await admitEvents(db.pool, [{ scope: 'floor:e' }, { scope: 'floor:f' }, { scope: 'floor:g' }]);
    const client = await session();
    const claimed: string[] = [];
    for (let n = 0; n < 3; n += 1) claimed.push(...(await claim(client, 1)));
    expect(claimed).toEqual(ids);
  });

  it('passes over the dead entries a held snapshot keeps inside the index, without visiting the table for each', async () => {
    const scopes = 200;
    const rounds = 50;
    const ids = await admitEvents(db.pool, Array.from({ length: scopes }, (_, n) => ({ scope: `floor:dead-${n}` })));
    await db.pool.query(`UPDATE wharf.scope SET ready_at = ready_at - interval '1 hour' WHERE head_id = ANY ($1::bigint[])`, [ids]);
    const holder = await session();
    await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await holder.query('SELECT count(*) FROM wharf.scope');
    // Each round leaves one dead entry per scope behind the live ones, half a
    // second apart, as served heads do: 10,000 in all (and 50 versions of
    // each scope row, which any lookup by key walks, floor or none).
    for (let round = 0; round < rounds; round += 1) {
      await db.pool.query(`UPDATE wharf.scope SET ready_at = ready_at + interval '500 milliseconds' WHERE head_id = ANY ($1::bigint[])`, [ids]);
    }
    // How many entries of ix_scope_claim the index handed to the table: a
    // dead entry the scan must visit the table for counts one; an entry below
    // the floor, passed over inside the index, none.
    const client = await session();
    const entriesRead = async () => (await readsOfOwnTransaction(client, 'wharf.scope', () => claim(client, 1)))
      .reads.indexes.get('ix_scope_claim')!.entriesRead;
    const fromTheStart = await entriesRead();
    const fromTheFloor = await entriesRead();
    // From the start a claim reads every dead entry (twice: the kinds, then
    // the line); from the floor only the second's worth below the oldest head.
    expect(fromTheStart).toBeGreaterThanOrEqual(scopes * rounds);
    expect(fromTheFloor).toBeLessThan(fromTheStart / 10);
  });

  it('locks and marks its candidates\' scope rows at the versions the line showed, never walking by key the versions a held snapshot keeps', async () => {
    const ids = await admitEvents(db.pool, Array.from({ length: 20 }, (_, n) => ({ scope: `floor:versions-${n}` })));
    await db.pool.query(`UPDATE wharf.scope SET ready_at = ready_at - interval '1 hour' WHERE head_id = ANY ($1::bigint[])`, [ids]);
    const holder = await session();
    await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await holder.query('SELECT count(*) FROM wharf.scope');
    // 100 versions of each scope row, none heap-only (ready_at is in the claim
    // line), each with its entry in the primary key: a lookup by key visits them all.
    for (let round = 0; round < 100; round += 1) {
      await db.pool.query(`UPDATE wharf.scope SET ready_at = ready_at + interval '1 millisecond' WHERE head_id = ANY ($1::bigint[])`, [ids]);
    }
    const client = await session();
    const { result, reads } = await readsOfOwnTransaction(client, 'wharf.scope', () => claim(client, 8));
    expect(result).toEqual(ids.slice(0, 8));
    // By key, the 8 locks and the 8 marks would read 1,600 entries and more.
    expect(reads.indexes.get('scope_pkey')!.entriesRead).toBeLessThan(100);
    const { rows } = await db.pool.query<{ marked: number }>(
      'SELECT count(*)::int AS marked FROM wharf.scope WHERE leased_id = ANY ($1::bigint[])', [ids.slice(0, 8)]);
    expect(rows[0]!.marked).toBe(8);
  });
});
