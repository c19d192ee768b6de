// Issue 54, item 1: which layout of the scope bookkeeping keeps admission and
// claim flat while a snapshot is held open. Three layouts, each reduced to the
// statements of the hot path (admit, claim, complete) on its own tables, in
// one database, served alike and measured alike:
//   npx tsx bench/scope-designs-under-snapshot.ts [events served, e.g. 10000,100000]
// (DATABASE_URL = a maintenance database URL.)
//
// - `today`: Wharf's layout (sql/20-scope-heads.sql): one scope row holding
//   the head, the lease mark and ready_at, updated in place twice per served
//   event; the claim line is a partial index on the same row, so neither
//   update is heap-only and each leaves an entry in the primary key.
// - `hot`: the same row with no index but its primary key and a fill factor
//   of 20, so its updates are heap-only while a page has room; the claim
//   line is a table of its own (a row inserted when a scope becomes
//   claimable, deleted when it is leased).
// - `versions`: a scope row that the hot path only locks (identity and lock
//   target, never updated), and the moving state as insert-only rows keyed
//   (scope_key, seq): each change inserts the next state and deletes the
//   last, and a lookup reads the key's newest entry first (ORDER BY seq DESC
//   LIMIT 1), so the versions a snapshot keeps lie behind it and are never
//   visited. The claim line is the state table's partial index.
//
// The event rows are alike in all three (a narrow row, its state updated
// heap-only). Served events: rounds of one admission per scope at its tail,
// a claim of every ready head, and their completions, while another session
// holds a REPEATABLE READ snapshot. Measured: EXPLAIN (ANALYZE, BUFFERS) of
// one admission into a scope with a backlog, one into an empty scope, and
// one claim of 8 from a session's floor (as Wharf's claim starts), each in a
// transaction rolled back; medians of 15.
import type pg from 'pg';
import { withBenchDatabase, type BenchDatabase } from './databases.js';
import { explained, medianCost, type Cost } from './explained.js';

const serverUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const steps = (process.argv[2] ?? '10000,100000').split(',').map(Number);
const scopes = 200;
const backlogPerScope = 100;
const calls = 15;
const designs = ['today', 'hot', 'versions'] as const;
type Design = (typeof designs)[number];

/** Every design's event table: the order within a scope and the state, heap-only updates. */
const eventTable = (schema: Design) => `
  CREATE TABLE ${schema}.event (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, scope_key text NOT NULL,
                                state text NOT NULL DEFAULT 'QUEUED', attempt int NOT NULL DEFAULT 0) WITH (fillfactor = 50);
  CREATE INDEX ON ${schema}.event (scope_key, id);
  -- The next QUEUED event of a scope after p_after.
  CREATE FUNCTION ${schema}.next_in_scope(p_scope text, p_after bigint) RETURNS bigint LANGUAGE sql STABLE AS $f$
    SELECT id FROM ${schema}.event WHERE scope_key = p_scope AND id > p_after AND state = 'QUEUED' ORDER BY id LIMIT 1 $f$;`;

