-- Up Migration

-- Release 0.2.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.bulk_replay_candidates(bigint,jsonb,boolean,timestamp with time zone,bigint)
--   new      function wharf.bulk_replay_summary(wharf.bulk_replay)
--   new      function wharf.continue_bulk_replay(bigint,bigint,integer)
--   new      function wharf.event_attempts(wharf.provider_event)
--   new      function wharf.event_page(bigint,text,text,integer,bigint,text,text,timestamp with time zone,timestamp with time zone)
--   new      function wharf.list_bulk_replays(bigint)
--   new      function wharf.list_events(bigint,text,text,integer,bigint,text,text,timestamp with time zone,timestamp with time zone)
--   new      function wharf.list_installation_events(text,text,integer,bigint,text,text,timestamp with time zone,timestamp with time zone)
--   new      function wharf.next_due_at()
--   new      function wharf.queue_history(bigint,integer)
--   new      function wharf.show_bulk_replay(bigint,bigint)
--   new      function wharf.start_bulk_replay(bigint,jsonb,text,boolean)
--   changed  function wharf.claim(text,integer,text[])
--   changed  function wharf.event_detail(bigint,bigint)
--   changed  function wharf.fail(bigint,bigint,text,text)
--   changed  function wharf.list_installation_dead(text,integer,bigint)
--   changed  function wharf.reap()
--   changed  function wharf.release(bigint,bigint)
--   dropped  function wharf.event_page(bigint,text,text,integer,bigint)
--   dropped  function wharf.list_events(bigint,text,text,integer,bigint)
--   dropped  function wharf.list_installation_events(text,text,integer,bigint)

-- The grants of the functions dropped below, given again to the functions of the same name created after them.
CREATE TEMP TABLE wharf_release_grants ON COMMIT DROP AS
  SELECT p.proname::text AS name, a.grantee::regrole::text AS grantee
    FROM pg_proc p CROSS JOIN LATERAL aclexplode(p.proacl) a
   WHERE p.oid IN ('wharf.event_page(bigint,text,text,integer,bigint)'::regprocedure, 'wharf.list_events(bigint,text,text,integer,bigint)'::regprocedure, 'wharf.list_installation_events(text,text,integer,bigint)'::regprocedure)
     AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> p.proowner;

DROP FUNCTION wharf.event_page(bigint,text,text,integer,bigint);

DROP FUNCTION wharf.list_events(bigint,text,text,integer,bigint);

DROP FUNCTION wharf.list_installation_events(text,text,integer,bigint);

-- ======== sql/30-claim-lease.sql ========

-- Leases up to p_max rows, each the oldest QUEUED row of its scope, due now,
-- in a scope with no LEASED row and an ACTIVE (or no) workspace, admitted by a
-- connection that is not PAUSED; scopes are
-- served longest ready first (wharf.scope.ready_at). Increments attempt and
-- lease_epoch, and draws the lease's random lease_token, which the handler's
-- step and fence present (sql/50-steps-fences.sql), and records when the
-- lease began (leased_at, the start of its attempt history entry). Concurrent claimers pass
-- over each other. With p_handles (`provider:event_type` and `provider:*`
-- keys), only heads this host has a handler for: another head keeps its scope
-- waiting, in order, for a host that handles it.
--
-- The plan is pinned to its one good shape: walk ix_scope_claim in order and
-- fetch each head by primary key, stopping after p_max. PL/pgSQL caches a
-- generic plan after five calls, and for a small scope table the planner's
-- generic choice is a sequential scan of wharf.scope merge-joined with the
-- whole provider_event primary key, which reads the backlog on every claim.
-- Turning off the other scan and join methods leaves it the index path alone.
--
-- That plan is also forced generic: left to choose, the plan cache finds the
-- custom plans (LIMIT p_max known) cheaper and plans every call afresh, which
-- costs a claim a quarter of its time. The figures are in bench/RESULTS.md
-- and the commits that pinned both.
CREATE OR REPLACE FUNCTION wharf.claim(p_worker text, p_max integer DEFAULT 1, p_handles text[] DEFAULT NULL)
RETURNS SETOF wharf.provider_event
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_mergejoin = off SET enable_hashjoin = off
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_now   timestamptz := clock_timestamp();
  v_lease interval := wharf.setting_interval('lease');
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

  RETURN QUERY
  WITH due_heads AS (
    SELECT e.id
      FROM wharf.scope s
      JOIN wharf.provider_event e ON e.id = s.head_id
     WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
       AND s.ready_at <= v_now  -- never earlier than head_due_at: the head is due
       AND e.state = 'QUEUED'
       -- A paused connection's rows wait, holding their scopes, until it resumes.
       AND (e.connection_id IS NULL
            OR NOT EXISTS (SELECT FROM wharf.connection c WHERE c.id = e.connection_id AND c.state = 'PAUSED'))
       AND (p_handles IS NULL
            OR e.provider || ':' || e.event_type = ANY (p_handles)
            OR e.provider || ':*' = ANY (p_handles))
     ORDER BY s.ready_at, s.head_id
     LIMIT p_max
     -- NO KEY UPDATE: a claimer that locks a head another claimer has just
     -- leased (its snapshot was older) must not make the winner's fence
     -- (FOR KEY SHARE NOWAIT) fail as busy; the reaper, lock_scope, purge and
     -- erasure take FOR UPDATE and still conflict.
     FOR NO KEY UPDATE OF s, e SKIP LOCKED
  )
  UPDATE wharf.provider_event e
     SET state        = 'LEASED',
         attempt      = e.attempt + 1,
         lease_epoch  = e.lease_epoch + 1,
         leased_until = v_now + v_lease,
         leased_by    = p_worker,
         leased_at    = v_now,
         lease_token  = gen_random_uuid()
    FROM due_heads
   WHERE e.id = due_heads.id
  RETURNING e.*;
END $$;

