-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.fail(bigint,bigint,text,text,text[])
--   new      function wharf.frames_fingerprint(text[])
--   changed  function wharf.count_failures_into_issues()
--   changed  function wharf.event_attempts(wharf.provider_event)
--   changed  function wharf.event_detail(bigint,bigint)
--   changed  function wharf.issue_events(bigint,bigint,integer,bigint)
--   changed  function wharf.issue_summary(wharf.issue)
--   dropped  function wharf.fail(bigint,bigint,text,text)

-- The grants of the functions dropped below, given again to the functions of the same name created after them.
CREATE TEMP TABLE wharf_release_grants ON COMMIT DROP AS
  SELECT p.proname::text AS name, a.grantee::regrole::text AS grantee
    FROM pg_proc p CROSS JOIN LATERAL aclexplode(p.proacl) a
   WHERE p.oid IN ('wharf.fail(bigint,bigint,text,text)'::regprocedure)
     AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> p.proowner;

DROP FUNCTION wharf.fail(bigint,bigint,text,text);

-- ======== sql/40-failure-dead-letters.sql ========

-- Records a failed attempt of a row LEASED under p_epoch, in the row and in
-- its attempt history, and returns its new state; NULL when the lease is
-- gone. Waits (5 s at most, then 55P03) for the lease's open fenced writes,
-- like every end of a lease (top of sql/30).
--
-- Idempotent under its epoch: a repeat, writing nothing, returns the state
-- its first try left (QUEUED or DEAD) when that epoch's attempt history
-- entry is this failure (its kind and class): the first try committed while
-- its reply was lost (a connection cut after COMMIT, a failover), and the
-- worker's retry learns what it did. The entry keeps that state (left_state)
-- because the row may have moved on since: claimed again, replayed. A lease
-- that ended otherwise (completed, released, reaped, failed with another
-- kind or class, erased) still answers NULL. p_kind:
--   transient  back to QUEUED after the delay; failures unchanged; but DEAD
--              once its transient failures have lasted longer than
--              transient_max_age (counted from the first of them,
--              transient_since), so that an upstream failing forever for one
--              payload cannot hold its scope forever
--   unknown    failures + 1; DEAD at max_attempts, else QUEUED after the delay
--   permanent  DEAD at once
--   uncertain  DEAD with outcome 'uncertain', never retried automatically
-- p_error_class is a class name (e.g. 'TypeError'), never a message: 22023
-- for anything else, 22023 for an unknown kind. p_frames (optional, a worker
-- of before passes none) are where it was thrown, innermost first, in the
-- application's own code: at most 8 of 'path:line:column' or 'path:line:column
-- function', the path relative to the application's root; 22023 for anything
-- else, so that no message, argument or absolute path (a home directory) is
-- stored. The attempt history keeps them; the issue grouping fingerprints
-- them (sql/97). An empty array is no frames.
CREATE OR REPLACE FUNCTION wharf.fail(p_id bigint, p_epoch bigint, p_kind text, p_error_class text,
                                      p_frames text[] DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
  v_now   timestamptz := clock_timestamp();
  v_row   record;
  v_dead  boolean;
  v_state text;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL OR p_kind IS NULL OR p_error_class IS NULL THEN
    RAISE EXCEPTION 'wharf.fail: id, epoch, kind and error_class are required' USING ERRCODE = '22004';
  END IF;
  IF p_kind NOT IN ('transient', 'unknown', 'permanent', 'uncertain') THEN
    RAISE EXCEPTION 'wharf.fail: unknown failure kind %', quote_literal(p_kind) USING ERRCODE = '22023';
  END IF;
  IF p_error_class !~ '^[A-Za-z_$][A-Za-z0-9_$.:-]{0,127}$' THEN
    RAISE EXCEPTION 'wharf.fail: error_class must be a class name, not free text' USING ERRCODE = '22023';
  END IF;
  IF cardinality(p_frames) > 8 OR array_ndims(p_frames) > 1
     OR EXISTS (SELECT FROM unnest(p_frames) f(frame)
                 WHERE frame IS NULL
                    OR frame !~ '^[A-Za-z0-9_.@-][A-Za-z0-9_./@-]{0,199}:[0-9]{1,7}:[0-9]{1,7}( [A-Za-z_$<][A-Za-z0-9_$.<>]{0,127})?$') THEN
    RAISE EXCEPTION 'wharf.fail: frames must be at most 8 of path:line:column function, not free text' USING ERRCODE = '22023';
  END IF;

  SELECT attempt, failures, leased_by, leased_at, transient_since INTO v_row
    FROM wharf.provider_event
   WHERE id = p_id AND lease_epoch = p_epoch AND state COLLATE "C" = 'LEASED'  -- by primary key (top of sql/30)
   FOR UPDATE;  -- after the lease's fenced writes (top of sql/30)
  IF NOT FOUND THEN
    -- Failed under this epoch by an earlier try whose reply was lost. Read
    -- after the row lock: a try still in flight has committed or rolled back.
    RETURN (SELECT h.left_state FROM wharf.event_attempt h
             WHERE h.event_id = p_id AND h.lease_epoch = p_epoch  -- by primary key
               AND h.ended = p_kind AND h.error_class = p_error_class);
  END IF;

  v_dead := p_kind IN ('permanent', 'uncertain')
            OR (p_kind = 'unknown' AND v_row.failures + 1 >= wharf.setting_integer('max_attempts'))
            OR (p_kind = 'transient' AND v_row.transient_since IS NOT NULL
                AND v_now - v_row.transient_since > wharf.setting_interval('transient_max_age'));
  v_state := CASE WHEN v_dead THEN 'DEAD' ELSE 'QUEUED' END;

  UPDATE wharf.provider_event
     SET failures        = failures + CASE WHEN p_kind = 'unknown' THEN 1 ELSE 0 END,
         transient_since = CASE WHEN p_kind = 'transient' THEN coalesce(transient_since, v_now) ELSE transient_since END,
         error_class     = p_error_class,
         leased_until    = NULL,
         state           = v_state,
         outcome         = CASE WHEN p_kind = 'uncertain' THEN 'uncertain' END,
         dead_at         = CASE WHEN v_dead THEN v_now END,
         next_attempt_at = CASE WHEN v_dead THEN next_attempt_at
                                ELSE v_now + wharf.retry_delay(v_row.attempt) END
   WHERE id = p_id;
  INSERT INTO wharf.event_attempt (event_id, lease_epoch, attempt, worker, started_at, ended_at, ended, error_class,
                                   left_state, frames)
  VALUES (p_id, p_epoch, v_row.attempt, v_row.leased_by, v_row.leased_at, v_now, p_kind, p_error_class,
          v_state, nullif(p_frames, '{}'));
  RETURN v_state;
END $$;

REVOKE ALL ON FUNCTION wharf.fail(bigint, bigint, text, text, text[]) FROM PUBLIC;

-- ======== sql/95-operator.sql ========

-- Every lease of event e, oldest first, as {attempt, epoch, worker,
-- started_at, ended_at, ended, error_class, frames}: those that ended other
-- than by completion from wharf.event_attempt (frames: where a failure was
-- thrown in the application's code, as wharf.fail took them; [] when its
-- worker passed none), then the lease the row itself
-- describes when it is LEASED ('running') or was completed by it (its
-- outcome). Internal, like event_page.
CREATE OR REPLACE FUNCTION wharf.event_attempts(e wharf.provider_event) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT coalesce(jsonb_agg(a ORDER BY (a ->> 'epoch')::bigint), '[]')
    FROM (SELECT jsonb_build_object('attempt', h.attempt, 'epoch', h.lease_epoch, 'worker', h.worker,
                                    'started_at', h.started_at, 'ended_at', h.ended_at,
                                    'ended', h.ended, 'error_class', h.error_class,
                                    'frames', coalesce(to_jsonb(h.frames), '[]')) AS a
            FROM wharf.event_attempt h
           WHERE h.event_id = e.id
          UNION ALL
          SELECT jsonb_build_object('attempt', e.attempt, 'epoch', e.lease_epoch, 'worker', e.leased_by,
                                    'started_at', e.leased_at,
                                    'ended_at', CASE WHEN e.state = 'DONE' THEN e.handled_at END,
                                    'ended', CASE WHEN e.state = 'DONE' THEN e.outcome ELSE 'running' END,
                                    'error_class', NULL, 'frames', '[]'::jsonb)
           WHERE e.state IN ('LEASED', 'DONE') AND e.leased_by IS NOT NULL) attempts
$$;

-- Event p_id with its payload, headers (stored without credentials by admit),
-- lease and replay facts, attempts, the frames of its last failure
-- (error_frames: a dead letter's, where it was thrown; [] when none) and
-- committed steps, when its workspace IS
-- NOT DISTINCT FROM p_workspace_id; NULL otherwise. Internal, like event_page.
CREATE OR REPLACE FUNCTION wharf.event_detail(p_workspace_id bigint, p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT wharf.event_summary(e) || jsonb_build_object(
           'delivery_key', e.delivery_key, 'scope_key', e.scope_key,
           'connection_id', e.connection_id, 'payload', e.payload, 'headers', e.headers,
           'lease_epoch', e.lease_epoch, 'leased_until', e.leased_until, 'leased_by', e.leased_by,
           'replayed_by', e.replayed_by, 'replayed_at', e.replayed_at,
           'attempts', wharf.event_attempts(e),
           'error_frames', coalesce((SELECT to_jsonb(h.frames) FROM wharf.event_attempt h
                                      WHERE h.event_id = e.id AND e.error_class IS NOT NULL  -- by primary key
                                      ORDER BY h.lease_epoch DESC LIMIT 1), '[]'),
           'steps', (SELECT coalesce(jsonb_agg(jsonb_build_object('name', s.step_name,
                                                                  'committed_at', s.committed_at)
                                               ORDER BY s.committed_at, s.step_name), '[]')
                       FROM wharf.provider_event_step s WHERE s.event_id = e.id))
    FROM wharf.provider_event e
   WHERE e.id = p_id AND e.workspace_id IS NOT DISTINCT FROM p_workspace_id
$$;

-- ======== sql/97-issues.sql ========

-- The fingerprint of a failure's frames (wharf.fail's p_frames, innermost
-- first): its first three, the place it was thrown and two callers, so that
-- a deeper caller does not split an issue; '' for none. Line and column are
-- part of it: a deploy that moves the code starts new issues. Internal.
CREATE OR REPLACE FUNCTION wharf.frames_fingerprint(p_frames text[]) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN cardinality(p_frames) > 0 THEN md5(array_to_string(p_frames[1:3], E'\n')) ELSE '' END
$$;

-- Trigger on wharf.event_attempt, per statement (reap inserts many rows at
-- once): upserts the issue of every failed or expired lease, in key order so
-- that two reapers counting into the same issues cannot deadlock.
CREATE OR REPLACE FUNCTION wharf.count_failures_into_issues() RETURNS trigger
LANGUAGE plpgsql AS $$
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
END $$;

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

-- The events of issue p_id of workspace p_workspace_id that still carry its
-- error class as their last cause (and, unless the issue is of event type
-- '*', their last failure the issue's fingerprint), newest first, as list_events pages them
-- ({events, next_cursor}, older than p_before_id when given). NULL when the
-- workspace has no such issue. An issue of event type '*' matches every
-- event type.
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
END $$;

REVOKE ALL ON FUNCTION wharf.list_issues(bigint, text, integer),
  wharf.list_installation_issues(text, integer),
  wharf.show_issue(bigint, bigint),
  wharf.set_issue_status(bigint, bigint, text, text),
  wharf.set_installation_issue_status(bigint, text, text),
  wharf.issue_events(bigint, bigint, integer, bigint),
  wharf.purge_issues(integer) FROM PUBLIC;

DO $$
DECLARE g record;
BEGIN
  FOR g IN SELECT * FROM wharf_release_grants LOOP
    IF g.name = 'fail' THEN EXECUTE format('GRANT EXECUTE ON FUNCTION wharf.fail(bigint,bigint,text,text,text[]) TO %s', g.grantee); END IF;
  END LOOP;
END $$;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

DROP FUNCTION wharf.fail(bigint,bigint,text,text,text[]);

DROP FUNCTION wharf.frames_fingerprint(text[]);

CREATE OR REPLACE FUNCTION wharf.count_failures_into_issues()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_limit integer := wharf.setting_integer('issue_limit');
BEGIN
  WITH failed AS (
    SELECT e.workspace_id, e.provider, e.event_type, coalesce(a.error_class, a.ended) AS error_class,
           a.ended_at, e.id AS event_id, e.state
      FROM attempts_added a
      JOIN wharf.provider_event e ON e.id = a.event_id
     WHERE a.ended <> 'released'
  ), grouped AS (
    SELECT f.workspace_id, f.provider, f.event_type, f.error_class,
           min(f.ended_at) AS first_seen_at, max(f.ended_at) AS last_seen_at, count(*) AS failures,
           count(*) FILTER (WHERE f.state = 'DEAD') AS dead, max(f.event_id) AS sample_event_id
      FROM failed f
     GROUP BY f.workspace_id, f.provider, f.event_type, f.error_class
  ), keyed AS (
    -- A group with no issue yet gets its own while the workspace has fewer
    -- than issue_limit; otherwise it counts into '*'. Two new groups at once
    -- may both pass the count: the bound is issue_limit plus the concurrency.
    SELECT g.*,
           CASE WHEN EXISTS (SELECT FROM wharf.issue i
                              WHERE (i.workspace_id = g.workspace_id OR (g.workspace_id IS NULL AND i.workspace_id IS NULL))
                                AND i.provider = g.provider AND i.event_type = g.event_type
                                AND i.error_class = g.error_class)
                  OR (SELECT count(*) FROM (SELECT FROM wharf.issue i
                                             WHERE i.workspace_id = g.workspace_id
                                                OR (g.workspace_id IS NULL AND i.workspace_id IS NULL)
                                             LIMIT v_limit) n) < v_limit
                THEN g.event_type ELSE '*' END AS issue_type
      FROM grouped g
  )
  INSERT INTO wharf.issue AS i (workspace_id, provider, event_type, error_class, first_seen_at, last_seen_at,
                                failures, dead, sample_event_id, status_at)
  SELECT k.workspace_id, k.provider, k.issue_type, k.error_class, min(k.first_seen_at), max(k.last_seen_at),
         sum(k.failures), sum(k.dead), max(k.sample_event_id), min(k.first_seen_at)
    FROM keyed k
   GROUP BY k.workspace_id, k.provider, k.issue_type, k.error_class
   ORDER BY k.workspace_id, k.provider, k.issue_type, k.error_class
  ON CONFLICT (workspace_id, provider, event_type, error_class) DO UPDATE
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

CREATE OR REPLACE FUNCTION wharf.event_attempts(e wharf.provider_event)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
  SELECT coalesce(jsonb_agg(a ORDER BY (a ->> 'epoch')::bigint), '[]')
    FROM (SELECT jsonb_build_object('attempt', h.attempt, 'epoch', h.lease_epoch, 'worker', h.worker,
                                    'started_at', h.started_at, 'ended_at', h.ended_at,
                                    'ended', h.ended, 'error_class', h.error_class) AS a
            FROM wharf.event_attempt h
           WHERE h.event_id = e.id
          UNION ALL
          SELECT jsonb_build_object('attempt', e.attempt, 'epoch', e.lease_epoch, 'worker', e.leased_by,
                                    'started_at', e.leased_at,
                                    'ended_at', CASE WHEN e.state = 'DONE' THEN e.handled_at END,
                                    'ended', CASE WHEN e.state = 'DONE' THEN e.outcome ELSE 'running' END,
                                    'error_class', NULL)
           WHERE e.state IN ('LEASED', 'DONE') AND e.leased_by IS NOT NULL) attempts
$function$;
GRANT EXECUTE ON FUNCTION wharf.event_attempts(wharf.provider_event) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.event_detail(p_workspace_id bigint, p_id bigint)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
  SELECT wharf.event_summary(e) || jsonb_build_object(
           'delivery_key', e.delivery_key, 'scope_key', e.scope_key,
           'connection_id', e.connection_id, 'payload', e.payload, 'headers', e.headers,
           'lease_epoch', e.lease_epoch, 'leased_until', e.leased_until, 'leased_by', e.leased_by,
           'replayed_by', e.replayed_by, 'replayed_at', e.replayed_at,
           'attempts', wharf.event_attempts(e),
           'steps', (SELECT coalesce(jsonb_agg(jsonb_build_object('name', s.step_name,
                                                                  'committed_at', s.committed_at)
                                               ORDER BY s.committed_at, s.step_name), '[]')
                       FROM wharf.provider_event_step s WHERE s.event_id = e.id))
    FROM wharf.provider_event e
   WHERE e.id = p_id AND e.workspace_id IS NOT DISTINCT FROM p_workspace_id
$function$;
GRANT EXECUTE ON FUNCTION wharf.event_detail(bigint,bigint) TO PUBLIC;

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
           ORDER BY x.id DESC
           LIMIT p_limit + 1) e;
  IF v_count <= p_limit THEN
    RETURN jsonb_build_object('events', v_events, 'next_cursor', NULL);
  END IF;
  v_events := v_events - p_limit;
  RETURN jsonb_build_object('events', v_events, 'next_cursor', v_events -> (p_limit - 1) -> 'id');
END $function$;
REVOKE ALL ON FUNCTION wharf.issue_events(bigint,bigint,integer,bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.issue_summary(i wharf.issue)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
  SELECT jsonb_build_object(
    'id', i.id, 'workspace_id', i.workspace_id, 'provider', i.provider, 'event_type', i.event_type,
    'error_class', i.error_class, 'status', i.status, 'status_by', i.status_by, 'status_at', i.status_at,
    'first_seen_at', i.first_seen_at, 'last_seen_at', i.last_seen_at, 'failures', i.failures,
    'dead', i.dead, 'sample_event_id', i.sample_event_id, 'reopened', i.reopened,
    'reopened_at', i.reopened_at)
$function$;
GRANT EXECUTE ON FUNCTION wharf.issue_summary(wharf.issue) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.fail(p_id bigint, p_epoch bigint, p_kind text, p_error_class text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET lock_timeout TO '5s'
AS $function$
DECLARE
  v_now   timestamptz := clock_timestamp();
  v_row   record;
  v_dead  boolean;
  v_state text;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL OR p_kind IS NULL OR p_error_class IS NULL THEN
    RAISE EXCEPTION 'wharf.fail: id, epoch, kind and error_class are required' USING ERRCODE = '22004';
  END IF;
  IF p_kind NOT IN ('transient', 'unknown', 'permanent', 'uncertain') THEN
    RAISE EXCEPTION 'wharf.fail: unknown failure kind %', quote_literal(p_kind) USING ERRCODE = '22023';
  END IF;
  IF p_error_class !~ '^[A-Za-z_$][A-Za-z0-9_$.:-]{0,127}$' THEN
    RAISE EXCEPTION 'wharf.fail: error_class must be a class name, not free text' USING ERRCODE = '22023';
  END IF;

  SELECT attempt, failures, leased_by, leased_at, transient_since INTO v_row
    FROM wharf.provider_event
   WHERE id = p_id AND lease_epoch = p_epoch AND state COLLATE "C" = 'LEASED'  -- by primary key (top of sql/30)
   FOR UPDATE;  -- after the lease's fenced writes (top of sql/30)
  IF NOT FOUND THEN
    -- Failed under this epoch by an earlier try whose reply was lost. Read
    -- after the row lock: a try still in flight has committed or rolled back.
    RETURN (SELECT h.left_state FROM wharf.event_attempt h
             WHERE h.event_id = p_id AND h.lease_epoch = p_epoch  -- by primary key
               AND h.ended = p_kind AND h.error_class = p_error_class);
  END IF;

  v_dead := p_kind IN ('permanent', 'uncertain')
            OR (p_kind = 'unknown' AND v_row.failures + 1 >= wharf.setting_integer('max_attempts'))
            OR (p_kind = 'transient' AND v_row.transient_since IS NOT NULL
                AND v_now - v_row.transient_since > wharf.setting_interval('transient_max_age'));
  v_state := CASE WHEN v_dead THEN 'DEAD' ELSE 'QUEUED' END;

  UPDATE wharf.provider_event
     SET failures        = failures + CASE WHEN p_kind = 'unknown' THEN 1 ELSE 0 END,
         transient_since = CASE WHEN p_kind = 'transient' THEN coalesce(transient_since, v_now) ELSE transient_since END,
         error_class     = p_error_class,
         leased_until    = NULL,
         state           = v_state,
         outcome         = CASE WHEN p_kind = 'uncertain' THEN 'uncertain' END,
         dead_at         = CASE WHEN v_dead THEN v_now END,
         next_attempt_at = CASE WHEN v_dead THEN next_attempt_at
                                ELSE v_now + wharf.retry_delay(v_row.attempt) END
   WHERE id = p_id;
  INSERT INTO wharf.event_attempt (event_id, lease_epoch, attempt, worker, started_at, ended_at, ended, error_class, left_state)
  VALUES (p_id, p_epoch, v_row.attempt, v_row.leased_by, v_row.leased_at, v_now, p_kind, p_error_class, v_state);
  RETURN v_state;
END $function$;
REVOKE ALL ON FUNCTION wharf.fail(bigint,bigint,text,text) FROM PUBLIC;