const schemaOf: Record<Design, string> = {
  today: `
    CREATE SCHEMA today;
    ${eventTable('today')}
    CREATE TABLE today.scope (scope_key text PRIMARY KEY, head_id bigint, ready_at timestamptz, leased_id bigint);
    CREATE INDEX ix_today_claim ON today.scope (ready_at, head_id) WHERE head_id IS NOT NULL AND leased_id IS NULL;
    CREATE FUNCTION today.admit(p_scope text) RETURNS void LANGUAGE plpgsql AS $f$
    DECLARE v_id bigint;
    BEGIN
      INSERT INTO today.scope AS s (scope_key) VALUES (p_scope) ON CONFLICT (scope_key) DO UPDATE SET head_id = s.head_id WHERE false;
      INSERT INTO today.event (scope_key) VALUES (p_scope) RETURNING id INTO v_id;
      UPDATE today.scope SET head_id = v_id, ready_at = clock_timestamp()
       WHERE scope_key = p_scope AND head_id IS NULL AND leased_id IS NULL;
    END $f$;
    CREATE FUNCTION today.claim(p_max int, p_floor timestamptz) RETURNS SETOF bigint LANGUAGE plpgsql AS $f$
    DECLARE v_ids bigint[]; v_scopes text[];
    BEGIN
      SELECT array_agg(c.head_id), array_agg(c.scope_key) INTO v_ids, v_scopes FROM (
        SELECT s.head_id, s.scope_key FROM today.scope s
         WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.ready_at >= p_floor
         ORDER BY s.ready_at, s.head_id LIMIT p_max FOR NO KEY UPDATE SKIP LOCKED) c;
      UPDATE today.scope s SET leased_id = h.id, head_id = today.next_in_scope(h.scope_key, h.id)
        FROM unnest(v_ids, v_scopes) h(id, scope_key) WHERE s.scope_key = h.scope_key;
      UPDATE today.event e SET state = 'LEASED', attempt = attempt + 1 WHERE e.id = ANY (v_ids);
      RETURN QUERY SELECT unnest(v_ids);
    END $f$;
    CREATE FUNCTION today.complete(p_ids bigint[]) RETURNS void LANGUAGE plpgsql AS $f$
    BEGIN
      UPDATE today.event SET state = 'DONE' WHERE id = ANY (p_ids);
      UPDATE today.scope s SET leased_id = NULL, ready_at = clock_timestamp()
        FROM today.event e WHERE e.id = ANY (p_ids) AND s.scope_key = e.scope_key AND s.leased_id = e.id;
    END $f$;`,

  hot: `
    CREATE SCHEMA hot;
    ${eventTable('hot')}
    CREATE TABLE hot.scope (scope_key text PRIMARY KEY, head_id bigint, ready_at timestamptz, leased_id bigint) WITH (fillfactor = 20);
    CREATE TABLE hot.line (ready_at timestamptz NOT NULL, head_id bigint NOT NULL, scope_key text NOT NULL, PRIMARY KEY (ready_at, head_id));
    CREATE FUNCTION hot.admit(p_scope text) RETURNS void LANGUAGE plpgsql AS $f$
    DECLARE v_id bigint; v_now timestamptz := clock_timestamp();
    BEGIN
      INSERT INTO hot.scope AS s (scope_key) VALUES (p_scope) ON CONFLICT (scope_key) DO UPDATE SET head_id = s.head_id WHERE false;
      INSERT INTO hot.event (scope_key) VALUES (p_scope) RETURNING id INTO v_id;
      UPDATE hot.scope SET head_id = v_id, ready_at = v_now WHERE scope_key = p_scope AND head_id IS NULL AND leased_id IS NULL;
      IF FOUND THEN INSERT INTO hot.line VALUES (v_now, v_id, p_scope); END IF;
    END $f$;
    CREATE FUNCTION hot.claim(p_max int, p_floor timestamptz) RETURNS SETOF bigint LANGUAGE plpgsql AS $f$
    DECLARE v_ids bigint[]; v_scopes text[];
    BEGIN
      WITH taken AS (
        DELETE FROM hot.line l WHERE (l.ready_at, l.head_id) IN (
          SELECT ready_at, head_id FROM hot.line WHERE ready_at >= p_floor ORDER BY ready_at, head_id LIMIT p_max FOR UPDATE SKIP LOCKED)
        RETURNING l.head_id, l.scope_key)
      SELECT array_agg(head_id), array_agg(scope_key) INTO v_ids, v_scopes FROM taken;
      UPDATE hot.scope s SET leased_id = h.id, head_id = hot.next_in_scope(h.scope_key, h.id)
        FROM unnest(v_ids, v_scopes) h(id, scope_key) WHERE s.scope_key = h.scope_key;
      UPDATE hot.event e SET state = 'LEASED', attempt = attempt + 1 WHERE e.id = ANY (v_ids);
      RETURN QUERY SELECT unnest(v_ids);
    END $f$;
    CREATE FUNCTION hot.complete(p_ids bigint[]) RETURNS void LANGUAGE plpgsql AS $f$
    DECLARE v_now timestamptz := clock_timestamp();
    BEGIN
      UPDATE hot.event SET state = 'DONE' WHERE id = ANY (p_ids);
      WITH freed AS (
        UPDATE hot.scope s SET leased_id = NULL, ready_at = v_now
          FROM hot.event e WHERE e.id = ANY (p_ids) AND s.scope_key = e.scope_key AND s.leased_id = e.id
        RETURNING s.scope_key, s.head_id)
      INSERT INTO hot.line SELECT v_now, head_id, scope_key FROM freed WHERE head_id IS NOT NULL;
    END $f$;`,

  versions: `
    CREATE SCHEMA versions;
    ${eventTable('versions')}
    CREATE TABLE versions.scope (scope_key text PRIMARY KEY);
    CREATE TABLE versions.state (scope_key text NOT NULL, seq bigint GENERATED ALWAYS AS IDENTITY,
                                 head_id bigint, ready_at timestamptz, leased_id bigint, PRIMARY KEY (scope_key, seq));
    CREATE INDEX ix_versions_claim ON versions.state (ready_at, head_id) WHERE head_id IS NOT NULL AND leased_id IS NULL;
    -- A scope's state now: its newest row, read first.
    CREATE FUNCTION versions.current(p_scope text) RETURNS versions.state LANGUAGE sql STABLE AS $f$
      SELECT * FROM versions.state WHERE scope_key = p_scope ORDER BY seq DESC LIMIT 1 $f$;
    -- The next state of a scope: its last row goes, the new one is the newest.
    CREATE FUNCTION versions.move(p_old versions.state, p_head bigint, p_ready timestamptz, p_leased bigint) RETURNS void LANGUAGE sql AS $f$
      DELETE FROM versions.state WHERE scope_key = p_old.scope_key AND seq = p_old.seq;
      INSERT INTO versions.state (scope_key, head_id, ready_at, leased_id) VALUES (p_old.scope_key, p_head, p_ready, p_leased) $f$;
    CREATE FUNCTION versions.admit(p_scope text) RETURNS void LANGUAGE plpgsql AS $f$
    DECLARE v_id bigint; v_state versions.state;
    BEGIN
      INSERT INTO versions.scope AS s (scope_key) VALUES (p_scope) ON CONFLICT (scope_key) DO UPDATE SET scope_key = s.scope_key WHERE false;
      INSERT INTO versions.event (scope_key) VALUES (p_scope) RETURNING id INTO v_id;
      v_state := versions.current(p_scope);
      IF v_state.seq IS NULL THEN
        INSERT INTO versions.state (scope_key, head_id, ready_at) VALUES (p_scope, v_id, clock_timestamp());
      ELSIF v_state.head_id IS NULL THEN
        PERFORM versions.move(v_state, v_id, clock_timestamp(), v_state.leased_id);
      END IF;
    END $f$;
    CREATE FUNCTION versions.claim(p_max int, p_floor timestamptz) RETURNS SETOF bigint LANGUAGE plpgsql AS $f$
    DECLARE v_taken versions.state;
    BEGIN
      FOR v_taken IN
        SELECT c.* FROM (
          SELECT * FROM versions.state WHERE head_id IS NOT NULL AND leased_id IS NULL AND ready_at >= p_floor
           ORDER BY ready_at, head_id LIMIT p_max + 16) c
        CROSS JOIN LATERAL (SELECT s.scope_key FROM versions.scope s WHERE s.scope_key = c.scope_key FOR NO KEY UPDATE SKIP LOCKED) s
        LIMIT p_max
      LOOP
        -- The candidate's row may have been moved by the session that held the lock.
        IF (versions.current(v_taken.scope_key)).seq = v_taken.seq THEN
          PERFORM versions.move(v_taken, versions.next_in_scope(v_taken.scope_key, v_taken.head_id), v_taken.ready_at, v_taken.head_id);
          UPDATE versions.event SET state = 'LEASED', attempt = attempt + 1 WHERE id = v_taken.head_id;
          RETURN NEXT v_taken.head_id;
        END IF;
      END LOOP;
    END $f$;
    CREATE FUNCTION versions.complete(p_ids bigint[]) RETURNS void LANGUAGE plpgsql AS $f$
    DECLARE v_event record; v_state versions.state;
    BEGIN
      FOR v_event IN UPDATE versions.event SET state = 'DONE' WHERE id = ANY (p_ids) RETURNING id, scope_key LOOP
        PERFORM FROM versions.scope WHERE scope_key = v_event.scope_key FOR NO KEY UPDATE;
        v_state := versions.current(v_event.scope_key);
        IF v_state.leased_id = v_event.id THEN
          PERFORM versions.move(v_state, v_state.head_id, clock_timestamp(), NULL);
        END IF;
      END LOOP;
    END $f$;`,
};