-- A stopping worker gives the row back: QUEUED, due at once, attempt as it
-- was before the claim, the lease kept in the attempt history as
-- 'released', and idle claimers woken. False when the row is not LEASED
-- under p_epoch.
CREATE OR REPLACE FUNCTION wharf.release(p_id bigint, p_epoch bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_row record;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL THEN
    RAISE EXCEPTION 'wharf.release: id and epoch are required' USING ERRCODE = '22004';
  END IF;
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  UPDATE wharf.provider_event
     SET state = 'QUEUED', attempt = greatest(attempt - 1, 0), next_attempt_at = now(), leased_until = NULL
   WHERE id = p_id AND lease_epoch = p_epoch AND state = 'LEASED'
  RETURNING attempt + 1 AS attempt, leased_by, leased_at INTO v_row;  -- the lease's own attempt
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  INSERT INTO wharf.event_attempt (event_id, lease_epoch, attempt, worker, started_at, ended_at, ended)
  VALUES (p_id, p_epoch, v_row.attempt, v_row.leased_by, v_row.leased_at, clock_timestamp(), 'released');
  PERFORM wharf.notify_idle_claimers();
  RETURN true;
END $$;

-- Takes back every lease past leased_until: QUEUED after the retry delay with
-- failures + 1 and error_class 'LeaseExpired', or DEAD once failures reach
-- max_attempts; each lease stays in the attempt history as 'expired'. Skips rows under a fenced write or in a scope busy elsewhere
-- (the next run takes them). Returns how many it reaped.
-- Also forgets idle listeners whose session has ended.
CREATE OR REPLACE FUNCTION wharf.reap() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_now          timestamptz := clock_timestamp();
  v_max_attempts integer := wharf.setting_integer('max_attempts');
  v_reaped       integer;
BEGIN
  -- The scope rows are locked here, skipping busy ones, rather than by the
  -- trigger in update order: an admission fanning out holds one scope and
  -- waits for the next, and must never wait for a reaper waiting for it.
  WITH expired AS (
    SELECT e.id
      FROM wharf.provider_event e
      JOIN wharf.scope s ON s.scope_key = e.scope_key
     WHERE e.state = 'LEASED' AND e.leased_until < v_now
     FOR UPDATE OF e, s SKIP LOCKED
  ), reaped AS (
    UPDATE wharf.provider_event e
       SET failures        = e.failures + 1,
           error_class     = 'LeaseExpired',
           leased_until    = NULL,
           state           = CASE WHEN e.failures + 1 >= v_max_attempts THEN 'DEAD' ELSE 'QUEUED' END,
           dead_at         = CASE WHEN e.failures + 1 >= v_max_attempts THEN v_now END,
           next_attempt_at = CASE WHEN e.failures + 1 >= v_max_attempts THEN e.next_attempt_at
                                  ELSE v_now + wharf.retry_delay(e.attempt) END
      FROM expired
     WHERE e.id = expired.id
    RETURNING e.id, e.lease_epoch, e.attempt, e.leased_by, e.leased_at
  )
  INSERT INTO wharf.event_attempt (event_id, lease_epoch, attempt, worker, started_at, ended_at, ended, error_class)
  SELECT id, lease_epoch, attempt, leased_by, leased_at, v_now, 'expired', 'LeaseExpired' FROM reaped;
  GET DIAGNOSTICS v_reaped = ROW_COUNT;

  DELETE FROM wharf.idle_listener l
   WHERE NOT EXISTS (SELECT FROM pg_stat_activity a WHERE a.pid = l.backend_pid);
  RETURN v_reaped;
END $$;

-- The earliest time after now at which a scope head that no lease holds
-- falls due (a retry waiting out its delay); NULL when none waits. A claimer
-- about to sleep wakes by itself then: a retry becomes due without any
-- commit that could notify it.
CREATE OR REPLACE FUNCTION wharf.next_due_at() RETURNS timestamptz
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT min(ready_at) FROM wharf.scope
   WHERE head_id IS NOT NULL AND leased_id IS NULL AND active AND ready_at > clock_timestamp()
$$;

REVOKE ALL ON FUNCTION wharf.claim(text, integer, text[]), wharf.renew(bigint, bigint),
  wharf.complete(bigint, bigint, text), wharf.release(bigint, bigint), wharf.reap(),
  wharf.mark_idle(text), wharf.mark_busy(text), wharf.next_due_at(), wharf.queue_stats() FROM PUBLIC;

-- ======== sql/40-failure-dead-letters.sql ========

-- Records a failed attempt of a row LEASED under p_epoch, in the row and in
-- its attempt history, and returns its new state; NULL when the lease is
-- gone. p_kind:
--   transient  back to QUEUED after the delay; failures unchanged
--   unknown    failures + 1; DEAD at max_attempts, else QUEUED after the delay
--   permanent  DEAD at once
--   uncertain  DEAD with outcome 'uncertain', never retried automatically
-- p_error_class is a class name (e.g. 'TypeError'), never a message: 22023
-- for anything else, 22023 for an unknown kind.
CREATE OR REPLACE FUNCTION wharf.fail(p_id bigint, p_epoch bigint, p_kind text, p_error_class text)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_now   timestamptz := clock_timestamp();
  v_row   record;
  v_dead  boolean;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL OR p_kind IS NULL OR p_error_class IS NULL THEN
    RAISE EXCEPTION 'wharf.fail: id, epoch, kind and error_class are required' USING ERRCODE = '22004';
  END IF;
  IF p_kind NOT IN ('transient', 'unknown', 'permanent', 'uncertain') THEN
    RAISE EXCEPTION 'wharf.fail: unknown failure kind %', quote_literal(p_kind) USING ERRCODE = '22023';
  END IF;
  IF p_error_class !~ '^[A-Za-z_$][A-Za-z0-9_$.:-]{0,127}$' THEN
    RAISE EXCEPTION 'wharf.fail: error_class must be a class name, not free text' USING ERRCODE = '22023';
  END IF;

  SELECT attempt, failures, leased_by, leased_at INTO v_row
    FROM wharf.provider_event
   WHERE id = p_id AND lease_epoch = p_epoch AND state = 'LEASED'
   FOR NO KEY UPDATE;  -- the lock the UPDATE below takes anyway
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;

  v_dead := p_kind IN ('permanent', 'uncertain')
            OR (p_kind = 'unknown' AND v_row.failures + 1 >= wharf.setting_integer('max_attempts'));

  UPDATE wharf.provider_event
     SET failures        = failures + CASE WHEN p_kind = 'unknown' THEN 1 ELSE 0 END,
         error_class     = p_error_class,
         leased_until    = NULL,
         state           = CASE WHEN v_dead THEN 'DEAD' ELSE 'QUEUED' END,
         outcome         = CASE WHEN p_kind = 'uncertain' THEN 'uncertain' END,
         dead_at         = CASE WHEN v_dead THEN v_now END,
         next_attempt_at = CASE WHEN v_dead THEN next_attempt_at
                                ELSE v_now + wharf.retry_delay(v_row.attempt) END
   WHERE id = p_id;
  INSERT INTO wharf.event_attempt (event_id, lease_epoch, attempt, worker, started_at, ended_at, ended, error_class)
  VALUES (p_id, p_epoch, v_row.attempt, v_row.leased_by, v_row.leased_at, v_now, p_kind, p_error_class);
  RETURN CASE WHEN v_dead THEN 'DEAD' ELSE 'QUEUED' END;
END $$;

REVOKE ALL ON FUNCTION wharf.fail(bigint, bigint, text, text) FROM PUBLIC;

-- ======== sql/62-bulk-replay.sql ========

-- The DEAD events a bulk replay takes, in id order from after p_after_id: of
-- workspace p_workspace_id, dead by p_dead_by (the replay's start, so that an
-- event replayed and dead again meanwhile is not taken twice), not
-- 'uncertain' unless p_force, and matching every key of p_filter (provider,
-- event_type, subject, error_class exactly; dead_after inclusive, dead_before
-- exclusive). Internal.
CREATE OR REPLACE FUNCTION wharf.bulk_replay_candidates(
  p_workspace_id bigint, p_filter jsonb, p_force boolean, p_dead_by timestamptz, p_after_id bigint)
RETURNS SETOF wharf.provider_event
LANGUAGE sql STABLE AS $$
  SELECT *
    FROM wharf.provider_event e
   WHERE e.workspace_id = p_workspace_id AND e.state = 'DEAD' AND e.id > p_after_id
     AND e.dead_at <= p_dead_by
     AND (p_force OR e.outcome IS DISTINCT FROM 'uncertain')
     AND (NOT p_filter ? 'provider' OR e.provider = p_filter ->> 'provider')
     AND (NOT p_filter ? 'event_type' OR e.event_type = p_filter ->> 'event_type')
     AND (NOT p_filter ? 'subject' OR e.subject = p_filter ->> 'subject')
     AND (NOT p_filter ? 'error_class' OR e.error_class = p_filter ->> 'error_class')
     AND (NOT p_filter ? 'dead_after' OR e.dead_at >= (p_filter ->> 'dead_after')::timestamptz)
     AND (NOT p_filter ? 'dead_before' OR e.dead_at < (p_filter ->> 'dead_before')::timestamptz)
   ORDER BY e.id
$$;

-- A bulk replay as the operator surface shows it. skipped: matched events
-- it did not replay (replayed, purged or erased meanwhile), known at the end.
CREATE OR REPLACE FUNCTION wharf.bulk_replay_summary(r wharf.bulk_replay) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', r.id, 'workspace_id', r.workspace_id, 'filter', r.filter, 'force', r.force,
    'requested_by', r.requested_by,
    'state', CASE WHEN r.finished_at IS NULL THEN 'running' ELSE 'finished' END,
    'matched', r.matched, 'replayed', r.replayed,
    'skipped', CASE WHEN r.finished_at IS NULL THEN 0 ELSE greatest(r.matched - r.replayed, 0) END,
    'started_at', r.started_at, 'updated_at', r.updated_at, 'finished_at', r.finished_at)
