-- Up Migration

-- Release 0.2.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   changed  function wharf.continue_bulk_replay(bigint,bigint,integer)
--   changed  function wharf.queue_history(bigint,integer)
--   changed  function wharf.start_bulk_replay(bigint,jsonb,text,boolean)

-- ======== sql/62-bulk-replay.sql ========

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
  -- Times are kept in UTC, so that every batch reads them alike whatever
  -- its session's time zone (a time written without one is read in the
  -- caller's).
  FOREACH v_key IN ARRAY ARRAY['dead_after', 'dead_before'] LOOP
    IF p_filter ? v_key THEN
      p_filter := jsonb_set(p_filter, ARRAY[v_key], to_jsonb(
        to_char((p_filter ->> v_key)::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')));
    END IF;
  END LOOP;

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

  -- Lock the events in id order, then their scopes in key order, then
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
  PERFORM FROM wharf.scope s
   WHERE s.scope_key IN (SELECT e.scope_key FROM wharf.provider_event e WHERE e.id = ANY (v_ids))
   ORDER BY s.workspace_id NULLS FIRST, s.scope_key
     FOR UPDATE;

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

REVOKE ALL ON FUNCTION wharf.start_bulk_replay(bigint, jsonb, text, boolean),
  wharf.continue_bulk_replay(bigint, bigint, integer), wharf.show_bulk_replay(bigint, bigint),
  wharf.list_bulk_replays(bigint) FROM PUBLIC;

-- ======== sql/96-queue-history.sql ========

-- The last p_hours (1..24) hours of workspace p_workspace_id, one
-- {at, admitted, handled, dead, depth, oldest_age_seconds} per minute, oldest
-- first. depth counts events waiting at the minute's end (received, or
-- replayed, and neither DONE nor DEAD then: retries not yet due and held
-- events included); oldest_age_seconds is how long the oldest of them had
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
      -- A replayed event waits from its replay, not from its arrival: it was
      -- DEAD in between.
      SELECT e.received_at, e.state, greatest(e.received_at, e.replayed_at) AS waiting_since,
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
    entries AS (
      SELECT date_trunc('minute', waiting_since) AS at, count(*) AS entered
        FROM events WHERE waiting_since >= v_since GROUP BY 1
    ),
    endings AS (
      SELECT date_trunc('minute', ended_at) AS at,
             count(*) FILTER (WHERE state = 'DONE') AS handled,
             count(*) FILTER (WHERE state = 'DEAD') AS dead,
             min(waiting_since) AS earliest_waiting
        FROM events WHERE ended_at IS NOT NULL GROUP BY 1
    ),
    still_waiting AS (
      SELECT min(waiting_since) AS earliest_waiting FROM events WHERE ended_at IS NULL
    ),
    before_window AS (
      SELECT count(*) AS waiting FROM events WHERE waiting_since < v_since
    ),
    per_minute AS (
      SELECT m.at, m.ends,
             coalesce(a.admitted, 0) AS admitted, coalesce(x.handled, 0) AS handled,
             coalesce(x.dead, 0) AS dead,
             -- Depth at the minute's end: every event waiting since before
             -- it (those before the window too) less every event ended before it.
             b.waiting + sum(coalesce(n.entered, 0)) OVER (ORDER BY m.at)
               - sum(coalesce(x.handled, 0) + coalesce(x.dead, 0)) OVER (ORDER BY m.at) AS depth,
             -- The oldest event waiting at the minute's end is the one
             -- waiting longest of those that end after that minute, or
             -- never: a running minimum over the later minutes. It is
             -- waiting then only when it was waiting before the minute's end.
             least(w.earliest_waiting,
                   min(x.earliest_waiting) OVER (ORDER BY m.at DESC
                                                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)) AS oldest
        FROM minutes m
        LEFT JOIN arrivals a ON a.at = m.at
        LEFT JOIN entries n ON n.at = m.at
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

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

CREATE OR REPLACE FUNCTION wharf.continue_bulk_replay(p_workspace_id bigint, p_id bigint, p_batch integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
END $function$;
REVOKE ALL ON FUNCTION wharf.continue_bulk_replay(bigint,bigint,integer) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.queue_history(p_workspace_id bigint, p_hours integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
END $function$;
REVOKE ALL ON FUNCTION wharf.queue_history(bigint,integer) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.start_bulk_replay(p_workspace_id bigint, p_filter jsonb, p_account text, p_force boolean DEFAULT false)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
END $function$;
REVOKE ALL ON FUNCTION wharf.start_bulk_replay(bigint,jsonb,text,boolean) FROM PUBLIC;
