-- Delivery history: per minute and connection of one workspace, the
-- deliveries accepted (events stored) and those refused or dropped, by
-- reason (the admission log), over the last hours. Metrics over time without
-- a metrics store, as queue_history (sql/96) does for the queue.

-- The last p_hours (1..24) hours of workspace p_workspace_id: one {at,
-- connection_id, accepted, refused: {reason: count}} per minute and
-- connection that saw a delivery, oldest first. Accepted are the
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
                                                 'refused', m.refused) ORDER BY m.at, m.connection_id NULLS FIRST), '[]')
      FROM (SELECT p.at, p.connection_id, sum(p.accepted) AS accepted,
                   coalesce(jsonb_object_agg(p.reason, p.refused) FILTER (WHERE p.reason IS NOT NULL), '{}') AS refused
              FROM per_minute p
             GROUP BY p.at, p.connection_id) m
  );
END $$;

REVOKE ALL ON FUNCTION wharf.delivery_history(bigint, integer) FROM PUBLIC;
