-- Claim and lease: workers lease the head of each scope, renew it while the
-- handler runs, and end it with complete or release. Every write after the
-- claim names the lease epoch and is a no-op under any other epoch.
--
-- The functions a worker calls are SECURITY DEFINER with a fixed search_path
-- and not executable by PUBLIC: the worker's role gets EXECUTE on them and no
-- access to the inbox tables (sql/README.md, "Roles and GRANTs").
--
-- A lease is found by primary key and checked with `state COLLATE "C" =
-- 'LEASED'`, the same test as `state = 'LEASED'` (equality is bytewise in
-- either collation) that no partial index on state could serve. No index of
-- provider_event names state today (sql/20: claim and complete must stay
-- HOT); the test keeps these lookups on the primary key should one come.
--
-- A lease ends only when no write of it can still commit. A handler's fenced
-- write (step, fence: sql/50) holds its event row FOR KEY SHARE until it
-- commits or rolls back. Every way a lease ends takes the row FOR UPDATE
-- first, which conflicts with KEY SHARE: complete, complete_many, release and
-- fail (sql/40) wait for the open fenced writes of the lease to end; the
-- reaper (FOR UPDATE SKIP LOCKED) passes over the row until they have; an
-- erasure's DELETE waits like the closing writes. A fence that comes after
-- the end reads the new state and raises WH412; one that comes while the end
-- holds its lock raises 55P03 at once (NOWAIT) and its transaction is tried
-- again, then sees WH412. So the next head of a scope is never claimed while
-- a fenced write of its predecessor is open. Renewals (FOR NO KEY UPDATE, an
-- UPDATE of no key column) stay compatible with KEY SHARE: a long step keeps
-- its lease.
--
-- Why it cannot deadlock: a fence never waits for an event row (NOWAIT), and
-- the writers that wait for one (these functions, erasure, bulk replay) hold
-- no lock a handler's business transaction takes; several event rows are
-- locked in id order. The wait is bounded (each sets lock_timeout to 5 s):
-- a closing write that meets a business transaction hung in the
-- database fails with 55P03 and the worker tries it again, in order, without
-- charging the failure budget; meanwhile the lease stays, and the worker
-- cancels the hung transaction (worker/event-run.ts).

-- Makes every session's next claim read its line from the start, not from
-- its floor (see "The claim line's floor" below): called where scopes become
-- claimable again with the ready_at they had (a workspace or a connection
-- leaving PAUSED), and by a DBA who moves ready_at back by hand.
CREATE OR REPLACE FUNCTION wharf.reset_claim_lines() RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  UPDATE wharf.claim_line_reset SET generation = generation + 1
$$;

