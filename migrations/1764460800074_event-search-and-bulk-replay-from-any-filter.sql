-- Up Migration

-- Release 0.3.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.bulk_replay_filter(jsonb)
--   new      function wharf.count_bulk_replay(bigint,jsonb,boolean)
--   new      function wharf.search_events(bigint,jsonb,jsonb,text,text,integer,bigint,text,text,timestamp with time zone,timestamp with time zone)
--   changed  function wharf.bulk_replay_candidates(bigint,jsonb,boolean,timestamp with time zone,bigint)
--   changed  function wharf.start_bulk_replay(bigint,jsonb,text,boolean)

-- ======== sql/62-bulk-replay.sql ========

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

REVOKE ALL ON FUNCTION wharf.start_bulk_replay(bigint, jsonb, text, boolean),
  wharf.count_bulk_replay(bigint, jsonb, boolean),
  wharf.continue_bulk_replay(bigint, bigint, integer), wharf.show_bulk_replay(bigint, bigint),
  wharf.list_bulk_replays(bigint) FROM PUBLIC;

-- ======== sql/93-event-search.sql ========

-- A page of workspace p_workspace_id's events whose payload contains
-- p_payload and whose headers contain p_headers (each a JSON object; NULL:
-- any), narrowed by the filters of list_events, newest first: {events,
-- next_cursor}. P0002 for an unknown workspace; 22004 when neither
-- p_payload nor p_headers is given; 22023 for a value that is not a JSON
-- object, an unknown state or a limit outside 1..500.
CREATE OR REPLACE FUNCTION wharf.search_events(
  p_workspace_id bigint, p_payload jsonb, p_headers jsonb DEFAULT NULL,
  p_state text DEFAULT NULL, p_subject text DEFAULT NULL, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL,
  p_provider text DEFAULT NULL, p_event_type text DEFAULT NULL,
  p_received_after timestamptz DEFAULT NULL, p_received_before timestamptz DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_events jsonb;
  v_count  bigint;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF p_payload IS NULL AND p_headers IS NULL THEN
    RAISE EXCEPTION 'wharf: a search needs a payload or a headers value to look for' USING ERRCODE = '22004';
  END IF;
  IF jsonb_typeof(p_payload) <> 'object' OR jsonb_typeof(p_headers) <> 'object' THEN
    RAISE EXCEPTION 'wharf: a payload or headers search is a JSON object, e.g. {"repository": {"full_name": "acme/api"}}'
      USING ERRCODE = '22023';
  END IF;
  IF p_state IS NOT NULL AND p_state NOT IN ('QUEUED', 'LEASED', 'DONE', 'DEAD') THEN
    RAISE EXCEPTION 'wharf: unknown event state %', quote_literal(p_state) USING ERRCODE = '22023';
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 500' USING ERRCODE = '22023';
  END IF;

  SELECT coalesce(jsonb_agg(wharf.event_summary(e) ORDER BY e.id DESC), '[]'), count(*) INTO v_events, v_count
    FROM (SELECT *
            FROM wharf.provider_event x
           WHERE x.workspace_id = p_workspace_id
             AND (p_payload IS NULL OR x.payload @> p_payload)
             AND (p_headers IS NULL OR x.headers @> p_headers)
             AND (p_state IS NULL OR x.state = p_state)
             AND wharf.event_page_matches(x, p_workspace_id, p_subject, p_provider, p_event_type,
                                          p_received_after, p_received_before, p_before_id)
           ORDER BY x.id DESC
           LIMIT p_limit + 1) e;
  IF v_count <= p_limit THEN
    RETURN jsonb_build_object('events', v_events, 'next_cursor', NULL);
  END IF;
  v_events := v_events - p_limit;
  RETURN jsonb_build_object('events', v_events, 'next_cursor', v_events -> (p_limit - 1) -> 'id');
END $$;

REVOKE ALL ON FUNCTION wharf.search_events(bigint, jsonb, jsonb, text, text, integer, bigint, text, text, timestamptz, timestamptz)
  FROM PUBLIC;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

DROP FUNCTION wharf.bulk_replay_filter(jsonb);

DROP FUNCTION wharf.count_bulk_replay(bigint,jsonb,boolean);

DROP FUNCTION wharf.search_events(bigint,jsonb,jsonb,text,text,integer,bigint,text,text,timestamp with time zone,timestamp with time zone);

CREATE OR REPLACE FUNCTION wharf.bulk_replay_candidates(p_workspace_id bigint, p_filter jsonb, p_force boolean, p_dead_by timestamp with time zone, p_after_id bigint)
 RETURNS SETOF wharf.provider_event
 LANGUAGE sql
 STABLE
AS $function$
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
   ORDER BY e.id
$function$;
GRANT EXECUTE ON FUNCTION wharf.bulk_replay_candidates(bigint,jsonb,boolean,timestamp with time zone,bigint) TO PUBLIC;

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
END $function$;
REVOKE ALL ON FUNCTION wharf.start_bulk_replay(bigint,jsonb,text,boolean) FROM PUBLIC;
