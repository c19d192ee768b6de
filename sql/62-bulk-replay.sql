-- Bulk replay: every DEAD event of a workspace that matches a filter goes back
-- to the queue, each exactly as replay sends it (wharf.requeue_dead), in id
-- order. The work is cut into batches of one short transaction each, so that
-- admissions and claims never wait behind it; the progress lives in
-- wharf.bulk_replay, where the API, the CLI and the console follow it and
-- any runner can carry on a replay that another left unfinished.
--
-- A cancel and the batches meet on the bulk replay's row and on its lock
-- (lifecycle_key('bulk_replay', id), sql/70): a batch holds the lock shared,
-- taken without waiting under the row lock; a cancel takes it exclusive
-- before the row. The row alone cannot order them: every batch writes a new
-- version of it, a cancel waiting for the old version holds no place on the
-- new one, and the runner's next batch could take that first, batch after
-- batch, to the end. The advisory lock queues fairly, and a batch that finds
-- it taken or asked for exclusive replays nothing. No cycle: a batch waits
-- for neither (SKIP LOCKED, a try), a cancel for the lock, then the row.

-- The DEAD events a bulk replay takes, in id order from after p_after_id: of
-- workspace p_workspace_id, dead by p_dead_by (the replay's start, so that an
-- event replayed and dead again meanwhile is not taken twice), not
-- 'uncertain' unless p_force, and matching every key of p_filter (provider,
-- event_type, subject, error_class exactly; dead_after and received_after
-- inclusive, dead_before and received_before exclusive; payload and headers
-- by JSON containment, as search_events). Internal.
CREATE OR REPLACE FUNCTION wharf.bulk_replay_candidates(
  p_workspace_id bigint, p_filter jsonb, p_force boolean, p_dead_by timestamptz, p_after_id bigint)
RETURNS SETOF wharf.provider_event
LANGUAGE sql STABLE AS $$
  SELECT *
    FROM wharf.provider_event e
   WHERE e.workspace_id = p_workspace_id AND e.state = 'DEAD' AND e.id > p_after_id
     AND e.dead_at IS NOT NULL  -- ix_provider_event_dead's predicate: DEAD is exactly that
     AND e.dead_at <= p_dead_by
     AND (p_force OR e.outcome IS DISTINCT FROM 'uncertain')
     AND (NOT p_filter ? 'provider' OR e.provider = p_filter ->> 'provider')
     AND (NOT p_filter ? 'event_type' OR e.event_type = p_filter ->> 'event_type')
     AND (NOT p_filter ? 'subject' OR e.subject = p_filter ->> 'subject')
     AND (NOT p_filter ? 'error_class' OR e.error_class = p_filter ->> 'error_class')
     AND (NOT p_filter ? 'dead_after' OR e.dead_at >= (p_filter ->> 'dead_after')::timestamptz)
     AND (NOT p_filter ? 'dead_before' OR e.dead_at < (p_filter ->> 'dead_before')::timestamptz)
     AND (NOT p_filter ? 'received_after' OR e.received_at >= (p_filter ->> 'received_after')::timestamptz)
     AND (NOT p_filter ? 'received_before' OR e.received_at < (p_filter ->> 'received_before')::timestamptz)
     AND (NOT p_filter ? 'payload' OR e.payload @> (p_filter -> 'payload'))
     AND (NOT p_filter ? 'headers' OR e.headers @> (p_filter -> 'headers'))
   ORDER BY e.id
$$;

-- A bulk replay as the operator surface shows it. state: running,
-- finished, or cancelled (by cancelled_by at cancelled_at: it replayed no
-- batch after). skipped: matched events it did not replay (replayed, purged
-- or erased meanwhile), known at the end; a cancelled replay skipped none,
-- it stopped.
CREATE OR REPLACE FUNCTION wharf.bulk_replay_summary(r wharf.bulk_replay) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', r.id, 'workspace_id', r.workspace_id, 'filter', r.filter, 'force', r.force,
    'requested_by', r.requested_by,
    'state', CASE WHEN r.cancelled_at IS NOT NULL THEN 'cancelled'
                  WHEN r.finished_at IS NULL THEN 'running' ELSE 'finished' END,
    'matched', r.matched, 'replayed', r.replayed,
    'skipped', CASE WHEN r.finished_at IS NULL OR r.cancelled_at IS NOT NULL THEN 0
                    ELSE greatest(r.matched - r.replayed, 0) END,
    'started_at', r.started_at, 'updated_at', r.updated_at, 'finished_at', r.finished_at,
    'cancelled_by', r.cancelled_by, 'cancelled_at', r.cancelled_at)
