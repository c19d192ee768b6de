-- Up Migration

-- Release 0.3.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   changed  function wharf.issue_gauges()

-- ======== sql/97-issues.sql ========

-- The instance's issues by status, for the worker's gauges: {"issues":
-- {status: count}}. Reads the issue table (bounded by issue_limit per
-- workspace), never the inbox.
CREATE OR REPLACE FUNCTION wharf.issue_gauges() RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT jsonb_build_object(
    'issues', (SELECT jsonb_object_agg(s.status, (SELECT count(*) FROM wharf.issue i WHERE i.status = s.status))
                 FROM unnest(ARRAY['open', 'acknowledged', 'resolved', 'ignored']) AS s(status)))
$$;

REVOKE ALL ON FUNCTION wharf.failure_history(bigint, integer), wharf.issue_gauges() FROM PUBLIC;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

CREATE OR REPLACE FUNCTION wharf.issue_gauges()
 RETURNS jsonb
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
  SELECT jsonb_build_object(
    'issues', (SELECT jsonb_object_agg(s.status, (SELECT count(*) FROM wharf.issue i WHERE i.status = s.status))
                 FROM unnest(ARRAY['open', 'acknowledged', 'resolved', 'ignored']) AS s(status)),
    'stuck_scopes', (SELECT count(*) FROM wharf.scope sc
                       JOIN wharf.provider_event h ON h.id = coalesce(sc.leased_id, sc.head_id)
                      WHERE greatest(h.received_at, h.replayed_at) < now() - wharf.setting_interval('stuck_after')))
$function$;
REVOKE ALL ON FUNCTION wharf.issue_gauges() FROM PUBLIC;
