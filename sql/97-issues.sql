-- Issues: failures grouped by what an operator fixes once. Every failed or
-- expired lease is a row of wharf.event_attempt (fail and reap write it, with
-- its error class and, from workers that pass them, the top frames of the
-- application's code where it was thrown); a statement trigger on that table
-- counts each one into the issue of its (workspace, provider, event type,
-- error class, fingerprint of the frames), opening it when new and reopening
-- it when it had been resolved: two TypeErrors thrown in two places are two
-- issues. A failure without frames (a worker of before, an expired lease)
-- has the fingerprint '' and groups by its class alone. An operator
-- acknowledges, resolves or ignores an issue; an ignored one keeps counting
-- and stays ignored. The table is bounded: past the setting issue_limit
-- distinct groups in one workspace, further groups count into the
-- workspace's event type '*' issue of their provider and error class (any
-- frames, fingerprint ''), and
-- purge_issues forgets issues not seen for issue_retention.
--
-- Released leases (a stopping worker giving a row back) are no failure and
-- open nothing. A lease that expired counts under its class 'LeaseExpired'.

-- The fingerprint of a failure's frames (wharf.fail's p_frames, innermost
-- first): its first three, the place it was thrown and two callers, so that
-- a deeper caller does not split an issue; '' for none. Line and column are
-- part of it: a deploy that moves the code starts new issues. Internal.
CREATE OR REPLACE FUNCTION wharf.frames_fingerprint(p_frames text[]) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN cardinality(p_frames) > 0 THEN md5(array_to_string(p_frames[1:3], E'\n')) ELSE '' END
$$;

-- Counts p_failures failures (p_dead of them dead, the latest at
-- p_last_seen_at) of one group into its issue: opened when new, reopened
-- when resolved; an acknowledged or ignored issue keeps its status. The one
-- upsert of wharf.issue: the handlers' attempts (below) and the
-- destinations' deliveries (count_delivery_issue, below) count through it.
-- PL/pgSQL for the plan it keeps per session: the trigger calls it once per
-- group. Internal.
CREATE OR REPLACE FUNCTION wharf.count_into_issue(
  p_workspace_id bigint, p_provider text, p_event_type text, p_error_class text, p_fingerprint text, p_frames text[],
  p_first_seen_at timestamptz, p_last_seen_at timestamptz, p_failures bigint, p_dead bigint, p_sample_event_id bigint)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO wharf.issue AS i (workspace_id, provider, event_type, error_class, fingerprint, frames,
                                first_seen_at, last_seen_at, failures, dead, sample_event_id, status_at)
  VALUES (p_workspace_id, p_provider, p_event_type, p_error_class, p_fingerprint, p_frames,
          p_first_seen_at, p_last_seen_at, p_failures, p_dead, p_sample_event_id, p_first_seen_at)
  ON CONFLICT (workspace_id, provider, event_type, error_class, fingerprint) DO UPDATE
     SET last_seen_at    = greatest(i.last_seen_at, excluded.last_seen_at),
         failures        = i.failures + excluded.failures,
         dead            = i.dead + excluded.dead,
         sample_event_id = excluded.sample_event_id,
         status          = CASE WHEN i.status = 'resolved' THEN 'open' ELSE i.status END,
         status_by       = CASE WHEN i.status = 'resolved' THEN NULL ELSE i.status_by END,
         status_at       = CASE WHEN i.status = 'resolved' THEN excluded.last_seen_at ELSE i.status_at END,
         reopened        = i.reopened + CASE WHEN i.status = 'resolved' THEN 1 ELSE 0 END,
         reopened_at     = CASE WHEN i.status = 'resolved' THEN excluded.last_seen_at ELSE i.reopened_at END;
END $$;

-- Counts p_failed failures, p_dead of them dead letters, into workspace
-- p_workspace_id's minute p_minute (wharf.failure_minute: the dead-letter
-- rate's alerts, the failure chart, the metrics): a handler's failed or
-- expired lease (below) and a failed delivery to a destination (sql/88)
-- alike. Internal.
CREATE OR REPLACE FUNCTION wharf.count_into_failure_minute(
  p_workspace_id bigint, p_minute timestamptz, p_failed bigint, p_dead bigint)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO wharf.failure_minute AS m (workspace_id, minute, failed, dead)
  VALUES (p_workspace_id, p_minute, p_failed, p_dead)
  ON CONFLICT (workspace_id, minute) DO UPDATE
     SET failed = m.failed + excluded.failed, dead = m.dead + excluded.dead;
