-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.chart_issue_failures()
--   new      function wharf.issue_history(bigint,bigint,integer)
--   new      trigger issue_chart_counted on wharf.issue
--   new      trigger issue_chart_new on wharf.issue
--   changed  function wharf.purge_issues(integer)

-- ======== sql/97-issues.sql ========

-- Trigger on wharf.issue, per row: charts what an issue's counts grew by
-- in the hour of its last failure (wharf.issue_failure_hour). It fires for
-- every path that counts into an issue, and not for a status change.
CREATE OR REPLACE FUNCTION wharf.chart_issue_failures() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  v_failures bigint := NEW.failures - CASE WHEN TG_OP = 'UPDATE' THEN OLD.failures ELSE 0 END;
  v_dead     bigint := NEW.dead - CASE WHEN TG_OP = 'UPDATE' THEN OLD.dead ELSE 0 END;
BEGIN
  INSERT INTO wharf.issue_failure_hour AS h (issue_id, hour, failures, dead)
  VALUES (NEW.id, date_trunc('hour', NEW.last_seen_at), v_failures, v_dead)
  ON CONFLICT (issue_id, hour) DO UPDATE
     SET failures = h.failures + excluded.failures, dead = h.dead + excluded.dead;
  RETURN NULL;
END $$;

CREATE TRIGGER issue_chart_new
  AFTER INSERT ON wharf.issue
  FOR EACH ROW WHEN (NEW.failures > 0) EXECUTE FUNCTION wharf.chart_issue_failures();

CREATE TRIGGER issue_chart_counted
  AFTER UPDATE OF failures, dead ON wharf.issue
  FOR EACH ROW WHEN (NEW.failures > OLD.failures OR NEW.dead > OLD.dead) EXECUTE FUNCTION wharf.chart_issue_failures();

-- Retention: deletes at most p_batch issues not seen for issue_retention,
-- whatever their status (a failure that returns later opens a new one),
-- then, within the same batch, per-minute failure counts older than a day
-- and per-issue hours older than the chart's week (8 days, so a week's
-- chart always has its first hour), and returns how many rows it deleted. One short transaction per call: the retention loop calls
-- it until it returns less than p_batch.
CREATE OR REPLACE FUNCTION wharf.purge_issues(p_batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_deleted bigint;
  v_count   bigint;
BEGIN
  IF p_batch IS NULL OR p_batch < 1 THEN
    RAISE EXCEPTION 'wharf: purge_issues needs a positive batch size' USING ERRCODE = '22023';
  END IF;
  DELETE FROM wharf.issue
   WHERE id IN (SELECT id FROM wharf.issue
                 WHERE last_seen_at < now() - wharf.setting_interval('issue_retention')
                 ORDER BY last_seen_at
                 LIMIT p_batch
                 FOR UPDATE SKIP LOCKED);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  IF v_deleted < p_batch THEN
    DELETE FROM wharf.failure_minute
     WHERE ctid IN (SELECT ctid FROM wharf.failure_minute
                     WHERE minute < now() - interval '1 day'
                     LIMIT p_batch - v_deleted);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    v_deleted := v_deleted + v_count;
  END IF;
  IF v_deleted < p_batch THEN
    -- issue_history charts a week at most.
    DELETE FROM wharf.issue_failure_hour
     WHERE ctid IN (SELECT ctid FROM wharf.issue_failure_hour
                     WHERE hour < now() - interval '8 days'
                     ORDER BY hour
                     LIMIT p_batch - v_deleted);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    v_deleted := v_deleted + v_count;
  END IF;
  RETURN v_deleted;
END $$;

-- Issue p_id of workspace p_workspace_id, failures and dead letters per
-- hour of the last p_hours (1..168) hours, oldest first, one {at, failures,
-- dead} per hour (zeros included), from wharf.issue_failure_hour; NULL when
-- the workspace has no such issue. 22004 for a NULL workspace, 22023 for
-- hours outside 1..168.
CREATE OR REPLACE FUNCTION wharf.issue_history(p_workspace_id bigint, p_id bigint, p_hours integer DEFAULT 48)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_since timestamptz;
BEGIN
  IF p_workspace_id IS NULL THEN
    RAISE EXCEPTION 'wharf.issue_history: workspace is required' USING ERRCODE = '22004';
  END IF;
  IF p_hours IS NULL OR p_hours < 1 OR p_hours > 168 THEN
    RAISE EXCEPTION 'wharf.issue_history: hours must be between 1 and 168' USING ERRCODE = '22023';
  END IF;
  IF NOT EXISTS (SELECT FROM wharf.issue i WHERE i.id = p_id AND i.workspace_id = p_workspace_id) THEN
    RETURN NULL;
  END IF;
  v_since := date_trunc('hour', now()) - make_interval(hours => p_hours - 1);
  RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object('at', t.at, 'failures', coalesce(h.failures, 0), 'dead', coalesce(h.dead, 0))
                                    ORDER BY t.at), '[]')
            FROM generate_series(v_since, date_trunc('hour', now()), interval '1 hour') AS t(at)
            LEFT JOIN wharf.issue_failure_hour h ON h.issue_id = p_id AND h.hour = t.at);
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

DROP TRIGGER issue_chart_counted ON wharf.issue;

DROP TRIGGER issue_chart_new ON wharf.issue;

DROP FUNCTION wharf.chart_issue_failures();

DROP FUNCTION wharf.issue_history(bigint,bigint,integer);

CREATE OR REPLACE FUNCTION wharf.purge_issues(p_batch integer DEFAULT 1000)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_deleted bigint;
  v_count   bigint;
BEGIN
  IF p_batch IS NULL OR p_batch < 1 THEN
    RAISE EXCEPTION 'wharf: purge_issues needs a positive batch size' USING ERRCODE = '22023';
  END IF;
  DELETE FROM wharf.issue
   WHERE id IN (SELECT id FROM wharf.issue
                 WHERE last_seen_at < now() - wharf.setting_interval('issue_retention')
                 ORDER BY last_seen_at
                 LIMIT p_batch
                 FOR UPDATE SKIP LOCKED);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  IF v_deleted < p_batch THEN
    DELETE FROM wharf.failure_minute
     WHERE ctid IN (SELECT ctid FROM wharf.failure_minute
                     WHERE minute < now() - interval '1 day'
                     LIMIT p_batch - v_deleted);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    v_deleted := v_deleted + v_count;
  END IF;
  RETURN v_deleted;
END $function$;
REVOKE ALL ON FUNCTION wharf.purge_issues(integer) FROM PUBLIC;
