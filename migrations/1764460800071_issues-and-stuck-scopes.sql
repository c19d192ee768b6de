-- Up Migration

-- Release 0.3.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.change_issue_status(bigint,bigint,text,text)
--   new      function wharf.count_failures_into_issues()
--   new      function wharf.dead_letter_scope_head(bigint,text,bigint,text)
--   new      function wharf.issue_events(bigint,bigint,integer,bigint)
--   new      function wharf.issue_list(bigint,text,integer)
--   new      function wharf.issue_summary(wharf.issue)
--   new      function wharf.list_installation_issues(text,integer)
--   new      function wharf.list_issues(bigint,text,integer)
--   new      function wharf.list_scope_actions(bigint,integer)
--   new      function wharf.list_stuck_scopes(bigint,interval,integer)
--   new      function wharf.pause_scope_connection(bigint,text,bigint,text)
--   new      function wharf.purge_issues(integer)
--   new      function wharf.purge_scope_actions(integer)
--   new      function wharf.retry_scope_head(bigint,text,bigint,text)
--   new      function wharf.scope_action_result(bigint,text)
--   new      function wharf.scope_head_refusal(bigint,text,bigint,text)
--   new      function wharf.set_installation_issue_status(bigint,text,text)
--   new      function wharf.set_issue_status(bigint,bigint,text,text)
--   new      function wharf.show_issue(bigint,bigint)
--   new      function wharf.stuck_scope_list(bigint,interval,integer)
--   new      trigger event_attempt_count_issues on wharf.event_attempt

-- ======== sql/97-issues.sql ========

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
  RETURN NULL;
END $$;

CREATE TRIGGER event_attempt_count_issues
  AFTER INSERT ON wharf.event_attempt
  REFERENCING NEW TABLE AS attempts_added
  FOR EACH STATEMENT EXECUTE FUNCTION wharf.count_failures_into_issues();

-- One issue as the operator surface shows it. Internal.
CREATE OR REPLACE FUNCTION wharf.issue_summary(i wharf.issue) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', i.id, 'workspace_id', i.workspace_id, 'provider', i.provider, 'event_type', i.event_type,
    'error_class', i.error_class, 'status', i.status, 'status_by', i.status_by, 'status_at', i.status_at,
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
-- error class as their last cause, newest first, as list_events pages them
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
           ORDER BY x.id DESC
           LIMIT p_limit + 1) e;
  IF v_count <= p_limit THEN
    RETURN jsonb_build_object('events', v_events, 'next_cursor', NULL);
  END IF;
  v_events := v_events - p_limit;
  RETURN jsonb_build_object('events', v_events, 'next_cursor', v_events -> (p_limit - 1) -> 'id');
END $$;