END $$;

-- Counts a failure of a delivery to destination p_destination_id into the
-- issues of its workspace, grouped per destination (the fingerprint
-- 'destination:<id>') and class, opening or reopening the issue, so that the
-- alert rules on issues fire. Internal.
CREATE OR REPLACE FUNCTION wharf.count_delivery_issue(
  p_destination_id bigint, p_event_id bigint, p_error_class text, p_at timestamptz, p_dead boolean)
RETURNS void
LANGUAGE sql AS $$
  SELECT wharf.count_into_issue(e.workspace_id, e.provider, e.event_type, p_error_class, 'destination:' || p_destination_id,
                                ARRAY['destination ' || p_destination_id || ' ' || d.name], p_at, p_at, 1,
                                CASE WHEN p_dead THEN 1 ELSE 0 END, e.id)
    FROM wharf.provider_event e, wharf.destination d
   WHERE e.id = p_event_id AND d.id = p_destination_id
$$;

-- Trigger on wharf.event_attempt, per statement (reap inserts many rows at
-- once): upserts the issue of every failed or expired lease, in key order so
-- that two reapers counting into the same issues cannot deadlock.
CREATE OR REPLACE FUNCTION wharf.count_failures_into_issues() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  v_limit  integer := wharf.setting_integer('issue_limit');
  v_group  record;
  v_minute record;
BEGIN
  FOR v_group IN
  WITH failed AS (
    SELECT e.workspace_id, e.provider, e.event_type, coalesce(a.error_class, a.ended) AS error_class,
           wharf.frames_fingerprint(a.frames) AS fingerprint, nullif(a.frames[1:3], '{}') AS frames,
           a.ended_at, e.id AS event_id, e.state
      FROM attempts_added a
      JOIN wharf.provider_event e ON e.id = a.event_id
     WHERE a.ended <> 'released'
  ), grouped AS (
    SELECT f.workspace_id, f.provider, f.event_type, f.error_class, f.fingerprint, f.frames,
           min(f.ended_at) AS first_seen_at, max(f.ended_at) AS last_seen_at, count(*) AS failures,
           count(*) FILTER (WHERE f.state = 'DEAD') AS dead, max(f.event_id) AS sample_event_id
      FROM failed f
     GROUP BY f.workspace_id, f.provider, f.event_type, f.error_class, f.fingerprint, f.frames
  ), keyed AS (
    -- A group with no issue yet gets its own while the workspace has fewer
    -- than issue_limit; otherwise it counts into '*'. Two new groups at once
    -- may both pass the count: the bound is issue_limit plus the concurrency.
    SELECT g.*,
           CASE WHEN EXISTS (SELECT FROM wharf.issue i
                              WHERE (i.workspace_id = g.workspace_id OR (g.workspace_id IS NULL AND i.workspace_id IS NULL))
                                AND i.provider = g.provider AND i.event_type = g.event_type
                                AND i.error_class = g.error_class AND i.fingerprint = g.fingerprint)
                  OR (SELECT count(*) FROM (SELECT FROM wharf.issue i
                                             WHERE i.workspace_id = g.workspace_id
                                                OR (g.workspace_id IS NULL AND i.workspace_id IS NULL)
                                             LIMIT v_limit) n) < v_limit
                THEN g.event_type ELSE '*' END AS issue_type
      FROM grouped g
  ), placed AS (
    SELECT k.*,
           CASE WHEN k.issue_type = '*' THEN '' ELSE k.fingerprint END AS issue_fingerprint,
           CASE WHEN k.issue_type = '*' THEN NULL ELSE k.frames END AS issue_frames
      FROM keyed k
  )
  SELECT k.workspace_id, k.provider, k.issue_type, k.error_class, k.issue_fingerprint, k.issue_frames,
         min(k.first_seen_at) AS first_seen_at, max(k.last_seen_at) AS last_seen_at,
         sum(k.failures)::bigint AS failures, sum(k.dead)::bigint AS dead, max(k.sample_event_id) AS sample_event_id
    FROM placed k
   GROUP BY k.workspace_id, k.provider, k.issue_type, k.error_class, k.issue_fingerprint, k.issue_frames
   ORDER BY k.workspace_id, k.provider, k.issue_type, k.error_class, k.issue_fingerprint
  LOOP
    PERFORM wharf.count_into_issue(v_group.workspace_id, v_group.provider, v_group.issue_type, v_group.error_class,
                                   v_group.issue_fingerprint, v_group.issue_frames, v_group.first_seen_at,
                                   v_group.last_seen_at, v_group.failures, v_group.dead, v_group.sample_event_id);
  END LOOP;

  -- The same failures per workspace and minute (alert rates, metrics).
  FOR v_minute IN
    SELECT e.workspace_id, date_trunc('minute', a.ended_at) AS minute, count(*) AS failed,
           count(*) FILTER (WHERE e.state = 'DEAD') AS dead
      FROM attempts_added a
      JOIN wharf.provider_event e ON e.id = a.event_id
     WHERE a.ended <> 'released'
     GROUP BY 1, 2
     ORDER BY 1, 2
  LOOP
    PERFORM wharf.count_into_failure_minute(v_minute.workspace_id, v_minute.minute, v_minute.failed, v_minute.dead);
  END LOOP;
  RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS event_attempt_count_issues ON wharf.event_attempt;
