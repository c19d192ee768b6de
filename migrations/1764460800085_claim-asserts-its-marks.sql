-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   changed  function wharf.claim(text,integer,text[])
--   changed  function wharf.issue_events(bigint,bigint,integer,bigint)

-- ======== sql/30-claim-lease.sql ========

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

REVOKE ALL ON FUNCTION wharf.claim(text, integer, text[]), wharf.renew(bigint, bigint),
  wharf.complete(bigint, bigint, text), wharf.complete_many(bigint[], bigint[], text[]), wharf.release(bigint, bigint), wharf.reap(),
  wharf.mark_idle(text), wharf.mark_busy(text), wharf.next_due_at(), wharf.queue_stats(), wharf.reset_claim_lines() FROM PUBLIC;

-- ======== sql/97-issues.sql ========

-- The events of issue p_id of workspace p_workspace_id that still carry its
-- error class as their last cause (and, unless the issue is of event type
-- '*', their last failure the issue's fingerprint), newest first, as list_events pages them
-- ({events, next_cursor}, older than p_before_id when given). NULL when the
-- workspace has no such issue. An issue of event type '*' matches every
-- event type. For a destination's issue (fingerprint 'destination:<id>',
-- sql/88): the events whose delivery to it last failed with the class and
-- has not succeeded since (waiting for its retry, leased, or dead); for its
-- breaker's or its 410's issue, every such failure of any class.
CREATE OR REPLACE FUNCTION wharf.issue_events(
  p_workspace_id bigint, p_id bigint, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_issue  wharf.issue;
  v_events jsonb;
  v_count  bigint;
BEGIN
  IF p_workspace_id IS NULL THEN
    RAISE EXCEPTION 'wharf.issue_events: workspace is required' USING ERRCODE = '22004';
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 500' USING ERRCODE = '22023';
  END IF;
  SELECT * INTO v_issue FROM wharf.issue WHERE id = p_id AND workspace_id = p_workspace_id;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF v_issue.fingerprint LIKE 'destination:%' THEN
    SELECT coalesce(jsonb_agg(wharf.event_summary(e) ORDER BY e.id DESC), '[]'), count(*) INTO v_events, v_count
      FROM (SELECT x.* FROM wharf.destination_delivery q
              JOIN wharf.provider_event x ON x.id = q.event_id  -- by primary key
             WHERE q.destination_id = substr(v_issue.fingerprint, length('destination:') + 1)::bigint
               AND q.state <> 'DONE' AND q.error_class IS NOT NULL  -- ix_destination_delivery_failing
               -- A paused or broken destination's issue: every failure it holds.
               AND (v_issue.error_class IN ('DestinationGone', 'DestinationBreakerOpen') OR q.error_class = v_issue.error_class)
               AND (p_before_id IS NULL OR q.event_id < p_before_id)
               AND x.workspace_id = p_workspace_id
               AND x.provider = v_issue.provider
               AND (v_issue.event_type = '*' OR x.event_type = v_issue.event_type)
             ORDER BY q.event_id DESC
             LIMIT p_limit + 1) e;
  ELSE
    SELECT coalesce(jsonb_agg(wharf.event_summary(e) ORDER BY e.id DESC), '[]'), count(*) INTO v_events, v_count
      FROM (SELECT * FROM wharf.provider_event x
             WHERE x.workspace_id = p_workspace_id
               AND (p_before_id IS NULL OR x.id < p_before_id)
               AND x.provider = v_issue.provider
               AND (v_issue.event_type = '*' OR x.event_type = v_issue.event_type)
               AND x.error_class = v_issue.error_class
               AND (v_issue.event_type = '*'
                    OR wharf.frames_fingerprint((SELECT h.frames FROM wharf.event_attempt h
                                                  WHERE h.event_id = x.id  -- by primary key
                                                  ORDER BY h.lease_epoch DESC LIMIT 1)) = v_issue.fingerprint)
             ORDER BY x.id DESC
             LIMIT p_limit + 1) e;
  END IF;
  IF v_count <= p_limit THEN
    RETURN jsonb_build_object('events', v_events, 'next_cursor', NULL);
  END IF;
  v_events := v_events - p_limit;
  RETURN jsonb_build_object('events', v_events, 'next_cursor', v_events -> (p_limit - 1) -> 'id');
END $$;

REVOKE ALL ON FUNCTION wharf.list_issues(bigint, text, integer),
  wharf.list_installation_issues(text, integer),
  wharf.show_issue(bigint, bigint),
  wharf.set_issue_status(bigint, bigint, text, text),
  wharf.set_installation_issue_status(bigint, text, text),
  wharf.issue_events(bigint, bigint, integer, bigint),
  wharf.issue_history(bigint, bigint, integer),
  wharf.purge_issues(integer) FROM PUBLIC;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

CREATE OR REPLACE FUNCTION wharf.claim(p_worker text, p_max integer DEFAULT 1, p_handles text[] DEFAULT NULL::text[])
 RETURNS SETOF wharf.provider_event
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
 SET enable_mergejoin TO 'off'
 SET enable_hashjoin TO 'off'
 SET plan_cache_mode TO 'force_generic_plan'
 SET jit TO 'off'
AS $function$
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
  v_marked     text[];
  v_index_scans text := current_setting('enable_indexscan');
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
    -- keeps, two per event served (bench/RESULTS.md §7b). A row changed
    -- since the line was read is followed to its newest version by the lock
    -- and checked again, or passed over as a locked one is. The nested loop
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

  -- The scope rows locked above, at the versions locked (no one else can
  -- have moved them since). By key only should one have moved after all,
  -- so that no event is leased without its scope's mark. Index scans are
  -- off for this statement alone: over statistics of an empty scope table
  -- (analyzed while empty) the planner prices a walk of the whole primary
  -- key below the TID scan of the rows it is given (the plan is cached with
  -- it; next_in_scope's index has no alternative, so it keeps its index).
  PERFORM set_config('enable_indexscan', 'off', true);
  WITH marked AS (
    UPDATE wharf.scope s
       SET leased_id = h.id, head_id = n.id, head_due_at = n.due_at, head_kind = n.kind
      FROM unnest(v_ids, v_scopes, v_all_rows) AS h(id, scope_key, row_id)
      LEFT JOIN LATERAL wharf.next_in_scope(h.scope_key, h.id) n ON true
     WHERE s.ctid = h.row_id AND s.scope_key = h.scope_key
    RETURNING s.scope_key)
  SELECT array_agg(scope_key) INTO v_marked FROM marked;
  PERFORM set_config('enable_indexscan', v_index_scans, true);
  IF cardinality(v_marked) IS DISTINCT FROM cardinality(v_scopes) THEN
    UPDATE wharf.scope s
       SET leased_id = h.id, head_id = n.id, head_due_at = n.due_at, head_kind = n.kind
      FROM unnest(v_ids, v_scopes) AS h(id, scope_key)
      LEFT JOIN LATERAL wharf.next_in_scope(h.scope_key, h.id) n ON true
     WHERE s.scope_key = h.scope_key
       AND s.scope_key = ANY (v_scopes) AND NOT s.scope_key = ANY (coalesce(v_marked, '{}'))  -- by key
       AND s.leased_id IS NULL;
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
END $function$;
REVOKE ALL ON FUNCTION wharf.claim(text,integer,text[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.issue_events(p_workspace_id bigint, p_id bigint, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL::bigint)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_issue  wharf.issue;
  v_events jsonb;
  v_count  bigint;
BEGIN
  IF p_workspace_id IS NULL THEN
    RAISE EXCEPTION 'wharf.issue_events: workspace is required' USING ERRCODE = '22004';
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 500' USING ERRCODE = '22023';
  END IF;
  SELECT * INTO v_issue FROM wharf.issue WHERE id = p_id AND workspace_id = p_workspace_id;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF v_issue.fingerprint LIKE 'destination:%' THEN
    SELECT coalesce(jsonb_agg(wharf.event_summary(e) ORDER BY e.id DESC), '[]'), count(*) INTO v_events, v_count
      FROM (SELECT x.* FROM wharf.destination_delivery q
              JOIN wharf.provider_event x ON x.id = q.event_id  -- by primary key
             WHERE q.destination_id = substr(v_issue.fingerprint, length('destination:') + 1)::bigint
               AND q.state IN ('QUEUED', 'LEASED', 'DEAD')  -- ix_destination_delivery_listing
               AND q.error_class = v_issue.error_class
               AND (p_before_id IS NULL OR q.event_id < p_before_id)
               AND x.workspace_id = p_workspace_id
               AND x.provider = v_issue.provider
               AND (v_issue.event_type = '*' OR x.event_type = v_issue.event_type)
             ORDER BY q.event_id DESC
             LIMIT p_limit + 1) e;
  ELSE
    SELECT coalesce(jsonb_agg(wharf.event_summary(e) ORDER BY e.id DESC), '[]'), count(*) INTO v_events, v_count
      FROM (SELECT * FROM wharf.provider_event x
             WHERE x.workspace_id = p_workspace_id
               AND (p_before_id IS NULL OR x.id < p_before_id)
               AND x.provider = v_issue.provider
               AND (v_issue.event_type = '*' OR x.event_type = v_issue.event_type)
               AND x.error_class = v_issue.error_class
               AND (v_issue.event_type = '*'
                    OR wharf.frames_fingerprint((SELECT h.frames FROM wharf.event_attempt h
                                                  WHERE h.event_id = x.id  -- by primary key
                                                  ORDER BY h.lease_epoch DESC LIMIT 1)) = v_issue.fingerprint)
             ORDER BY x.id DESC
             LIMIT p_limit + 1) e;
  END IF;
  IF v_count <= p_limit THEN
    RETURN jsonb_build_object('events', v_events, 'next_cursor', NULL);
  END IF;
  v_events := v_events - p_limit;
  RETURN jsonb_build_object('events', v_events, 'next_cursor', v_events -> (p_limit - 1) -> 'id');
END $function$;
REVOKE ALL ON FUNCTION wharf.issue_events(bigint,bigint,integer,bigint) FROM PUBLIC;
