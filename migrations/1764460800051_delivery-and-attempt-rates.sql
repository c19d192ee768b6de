-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.admission_outcome(text)
--   new      function wharf.delivery_gauges(timestamp with time zone,integer)
--   changed  function wharf.delivery_history(bigint,integer)
--   changed  function wharf.queue_history(bigint,integer)

-- ======== sql/92-delivery-history.sql ========

-- What an admission log entry of reason p_reason is: 'refused' when a
-- recipient would not take the delivery (its connection or workspace not
-- ACTIVE: the delivery was for it), else 'dropped' (no recipient at all: an
-- unknown or inactive source, no subscriber, a route that does not match, a
-- malformed control event). The reasons are the fixed set admission writes
-- (sql/80), so a label made of them is bounded.
CREATE OR REPLACE FUNCTION wharf.admission_outcome(p_reason text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p_reason IN ('connection-inactive', 'workspace-inactive') THEN 'refused' ELSE 'dropped' END
$$;

-- The last p_hours (1..24) hours of workspace p_workspace_id: one {at,
-- connection_id, accepted, refused: {reason: count}, dropped: {reason:
-- count}} per minute and connection that saw a delivery, oldest first
-- (refused and dropped: admission_outcome). Accepted are the
-- workspace's events by arrival; refused and dropped are the admission log's
-- entries that concern it (naming it, or naming one of its connections).
-- Cost: the events received within the window (by arrival, or the
-- workspace's rows, as the planner finds cheaper) and a scan of the admission
-- log, which has no index but its key and is bounded by its retention.
-- Events purged since are not counted. P0002 for an unknown workspace, 22023
-- for hours outside 1..24.
CREATE OR REPLACE FUNCTION wharf.delivery_history(p_workspace_id bigint, p_hours integer) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_since timestamptz;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF p_hours IS NULL OR p_hours < 1 OR p_hours > 24 THEN
    RAISE EXCEPTION 'wharf.delivery_history: hours must be between 1 and 24' USING ERRCODE = '22023';
  END IF;
  v_since := date_trunc('minute', now()) - make_interval(mins => p_hours * 60 - 1);
  RETURN (
    WITH accepted AS (
      SELECT e.id, e.received_at, e.connection_id
        FROM wharf.provider_event e
       WHERE e.workspace_id = p_workspace_id AND e.received_at >= v_since
    ), connections AS (
      SELECT c.id FROM wharf.connection c WHERE c.workspace_id = p_workspace_id
    ), refused AS (
      SELECT a.at, a.connection_id, a.reason
        FROM wharf.admission_log a
       WHERE a.at >= v_since
         AND (a.workspace_id = p_workspace_id
              OR (a.workspace_id IS NULL AND a.connection_id IN (SELECT id FROM connections)))
    ), per_minute AS (
      SELECT date_trunc('minute', received_at) AS at, connection_id, count(*) AS accepted, NULL::text AS reason, 0::bigint AS refused
        FROM accepted GROUP BY 1, 2
      UNION ALL
      SELECT date_trunc('minute', at), connection_id, 0, reason, count(*)
        FROM refused GROUP BY 1, 2, 4
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object('at', m.at, 'connection_id', m.connection_id, 'accepted', m.accepted,
                                                 'refused', m.refused, 'dropped', m.dropped)
                              ORDER BY m.at, m.connection_id NULLS FIRST), '[]')
      FROM (SELECT p.at, p.connection_id, sum(p.accepted) AS accepted,
                   coalesce(jsonb_object_agg(p.reason, p.refused)
                              FILTER (WHERE p.reason IS NOT NULL AND wharf.admission_outcome(p.reason) = 'refused'), '{}') AS refused,
                   coalesce(jsonb_object_agg(p.reason, p.refused)
                              FILTER (WHERE p.reason IS NOT NULL AND wharf.admission_outcome(p.reason) = 'dropped'), '{}') AS dropped
              FROM per_minute p
             GROUP BY p.at, p.connection_id) m
  );
END $$;

-- The deliveries of the instance in minute p_minute (truncated to the
-- minute; NULL: the last complete one), for the worker's gauges:
-- {minute, deliveries: [{connection, outcome, reason, count}]}. outcome:
-- 'accepted' (events stored; reason ''), 'refused' or 'dropped' (by reason,
-- admission_outcome). connection: the connection's id for the p_top
-- connections (1..100) with the most deliveries in the minute, 'other' for
-- every other connection together, 'none' for a drop that names no
-- connection (an unknown source): so a label made of it has at most p_top +
-- 2 values, whatever the number of connections. Cost: the minute's events
-- (ix_provider_event_received) and admission log entries (its index on at).
-- 22023 for p_top outside 1..100.
CREATE OR REPLACE FUNCTION wharf.delivery_gauges(p_minute timestamptz, p_top integer) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_at timestamptz := date_trunc('minute', coalesce(p_minute, now() - interval '1 minute'));
BEGIN
  IF p_top IS NULL OR p_top < 1 OR p_top > 100 THEN
    RAISE EXCEPTION 'wharf.delivery_gauges: top must be between 1 and 100' USING ERRCODE = '22023';
  END IF;
  RETURN (
    WITH counted AS (
      SELECT e.connection_id, 'accepted' AS outcome, '' AS reason, count(*) AS n
        FROM wharf.provider_event e
       WHERE e.received_at >= v_at AND e.received_at < v_at + interval '1 minute'
       GROUP BY e.connection_id
      UNION ALL
      SELECT a.connection_id, wharf.admission_outcome(a.reason), a.reason, count(*)
        FROM wharf.admission_log a
       WHERE a.at >= v_at AND a.at < v_at + interval '1 minute'
       GROUP BY a.connection_id, a.reason
    ), top AS (
      SELECT c.connection_id FROM counted c WHERE c.connection_id IS NOT NULL
       GROUP BY c.connection_id ORDER BY sum(c.n) DESC, c.connection_id LIMIT p_top
    )
    SELECT jsonb_build_object('minute', v_at, 'deliveries', coalesce(jsonb_agg(jsonb_build_object(
             'connection', g.connection, 'outcome', g.outcome, 'reason', g.reason, 'count', g.n)
             ORDER BY g.connection, g.outcome, g.reason), '[]'))
      FROM (SELECT CASE WHEN c.connection_id IS NULL THEN 'none'
                        WHEN c.connection_id IN (SELECT t.connection_id FROM top t) THEN c.connection_id::text
                        ELSE 'other' END AS connection,
                   c.outcome, c.reason, sum(c.n) AS n
              FROM counted c GROUP BY 1, 2, 3) g
  );
END $$;

REVOKE ALL ON FUNCTION wharf.delivery_history(bigint, integer), wharf.delivery_gauges(timestamptz, integer) FROM PUBLIC;

-- ======== sql/96-queue-history.sql ========

-- The last p_hours (1..24) hours of workspace p_workspace_id, one
-- {at, admitted, handled, attempts, dead, depth, oldest_age_seconds} per
-- minute, oldest first. attempts: the attempts the events handled in the
-- minute took, all told (attempts / handled is the attempts per handled
-- event; an event replayed counts the attempts since its replay). depth counts events waiting at the minute's end (received, or
-- replayed, and neither DONE nor DEAD then: retries not yet due and held
-- events included); oldest_age_seconds is how long the oldest of them had
-- waited (0 when none). It reads the workspace's own rows
-- (ix_provider_event_workspace_recent), never another tenant's: its cost is
-- the workspace's traffic within the retention, whatever the others send.
-- Events purged since are not counted. P0002 for an unknown workspace, 22023 for hours
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
      SELECT e.received_at, e.state, e.attempt, greatest(e.received_at, e.replayed_at) AS waiting_since,
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
             coalesce(sum(attempt) FILTER (WHERE state = 'DONE'), 0) AS attempts,
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
             coalesce(x.attempts, 0) AS attempts,
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
             'at', x.at, 'admitted', x.admitted, 'handled', x.handled, 'attempts', x.attempts, 'dead', x.dead,
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