CREATE TRIGGER event_attempt_count_issues
  AFTER INSERT ON wharf.event_attempt
  REFERENCING NEW TABLE AS attempts_added
  FOR EACH STATEMENT EXECUTE FUNCTION wharf.count_failures_into_issues();

-- Trigger on wharf.issue, per row: charts what an issue's counts grew by
-- in the hour (UTC) of its last failure (wharf.issue_failure_hour): a
-- statement's failures all go to the hour of its latest. It fires for
-- every path that counts into an issue, and not for a status change.
CREATE OR REPLACE FUNCTION wharf.chart_issue_failures() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  v_failures bigint := NEW.failures - CASE WHEN TG_OP = 'UPDATE' THEN OLD.failures ELSE 0 END;
  v_dead     bigint := NEW.dead - CASE WHEN TG_OP = 'UPDATE' THEN OLD.dead ELSE 0 END;
BEGIN
  INSERT INTO wharf.issue_failure_hour AS h (issue_id, hour, failures, dead)
  VALUES (NEW.id, date_trunc('hour', NEW.last_seen_at, 'UTC'), v_failures, v_dead)
  ON CONFLICT (issue_id, hour) DO UPDATE
     SET failures = h.failures + excluded.failures, dead = h.dead + excluded.dead;
  RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS issue_chart_new ON wharf.issue;
CREATE TRIGGER issue_chart_new
  AFTER INSERT ON wharf.issue
  FOR EACH ROW WHEN (NEW.failures > 0) EXECUTE FUNCTION wharf.chart_issue_failures();
DROP TRIGGER IF EXISTS issue_chart_counted ON wharf.issue;
CREATE TRIGGER issue_chart_counted
  AFTER UPDATE OF failures, dead ON wharf.issue
  FOR EACH ROW WHEN (NEW.failures > OLD.failures OR NEW.dead > OLD.dead) EXECUTE FUNCTION wharf.chart_issue_failures();

-- One issue as the operator surface shows it. Internal.
CREATE OR REPLACE FUNCTION wharf.issue_summary(i wharf.issue) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', i.id, 'workspace_id', i.workspace_id, 'provider', i.provider, 'event_type', i.event_type,
    'error_class', i.error_class, 'frames', coalesce(to_jsonb(i.frames), '[]'), 'status', i.status, 'status_by', i.status_by, 'status_at', i.status_at,
    'first_seen_at', i.first_seen_at, 'last_seen_at', i.last_seen_at, 'failures', i.failures,
    'dead', i.dead, 'sample_event_id', i.sample_event_id, 'reopened', i.reopened,
    'reopened_at', i.reopened_at)
$$;