-- Leases up to p_max rows, each the oldest QUEUED row of its scope, due now,
-- in a scope with no LEASED row and an ACTIVE (or no) workspace, admitted by a
-- connection that is not PAUSED; scopes are served longest ready first
-- (wharf.scope.ready_at). Increments attempt and lease_epoch, draws the
-- lease's random lease_token, which the handler's step and fence present
-- (sql/50-steps-fences.sql), and records when the lease began (leased_at,
-- the start of its attempt history entry). Concurrent claimers pass over
-- each other. With p_handles (`provider:event_type` and `provider:*`
-- keys), only heads this host has a handler for: another head keeps its scope
-- waiting, in order, for a host that handles it.
--
-- The due heads are found kind by kind: wharf.claimable_kinds() lists the
-- kinds waiting (a skip scan of ix_scope_claim, which leads with head_kind),
-- those this host handles are kept, and for each the first v_window due
-- scopes in ready order are read; the longest ready of all of them win. So
-- a claim reads about the same whatever waits that it cannot take: heads of
-- kinds no host here handles cost one index descent per kind, and a head of
-- a PAUSED connection is read once and then parked (scope.active false,
-- out of ix_scope_claim) until its connection leaves PAUSED or its scope
-- gets another head.
--
-- The claim line's floor. Every head served leaves a dead entry in
-- ix_scope_claim at its ready_at, behind the live ones, and a snapshot held
-- open anywhere (a long report, a REPEATABLE READ reader, a session idle in
-- transaction) keeps vacuum from removing any: a claim that starts its walk
-- at the lowest ready_at visits the table for each of them, and under a
-- ten-minute snapshot at a few hundred events a second that made a claim
-- cost half a second (bench/SCENARIOS.md, bench/claim-under-snapshot.ts).
-- So a session remembers where its line was (the custom setting
-- wharf.claim_line, per handles): the next claim starts at the oldest due
-- head it saw, less a second for heads whose admission commits late, and
-- passes over the entries before it inside the index. A head can become
-- claimable below the floor only by committing more than a second after it
-- was made ready, by its workspace or connection leaving PAUSED, or by a
-- DBA's hand. The latter two call wharf.reset_claim_lines(), whose
-- generation a claim compares with its line's; and every ten seconds a claim
-- reads the line from its start anyway, and serves a late head then, the
-- longest ready first as always.
--
-- Four statements. The first picks the candidates and locks the first
-- p_max it can take with their scope rows (SKIP LOCKED). The second, run
-- only while some connection is PAUSED, parks the scopes among the
-- candidates whose head's connection is PAUSED,
-- passing over any row or connection another session holds (never
-- waiting: a claim holds scope rows and must not wait for a connection
-- change, which waits for scope rows). The third marks each leased scope
-- (the row version locked, by its ctid) and heads it with its next queued
-- row; it is a statement of its own so
-- that its snapshot, taken after the locks, sees every row admitted into
-- those scopes (an admission locks the scope row before it inserts, so none
-- is in flight now). The fourth leases the events: it writes no indexed
-- column, so every row version stays on its page (HOT) and no index gets an
-- entry; the scope trigger is told (wharf.keeping_scopes) that the scopes
-- are kept already (sql/20). When parking left the claim short, it looks
-- again, a few times at most.
--
-- The plan is pinned to its one good shape: walk ix_scope_claim per kind,
-- fetch each candidate's scope row by its ctid and its head by primary key. PL/pgSQL caches a generic plan after five
-- calls, and for a small scope table the planner's generic choice is a
-- sequential scan of wharf.scope merge-joined with the whole provider_event
-- primary key, which reads the backlog on every claim. Turning off the
-- other scan and join methods leaves it the index path alone (bitmap scans
-- too: a bitmap scan of ix_scope_claim loses its order). The head is tested
-- with `state COLLATE "C" = 'QUEUED'` (top of this file), by primary key.
--
-- That plan is also forced generic: left to choose, the plan cache finds the
-- custom plans (LIMIT p_max known) cheaper and plans every call afresh, which
-- costs a claim a quarter of its time. JIT is off: the scan methods turned
-- off price any plan that has to use one above jit_above_cost, and compiling
-- it costs a claim tens of milliseconds. The figures are in bench/RESULTS.md
-- and the commits that pinned both.
--
-- The claim's transaction commits without waiting for its WAL to reach disk
-- (synchronous_commit off, for the rest of the caller's transaction too: a
-- worker calls claim on its own). A database crash may forget a claim of
-- its last moments: the row is QUEUED again and is claimed again, as after
-- a worker's crash. Nothing a handler commits can outlive the claim it ran
-- under: a step, a fenced transaction or a completion flushes the WAL up to
-- its own commit, past the claim. An idle worker's wake-up no longer waits
-- for a disk flush before its handler starts.
CREATE OR REPLACE FUNCTION wharf.claim(p_worker text, p_max integer DEFAULT 1, p_handles text[] DEFAULT NULL)
RETURNS SETOF wharf.provider_event
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_mergejoin = off SET enable_hashjoin = off
SET plan_cache_mode = force_generic_plan SET jit = off SET enable_indexscan = on AS $$
DECLARE
  v_now        timestamptz := clock_timestamp();
  v_lease      interval := wharf.setting_interval('lease');
  v_window     integer;
  v_candidates text[];
  v_candidate_rows tid[];
  v_parked     integer;
  v_ids        bigint[];
  v_scopes     text[];
  v_rows       tid[];
  v_all_ids    bigint[] := ARRAY[]::bigint[];
  v_all_scopes text[] := ARRAY[]::text[];
  v_all_rows   tid[] := ARRAY[]::tid[];
  v_marked     bigint;
  v_handles    text := md5(coalesce(p_handles::text, '*'));
  v_line       text[] := string_to_array(current_setting('wharf.claim_line', true), '/');
  v_floor      timestamptz := '-infinity'::timestamptz;
  v_generation bigint := (SELECT r.generation FROM wharf.claim_line_reset r WHERE r.only_row = true);  -- by primary key
  v_rescan     boolean;
  v_oldest     timestamptz;
  -- Whether there is anything to park (ix_connection_paused, nearly always empty).
  v_any_paused boolean := EXISTS (SELECT FROM wharf.connection x WHERE x.state = 'PAUSED');