$$;

-- Records a bulk replay of workspace p_workspace_id's DEAD events matching
-- p_filter (see bulk_replay_candidates) and counts them; replays nothing
-- (continue_bulk_replay does). P0002 for an unknown workspace, 22023 for an
-- unknown filter key or a filter value that is not text, 22007 for a time
-- that does not parse.
CREATE OR REPLACE FUNCTION wharf.start_bulk_replay(
  p_workspace_id bigint, p_filter jsonb, p_account text, p_force boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_key     text;
  v_started timestamptz;
  v_replay  wharf.bulk_replay;
BEGIN
  IF p_filter IS NULL OR p_account IS NULL OR p_account = '' OR p_force IS NULL THEN
    RAISE EXCEPTION 'wharf.start_bulk_replay: filter, account and force are required' USING ERRCODE = '22004';
  END IF;
  PERFORM wharf.require_workspace(p_workspace_id);
  IF jsonb_typeof(p_filter) <> 'object' THEN
    RAISE EXCEPTION 'wharf.start_bulk_replay: the filter must be a JSON object' USING ERRCODE = '22023';
  END IF;
  FOR v_key IN SELECT jsonb_object_keys(p_filter) LOOP
    IF v_key NOT IN ('provider', 'event_type', 'subject', 'error_class', 'dead_after', 'dead_before') THEN
      RAISE EXCEPTION 'wharf.start_bulk_replay: unknown filter %', quote_literal(v_key) USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(p_filter -> v_key) <> 'string' THEN
      RAISE EXCEPTION 'wharf.start_bulk_replay: filter % must be text', v_key USING ERRCODE = '22023';
    END IF;
  END LOOP;
  PERFORM (p_filter ->> 'dead_after')::timestamptz, (p_filter ->> 'dead_before')::timestamptz;

  -- The clock, not the transaction's start: an event that died before this
  -- call, in the same transaction too, is taken.
  v_started := clock_timestamp();
  INSERT INTO wharf.bulk_replay (workspace_id, filter, force, requested_by, matched, started_at, updated_at)
  VALUES (p_workspace_id, p_filter, p_force, p_account,
          (SELECT count(*) FROM wharf.bulk_replay_candidates(p_workspace_id, p_filter, p_force, v_started, 0)),
          v_started, v_started)
  RETURNING * INTO v_replay;
  RETURN wharf.bulk_replay_summary(v_replay);
END $$;

-- Replays the next at most p_batch (1..1000) events of bulk replay p_id of
-- workspace p_workspace_id, in id order, in this one transaction, waking idle
-- claimers once; finished when fewer remain. Returns the bulk replay as it is
-- after; NULL when another transaction is running a batch of it. P0002 when
-- the workspace has no such bulk replay.
CREATE OR REPLACE FUNCTION wharf.continue_bulk_replay(p_workspace_id bigint, p_id bigint, p_batch integer)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_replay   wharf.bulk_replay;
  v_ids      bigint[];
  v_id       bigint;
  v_replayed integer := 0;
BEGIN
  IF p_batch IS NULL OR p_batch < 1 OR p_batch > 1000 THEN
    RAISE EXCEPTION 'wharf.continue_bulk_replay: batch must be between 1 and 1000' USING ERRCODE = '22023';
  END IF;
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  SELECT * INTO v_replay FROM wharf.bulk_replay
   WHERE id = p_id AND workspace_id = p_workspace_id
     FOR UPDATE SKIP LOCKED;
  IF NOT FOUND THEN
    IF EXISTS (SELECT FROM wharf.bulk_replay WHERE id = p_id AND workspace_id = p_workspace_id) THEN
      RETURN NULL;
    END IF;
    RAISE EXCEPTION 'wharf: workspace % has no bulk replay %', p_workspace_id, p_id USING ERRCODE = 'P0002';
  END IF;
  IF v_replay.finished_at IS NOT NULL THEN
    RETURN wharf.bulk_replay_summary(v_replay);
  END IF;

  -- Events are locked in id order before the scope-head trigger locks their
  -- scopes, as every other writer does (event first, then its scope): two
  -- batches, or a batch and a single replay, cannot wait for each other in a
  -- cycle.
  SELECT array_agg(c.id ORDER BY c.id) INTO v_ids
    FROM (SELECT e.id
            FROM wharf.bulk_replay_candidates(p_workspace_id, v_replay.filter, v_replay.force,
                                              v_replay.started_at, v_replay.after_id) e
           ORDER BY e.id
           LIMIT p_batch) c;
  PERFORM FROM wharf.provider_event WHERE id = ANY (v_ids) ORDER BY id FOR UPDATE;

  FOREACH v_id IN ARRAY coalesce(v_ids, '{}') LOOP
    IF wharf.requeue_dead(p_workspace_id, v_id, v_replay.requested_by, v_replay.force) THEN
      v_replayed := v_replayed + 1;
    END IF;
  END LOOP;

  UPDATE wharf.bulk_replay
     SET replayed    = replayed + v_replayed,
         after_id    = coalesce(v_ids[cardinality(v_ids)], after_id),
         updated_at  = clock_timestamp(),
         finished_at = CASE WHEN coalesce(cardinality(v_ids), 0) < p_batch THEN clock_timestamp() END
   WHERE id = p_id
  RETURNING * INTO v_replay;
  RETURN wharf.bulk_replay_summary(v_replay);
END $$;

-- Bulk replay p_id of workspace p_workspace_id; NULL when it has none.
CREATE OR REPLACE FUNCTION wharf.show_bulk_replay(p_workspace_id bigint, p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.bulk_replay_summary(r) FROM wharf.bulk_replay r
   WHERE r.id = p_id AND r.workspace_id = p_workspace_id
$$;

-- The 50 newest bulk replays of workspace p_workspace_id. P0002 for an
-- unknown workspace.
CREATE OR REPLACE FUNCTION wharf.list_bulk_replays(p_workspace_id bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN (SELECT coalesce(jsonb_agg(wharf.bulk_replay_summary(r) ORDER BY r.id DESC), '[]')
            FROM (SELECT * FROM wharf.bulk_replay WHERE workspace_id = p_workspace_id
                   ORDER BY id DESC LIMIT 50) r);
END $$;

REVOKE ALL ON FUNCTION wharf.start_bulk_replay(bigint, jsonb, text, boolean),
  wharf.continue_bulk_replay(bigint, bigint, integer), wharf.show_bulk_replay(bigint, bigint),
  wharf.list_bulk_replays(bigint) FROM PUBLIC;

-- ======== sql/95-operator.sql ========

-- A page of the events whose workspace IS NOT DISTINCT FROM p_workspace_id
-- (NULL: installation rows), newest first, older than p_before_id when given,
-- narrowed by every filter given: state, subject, provider, event type, and
-- received at or after p_received_after and before p_received_before.
-- {events, next_cursor}: next_cursor is the id to pass as p_before_id for the
-- next page, NULL on the last. Ids only grow, so rows inserted between pages
-- land before the first page and never shift a later one. Internal: callers
-- use the bound list_* functions below.
CREATE OR REPLACE FUNCTION wharf.event_page(
  p_workspace_id bigint, p_state text, p_subject text, p_limit integer, p_before_id bigint,
  p_provider text, p_event_type text, p_received_after timestamptz, p_received_before timestamptz)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_events jsonb;
  v_count  bigint;
BEGIN
  IF p_state IS NOT NULL AND p_state NOT IN ('QUEUED', 'LEASED', 'DONE', 'DEAD') THEN
    RAISE EXCEPTION 'wharf: unknown event state %', quote_literal(p_state) USING ERRCODE = '22023';
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 500' USING ERRCODE = '22023';
  END IF;
  IF p_before_id IS NOT NULL AND p_before_id < 1 THEN
    RAISE EXCEPTION 'wharf: cursor must be a positive event id' USING ERRCODE = '22023';
  END IF;

  -- One row more than asked says whether another page follows.
  SELECT coalesce(jsonb_agg(wharf.event_summary(e) ORDER BY e.id DESC), '[]'), count(*)
    INTO v_events, v_count
    FROM (SELECT *
            FROM wharf.provider_event
           WHERE workspace_id IS NOT DISTINCT FROM p_workspace_id
             AND (p_state IS NULL OR state = p_state)
             AND (p_subject IS NULL OR subject = p_subject)
             AND (p_provider IS NULL OR provider = p_provider)
             AND (p_event_type IS NULL OR event_type = p_event_type)
             AND (p_received_after IS NULL OR received_at >= p_received_after)
             AND (p_received_before IS NULL OR received_at < p_received_before)
             AND (p_before_id IS NULL OR id < p_before_id)
           ORDER BY id DESC
           LIMIT p_limit + 1) e;

  IF v_count <= p_limit THEN
    RETURN jsonb_build_object('events', v_events, 'next_cursor', NULL);
  END IF;
  v_events := v_events - p_limit;
  RETURN jsonb_build_object('events', v_events, 'next_cursor', v_events -> (p_limit - 1) -> 'id');
END $$;

-- A page of workspace p_workspace_id's events (see event_page); P0002 for an
-- unknown workspace, 22023 for an unknown state or a limit outside 1..500.
CREATE OR REPLACE FUNCTION wharf.list_events(
  p_workspace_id bigint, p_state text DEFAULT NULL, p_subject text DEFAULT NULL,
  p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL,
  p_provider text DEFAULT NULL, p_event_type text DEFAULT NULL,
  p_received_after timestamptz DEFAULT NULL, p_received_before timestamptz DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN wharf.event_page(p_workspace_id, p_state, p_subject, p_limit, p_before_id,
                          p_provider, p_event_type, p_received_after, p_received_before);
END $$;

-- Instance admin only: a page of installation rows (NULL workspace), with
-- the filters of list_events.
CREATE OR REPLACE FUNCTION wharf.list_installation_events(
  p_state text DEFAULT NULL, p_subject text DEFAULT NULL, p_limit integer DEFAULT 50,
  p_before_id bigint DEFAULT NULL, p_provider text DEFAULT NULL, p_event_type text DEFAULT NULL,
  p_received_after timestamptz DEFAULT NULL, p_received_before timestamptz DEFAULT NULL)
RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.event_page(NULL, p_state, p_subject, p_limit, p_before_id,
                          p_provider, p_event_type, p_received_after, p_received_before)
$$;

-- Instance admin only: the dead installation rows, newest first.
CREATE OR REPLACE FUNCTION wharf.list_installation_dead(
  p_subject text DEFAULT NULL, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL)
RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.event_page(NULL, 'DEAD', p_subject, p_limit, p_before_id, NULL, NULL, NULL, NULL)
$$;

-- Every lease of event e, oldest first, as {attempt, epoch, worker,
-- started_at, ended_at, ended, error_class}: those that ended other than by
-- completion from wharf.event_attempt, then the lease the row itself
-- describes when it is LEASED ('running') or was completed by it (its
-- outcome). Internal, like event_page.
CREATE OR REPLACE FUNCTION wharf.event_attempts(e wharf.provider_event) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT coalesce(jsonb_agg(a ORDER BY (a ->> 'epoch')::bigint), '[]')
    FROM (SELECT jsonb_build_object('attempt', h.attempt, 'epoch', h.lease_epoch, 'worker', h.worker,
                                    'started_at', h.started_at, 'ended_at', h.ended_at,
                                    'ended', h.ended, 'error_class', h.error_class) AS a
            FROM wharf.event_attempt h
           WHERE h.event_id = e.id
          UNION ALL
          SELECT jsonb_build_object('attempt', e.attempt, 'epoch', e.lease_epoch, 'worker', e.leased_by,
                                    'started_at', e.leased_at,
                                    'ended_at', CASE WHEN e.state = 'DONE' THEN e.handled_at END,
                                    'ended', CASE WHEN e.state = 'DONE' THEN e.outcome ELSE 'running' END,
                                    'error_class', NULL)
           WHERE e.state IN ('LEASED', 'DONE') AND e.leased_by IS NOT NULL) attempts
$$;

-- Event p_id with its payload, headers (stored without credentials by admit),
-- lease and replay facts, attempts and committed steps, when its workspace IS
-- NOT DISTINCT FROM p_workspace_id; NULL otherwise. Internal, like event_page.
CREATE OR REPLACE FUNCTION wharf.event_detail(p_workspace_id bigint, p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT wharf.event_summary(e) || jsonb_build_object(
           'delivery_key', e.delivery_key, 'scope_key', e.scope_key,
           'connection_id', e.connection_id, 'payload', e.payload, 'headers', e.headers,
           'lease_epoch', e.lease_epoch, 'leased_until', e.leased_until, 'leased_by', e.leased_by,
           'replayed_by', e.replayed_by, 'replayed_at', e.replayed_at,
           'attempts', wharf.event_attempts(e),
           'steps', (SELECT coalesce(jsonb_agg(jsonb_build_object('name', s.step_name,
                                                                  'committed_at', s.committed_at)
                                               ORDER BY s.committed_at, s.step_name), '[]')
                       FROM wharf.provider_event_step s WHERE s.event_id = e.id))
    FROM wharf.provider_event e
   WHERE e.id = p_id AND e.workspace_id IS NOT DISTINCT FROM p_workspace_id
$$;

REVOKE ALL ON FUNCTION wharf.list_events(bigint, text, text, integer, bigint, text, text, timestamptz, timestamptz),
  wharf.list_dead(bigint, text, integer, bigint),
  wharf.list_installation_events(text, text, integer, bigint, text, text, timestamptz, timestamptz),
  wharf.list_installation_dead(text, integer, bigint),
  wharf.show_event(bigint, bigint),
  wharf.show_installation_event(bigint),
  wharf.show_workspace(bigint),
  wharf.list_workspaces(),
  wharf.show_connection(bigint),
  wharf.list_connections(bigint),
  wharf.create_token(bigint, text, bytea),
  wharf.verify_token(bytea),
  wharf.list_tokens(bigint),
  wharf.revoke_token(bigint, bigint) FROM PUBLIC;

-- ======== sql/96-queue-history.sql ========

-- The last p_hours (1..24) hours of workspace p_workspace_id, one
-- {at, admitted, handled, dead, depth, oldest_age_seconds} per minute, oldest
-- first. depth counts events received by the minute's end and neither DONE
-- nor DEAD then; oldest_age_seconds is how long the oldest of them had
-- waited (0 when none). It reads only the events that were waiting or ended
-- within the window: the workspace's QUEUED and LEASED rows, and DONE and
-- DEAD rows by the purge indexes on handled_at and dead_at. Events purged
-- since are not counted. P0002 for an unknown workspace, 22023 for hours
-- outside 1..24.
CREATE OR REPLACE FUNCTION wharf.queue_history(p_workspace_id bigint, p_hours integer) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_now   timestamptz := clock_timestamp();
  v_since timestamptz;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF p_hours IS NULL OR p_hours < 1 OR p_hours > 24 THEN
    RAISE EXCEPTION 'wharf.queue_history: hours must be between 1 and 24' USING ERRCODE = '22023';
  END IF;
  v_since := date_trunc('minute', v_now) - make_interval(mins => p_hours * 60 - 1);

  RETURN (
    WITH events AS (
      SELECT e.received_at, e.state,
             CASE e.state WHEN 'DONE' THEN e.handled_at WHEN 'DEAD' THEN e.dead_at END AS ended_at
        FROM wharf.provider_event e
       WHERE e.workspace_id = p_workspace_id
         AND (e.state IN ('QUEUED', 'LEASED')
              OR (e.state = 'DONE' AND e.handled_at >= v_since)
              OR (e.state = 'DEAD' AND e.dead_at >= v_since))
    ),
    minutes AS (
      SELECT m AS at, m + interval '1 minute' AS ends
        FROM generate_series(v_since, date_trunc('minute', v_now), interval '1 minute') m
    ),
    arrivals AS (
      SELECT date_trunc('minute', received_at) AS at, count(*) AS admitted
        FROM events WHERE received_at >= v_since GROUP BY 1
    ),
    endings AS (
      SELECT date_trunc('minute', ended_at) AS at,
             count(*) FILTER (WHERE state = 'DONE') AS handled,
             count(*) FILTER (WHERE state = 'DEAD') AS dead,
             min(received_at) AS earliest_received
        FROM events WHERE ended_at IS NOT NULL GROUP BY 1
    ),
    still_waiting AS (
      SELECT min(received_at) AS earliest_received FROM events WHERE ended_at IS NULL
    ),
    before_window AS (
      SELECT count(*) AS waiting FROM events WHERE received_at < v_since
    ),
    per_minute AS (
      SELECT m.at, m.ends,
             coalesce(a.admitted, 0) AS admitted, coalesce(x.handled, 0) AS handled,
             coalesce(x.dead, 0) AS dead,
             -- Depth at the minute's end: every event received before it
             -- (those before the window too) less every event ended before it.
             b.waiting + sum(coalesce(a.admitted, 0)) OVER (ORDER BY m.at)
               - sum(coalesce(x.handled, 0) + coalesce(x.dead, 0)) OVER (ORDER BY m.at) AS depth,
             -- The oldest event waiting at the minute's end is the earliest
             -- received of those that end after that minute, or never: a
             -- running minimum over the later minutes. It is waiting then
             -- only when it was received before the minute's end.
             least(w.earliest_received,
                   min(x.earliest_received) OVER (ORDER BY m.at DESC
                                                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)) AS oldest
        FROM minutes m
        LEFT JOIN arrivals a ON a.at = m.at
        LEFT JOIN endings x ON x.at = m.at
        CROSS JOIN still_waiting w
        CROSS JOIN before_window b
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
             'at', x.at, 'admitted', x.admitted, 'handled', x.handled, 'dead', x.dead,
             'depth', greatest(x.depth, 0),
             'oldest_age_seconds',
               CASE WHEN x.oldest < least(x.ends, v_now)
                    THEN round(extract(epoch FROM least(x.ends, v_now) - x.oldest)::numeric, 3)
                    ELSE 0 END)
             ORDER BY x.at), '[]')
      FROM per_minute x
  );
END $$;

REVOKE ALL ON FUNCTION wharf.queue_history(bigint, integer) FROM PUBLIC;

DO $$
DECLARE g record;
BEGIN
  FOR g IN SELECT * FROM wharf_release_grants LOOP
    IF g.name = 'event_page' THEN EXECUTE format('GRANT EXECUTE ON FUNCTION wharf.event_page(bigint,text,text,integer,bigint,text,text,timestamp with time zone,timestamp with time zone) TO %s', g.grantee); END IF;
    IF g.name = 'list_events' THEN EXECUTE format('GRANT EXECUTE ON FUNCTION wharf.list_events(bigint,text,text,integer,bigint,text,text,timestamp with time zone,timestamp with time zone) TO %s', g.grantee); END IF;
    IF g.name = 'list_installation_events' THEN EXECUTE format('GRANT EXECUTE ON FUNCTION wharf.list_installation_events(text,text,integer,bigint,text,text,timestamp with time zone,timestamp with time zone) TO %s', g.grantee); END IF;
  END LOOP;
END $$;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

DROP FUNCTION wharf.bulk_replay_candidates(bigint,jsonb,boolean,timestamp with time zone,bigint);

DROP FUNCTION wharf.bulk_replay_summary(wharf.bulk_replay);

DROP FUNCTION wharf.continue_bulk_replay(bigint,bigint,integer);

DROP FUNCTION wharf.event_attempts(wharf.provider_event);

DROP FUNCTION wharf.event_page(bigint,text,text,integer,bigint,text,text,timestamp with time zone,timestamp with time zone);

DROP FUNCTION wharf.list_bulk_replays(bigint);

DROP FUNCTION wharf.list_events(bigint,text,text,integer,bigint,text,text,timestamp with time zone,timestamp with time zone);

DROP FUNCTION wharf.list_installation_events(text,text,integer,bigint,text,text,timestamp with time zone,timestamp with time zone);

DROP FUNCTION wharf.next_due_at();

DROP FUNCTION wharf.queue_history(bigint,integer);

DROP FUNCTION wharf.show_bulk_replay(bigint,bigint);

DROP FUNCTION wharf.start_bulk_replay(bigint,jsonb,text,boolean);

CREATE OR REPLACE FUNCTION wharf.claim(p_worker text, p_max integer DEFAULT 1, p_handles text[] DEFAULT NULL::text[])
 RETURNS SETOF wharf.provider_event
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_mergejoin TO 'off'
 SET enable_hashjoin TO 'off'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
  v_now   timestamptz := clock_timestamp();
  v_lease interval := wharf.setting_interval('lease');
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

  RETURN QUERY
  WITH due_heads AS (
    SELECT e.id
      FROM wharf.scope s
      JOIN wharf.provider_event e ON e.id = s.head_id
     WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
       AND s.ready_at <= v_now  -- never earlier than head_due_at: the head is due
       AND e.state = 'QUEUED'
       -- A paused connection's rows wait, holding their scopes, until it resumes.
       AND (e.connection_id IS NULL
            OR NOT EXISTS (SELECT FROM wharf.connection c WHERE c.id = e.connection_id AND c.state = 'PAUSED'))
       AND (p_handles IS NULL
            OR e.provider || ':' || e.event_type = ANY (p_handles)
            OR e.provider || ':*' = ANY (p_handles))
     ORDER BY s.ready_at, s.head_id
     LIMIT p_max
     -- NO KEY UPDATE: a claimer that locks a head another claimer has just
     -- leased (its snapshot was older) must not make the winner's fence
     -- (FOR KEY SHARE NOWAIT) fail as busy; the reaper, lock_scope, purge and
     -- erasure take FOR UPDATE and still conflict.
     FOR NO KEY UPDATE OF s, e SKIP LOCKED
  )
  UPDATE wharf.provider_event e
     SET state        = 'LEASED',
         attempt      = e.attempt + 1,
         lease_epoch  = e.lease_epoch + 1,
         leased_until = v_now + v_lease,
         leased_by    = p_worker,
         lease_token  = gen_random_uuid()
    FROM due_heads
   WHERE e.id = due_heads.id
  RETURNING e.*;
END $function$;
REVOKE ALL ON FUNCTION wharf.claim(text,integer,text[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.event_detail(p_workspace_id bigint, p_id bigint)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
  SELECT wharf.event_summary(e) || jsonb_build_object(
           'delivery_key', e.delivery_key, 'scope_key', e.scope_key,
           'connection_id', e.connection_id, 'payload', e.payload, 'headers', e.headers,
           'lease_epoch', e.lease_epoch, 'leased_until', e.leased_until, 'leased_by', e.leased_by,
           'replayed_by', e.replayed_by, 'replayed_at', e.replayed_at,
           'steps', (SELECT coalesce(jsonb_agg(jsonb_build_object('name', s.step_name,
                                                                  'committed_at', s.committed_at)
                                               ORDER BY s.committed_at, s.step_name), '[]')
                       FROM wharf.provider_event_step s WHERE s.event_id = e.id))
    FROM wharf.provider_event e
   WHERE e.id = p_id AND e.workspace_id IS NOT DISTINCT FROM p_workspace_id
$function$;
GRANT EXECUTE ON FUNCTION wharf.event_detail(bigint,bigint) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.fail(p_id bigint, p_epoch bigint, p_kind text, p_error_class text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_now   timestamptz := clock_timestamp();
  v_row   record;
  v_dead  boolean;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL OR p_kind IS NULL OR p_error_class IS NULL THEN
    RAISE EXCEPTION 'wharf.fail: id, epoch, kind and error_class are required' USING ERRCODE = '22004';
  END IF;
  IF p_kind NOT IN ('transient', 'unknown', 'permanent', 'uncertain') THEN
    RAISE EXCEPTION 'wharf.fail: unknown failure kind %', quote_literal(p_kind) USING ERRCODE = '22023';
  END IF;
  IF p_error_class !~ '^[A-Za-z_$][A-Za-z0-9_$.:-]{0,127}$' THEN
    RAISE EXCEPTION 'wharf.fail: error_class must be a class name, not free text' USING ERRCODE = '22023';
  END IF;

  SELECT attempt, failures INTO v_row
    FROM wharf.provider_event
   WHERE id = p_id AND lease_epoch = p_epoch AND state = 'LEASED'
   FOR NO KEY UPDATE;  -- the lock the UPDATE below takes anyway
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;

  v_dead := p_kind IN ('permanent', 'uncertain')
            OR (p_kind = 'unknown' AND v_row.failures + 1 >= wharf.setting_integer('max_attempts'));

  UPDATE wharf.provider_event
     SET failures        = failures + CASE WHEN p_kind = 'unknown' THEN 1 ELSE 0 END,
         error_class     = p_error_class,
         leased_until    = NULL,
         state           = CASE WHEN v_dead THEN 'DEAD' ELSE 'QUEUED' END,
         outcome         = CASE WHEN p_kind = 'uncertain' THEN 'uncertain' END,
         dead_at         = CASE WHEN v_dead THEN v_now END,
         next_attempt_at = CASE WHEN v_dead THEN next_attempt_at
                                ELSE v_now + wharf.retry_delay(v_row.attempt) END
   WHERE id = p_id;
  RETURN CASE WHEN v_dead THEN 'DEAD' ELSE 'QUEUED' END;
END $function$;
REVOKE ALL ON FUNCTION wharf.fail(bigint,bigint,text,text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.list_installation_dead(p_subject text DEFAULT NULL::text, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL::bigint)
 RETURNS jsonb
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
  SELECT wharf.event_page(NULL, 'DEAD', p_subject, p_limit, p_before_id)
$function$;
REVOKE ALL ON FUNCTION wharf.list_installation_dead(text,integer,bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.reap()
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_now          timestamptz := clock_timestamp();
  v_max_attempts integer := wharf.setting_integer('max_attempts');
  v_reaped       integer;
BEGIN
  -- The scope rows are locked here, skipping busy ones, rather than by the
  -- trigger in update order: an admission fanning out holds one scope and
  -- waits for the next, and must never wait for a reaper waiting for it.
  WITH expired AS (
    SELECT e.id
      FROM wharf.provider_event e
      JOIN wharf.scope s ON s.scope_key = e.scope_key
     WHERE e.state = 'LEASED' AND e.leased_until < v_now
     FOR UPDATE OF e, s SKIP LOCKED
  )
  UPDATE wharf.provider_event e
     SET failures        = e.failures + 1,
         error_class     = 'LeaseExpired',
         leased_until    = NULL,
         state           = CASE WHEN e.failures + 1 >= v_max_attempts THEN 'DEAD' ELSE 'QUEUED' END,
         dead_at         = CASE WHEN e.failures + 1 >= v_max_attempts THEN v_now END,
         next_attempt_at = CASE WHEN e.failures + 1 >= v_max_attempts THEN e.next_attempt_at
                                ELSE v_now + wharf.retry_delay(e.attempt) END
    FROM expired
   WHERE e.id = expired.id;
  GET DIAGNOSTICS v_reaped = ROW_COUNT;

  DELETE FROM wharf.idle_listener l
   WHERE NOT EXISTS (SELECT FROM pg_stat_activity a WHERE a.pid = l.backend_pid);
  RETURN v_reaped;
END $function$;
REVOKE ALL ON FUNCTION wharf.reap() FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.release(p_id bigint, p_epoch bigint)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL THEN
    RAISE EXCEPTION 'wharf.release: id and epoch are required' USING ERRCODE = '22004';
  END IF;
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  UPDATE wharf.provider_event
     SET state = 'QUEUED', attempt = greatest(attempt - 1, 0), next_attempt_at = now(),
         leased_until = NULL
   WHERE id = p_id AND lease_epoch = p_epoch AND state = 'LEASED';
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM wharf.notify_idle_claimers();
  RETURN true;
END $function$;
REVOKE ALL ON FUNCTION wharf.release(bigint,bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.event_page(p_workspace_id bigint, p_state text, p_subject text, p_limit integer, p_before_id bigint)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
AS $function$
DECLARE
  v_events jsonb;
  v_count  bigint;
BEGIN
  IF p_state IS NOT NULL AND p_state NOT IN ('QUEUED', 'LEASED', 'DONE', 'DEAD') THEN
    RAISE EXCEPTION 'wharf: unknown event state %', quote_literal(p_state) USING ERRCODE = '22023';
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 500' USING ERRCODE = '22023';
  END IF;
  IF p_before_id IS NOT NULL AND p_before_id < 1 THEN
    RAISE EXCEPTION 'wharf: cursor must be a positive event id' USING ERRCODE = '22023';
  END IF;

  -- One row more than asked says whether another page follows.
  SELECT coalesce(jsonb_agg(wharf.event_summary(e) ORDER BY e.id DESC), '[]'), count(*)
    INTO v_events, v_count
    FROM (SELECT *
            FROM wharf.provider_event
           WHERE workspace_id IS NOT DISTINCT FROM p_workspace_id
             AND (p_state IS NULL OR state = p_state)
             AND (p_subject IS NULL OR subject = p_subject)
             AND (p_before_id IS NULL OR id < p_before_id)
           ORDER BY id DESC
           LIMIT p_limit + 1) e;

  IF v_count <= p_limit THEN
    RETURN jsonb_build_object('events', v_events, 'next_cursor', NULL);
  END IF;
  v_events := v_events - p_limit;
  RETURN jsonb_build_object('events', v_events, 'next_cursor', v_events -> (p_limit - 1) -> 'id');
END $function$;
GRANT EXECUTE ON FUNCTION wharf.event_page(bigint,text,text,integer,bigint) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.list_events(p_workspace_id bigint, p_state text DEFAULT NULL::text, p_subject text DEFAULT NULL::text, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL::bigint)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN wharf.event_page(p_workspace_id, p_state, p_subject, p_limit, p_before_id);
END $function$;
REVOKE ALL ON FUNCTION wharf.list_events(bigint,text,text,integer,bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.list_installation_events(p_state text DEFAULT NULL::text, p_subject text DEFAULT NULL::text, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL::bigint)
 RETURNS jsonb
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
  SELECT wharf.event_page(NULL, p_state, p_subject, p_limit, p_before_id)
$function$;
REVOKE ALL ON FUNCTION wharf.list_installation_events(text,text,integer,bigint) FROM PUBLIC;