-- The issues whose workspace IS NOT DISTINCT FROM p_workspace_id (NULL:
-- installation rows), latest seen first, at most p_limit, of status p_status
-- when given. 22023 for an unknown status or a limit outside 1..1000.
-- Internal: callers use list_issues / list_installation_issues.
CREATE OR REPLACE FUNCTION wharf.issue_list(p_workspace_id bigint, p_status text, p_limit integer) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF p_status IS NOT NULL AND p_status NOT IN ('open', 'acknowledged', 'resolved', 'ignored') THEN
    RAISE EXCEPTION 'wharf: unknown issue status %', quote_literal(p_status) USING ERRCODE = '22023';
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 1000' USING ERRCODE = '22023';
  END IF;
  RETURN (SELECT coalesce(jsonb_agg(wharf.issue_summary(i) ORDER BY i.last_seen_at DESC, i.id DESC), '[]')
            FROM (SELECT * FROM wharf.issue x
                   WHERE (x.workspace_id = p_workspace_id OR (p_workspace_id IS NULL AND x.workspace_id IS NULL))
                     AND (p_status IS NULL OR x.status = p_status)
                   ORDER BY x.last_seen_at DESC, x.id DESC
                   LIMIT p_limit) i);
END $$;

-- The issues of workspace p_workspace_id (see issue_list). P0002 for an
-- unknown workspace.
CREATE OR REPLACE FUNCTION wharf.list_issues(p_workspace_id bigint, p_status text DEFAULT NULL, p_limit integer DEFAULT 100)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN wharf.issue_list(p_workspace_id, p_status, p_limit);
END $$;

-- Instance admin only: the issues of installation rows (see issue_list).
CREATE OR REPLACE FUNCTION wharf.list_installation_issues(p_status text DEFAULT NULL, p_limit integer DEFAULT 100)
RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.issue_list(NULL, p_status, p_limit)
$$;