$$;

-- Filter p_filter of a bulk replay, checked and as it is stored: times in
-- UTC, so that every batch reads them alike whatever its session's time zone
-- (a time written without one is read in the caller's). 22023 for a filter
-- that is not an object, an unknown key, a value that is not text (payload
-- and headers: not a JSON object); 22007 for a time that does not parse.
-- Internal.
CREATE OR REPLACE FUNCTION wharf.bulk_replay_filter(p_filter jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_key text;
BEGIN
  IF jsonb_typeof(p_filter) <> 'object' THEN
    RAISE EXCEPTION 'wharf.start_bulk_replay: the filter must be a JSON object' USING ERRCODE = '22023';
  END IF;
  FOR v_key IN SELECT jsonb_object_keys(p_filter) LOOP
    IF v_key NOT IN ('provider', 'event_type', 'subject', 'error_class', 'dead_after', 'dead_before',
                     'received_after', 'received_before', 'payload', 'headers') THEN
      RAISE EXCEPTION 'wharf.start_bulk_replay: unknown filter %', quote_literal(v_key) USING ERRCODE = '22023';
    END IF;
    IF v_key IN ('payload', 'headers') AND jsonb_typeof(p_filter -> v_key) <> 'object' THEN
      RAISE EXCEPTION 'wharf.start_bulk_replay: filter % must be a JSON object', v_key USING ERRCODE = '22023';
    END IF;
    IF v_key NOT IN ('payload', 'headers') AND jsonb_typeof(p_filter -> v_key) <> 'string' THEN
      RAISE EXCEPTION 'wharf.start_bulk_replay: filter % must be text', v_key USING ERRCODE = '22023';
    END IF;
  END LOOP;
  FOREACH v_key IN ARRAY ARRAY['dead_after', 'dead_before', 'received_after', 'received_before'] LOOP
    IF p_filter ? v_key THEN
      p_filter := jsonb_set(p_filter, ARRAY[v_key], to_jsonb(
        to_char((p_filter ->> v_key)::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')));
    END IF;
  END LOOP;
  RETURN p_filter;
END $$;

-- How many DEAD events of workspace p_workspace_id a bulk replay with
-- p_filter would take now (see bulk_replay_candidates): the count an
-- operator sees before starting one. Replays nothing. Errors as
-- start_bulk_replay's.
CREATE OR REPLACE FUNCTION wharf.count_bulk_replay(p_workspace_id bigint, p_filter jsonb, p_force boolean DEFAULT false)
RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_filter IS NULL OR p_force IS NULL THEN
    RAISE EXCEPTION 'wharf.count_bulk_replay: filter and force are required' USING ERRCODE = '22004';
  END IF;
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN (SELECT count(*) FROM wharf.bulk_replay_candidates(p_workspace_id, wharf.bulk_replay_filter(p_filter),
                                                            p_force, clock_timestamp(), 0));
END $$;

-- Records a bulk replay of workspace p_workspace_id's DEAD events matching
-- p_filter (see bulk_replay_candidates) and counts them; replays nothing
-- (continue_bulk_replay does). P0002 for an unknown workspace; filter errors
-- as bulk_replay_filter's.
CREATE OR REPLACE FUNCTION wharf.start_bulk_replay(
  p_workspace_id bigint, p_filter jsonb, p_account text, p_force boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_started timestamptz;
  v_replay  wharf.bulk_replay;
BEGIN
  IF p_filter IS NULL OR p_account IS NULL OR p_account = '' OR p_force IS NULL THEN
    RAISE EXCEPTION 'wharf.start_bulk_replay: filter, account and force are required' USING ERRCODE = '22004';
  END IF;
  PERFORM wharf.require_workspace(p_workspace_id);
  p_filter := wharf.bulk_replay_filter(p_filter);

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
-- after; NULL, replaying nothing, when another transaction is running a batch
-- of it or cancelling it (cancel_bulk_replay asked: it stops here). P0002
-- when the workspace has no such bulk replay.
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
  -- A cancel holds the lock exclusive, or waits for it behind the batch in
  -- flight: this batch is after the cancel and leaves the row to it. Held
  -- shared to the end, so that a cancel asked now waits for this batch.
  IF NOT pg_try_advisory_xact_lock_shared(wharf.lifecycle_key('bulk_replay', p_id::text)) THEN
    RETURN NULL;
  END IF;

  -- Lock the events in id order, then their scopes in the lock order
  -- (lock_scopes, sql/20), then
  -- requeue: the order erase_person keeps. Left to the scope-head trigger,
  -- the scopes would be locked in event order, and two batches (or a batch
  -- and an erasure) whose events share scopes in another order would wait
  -- for each other in a cycle.
  SELECT array_agg(c.id ORDER BY c.id) INTO v_ids
    FROM (SELECT e.id
            FROM wharf.bulk_replay_candidates(p_workspace_id, v_replay.filter, v_replay.force,
                                              v_replay.started_at, v_replay.after_id) e
           ORDER BY e.id
           LIMIT p_batch) c;
  PERFORM FROM wharf.provider_event WHERE id = ANY (v_ids) ORDER BY id FOR UPDATE;
  PERFORM wharf.lock_scopes(ARRAY(SELECT e.scope_key FROM wharf.provider_event e WHERE e.id = ANY (v_ids)));

  FOREACH v_id IN ARRAY coalesce(v_ids, '{}') LOOP
    IF wharf.requeue_dead(p_workspace_id, v_id, v_replay.requested_by, v_replay.force) THEN
      v_replayed := v_replayed + 1;
    END IF;
  END LOOP;

  UPDATE wharf.bulk_replay
     SET replayed    = replayed + v_replayed,
         after_id    = coalesce(v_ids[cardinality(v_ids)], after_id),
         updated_at  = clock_timestamp(),
         finished_at = CASE WHEN coalesce(cardinality(v_ids), 0) < p_batch THEN clock_timestamp() END,
         -- An event that died just before the start but committed after the
         -- count is replayed too: the total is never below what was done.
         matched     = greatest(matched, replayed + v_replayed)
   WHERE id = p_id
  RETURNING * INTO v_replay;
  RETURN wharf.bulk_replay_summary(v_replay);
END $$;

-- Cancels bulk replay p_id of workspace p_workspace_id as p_account: no
-- batch of it replays anything after this call asked (a batch running now
-- finishes first: this waits for it, so what it replayed is counted). The
-- events replayed before stay replayed. Returns the bulk replay as it is
-- after, with "cancelled": whether this call cancelled it, true whenever it
-- was running when asked (even if the batch waited for was its last), false
-- when it had finished, or was cancelled, before. P0002 when the workspace
-- has no such bulk replay, 22004 for a NULL argument or an empty account.
CREATE OR REPLACE FUNCTION wharf.cancel_bulk_replay(p_workspace_id bigint, p_id bigint, p_account text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_replay  wharf.bulk_replay;
  v_running boolean;
  v_now     timestamptz;
BEGIN
  IF p_workspace_id IS NULL OR p_id IS NULL OR p_account IS NULL OR p_account = '' THEN
    RAISE EXCEPTION 'wharf.cancel_bulk_replay: workspace, id and account are required' USING ERRCODE = '22004';
  END IF;
  -- As it is when asked, before the wait: the batch in flight may finish it.
  SELECT finished_at IS NULL INTO v_running FROM wharf.bulk_replay WHERE id = p_id AND workspace_id = p_workspace_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: workspace % has no bulk replay %', p_workspace_id, p_id USING ERRCODE = 'P0002';
  END IF;
  -- Exclusive: from here no batch starts (see the top of this file); the one
  -- in flight holds it shared, and this waits for it to commit.
  PERFORM pg_advisory_xact_lock(wharf.lifecycle_key('bulk_replay', p_id::text));
  SELECT * INTO v_replay FROM wharf.bulk_replay WHERE id = p_id AND workspace_id = p_workspace_id FOR UPDATE;
  IF NOT FOUND THEN  -- finished and purged meanwhile
    RAISE EXCEPTION 'wharf: workspace % has no bulk replay %', p_workspace_id, p_id USING ERRCODE = 'P0002';
  END IF;
  -- Cancelled by another call that got the lock first: that one says true.
  IF NOT v_running OR v_replay.cancelled_at IS NOT NULL THEN
    RETURN wharf.bulk_replay_summary(v_replay) || '{"cancelled": false}';
  END IF;
  v_now := clock_timestamp();
  UPDATE wharf.bulk_replay
     SET finished_at = coalesce(finished_at, v_now), cancelled_at = v_now, cancelled_by = p_account, updated_at = v_now
   WHERE id = p_id
  RETURNING * INTO v_replay;
  RETURN wharf.bulk_replay_summary(v_replay) || '{"cancelled": true}';
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
  wharf.count_bulk_replay(bigint, jsonb, boolean),
  wharf.continue_bulk_replay(bigint, bigint, integer), wharf.cancel_bulk_replay(bigint, bigint, text),
  wharf.show_bulk_replay(bigint, bigint),
  wharf.list_bulk_replays(bigint) FROM PUBLIC;