-- Retention: deletes at most p_batch issues not seen for issue_retention,
-- whatever their status (a failure that returns later opens a new one), and
-- returns how many. One short transaction per call: the retention loop calls
-- it until it returns less than p_batch.
CREATE OR REPLACE FUNCTION wharf.purge_issues(p_batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_deleted bigint;
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
  RETURN v_deleted;
END $$;

REVOKE ALL ON FUNCTION wharf.list_issues(bigint, text, integer),
  wharf.list_installation_issues(text, integer),
  wharf.show_issue(bigint, bigint),
  wharf.set_issue_status(bigint, bigint, text, text),
  wharf.set_installation_issue_status(bigint, text, text),
  wharf.issue_events(bigint, bigint, integer, bigint),
  wharf.purge_issues(integer) FROM PUBLIC;

-- ======== sql/98-stuck-scopes.sql ========

-- The scopes of workspace p_workspace_id whose head arrived (or was last
-- replayed) more than p_older_than ago, oldest first, at most p_limit, each
-- as {scope_key, subject, reason, waiting_since, waiting_seconds, behind,
-- head: {...}, connection: {id, state}}. reason: 'leased' (a handler holds
-- it), 'paused' (its connection is paused), 'failing' (it failed before and
-- waits for its retry or its next claim), else 'waiting'. behind: the QUEUED
-- events after the head, counted up to 10000 (behind_capped says so).
-- Internal: callers use list_stuck_scopes.
CREATE OR REPLACE FUNCTION wharf.stuck_scope_list(p_workspace_id bigint, p_older_than interval, p_limit integer)
RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT coalesce(jsonb_agg(x.scope ORDER BY x.since, x.scope_key), '[]')
    FROM (SELECT s.scope_key, greatest(h.received_at, h.replayed_at) AS since,
                 jsonb_build_object(
                   'scope_key', s.scope_key, 'subject', h.subject,
                   'reason', CASE WHEN h.state = 'LEASED' THEN 'leased'
                                  WHEN c.state = 'PAUSED' THEN 'paused'
                                  WHEN h.attempt > 0 OR h.error_class IS NOT NULL THEN 'failing'
                                  ELSE 'waiting' END,
                   'waiting_since', greatest(h.received_at, h.replayed_at),
                   'waiting_seconds', floor(extract(epoch FROM now() - greatest(h.received_at, h.replayed_at))),
                   'behind', b.n, 'behind_capped', b.n >= 10000,
                   'head', wharf.event_summary(h) || jsonb_build_object('leased_by', h.leased_by,
                                                                        'leased_until', h.leased_until),
                   'connection', jsonb_build_object('id', c.id, 'state', c.state)) AS scope
            FROM wharf.scope s
            JOIN wharf.provider_event h ON h.id = coalesce(s.leased_id, s.head_id)
            LEFT JOIN wharf.connection c ON c.id = h.connection_id
            CROSS JOIN LATERAL (SELECT count(*) AS n
                                  FROM (SELECT FROM wharf.provider_event e
                                         WHERE e.scope_key = s.scope_key AND e.id > h.id AND e.state = 'QUEUED'
                                         LIMIT 10000) q) b
           WHERE s.workspace_id = p_workspace_id
             AND (s.leased_id IS NOT NULL OR s.head_id IS NOT NULL)
             AND greatest(h.received_at, h.replayed_at) < now() - p_older_than
           ORDER BY greatest(h.received_at, h.replayed_at), s.scope_key
           LIMIT p_limit) x
$$;

-- The stuck scopes of workspace p_workspace_id (see stuck_scope_list),
-- older than p_older_than or, when NULL, the setting stuck_after. P0002 for
-- an unknown workspace, 22023 for a threshold below zero or a limit outside
-- 1..500.
CREATE OR REPLACE FUNCTION wharf.list_stuck_scopes(
  p_workspace_id bigint, p_older_than interval DEFAULT NULL, p_limit integer DEFAULT 100)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF p_older_than < interval '0' THEN
    RAISE EXCEPTION 'wharf: the threshold must not be negative' USING ERRCODE = '22023';
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 500' USING ERRCODE = '22023';
  END IF;
  RETURN wharf.stuck_scope_list(p_workspace_id, coalesce(p_older_than, wharf.setting_interval('stuck_after')), p_limit);
END $$;

-- Locks event p_event_id of scope p_scope_key of workspace p_workspace_id
-- and says why an action on it as the scope's head must be refused: NULL
-- when it is the scope's QUEUED head, 'leased' when a handler holds it (wait
-- for its lease to end, or for the reaper), 'not_head' when it no longer
-- heads the scope (the list the operator acted on is stale). P0002 when the
-- workspace has no such event in that scope, 22004 for a NULL argument or an
-- empty account. Internal.
CREATE OR REPLACE FUNCTION wharf.scope_head_refusal(p_workspace_id bigint, p_scope_key text, p_event_id bigint, p_account text)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_state text;
BEGIN
  IF p_workspace_id IS NULL OR p_scope_key IS NULL OR p_event_id IS NULL OR p_account IS NULL OR p_account = '' THEN
    RAISE EXCEPTION 'wharf: a scope action needs a workspace, a scope, its head event and an account'
      USING ERRCODE = '22004';
  END IF;
  -- The event first, then (through the trigger of sql/20) its scope row:
  -- the order fail and reap lock them in.
  SELECT state INTO v_state FROM wharf.provider_event
   WHERE id = p_event_id AND workspace_id = p_workspace_id AND scope_key = p_scope_key
   FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: workspace % has no event % in scope %', p_workspace_id, p_event_id, p_scope_key
      USING ERRCODE = 'P0002';
  END IF;
  IF v_state = 'LEASED' THEN
    RETURN 'leased';
  END IF;
  IF v_state <> 'QUEUED'
     OR NOT EXISTS (SELECT FROM wharf.scope s WHERE s.scope_key = p_scope_key AND s.head_id = p_event_id) THEN
    RETURN 'not_head';
  END IF;
  RETURN NULL;