-- Issue p_id of workspace p_workspace_id; NULL when it is not one of that
-- workspace's, whether or not it exists elsewhere. 22004 for a NULL workspace.
CREATE OR REPLACE FUNCTION wharf.show_issue(p_workspace_id bigint, p_id bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_workspace_id IS NULL THEN
    RAISE EXCEPTION 'wharf.show_issue: workspace is required' USING ERRCODE = '22004';
  END IF;
  RETURN (SELECT wharf.issue_summary(i) FROM wharf.issue i WHERE i.id = p_id AND i.workspace_id = p_workspace_id);
END $$;

-- Sets the status of issue p_id of workspace p_workspace_id (NULL: an
-- installation issue) to p_status, recording p_account and the time; the
-- issue as it is after, or NULL when there is no such issue there. Internal.
CREATE OR REPLACE FUNCTION wharf.change_issue_status(p_workspace_id bigint, p_id bigint, p_status text, p_account text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_issue wharf.issue;
BEGIN
  IF p_id IS NULL OR p_status IS NULL OR p_account IS NULL OR p_account = '' THEN
    RAISE EXCEPTION 'wharf: an issue status change needs an issue, a status and an account' USING ERRCODE = '22004';
  END IF;
  IF p_status NOT IN ('open', 'acknowledged', 'resolved', 'ignored') THEN
    RAISE EXCEPTION 'wharf: unknown issue status %', quote_literal(p_status) USING ERRCODE = '22023';
  END IF;
  UPDATE wharf.issue i
     SET status = p_status, status_by = p_account, status_at = now()
   WHERE i.id = p_id AND (i.workspace_id = p_workspace_id OR (p_workspace_id IS NULL AND i.workspace_id IS NULL))
  RETURNING * INTO v_issue;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  RETURN wharf.issue_summary(v_issue);
END $$;

-- Sets the status of issue p_id of workspace p_workspace_id (see
-- change_issue_status): 'open', 'acknowledged', 'resolved' or 'ignored'.
-- 22004 for a NULL argument, 22023 for an unknown status.
CREATE OR REPLACE FUNCTION wharf.set_issue_status(p_workspace_id bigint, p_id bigint, p_status text, p_account text)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_workspace_id IS NULL THEN
    RAISE EXCEPTION 'wharf.set_issue_status: workspace is required' USING ERRCODE = '22004';
  END IF;
  RETURN wharf.change_issue_status(p_workspace_id, p_id, p_status, p_account);
END $$;

-- Instance admin only: the same for an issue of installation rows.
CREATE OR REPLACE FUNCTION wharf.set_installation_issue_status(p_id bigint, p_status text, p_account text)
RETURNS jsonb
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.change_issue_status(NULL, p_id, p_status, p_account)
$$;

-- The events of issue p_id of workspace p_workspace_id that still carry its
-- error class as their last cause (and, unless the issue is of event type
-- '*', their last failure the issue's fingerprint), newest first, as list_events pages them
-- ({events, next_cursor}, older than p_before_id when given). NULL when the
-- workspace has no such issue. An issue of event type '*' matches every
-- event type. For a destination's issue (fingerprint 'destination:<id>',
-- sql/88): the events whose delivery to it last failed with the class and
-- has not succeeded since (waiting for its retry, leased, or dead); for its
-- breaker's or its 410's issue, every such failure of any class.
CREATE OR REPLACE FUNCTION wharf.issue_events(
  p_workspace_id bigint, p_id bigint, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_issue  wharf.issue;
  v_events jsonb;
  v_count  bigint;
BEGIN
  IF p_workspace_id IS NULL THEN
    RAISE EXCEPTION 'wharf.issue_events: workspace is required' USING ERRCODE = '22004';
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 500' USING ERRCODE = '22023';
  END IF;
  SELECT * INTO v_issue FROM wharf.issue WHERE id = p_id AND workspace_id = p_workspace_id;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF v_issue.fingerprint LIKE 'destination:%' THEN
    SELECT coalesce(jsonb_agg(wharf.event_summary(e) ORDER BY e.id DESC), '[]'), count(*) INTO v_events, v_count
      FROM (SELECT x.* FROM wharf.destination_delivery q
              JOIN wharf.provider_event x ON x.id = q.event_id  -- by primary key
             WHERE q.destination_id = substr(v_issue.fingerprint, length('destination:') + 1)::bigint
               AND q.state <> 'DONE' AND q.error_class IS NOT NULL  -- ix_destination_delivery_failing
               -- A paused or broken destination's issue: every failure it holds.
               AND (v_issue.error_class IN ('DestinationGone', 'DestinationBreakerOpen') OR q.error_class = v_issue.error_class)
               AND (p_before_id IS NULL OR q.event_id < p_before_id)
               AND x.workspace_id = p_workspace_id
               AND x.provider = v_issue.provider
               AND (v_issue.event_type = '*' OR x.event_type = v_issue.event_type)
             ORDER BY q.event_id DESC
             LIMIT p_limit + 1) e;
  ELSE
    SELECT coalesce(jsonb_agg(wharf.event_summary(e) ORDER BY e.id DESC), '[]'), count(*) INTO v_events, v_count
      FROM (SELECT * FROM wharf.provider_event x
             WHERE x.workspace_id = p_workspace_id
               AND (p_before_id IS NULL OR x.id < p_before_id)
               AND x.provider = v_issue.provider
               AND (v_issue.event_type = '*' OR x.event_type = v_issue.event_type)
               AND x.error_class = v_issue.error_class
               AND (v_issue.event_type = '*'
                    OR wharf.frames_fingerprint((SELECT h.frames FROM wharf.event_attempt h
                                                  WHERE h.event_id = x.id  -- by primary key
                                                  ORDER BY h.lease_epoch DESC LIMIT 1)) = v_issue.fingerprint)
             ORDER BY x.id DESC
             LIMIT p_limit + 1) e;
  END IF;
  IF v_count <= p_limit THEN
    RETURN jsonb_build_object('events', v_events, 'next_cursor', NULL);
  END IF;
  v_events := v_events - p_limit;
  RETURN jsonb_build_object('events', v_events, 'next_cursor', v_events -> (p_limit - 1) -> 'id');
END $$;

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
  v_since := date_trunc('hour', now(), 'UTC') - make_interval(hours => p_hours - 1);
  RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object('at', t.at, 'failures', coalesce(h.failures, 0), 'dead', coalesce(h.dead, 0))
                                    ORDER BY t.at), '[]')
            FROM generate_series(v_since, date_trunc('hour', now(), 'UTC'), interval '1 hour') AS t(at)
            LEFT JOIN wharf.issue_failure_hour h ON h.issue_id = p_id AND h.hour = t.at);
END $$;

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

REVOKE ALL ON FUNCTION wharf.list_issues(bigint, text, integer),
  wharf.list_installation_issues(text, integer),
  wharf.show_issue(bigint, bigint),
  wharf.set_issue_status(bigint, bigint, text, text),
  wharf.set_installation_issue_status(bigint, text, text),
  wharf.issue_events(bigint, bigint, integer, bigint),
  wharf.issue_history(bigint, bigint, integer),
  wharf.purge_issues(integer) FROM PUBLIC;
