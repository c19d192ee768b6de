-- Up Migration

-- Release 0.3.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.failure_history(bigint,integer)
--   new      function wharf.issue_gauges()

-- ======== sql/97-issues.sql ========

-- Failed or expired leases and dead letters per minute of the last p_hours
-- (1..24) hours of workspace p_workspace_id, oldest first, one {at, failed,
-- dead} per minute (zeros included), from wharf.failure_minute: a few rows,
-- never the inbox. P0002 for an unknown workspace, 22023 for hours outside 1..24.
CREATE OR REPLACE FUNCTION wharf.failure_history(p_workspace_id bigint, p_hours integer) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_since timestamptz;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF p_hours IS NULL OR p_hours < 1 OR p_hours > 24 THEN
    RAISE EXCEPTION 'wharf.failure_history: hours must be between 1 and 24' USING ERRCODE = '22023';
  END IF;
  v_since := date_trunc('minute', now()) - make_interval(mins => p_hours * 60 - 1);
  RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object('at', m.at, 'failed', coalesce(f.failed, 0), 'dead', coalesce(f.dead, 0))
                                    ORDER BY m.at), '[]')
            FROM generate_series(v_since, date_trunc('minute', now()), interval '1 minute') AS m(at)
            LEFT JOIN wharf.failure_minute f ON f.workspace_id = p_workspace_id AND f.minute = m.at);
END $$;

-- The instance's issues by status and its stuck scopes (heads waiting past
-- stuck_after), for the worker's gauges: {"issues": {status: count},
-- "stuck_scopes": n}. Reads the issue table (bounded by issue_limit per
-- workspace) and the scopes in use, never the inbox.
CREATE OR REPLACE FUNCTION wharf.issue_gauges() RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT jsonb_build_object(
    'issues', (SELECT jsonb_object_agg(s.status, (SELECT count(*) FROM wharf.issue i WHERE i.status = s.status))
                 FROM unnest(ARRAY['open', 'acknowledged', 'resolved', 'ignored']) AS s(status)),
    'stuck_scopes', (SELECT count(*) FROM wharf.scope sc
                       JOIN wharf.provider_event h ON h.id = coalesce(sc.leased_id, sc.head_id)
                      WHERE greatest(h.received_at, h.replayed_at) < now() - wharf.setting_interval('stuck_after')))
$$;

REVOKE ALL ON FUNCTION wharf.failure_history(bigint, integer), wharf.issue_gauges() FROM PUBLIC;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

DROP FUNCTION wharf.failure_history(bigint,integer);

DROP FUNCTION wharf.issue_gauges();