DROP FUNCTION wharf.admission_outcome(text);

DROP FUNCTION wharf.delivery_gauges(timestamp with time zone,integer);

CREATE OR REPLACE FUNCTION wharf.delivery_history(p_workspace_id bigint, p_hours integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_since timestamptz;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF p_hours IS NULL OR p_hours < 1 OR p_hours > 24 THEN
    RAISE EXCEPTION 'wharf.delivery_history: hours must be between 1 and 24' USING ERRCODE = '22023';
  END IF;
  v_since := date_trunc('minute', now()) - make_interval(mins => p_hours * 60 - 1);
  RETURN (
    WITH accepted AS (
      SELECT e.id, e.received_at, e.connection_id
        FROM wharf.provider_event e
       WHERE e.workspace_id = p_workspace_id AND e.received_at >= v_since
    ), connections AS (
      SELECT c.id FROM wharf.connection c WHERE c.workspace_id = p_workspace_id
    ), refused AS (
      SELECT a.at, a.connection_id, a.reason
        FROM wharf.admission_log a
       WHERE a.at >= v_since
         AND (a.workspace_id = p_workspace_id
              OR (a.workspace_id IS NULL AND a.connection_id IN (SELECT id FROM connections)))
    ), per_minute AS (
      SELECT date_trunc('minute', received_at) AS at, connection_id, count(*) AS accepted, NULL::text AS reason, 0::bigint AS refused
        FROM accepted GROUP BY 1, 2
      UNION ALL
      SELECT date_trunc('minute', at), connection_id, 0, reason, count(*)
        FROM refused GROUP BY 1, 2, 4
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object('at', m.at, 'connection_id', m.connection_id, 'accepted', m.accepted,
                                                 'refused', m.refused) ORDER BY m.at, m.connection_id NULLS FIRST), '[]')
      FROM (SELECT p.at, p.connection_id, sum(p.accepted) AS accepted,
                   coalesce(jsonb_object_agg(p.reason, p.refused) FILTER (WHERE p.reason IS NOT NULL), '{}') AS refused
              FROM per_minute p
             GROUP BY p.at, p.connection_id) m
  );
END $function$;
REVOKE ALL ON FUNCTION wharf.delivery_history(bigint,integer) FROM PUBLIC;

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
END $function$;
REVOKE ALL ON FUNCTION wharf.queue_history(bigint,integer) FROM PUBLIC;
