-- Delivery history: per minute and connection of one workspace, the
-- deliveries accepted (events stored) and those refused or dropped, by
-- reason (the admission log), over the last hours; and the same counts of
-- one minute for the whole instance, for the worker's gauges. Metrics over
-- time without a metrics store, as queue_history (sql/96) does for the
-- queue.

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