/** Medians over `calls` transactions, each rolled back, so that every call sees the same state. */
async function measure(db: BenchDatabase, sql: string): Promise<Cost> {
  const client = await db.pool.connect();
  try {
    const costs: Cost[] = [];
    for (let call = 0; call < calls; call += 1) {
      await client.query('BEGIN');
      costs.push(await explained(client, sql));
      await client.query('ROLLBACK');
    }
    return medianCost(costs);
  } finally {
    client.release();
  }
}

const scopeKey = (k: number) => `scope-${k}`;

/** One round per served event of every scope: an admission at each tail, a claim of all ready heads, their completions. */
async function serve(client: pg.PoolClient, design: Design, rounds: number): Promise<void> {
  for (let round = 0; round < rounds; round += 1) {
    await client.query(`SELECT ${design}.admit('scope-' || k) FROM generate_series(0, ${scopes - 1}) k`);
    const { rows } = await client.query<{ id: string }>(`SELECT id FROM ${design}.claim(${scopes}, '-infinity') id`);
    await client.query(`SELECT ${design}.complete($1::bigint[])`, [rows.map((r) => r.id)]);
  }
}

const format = (cost: Cost, base: Cost | undefined) =>
  `${cost.ms.toFixed(2)} ms, ${Math.round(cost.buffers).toLocaleString('en-US')} buf`
  + (base ? ` (${(cost.buffers / base.buffers).toFixed(1)}×, ${(cost.ms / base.ms).toFixed(1)}×)` : '');