BEGIN
  IF p_worker IS NULL OR p_worker = '' THEN
    RAISE EXCEPTION 'wharf.claim: worker must be named' USING ERRCODE = '22004';
  END IF;
  IF p_max IS NULL THEN
    RAISE EXCEPTION 'wharf.claim: max is required' USING ERRCODE = '22004';
  END IF;
  IF p_max < 0 THEN
    RAISE EXCEPTION 'wharf.claim: max must be zero or more, not %', p_max USING ERRCODE = '22023';
  END IF;
  -- A claim is a write even when nothing is due: on a standby (or in a
  -- read-only transaction) it says so at once, as its locks would, so the
  -- worker waits for a primary instead of idling on a server it cannot use.
  IF current_setting('transaction_read_only') = 'on' THEN
    RAISE EXCEPTION 'wharf.claim: the database is read-only (a standby?)' USING ERRCODE = '25006';
  END IF;
  PERFORM set_config('synchronous_commit', 'off', true);
  -- Room for claimers on other hosts that lock some of the same candidates.
  v_window := p_max + 16;
  -- Where this session's last claim with the same handles left its line
  -- (see "The claim line's floor" above): its floor, unless ten seconds
  -- have passed since the line was last read from its start, or the lines
  -- were reset since.
  v_rescan := cardinality(v_line) IS DISTINCT FROM 4 OR v_line[1] IS DISTINCT FROM v_handles
              OR v_line[4]::bigint IS DISTINCT FROM v_generation
              OR v_now - to_timestamp(v_line[3]::float8) >= interval '10 seconds';
  IF NOT v_rescan THEN
    v_floor := to_timestamp(v_line[2]::float8);
  END IF;

  FOR v_round IN 1..4 LOOP
    SELECT array_agg(c.scope_key ORDER BY c.ready_at, c.head_id), array_agg(c.row_id ORDER BY c.ready_at, c.head_id),
           min(c.ready_at)
      INTO v_candidates, v_candidate_rows, v_oldest
      FROM (SELECT c.scope_key, c.ready_at, c.head_id, c.row_id
              FROM wharf.claimable_kinds_since(v_floor) k(kind)
              CROSS JOIN LATERAL (
                SELECT s.scope_key, s.ready_at, s.head_id, s.ctid AS row_id FROM wharf.scope s
                 WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
                   AND s.head_kind = k.kind
                   AND s.ready_at >= v_floor
                   AND s.ready_at <= v_now  -- never earlier than head_due_at: the head is due
                 ORDER BY s.ready_at, s.head_id
                 LIMIT v_window) c
             WHERE p_handles IS NULL OR k.kind = ANY (p_handles) OR split_part(k.kind, ':', 1) || ':*' = ANY (p_handles)
             ORDER BY c.ready_at, c.head_id
             LIMIT v_window) c;
    IF v_round = 1 THEN
      -- The next claim starts at the oldest due head seen, less a second
      -- for heads that commit late; the floor only rises between rescans.
      PERFORM set_config('wharf.claim_line', concat_ws('/', v_handles,
                extract(epoch FROM greatest(v_floor, coalesce(v_oldest, v_now) - interval '1 second')),
                CASE WHEN v_rescan THEN extract(epoch FROM v_now) ELSE v_line[3]::numeric END, v_generation), false);
    END IF;
    EXIT WHEN v_candidates IS NULL;

    -- Each candidate is fetched at the row version the line showed (its
    -- ctid), in a subquery of its own (LIMIT 1 keeps the planner from
    -- flattening it), not looked up by its key: under a snapshot held open,
    -- the key's index entries lead to every version of the row the snapshot
    -- keeps, two per event served (bench/RESULTS.md §7b). A row another
    -- session changed since the line was read is passed over, as a locked
    -- one is (its old version is not this statement's to see, or, changed
    -- after this statement began, it fails the recheck of its ctid): the
    -- claim may come back short, and the next claim reads the line again.
    -- What it returns is the version it locked. The nested loop
    -- runs the candidates in their order and the LIMIT stops it after p_max
    -- locked heads, so no more rows are locked than are leased.
    SELECT array_agg(h.id ORDER BY h.n), array_agg(h.scope_key ORDER BY h.n), array_agg(h.row_id ORDER BY h.n)
      INTO v_ids, v_scopes, v_rows
      FROM (SELECT l.id, l.scope_key, l.row_id, c.n
              FROM unnest(v_candidates, v_candidate_rows) WITH ORDINALITY AS c(scope_key, row_id, n)
              CROSS JOIN LATERAL (
                SELECT e.id, s.scope_key, s.ctid AS row_id
                  FROM wharf.scope s
                  JOIN wharf.provider_event e ON e.id = s.head_id
                 WHERE s.ctid = c.row_id AND s.scope_key = c.scope_key
                   -- `IS NOT FALSE`: as in the parking below.
                   AND s.leased_id IS NULL AND s.active IS NOT FALSE AND s.ready_at <= v_now
                   AND NOT s.scope_key = ANY (v_all_scopes)  -- locked by an earlier round
                   AND e.state COLLATE "C" = 'QUEUED'  -- by primary key
                   -- The head may have changed since the candidates were read.
                   AND (p_handles IS NULL
                        OR e.provider || ':' || e.event_type = ANY (p_handles)
                        OR e.provider || ':*' = ANY (p_handles))
                   -- A paused connection's rows wait, holding their scopes, until it resumes.
                   AND (e.connection_id IS NULL
                        OR NOT EXISTS (SELECT FROM wharf.connection x WHERE x.id = e.connection_id AND x.state = 'PAUSED'))
                 LIMIT 1
                 -- NO KEY UPDATE: a claimer that locks a head another claimer has just
                 -- leased (its snapshot was older) must not make the winner's fence
                 -- (FOR KEY SHARE NOWAIT) fail as busy; the reaper, lock_scopes, purge and
                 -- erasure take FOR UPDATE and still conflict.
                   FOR NO KEY UPDATE OF s, e SKIP LOCKED) l
             LIMIT p_max - cardinality(v_all_ids)) h;

    -- Park the candidates held by a PAUSED connection (sql/20: sync_scope_activity).
    -- Only when some connection is PAUSED: the statement looks every
    -- candidate up again, which is about 8 % of a drained event's cost when
    -- none is (bench/RESULTS.md §3b). A connection paused after v_any_paused
    -- was read is still refused by the lookup above, and parked by the
    -- next claim.
    v_parked := 0;
    IF v_any_paused THEN
      UPDATE wharf.scope s SET active = false
       WHERE s.scope_key = ANY (ARRAY(  -- found and locked once, before the update
               SELECT p.scope_key
                 FROM unnest(v_candidates) AS c(scope_key)
                 CROSS JOIN LATERAL (  -- by key, as above
                   SELECT p.scope_key
                     FROM wharf.scope p
                     JOIN wharf.provider_event e ON e.id = p.head_id
                     JOIN wharf.connection x ON x.id = e.connection_id
                    -- Not a scope this round locked to lease: its row must stay where statement three finds it.
                    WHERE p.scope_key = c.scope_key AND NOT p.scope_key = ANY (v_all_scopes || coalesce(v_scopes, '{}'))
                      -- `IS NOT FALSE` (active is NOT NULL): ix_scope_claim's whole predicate
                      -- would offer the planner that index, which has no scope_key.
                      AND p.active IS NOT FALSE AND p.leased_id IS NULL AND x.state = 'PAUSED'
                    LIMIT 1
                      FOR UPDATE OF p SKIP LOCKED
                      -- SHARE conflicts with the connection's state change: a resume
                      -- either commits first (then this reads ACTIVE) or waits, and
                      -- unparks after this commits.
                      FOR SHARE OF x SKIP LOCKED) p));
      GET DIAGNOSTICS v_parked = ROW_COUNT;
    END IF;
    v_all_ids := v_all_ids || coalesce(v_ids, '{}');
    v_all_scopes := v_all_scopes || coalesce(v_scopes, '{}');
    v_all_rows := v_all_rows || coalesce(v_rows, '{}');
    -- Short because of what it parked: look again (what it locked stays locked).
    EXIT WHEN v_parked = 0 OR cardinality(v_all_ids) >= p_max;
  END LOOP;
  IF cardinality(v_all_ids) = 0 THEN
    RETURN;
  END IF;
  v_ids := v_all_ids;
  v_scopes := v_all_scopes;

  -- The scope rows locked above, at the versions locked: no other session
  -- can move them, and nothing of this claim's does (parking leaves them
  -- alone), so each is found, or the claim fails rather than lease an event
  -- without its scope's mark. Index scans are off for this statement alone
  -- (the function's SET puts them back on its way out): over statistics of
  -- an empty scope table (analyzed while empty) the planner prices a walk of
  -- the whole primary key below the TID scan of the rows it is given (the
  -- plan is cached with it; next_in_scope's index has no alternative, so it
  -- keeps its index).
  PERFORM set_config('enable_indexscan', 'off', true);
  WITH marked AS (
    UPDATE wharf.scope s
       SET leased_id = h.id, head_id = n.id, head_due_at = n.due_at, head_kind = n.kind
      FROM unnest(v_ids, v_scopes, v_all_rows) AS h(id, scope_key, row_id)
      LEFT JOIN LATERAL wharf.next_in_scope(h.scope_key, h.id) n ON true
     WHERE s.ctid = h.row_id AND s.scope_key = h.scope_key
    RETURNING s.scope_key)
  SELECT count(*) INTO v_marked FROM marked;
  PERFORM set_config('enable_indexscan', 'on', true);
  IF v_marked <> cardinality(v_scopes) THEN
    RAISE EXCEPTION 'wharf.claim: % of % locked scope rows moved before they were marked', cardinality(v_scopes) - v_marked, cardinality(v_scopes)
      USING ERRCODE = 'XX000';
  END IF;

  PERFORM set_config('wharf.keeping_scopes', 'on', true);
  RETURN QUERY
  UPDATE wharf.provider_event e
     SET state        = 'LEASED',
         attempt      = e.attempt + 1,
         lease_epoch  = e.lease_epoch + 1,
         leased_until = v_now + v_lease,
         leased_by    = p_worker,
         leased_at    = v_now,
         lease_token  = gen_random_uuid()
    FROM unnest(v_ids) AS h(id)
   WHERE e.id = h.id
  RETURNING e.*;
  PERFORM set_config('wharf.keeping_scopes', 'off', true);
END $$;

-- Extends the lease of a row LEASED under p_epoch to now + lease, also when it
-- expired but was not reaped yet. False when the lease is gone.
CREATE OR REPLACE FUNCTION wharf.renew(p_id bigint, p_epoch bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL THEN
    RAISE EXCEPTION 'wharf.renew: id and epoch are required' USING ERRCODE = '22004';
  END IF;
  UPDATE wharf.provider_event
     SET leased_until = clock_timestamp() + wharf.setting_interval('lease')
   WHERE id = p_id AND lease_epoch = p_epoch AND state COLLATE "C" = 'LEASED';  -- by primary key (top of sql/30)
  RETURN FOUND;
END $$;

-- Ends a lease with success: DONE with p_outcome ('handled', 'ignored', ...).
-- False when the row is not LEASED under p_epoch. The update is HOT (no
-- index names a column it writes); the scope is freed by free_scopes (sql/20).
--
-- Idempotent under its epoch: also true, writing nothing, when the row is
-- already DONE under p_epoch with p_outcome. Only complete and complete_many
-- write DONE, each only under the epoch that holds the lease, and an epoch
-- is drawn by one claim: such a row is this lease's own completion, which
-- committed while its reply was lost (a connection cut after COMMIT, a
-- failover), and the worker's retry learns that it took. A row finished by
-- anyone else (reaped and leased again, failed, released, erased, DONE
-- under another epoch) still answers false.
CREATE OR REPLACE FUNCTION wharf.complete(p_id bigint, p_epoch bigint, p_outcome text DEFAULT 'handled')
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
  v_scope_key text;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL OR p_outcome IS NULL OR p_outcome = '' THEN
    RAISE EXCEPTION 'wharf.complete: id, epoch and outcome are required' USING ERRCODE = '22004';
  END IF;
  PERFORM FROM wharf.provider_event WHERE id = p_id FOR UPDATE;  -- after its fenced writes (top of sql/30)
  PERFORM set_config('wharf.keeping_scopes', 'on', true);
  UPDATE wharf.provider_event
     SET state = 'DONE', outcome = p_outcome, handled_at = clock_timestamp(), leased_until = NULL
   WHERE id = p_id AND lease_epoch = p_epoch AND state COLLATE "C" = 'LEASED'  -- by primary key (top of sql/30)
  RETURNING scope_key INTO v_scope_key;
  PERFORM set_config('wharf.keeping_scopes', 'off', true);
  IF v_scope_key IS NULL THEN
    -- Read after the row lock: a first try still in flight has committed or rolled back.
    RETURN EXISTS (SELECT FROM wharf.provider_event
                    WHERE id = p_id AND lease_epoch = p_epoch AND state COLLATE "C" = 'DONE' AND outcome = p_outcome);
  END IF;
  PERFORM wharf.free_scopes(ARRAY[p_id], ARRAY[v_scope_key]);
  RETURN true;
END $$;

-- Ends many leases with success, as complete does each: the ids of the rows
-- that were LEASED under their epoch and are now DONE with their outcome, and
-- of those already DONE under their epoch with their outcome (a retry of a
-- batch whose commit was not confirmed: see complete). One
-- update of the events and one of their scopes: a busy host pays one commit
-- and one scope write per scope for a batch, its scope rows locked in the
-- one lock order (free_scopes, lock_scopes in sql/20), whatever order the
-- caller passes the leases in. The arrays must be of one
-- length (22023) with no NULL or empty element (22004).
--
-- Pinned to the primary key like claim: a generic plan for a batch of
-- unknown size must never scan the inbox.
CREATE OR REPLACE FUNCTION wharf.complete_many(p_ids bigint[], p_epochs bigint[], p_outcomes text[])
RETURNS SETOF bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_mergejoin = off SET enable_hashjoin = off SET lock_timeout = '5s' AS $$
DECLARE
  v_ids    bigint[];
  v_scopes text[];
BEGIN
  IF p_ids IS NULL OR p_epochs IS NULL OR p_outcomes IS NULL THEN
    RAISE EXCEPTION 'wharf.complete_many: ids, epochs and outcomes are required' USING ERRCODE = '22004';
  END IF;
  IF cardinality(p_epochs) <> cardinality(p_ids) OR cardinality(p_outcomes) <> cardinality(p_ids) THEN
    RAISE EXCEPTION 'wharf.complete_many: % ids, % epochs and % outcomes: one of each per lease',
      cardinality(p_ids), cardinality(p_epochs), cardinality(p_outcomes) USING ERRCODE = '22023';
  END IF;
  IF EXISTS (SELECT FROM unnest(p_ids, p_epochs, p_outcomes) AS c(id, epoch, outcome)
              WHERE c.id IS NULL OR c.epoch IS NULL OR c.outcome IS NULL OR c.outcome = '') THEN
    RAISE EXCEPTION 'wharf.complete_many: every id, epoch and outcome is required' USING ERRCODE = '22004';
  END IF;
  PERFORM FROM wharf.provider_event WHERE id = ANY (p_ids) ORDER BY id FOR UPDATE;  -- top of sql/30
  PERFORM set_config('wharf.keeping_scopes', 'on', true);
  WITH done AS (
    UPDATE wharf.provider_event e
       SET state = 'DONE', outcome = c.outcome, handled_at = clock_timestamp(), leased_until = NULL
      FROM unnest(p_ids, p_epochs, p_outcomes) WITH ORDINALITY AS c(id, epoch, outcome, n)
     WHERE e.id = c.id AND e.lease_epoch = c.epoch AND e.state COLLATE "C" = 'LEASED'  -- by primary key (top of sql/30)
    RETURNING e.id, e.scope_key, c.n
  )
  SELECT array_agg(id ORDER BY n), array_agg(scope_key ORDER BY n) INTO v_ids, v_scopes FROM done;
  PERFORM set_config('wharf.keeping_scopes', 'off', true);
  -- Completed under their epoch by an earlier try of this batch (the row
  -- locks above waited for a try still in flight): DONE with the same epoch
  -- and outcome, and not by the update above. Looked up only when the
  -- update missed some: a lookup per lease that nearly every call would pay
  -- for nothing.
  IF coalesce(cardinality(v_ids), 0) < cardinality(p_ids) THEN
    RETURN QUERY
    SELECT e.id
      FROM unnest(p_ids, p_epochs, p_outcomes) AS c(id, epoch, outcome)
      JOIN wharf.provider_event e ON e.id = c.id
     WHERE e.lease_epoch = c.epoch AND e.state COLLATE "C" = 'DONE' AND e.outcome = c.outcome  -- by primary key
       AND NOT e.id = ANY (coalesce(v_ids, '{}'));
  END IF;
  IF v_ids IS NULL THEN
    RETURN;
  END IF;
  PERFORM wharf.free_scopes(v_ids, v_scopes);
  RETURN QUERY SELECT unnest(v_ids);
END $$;

-- A stopping worker gives the row back: QUEUED, due at once, attempt as it
-- was before the claim, the lease kept in the attempt history as
-- 'released', and idle claimers woken. False when the row is not LEASED
-- under p_epoch.
--
-- Idempotent under its epoch: also true, writing nothing, when the attempt
-- history holds p_epoch's lease as 'released'. Only release writes that
-- entry, only under the epoch that holds the lease: it is this lease's own
-- release, which committed while its reply was lost (a connection cut after
-- COMMIT, a failover), and the worker's retry learns that it took, also once
-- the row has been claimed again. A lease that ended otherwise (completed,
-- failed, reaped, erased) still answers false.
CREATE OR REPLACE FUNCTION wharf.release(p_id bigint, p_epoch bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
  v_row record;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL THEN
    RAISE EXCEPTION 'wharf.release: id and epoch are required' USING ERRCODE = '22004';
  END IF;
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  PERFORM FROM wharf.provider_event WHERE id = p_id FOR UPDATE;  -- after its fenced writes (top of sql/30)
  UPDATE wharf.provider_event
     SET state = 'QUEUED', attempt = greatest(attempt - 1, 0), next_attempt_at = now(), leased_until = NULL
   WHERE id = p_id AND lease_epoch = p_epoch AND state COLLATE "C" = 'LEASED'  -- by primary key (top of sql/30)
  RETURNING attempt + 1 AS attempt, leased_by, leased_at INTO v_row;  -- the lease's own attempt
  IF NOT FOUND THEN
    -- Read after the row lock: a first try still in flight has committed or rolled back.
    RETURN EXISTS (SELECT FROM wharf.event_attempt h
                    WHERE h.event_id = p_id AND h.lease_epoch = p_epoch AND h.ended = 'released');  -- by primary key
  END IF;
  INSERT INTO wharf.event_attempt (event_id, lease_epoch, attempt, worker, started_at, ended_at, ended, left_state)
  VALUES (p_id, p_epoch, v_row.attempt, v_row.leased_by, v_row.leased_at, clock_timestamp(), 'released', 'QUEUED');
  PERFORM wharf.notify_idle_claimers();
  RETURN true;
END $$;

-- Takes back every lease past leased_until: QUEUED after the retry delay with
-- failures + 1 and error_class 'LeaseExpired', or DEAD once failures reach
-- max_attempts; each lease stays in the attempt history as 'expired', with
-- the state it left. Skips rows under a fenced write or in a scope busy
-- elsewhere (the next run takes them). Returns how many it reaped.
-- Also forgets idle listeners whose session has ended.
--
-- The leases are read from the scope rows (leased_id): the event table has
-- no index of its leases, which every claim would pay an entry for. That is
-- a scan of wharf.scope, the scopes in use, every 30 s or so per host, and
-- each lease's event by primary key: never a hash join over the inbox.
CREATE OR REPLACE FUNCTION wharf.reap() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_hashjoin = off SET enable_mergejoin = off AS $$
DECLARE
  v_now          timestamptz := clock_timestamp();
  v_max_attempts integer := wharf.setting_integer('max_attempts');
  v_reaped       integer;
BEGIN
  -- The scope rows are locked here, skipping busy ones, rather than by the
  -- trigger in update order: an admission fanning out holds one scope and
  -- waits for the next, and must never wait for a reaper waiting for it.
  WITH expired AS (
    SELECT e.id,
           -- An operator moved this head to the dead letters while the lease ran (sql/98).
           e.failures + 1 >= v_max_attempts OR wharf.dead_letter_after_lease(e.id, e.lease_epoch) AS dead
      FROM wharf.scope s
      JOIN wharf.provider_event e ON e.id = s.leased_id
     WHERE s.leased_id IS NOT NULL AND e.state = 'LEASED' AND e.leased_until < v_now
     FOR UPDATE OF e, s SKIP LOCKED
  ), reaped AS (
    UPDATE wharf.provider_event e
       SET failures        = e.failures + 1,
           error_class     = 'LeaseExpired',
           leased_until    = NULL,
           state           = CASE WHEN expired.dead THEN 'DEAD' ELSE 'QUEUED' END,
           dead_at         = CASE WHEN expired.dead THEN v_now END,
           next_attempt_at = CASE WHEN expired.dead THEN e.next_attempt_at
                                  ELSE v_now + wharf.retry_delay(e.attempt) END
      FROM expired
     WHERE e.id = expired.id
    RETURNING e.id, e.lease_epoch, e.attempt, e.leased_by, e.leased_at, e.state
  )
  INSERT INTO wharf.event_attempt (event_id, lease_epoch, attempt, worker, started_at, ended_at, ended, error_class, left_state)
  SELECT id, lease_epoch, attempt, leased_by, leased_at, v_now, 'expired', 'LeaseExpired', state FROM reaped;
  GET DIAGNOSTICS v_reaped = ROW_COUNT;

  DELETE FROM wharf.idle_listener l
   WHERE NOT EXISTS (SELECT FROM pg_stat_activity a WHERE a.pid = l.backend_pid);
  RETURN v_reaped;
END $$;

-- Wakes the idle claimers (delivered at commit) and forgets their idle marks:
-- each mark buys one notification, not one per admission, because pg_notify
-- serializes the commits of notifying transactions on one global lock. A
-- woken claimer claims, and marks itself idle again before it sleeps. Callers
-- lock idle_listener in ROW EXCLUSIVE mode before their first row lock (so
-- mark_idle orders after them and no lock cycle can form with it).
CREATE OR REPLACE FUNCTION wharf.notify_idle_claimers() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM wharf.idle_listener;
  IF FOUND THEN
    PERFORM pg_notify('wharf_event', '');
  END IF;
END $$;

-- A claimer's listener says it has nothing to do and waits on LISTEN
-- wharf_event: the next admission notifies it, once. True when marked; false,
-- changing nothing, while an admission is in flight (try again shortly). The
-- lock proves no admission is past its check, so the claim the caller makes
-- after this commits sees every row admitted before; NOWAIT because a waiting
-- request would queue every new admission behind it.
CREATE OR REPLACE FUNCTION wharf.mark_idle(p_listener text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_listener IS NULL OR p_listener = '' THEN
    RAISE EXCEPTION 'wharf.mark_idle: listener must be named' USING ERRCODE = '22004';
  END IF;
  BEGIN
    LOCK TABLE wharf.idle_listener IN SHARE ROW EXCLUSIVE MODE NOWAIT;
  EXCEPTION WHEN lock_not_available THEN
    RETURN false;
  END;
  INSERT INTO wharf.idle_listener (listener, backend_pid) VALUES (p_listener, pg_backend_pid())
  ON CONFLICT (listener) DO UPDATE SET backend_pid = excluded.backend_pid, since = now();
  RETURN true;
END $$;

-- The listener's host is busy again: admissions stop paying for pg_notify.
CREATE OR REPLACE FUNCTION wharf.mark_busy(p_listener text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  DELETE FROM wharf.idle_listener WHERE listener = p_listener
$$;

-- The earliest time after now at which a scope head that no lease holds
-- falls due (a retry waiting out its delay); NULL when none waits. Read kind
-- by kind from ix_scope_claim: one descent per kind. A claimer
-- about to sleep wakes by itself then: a retry becomes due without any
-- commit that could notify it.
CREATE OR REPLACE FUNCTION wharf.next_due_at() RETURNS timestamptz
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT min(n.ready_at)
    FROM wharf.claimable_kinds() k(kind)
    CROSS JOIN LATERAL (SELECT s.ready_at FROM wharf.scope s
                         WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
                           AND s.head_kind = k.kind AND s.ready_at > clock_timestamp()
                         ORDER BY s.ready_at LIMIT 1) n
$$;

-- What a stuck scope is: the one definition that queue_stats' gauge below,
-- the stuck-scopes list (stuck_scope_list, sql/98) and the stuck_scope alert
-- rule (evaluate_alert_rules, sql/99) all read, so that the gauge counts
-- exactly the scopes the list shows. A scope is stuck since the earlier of
--   failing_since  when its head first failed (a lease of it failed or
--                  expired) with no event of the scope handled since: kept
--                  through the head's retries, leased or waiting out their
--                  delay, cleared when a lease of the scope ends handled or
--                  dead (sql/20);
--   ready_at       when its head, due and unleased, joined the claim line
--                  (ix_scope_claim): it waits there for a claimer, because
--                  no host handles its kind or none keeps up;
-- and stuck when that is before p_before (now minus stuck_after, or an
-- alert rule's window). Neither clock starts at the head's arrival: a
-- backlog served in order is not stuck, however old its rows. Not stuck:
-- a head whose connection is PAUSED, failing or not (held on purpose; it is
-- stuck again, from the same time, when the connection resumes), a scope
-- whose lease is held and has not failed (a long handler is the reaper's
-- business), a scope parked out of the claim line (active false), a head
-- not yet due that never failed.
-- Returns the stuck scopes of workspace p_workspace_id (NULL: every
-- workspace and the installation scopes), longest stuck first, at most
-- p_limit (NULL: all), each with its head (the leased event, else the
-- queued one) and since when. Read through ix_scope_failing and, kind by
-- kind, ix_scope_claim: the cost follows the stuck scopes read, not the
-- inbox. A head's connection is looked up (by primary keys) only while
-- some connection is PAUSED, and as a scalar subquery, not NOT EXISTS: the
-- planner keeps the index scans in order under their LIMIT instead of
-- turning it into an anti join over the whole inbox. Internal.
CREATE OR REPLACE FUNCTION wharf.scopes_stuck_since(p_before timestamptz, p_workspace_id bigint, p_limit integer)
RETURNS TABLE (scope_key text, workspace_id bigint, head_id bigint, since timestamptz)
LANGUAGE sql STABLE AS $$
  SELECT x.scope_key, x.workspace_id, x.head_id, x.since
    FROM (SELECT DISTINCT ON (y.scope_key) y.scope_key, y.workspace_id, y.head_id, y.since
            FROM ((SELECT s.scope_key, s.workspace_id, coalesce(s.leased_id, s.head_id) AS head_id, s.failing_since AS since
                     FROM wharf.scope s
                    WHERE s.failing_since < p_before
                      AND (p_workspace_id IS NULL OR s.workspace_id = p_workspace_id)
                      AND (NOT EXISTS (SELECT FROM wharf.connection p WHERE p.state = 'PAUSED')
                           OR (SELECT c.state FROM wharf.provider_event h JOIN wharf.connection c ON c.id = h.connection_id
                                WHERE h.id = coalesce(s.leased_id, s.head_id)) IS DISTINCT FROM 'PAUSED')
                    ORDER BY s.failing_since LIMIT p_limit)
                  UNION ALL
                  (SELECT w.scope_key, w.workspace_id, w.head_id, w.ready_at
                     FROM wharf.claimable_kinds() k(kind)
                     CROSS JOIN LATERAL (SELECT s.scope_key, s.workspace_id, s.head_id, s.ready_at FROM wharf.scope s
                                          WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
                                            AND s.head_kind = k.kind AND s.ready_at < p_before
                                            AND (p_workspace_id IS NULL OR s.workspace_id = p_workspace_id)
                                            AND (NOT EXISTS (SELECT FROM wharf.connection p WHERE p.state = 'PAUSED')
                                                 OR (SELECT c.state FROM wharf.provider_event h
                                                       JOIN wharf.connection c ON c.id = h.connection_id
                                                      WHERE h.id = s.head_id) IS DISTINCT FROM 'PAUSED')
                                          ORDER BY s.ready_at LIMIT p_limit) w
                    ORDER BY w.ready_at LIMIT p_limit)) y
           ORDER BY y.scope_key, y.since) x
   ORDER BY x.since, x.scope_key
   LIMIT p_limit
$$;

-- The worker's gauges, at a cost that does not grow with the inbox:
--   depth_by_state   rows by state: counted while the inbox heap is at most
--                    1,024 pages (8 MB), else estimated from the planner's
--                    statistics (the row estimate scaled to the heap's size
--                    now, times each state's frequency in pg_stats), as
--                    depth_estimated says
--   oldest_due_age   seconds the scope first in the claim line has waited
--                    since it became claimable (0 when none is): the first
--                    entry of ix_scope_claim, the claims' own order
--   stuck_scopes     scopes stuck for longer than stuck_after
--                    (scopes_stuck_since, above: the stuck-scopes list's
--                    rule), counted up to 10,000
--   oldest_stuck_age seconds the longest-stuck of them has been so (0: none)
-- JIT off: the planner prices the per-kind scans under their LIMIT as if
-- every kind held 10,000 stuck heads, and compiling that plan costs
-- hundreds of ms on every scrape, for a query that runs in a few.
CREATE OR REPLACE FUNCTION wharf.queue_stats(
  OUT depth_by_state jsonb, OUT oldest_due_age float8, OUT depth_estimated boolean,
  OUT stuck_scopes bigint, OUT oldest_stuck_age float8)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off AS $$
DECLARE
  v_now         timestamptz := clock_timestamp();
  v_stuck_since timestamptz := clock_timestamp() - wharf.setting_interval('stuck_after');
  v_pages       bigint := pg_relation_size('wharf.provider_event') / current_setting('block_size')::bigint;
BEGIN
  depth_estimated := v_pages > 1024;
  IF NOT depth_estimated THEN
    SELECT coalesce(jsonb_object_agg(state, n), '{}') INTO depth_by_state
      FROM (SELECT state, count(*) AS n FROM wharf.provider_event GROUP BY state) s;
  ELSE
    SELECT coalesce(jsonb_object_agg(f.state, round(t.rows * f.freq)::bigint), '{}') INTO depth_by_state
      FROM (SELECT CASE WHEN c.relpages > 0 THEN c.reltuples / c.relpages * v_pages ELSE 0 END AS rows
              FROM pg_class c WHERE c.oid = 'wharf.provider_event'::regclass) t,
           LATERAL (SELECT v.state, v.freq
                      FROM pg_stats st,
                           unnest(st.most_common_vals::text::text[], st.most_common_freqs) AS v(state, freq)
                     WHERE st.schemaname = 'wharf' AND st.tablename = 'provider_event' AND st.attname = 'state') f;
  END IF;

  SELECT coalesce(extract(epoch FROM v_now - min(o.ready_at))::float8, 0) INTO oldest_due_age
    FROM wharf.claimable_kinds() k(kind)
    CROSS JOIN LATERAL (SELECT s.ready_at FROM wharf.scope s
                         WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
                           AND s.head_kind = k.kind AND s.ready_at <= v_now
                         ORDER BY s.ready_at LIMIT 1) o;

  SELECT count(*), coalesce(extract(epoch FROM v_now - min(x.since))::float8, 0)
    INTO stuck_scopes, oldest_stuck_age
    FROM wharf.scopes_stuck_since(v_stuck_since, NULL, 10000) x;
END $$;

REVOKE ALL ON FUNCTION wharf.claim(text, integer, text[]), wharf.renew(bigint, bigint),
  wharf.complete(bigint, bigint, text), wharf.complete_many(bigint[], bigint[], text[]), wharf.release(bigint, bigint), wharf.reap(),
  wharf.mark_idle(text), wharf.mark_busy(text), wharf.next_due_at(), wharf.queue_stats(), wharf.reset_claim_lines() FROM PUBLIC;
