-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.count_into_issue(bigint,text,text,text,text,text[],timestamp with time zone,timestamp with time zone,bigint,bigint,bigint)
--   changed  function wharf.count_delivery_issue(bigint,bigint,text,timestamp with time zone,boolean)
--   changed  function wharf.count_failures_into_issues()
--   changed  function wharf.issue_events(bigint,bigint,integer,bigint)

-- ======== sql/97-issues.sql ========

-- Counts p_failures failures (p_dead of them dead, the latest at
-- p_last_seen_at) of one group into its issue: opened when new, reopened
-- when resolved; an acknowledged or ignored issue keeps its status. The one
-- upsert of wharf.issue: the handlers' attempts (below) and the
-- destinations' deliveries (count_delivery_issue, below) count through it.
-- Internal.
CREATE OR REPLACE FUNCTION wharf.count_into_issue(
  p_workspace_id bigint, p_provider text, p_event_type text, p_error_class text, p_fingerprint text, p_frames text[],
  p_first_seen_at timestamptz, p_last_seen_at timestamptz, p_failures bigint, p_dead bigint, p_sample_event_id bigint)
RETURNS void
LANGUAGE sql AS $$
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
         reopened_at     = CASE WHEN i.status = 'resolved' THEN excluded.last_seen_at ELSE i.reopened_at END
$$;

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
  v_limit integer := wharf.setting_integer('issue_limit');
  v_group record;
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
  INSERT INTO wharf.failure_minute AS m (workspace_id, minute, failed, dead)
  SELECT e.workspace_id, date_trunc('minute', a.ended_at), count(*), count(*) FILTER (WHERE e.state = 'DEAD')
    FROM attempts_added a
    JOIN wharf.provider_event e ON e.id = a.event_id
   WHERE a.ended <> 'released'
   GROUP BY 1, 2
   ORDER BY 1, 2
  ON CONFLICT (workspace_id, minute) DO UPDATE
     SET failed = m.failed + excluded.failed, dead = m.dead + excluded.dead;
  RETURN NULL;
END $$;

-- The events of issue p_id of workspace p_workspace_id that still carry its
-- error class as their last cause (and, unless the issue is of event type
-- '*', their last failure the issue's fingerprint), newest first, as list_events pages them
-- ({events, next_cursor}, older than p_before_id when given). NULL when the
-- workspace has no such issue. An issue of event type '*' matches every
-- event type. For a destination's issue (fingerprint 'destination:<id>',
-- sql/88): the events whose delivery to it last failed with the class and
-- has not succeeded since (waiting for its retry, leased, or dead).
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
               AND q.state IN ('QUEUED', 'LEASED', 'DEAD')  -- ix_destination_delivery_listing
               AND q.error_class = v_issue.error_class
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

DROP FUNCTION wharf.count_into_issue(bigint,text,text,text,text,text[],timestamp with time zone,timestamp with time zone,bigint,bigint,bigint);

CREATE OR REPLACE FUNCTION wharf.count_delivery_issue(p_destination_id bigint, p_event_id bigint, p_error_class text, p_at timestamp with time zone, p_dead boolean)
 RETURNS void
 LANGUAGE sql
AS $function$
  INSERT INTO wharf.issue AS i (workspace_id, provider, event_type, error_class, fingerprint, frames,
                                first_seen_at, last_seen_at, failures, dead, sample_event_id, status_at)
  SELECT e.workspace_id, e.provider, e.event_type, p_error_class, 'destination:' || p_destination_id,
         ARRAY['destination ' || p_destination_id || ' ' || d.name], p_at, p_at, 1,
         CASE WHEN p_dead THEN 1 ELSE 0 END, e.id, p_at
    FROM wharf.provider_event e, wharf.destination d
   WHERE e.id = p_event_id AND d.id = p_destination_id
  ON CONFLICT (workspace_id, provider, event_type, error_class, fingerprint) DO UPDATE
     SET last_seen_at    = greatest(i.last_seen_at, excluded.last_seen_at),
         failures        = i.failures + 1,
         dead            = i.dead + excluded.dead,
         sample_event_id = excluded.sample_event_id,
         status          = CASE WHEN i.status = 'resolved' THEN 'open' ELSE i.status END,
         status_by       = CASE WHEN i.status = 'resolved' THEN NULL ELSE i.status_by END,
         status_at       = CASE WHEN i.status = 'resolved' THEN excluded.last_seen_at ELSE i.status_at END,
         reopened        = i.reopened + CASE WHEN i.status = 'resolved' THEN 1 ELSE 0 END,
         reopened_at     = CASE WHEN i.status = 'resolved' THEN excluded.last_seen_at ELSE i.reopened_at END
$function$;
GRANT EXECUTE ON FUNCTION wharf.count_delivery_issue(bigint,bigint,text,timestamp with time zone,boolean) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.count_failures_into_issues()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_limit integer := wharf.setting_integer('issue_limit');
BEGIN
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
  INSERT INTO wharf.issue AS i (workspace_id, provider, event_type, error_class, fingerprint, frames,
                                first_seen_at, last_seen_at, failures, dead, sample_event_id, status_at)
  SELECT k.workspace_id, k.provider, k.issue_type, k.error_class, k.issue_fingerprint, k.issue_frames,
         min(k.first_seen_at), max(k.last_seen_at),
         sum(k.failures), sum(k.dead), max(k.sample_event_id), min(k.first_seen_at)
    FROM placed k
   GROUP BY k.workspace_id, k.provider, k.issue_type, k.error_class, k.issue_fingerprint, k.issue_frames
   ORDER BY k.workspace_id, k.provider, k.issue_type, k.error_class, k.issue_fingerprint
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

  -- The same failures per workspace and minute (alert rates, metrics).
  INSERT INTO wharf.failure_minute AS m (workspace_id, minute, failed, dead)
  SELECT e.workspace_id, date_trunc('minute', a.ended_at), count(*), count(*) FILTER (WHERE e.state = 'DEAD')
    FROM attempts_added a
    JOIN wharf.provider_event e ON e.id = a.event_id
   WHERE a.ended <> 'released'
   GROUP BY 1, 2
   ORDER BY 1, 2
  ON CONFLICT (workspace_id, minute) DO UPDATE
     SET failed = m.failed + excluded.failed, dead = m.dead + excluded.dead;
  RETURN NULL;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.count_failures_into_issues() TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.issue_events(p_workspace_id bigint, p_id bigint, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL::bigint)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
  IF v_count <= p_limit THEN
    RETURN jsonb_build_object('events', v_events, 'next_cursor', NULL);
  END IF;
  v_events := v_events - p_limit;
  RETURN jsonb_build_object('events', v_events, 'next_cursor', v_events -> (p_limit - 1) -> 'id');
END $function$;
REVOKE ALL ON FUNCTION wharf.issue_events(bigint,bigint,integer,bigint) FROM PUBLIC;