await withBenchDatabase(serverUrl, 'scope_designs', { wharf: false, poolSize: 4 }, async (db) => {
  for (const design of designs) {
    await db.pool.query(schemaOf[design]);
    // A backlog in every scope but the last, which the empty-scope admission uses.
    await db.pool.query(`SELECT ${design}.admit('scope-' || (g % ${scopes - 1})) FROM generate_series(0, ${(scopes - 1) * backlogPerScope - 1}) g`);
  }
  await db.pool.query('VACUUM ANALYZE');

  // The floor a session's claim would start from: the oldest ready head now (as Wharf's claim line).
  const floorOf = async (design: Design) => {
    const table = design === 'hot' ? 'hot.line' : `${design}.${design === 'today' ? 'scope' : 'state'}`;
    const { rows } = await db.pool.query<{ floor: string }>(
      `SELECT coalesce(min(ready_at), now())::text AS floor FROM ${table} WHERE head_id IS NOT NULL${design === 'hot' ? '' : ' AND leased_id IS NULL'}`);
    return rows[0]!.floor;
  };
  const base = new Map<string, Cost>();
  const row = async (label: string, baseline = false) => {
    const cells: string[] = [];
    for (const design of designs) {
      const costs = {
        admit: await measure(db, `SELECT ${design}.admit('${scopeKey(7)}')`),
        empty: await measure(db, `SELECT ${design}.admit('${scopeKey(scopes - 1)}')`),
        claim: await measure(db, `SELECT * FROM ${design}.claim(8, '${await floorOf(design)}')`),
      };
      for (const [what, cost] of Object.entries(costs)) {
        if (baseline) base.set(`${design}/${what}`, cost);
        cells.push(format(cost, baseline ? undefined : base.get(`${design}/${what}`)));
      }
    }
    console.log(`| ${label} | ${cells.join(' | ')} |`);
  };
  console.log(`${scopes} scopes, ${backlogPerScope} queued in each but one; medians of ${calls} calls, each rolled back; `
    + 'ratios (buffers, time) against the snapshot\'s first moment.\n');
  console.log(`| state | ${designs.map((d) => `${d}: admit | ${d}: admit, empty scope | ${d}: claim of 8`).join(' | ')} |`);
  console.log(`|---|${designs.map(() => '---:|---:|---:').join('|')}|`);
  await row('no snapshot held');

  const holder = await db.pool.connect();
  const server = await db.pool.connect();
  try {
    await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await holder.query('SELECT count(*) FROM today.scope');
    await row('snapshot held, 0 served since', true);
    let served = 0;
    for (const target of steps) {
      const rounds = Math.ceil((target - served) / scopes);
      for (const design of designs) {
        const started = performance.now();
        await serve(server, design, rounds);
        console.error(`${design}: ${rounds * scopes} more served in ${((performance.now() - started) / 1000).toFixed(1)} s`);
      }
      served += rounds * scopes;
      await row(`snapshot held, ${served.toLocaleString('en-US')} served since`);
    }
    await holder.query('COMMIT');
  } finally {
    server.release();
    holder.release();
  }
});