END $$;

-- An action's answer: {"done": true, "event"} or {"done": false, "reason"
-- (see scope_head_refusal), "event"}, the event as it is now. Internal.
CREATE OR REPLACE FUNCTION wharf.scope_action_result(p_event_id bigint, p_refusal text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object('done', p_refusal IS NULL, 'reason', p_refusal, 'event', wharf.event_summary(e))
    FROM wharf.provider_event e WHERE e.id = p_event_id
$$;

-- Makes head p_event_id of scope p_scope_key due now, wakes idle claimers
-- and records the action (see scope_action_result, scope_head_refusal).
CREATE OR REPLACE FUNCTION wharf.retry_scope_head(p_workspace_id bigint, p_scope_key text, p_event_id bigint, p_account text)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_refusal text;
BEGIN
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  v_refusal := wharf.scope_head_refusal(p_workspace_id, p_scope_key, p_event_id, p_account);
  IF v_refusal IS NULL THEN
    UPDATE wharf.provider_event SET next_attempt_at = now() WHERE id = p_event_id AND next_attempt_at > now();
    INSERT INTO wharf.scope_action (workspace_id, scope_key, event_id, connection_id, action, account)
    SELECT p_workspace_id, p_scope_key, p_event_id, e.connection_id, 'retry_head', p_account
      FROM wharf.provider_event e WHERE e.id = p_event_id;
    PERFORM wharf.notify_idle_claimers();
  END IF;
  RETURN wharf.scope_action_result(p_event_id, v_refusal);
END $$;

-- Moves head p_event_id of scope p_scope_key to the dead letters (DEAD now,
-- its error class kept, 'MovedToDeadLetters' when it has none), so that the
-- next event of the scope runs; wakes idle claimers and records the action
-- (see scope_action_result, scope_head_refusal). The event can be replayed
-- like any dead letter.
CREATE OR REPLACE FUNCTION wharf.dead_letter_scope_head(p_workspace_id bigint, p_scope_key text, p_event_id bigint, p_account text)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_refusal text;
BEGIN
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  v_refusal := wharf.scope_head_refusal(p_workspace_id, p_scope_key, p_event_id, p_account);
  IF v_refusal IS NULL THEN
    UPDATE wharf.provider_event
       SET state = 'DEAD', dead_at = now(), error_class = coalesce(error_class, 'MovedToDeadLetters')
     WHERE id = p_event_id;
    INSERT INTO wharf.scope_action (workspace_id, scope_key, event_id, connection_id, action, account)
    SELECT p_workspace_id, p_scope_key, p_event_id, e.connection_id, 'dead_letter_head', p_account
      FROM wharf.provider_event e WHERE e.id = p_event_id;
    PERFORM wharf.notify_idle_claimers();
  END IF;
  RETURN wharf.scope_action_result(p_event_id, v_refusal);
END $$;

-- Pauses the connection that admitted head p_event_id of scope p_scope_key
-- (its deliveries are still stored, nothing of it is claimed) and records
-- the action; the connection as it is after (show_connection). The head may
-- be leased (its handler finishes). P0002 when the workspace has no such
-- event in that scope or it has no connection.
CREATE OR REPLACE FUNCTION wharf.pause_scope_connection(p_workspace_id bigint, p_scope_key text, p_event_id bigint, p_account text)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_connection_id bigint;
BEGIN
  IF p_workspace_id IS NULL OR p_scope_key IS NULL OR p_event_id IS NULL OR p_account IS NULL OR p_account = '' THEN
    RAISE EXCEPTION 'wharf: a scope action needs a workspace, a scope, its head event and an account'
      USING ERRCODE = '22004';
  END IF;
  SELECT connection_id INTO v_connection_id FROM wharf.provider_event
   WHERE id = p_event_id AND workspace_id = p_workspace_id AND scope_key = p_scope_key;
  IF v_connection_id IS NULL THEN
    RAISE EXCEPTION 'wharf: workspace % has no event % with a connection in scope %', p_workspace_id, p_event_id, p_scope_key
      USING ERRCODE = 'P0002';
  END IF;
  PERFORM wharf.set_connection_state(v_connection_id, 'PAUSED');
  INSERT INTO wharf.scope_action (workspace_id, scope_key, event_id, connection_id, action, account)
  VALUES (p_workspace_id, p_scope_key, p_event_id, v_connection_id, 'pause_connection', p_account);
  RETURN wharf.show_connection(v_connection_id);
END $$;

-- The newest actions on the scopes of workspace p_workspace_id, at most
-- p_limit, as {id, scope_key, event_id, connection_id, action, account, at}.
-- P0002 for an unknown workspace, 22023 for a limit outside 1..500.
CREATE OR REPLACE FUNCTION wharf.list_scope_actions(p_workspace_id bigint, p_limit integer DEFAULT 50) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 500' USING ERRCODE = '22023';
  END IF;
  RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', a.id, 'scope_key', a.scope_key, 'event_id', a.event_id, 'connection_id', a.connection_id,
                   'action', a.action, 'account', a.account, 'at', a.at) ORDER BY a.id DESC), '[]')
            FROM (SELECT * FROM wharf.scope_action x WHERE x.workspace_id = p_workspace_id
                   ORDER BY x.id DESC LIMIT p_limit) a);
END $$;

-- Retention: deletes at most p_batch scope actions older than
-- issue_retention and returns how many; the retention loop calls it until it
-- returns less than p_batch.
CREATE OR REPLACE FUNCTION wharf.purge_scope_actions(p_batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_deleted bigint;
BEGIN
  IF p_batch IS NULL OR p_batch < 1 THEN
    RAISE EXCEPTION 'wharf: purge_scope_actions needs a positive batch size' USING ERRCODE = '22023';
  END IF;
  DELETE FROM wharf.scope_action
   WHERE id IN (SELECT id FROM wharf.scope_action
                 WHERE at < now() - wharf.setting_interval('issue_retention')
                 ORDER BY at LIMIT p_batch);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  RETURN v_deleted;
END $$;

REVOKE ALL ON FUNCTION wharf.list_stuck_scopes(bigint, interval, integer),
  wharf.retry_scope_head(bigint, text, bigint, text),
  wharf.dead_letter_scope_head(bigint, text, bigint, text),
  wharf.pause_scope_connection(bigint, text, bigint, text),
  wharf.list_scope_actions(bigint, integer),
  wharf.purge_scope_actions(integer) FROM PUBLIC;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

DROP TRIGGER event_attempt_count_issues ON wharf.event_attempt;

DROP FUNCTION wharf.change_issue_status(bigint,bigint,text,text);

DROP FUNCTION wharf.count_failures_into_issues();

DROP FUNCTION wharf.dead_letter_scope_head(bigint,text,bigint,text);

DROP FUNCTION wharf.issue_events(bigint,bigint,integer,bigint);

DROP FUNCTION wharf.issue_list(bigint,text,integer);

DROP FUNCTION wharf.issue_summary(wharf.issue);

DROP FUNCTION wharf.list_installation_issues(text,integer);

DROP FUNCTION wharf.list_issues(bigint,text,integer);

DROP FUNCTION wharf.list_scope_actions(bigint,integer);

DROP FUNCTION wharf.list_stuck_scopes(bigint,interval,integer);

DROP FUNCTION wharf.pause_scope_connection(bigint,text,bigint,text);

DROP FUNCTION wharf.purge_issues(integer);

DROP FUNCTION wharf.purge_scope_actions(integer);

DROP FUNCTION wharf.retry_scope_head(bigint,text,bigint,text);

DROP FUNCTION wharf.scope_action_result(bigint,text);

DROP FUNCTION wharf.scope_head_refusal(bigint,text,bigint,text);

DROP FUNCTION wharf.set_installation_issue_status(bigint,text,text);

DROP FUNCTION wharf.set_issue_status(bigint,bigint,text,text);

DROP FUNCTION wharf.show_issue(bigint,bigint);

DROP FUNCTION wharf.stuck_scope_list(bigint,interval,integer);
