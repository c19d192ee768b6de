-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.dead_letter_after_lease(bigint,bigint)
--   changed  function wharf.dead_letter_scope_head(bigint,text,bigint,text)
--   changed  function wharf.fail(bigint,bigint,text,text,text[])
--   changed  function wharf.list_scope_actions(bigint,integer)
--   changed  function wharf.reap()
--   changed  function wharf.stuck_scope_list(bigint,interval,integer)

-- ======== sql/30-claim-lease.sql ========

-- Takes back every lease past leased_until: QUEUED after the retry delay with
-- failures + 1 and error_class 'LeaseExpired', or DEAD once failures reach
-- max_attempts; each lease stays in the attempt history as 'expired', with
-- the state it left. Skips rows under a fenced write or in a scope busy
-- elsewhere (the next run takes them). Returns how many it reaped.
-- Also forgets idle listeners whose session has ended.
--
-- The leases are read from the scope rows (leased_id): the event table has
-- no index of its leases, which every claim would pay an entry for. That is
-- a scan of wharf.scope, the scopes in use, every 30 s or so per host, and
-- each lease's event by primary key: never a hash join over the inbox.
CREATE OR REPLACE FUNCTION wharf.reap() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_hashjoin = off SET enable_mergejoin = off AS $$
DECLARE
  v_now          timestamptz := clock_timestamp();
  v_max_attempts integer := wharf.setting_integer('max_attempts');
  v_reaped       integer;
BEGIN
  -- The scope rows are locked here, skipping busy ones, rather than by the
  -- trigger in update order: an admission fanning out holds one scope and
  -- waits for the next, and must never wait for a reaper waiting for it.
  WITH expired AS (
    SELECT e.id,
           -- An operator moved this head to the dead letters while the lease ran (sql/98).
           e.failures + 1 >= v_max_attempts OR wharf.dead_letter_after_lease(e.id, e.lease_epoch) AS dead
      FROM wharf.scope s
      JOIN wharf.provider_event e ON e.id = s.leased_id
     WHERE s.leased_id IS NOT NULL AND e.state = 'LEASED' AND e.leased_until < v_now
     FOR UPDATE OF e, s SKIP LOCKED
  ), reaped AS (
    UPDATE wharf.provider_event e
       SET failures        = e.failures + 1,
           error_class     = 'LeaseExpired',
           leased_until    = NULL,
           state           = CASE WHEN expired.dead THEN 'DEAD' ELSE 'QUEUED' END,
           dead_at         = CASE WHEN expired.dead THEN v_now END,
           next_attempt_at = CASE WHEN expired.dead THEN e.next_attempt_at
                                  ELSE v_now + wharf.retry_delay(e.attempt) END
      FROM expired
     WHERE e.id = expired.id
    RETURNING e.id, e.lease_epoch, e.attempt, e.leased_by, e.leased_at, e.state
  )
  INSERT INTO wharf.event_attempt (event_id, lease_epoch, attempt, worker, started_at, ended_at, ended, error_class, left_state)
  SELECT id, lease_epoch, attempt, leased_by, leased_at, v_now, 'expired', 'LeaseExpired', state FROM reaped;
  GET DIAGNOSTICS v_reaped = ROW_COUNT;

  DELETE FROM wharf.idle_listener l
   WHERE NOT EXISTS (SELECT FROM pg_stat_activity a WHERE a.pid = l.backend_pid);
  RETURN v_reaped;
END $$;

REVOKE ALL ON FUNCTION wharf.claim(text, integer, text[]), wharf.renew(bigint, bigint),
  wharf.complete(bigint, bigint, text), wharf.complete_many(bigint[], bigint[], text[]), wharf.release(bigint, bigint), wharf.reap(),
  wharf.mark_idle(text), wharf.mark_busy(text), wharf.next_due_at(), wharf.queue_stats(), wharf.reset_claim_lines() FROM PUBLIC;

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
-- Whatever the kind, DEAD when an operator moved the row to the dead
-- letters while this lease ran (dead_letter_scope_head, sql/98).
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
            -- An operator moved this head to the dead letters while this lease ran (sql/98).
            OR wharf.dead_letter_after_lease(p_id, p_epoch)
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

-- ======== sql/98-stuck-scopes.sql ========

-- Whether an operator moved event p_id to the dead letters while its lease
-- under p_epoch ran: that lease, if it fails, leaves it DEAD. One probe of
-- ix_scope_action_after_lease. Internal: fail's and reap's.
CREATE OR REPLACE FUNCTION wharf.dead_letter_after_lease(p_id bigint, p_epoch bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT FROM wharf.scope_action a WHERE a.event_id = p_id AND a.after_lease_epoch = p_epoch)
$$;

-- The scopes of workspace p_workspace_id stuck for more than p_older_than
-- (scopes_stuck_since), longest stuck first, at most p_limit, each as
-- {scope_key, subject, reason, waiting_since, waiting_seconds, behind,
-- head: {...}, connection: {id, state}}. waiting_since: since when it is
-- stuck. reason: 'leased' (it failed before and a handler retries it now),
-- 'failing' (it failed before and waits for its retry or its next claim),
-- else 'waiting' (due, never failed, unclaimed). behind: the QUEUED events
-- after the head, counted up to 10000 (behind_capped says so). Internal:
-- callers use list_stuck_scopes.
CREATE OR REPLACE FUNCTION wharf.stuck_scope_list(p_workspace_id bigint, p_older_than interval, p_limit integer)
RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT coalesce(jsonb_agg(jsonb_build_object(
           'scope_key', t.scope_key, 'subject', h.subject,
           'reason', CASE WHEN h.state = 'LEASED' THEN 'leased'
                          WHEN s.failing_since IS NOT NULL THEN 'failing'
                          ELSE 'waiting' END,
           'waiting_since', t.since,
           'waiting_seconds', floor(extract(epoch FROM now() - t.since)),
           'behind', b.n, 'behind_capped', b.n >= 10000,
           'head', wharf.event_summary(h) || jsonb_build_object('leased_by', h.leased_by,
                                                                'leased_until', h.leased_until,
                                                                'dead_letter_pending', h.state = 'LEASED'
                                                                  AND wharf.dead_letter_after_lease(h.id, h.lease_epoch)),
           'connection', jsonb_build_object('id', c.id, 'state', c.state)) ORDER BY t.since, t.scope_key), '[]')
    FROM wharf.scopes_stuck_since(now() - p_older_than, p_workspace_id, p_limit) t
    JOIN wharf.scope s ON s.scope_key = t.scope_key
    JOIN wharf.provider_event h ON h.id = t.head_id
    LEFT JOIN wharf.connection c ON c.id = h.connection_id
    CROSS JOIN LATERAL (SELECT count(*) AS n
                          FROM (SELECT FROM wharf.provider_event e
                                 WHERE e.scope_key = t.scope_key AND e.id > h.id AND e.state = 'QUEUED'
                                 LIMIT 10000) q) b
$$;

-- Moves head p_event_id of scope p_scope_key to the dead letters (DEAD now,
-- its error class kept, 'MovedToDeadLetters' when it has none), so that the
-- next event of the scope runs; wakes idle claimers and records the action
-- (see scope_action_result, scope_head_refusal). The event can be replayed
-- like any dead letter. While a handler retries the head (it is LEASED),
-- the action waits for that lease: recorded with its epoch, it makes the
-- lease's failure a dead letter instead of another retry (fail, reap), and
-- leaves a success alone; the answer says so (after_lease: true).
CREATE OR REPLACE FUNCTION wharf.dead_letter_scope_head(p_workspace_id bigint, p_scope_key text, p_event_id bigint, p_account text)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_refusal text;
BEGIN
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  v_refusal := wharf.scope_head_refusal(p_workspace_id, p_scope_key, p_event_id, p_account);
  IF v_refusal = 'leased' THEN
    -- The event is locked (scope_head_refusal): its lease cannot end before this commits.
    INSERT INTO wharf.scope_action (workspace_id, scope_key, event_id, connection_id, action, account, after_lease_epoch)
    SELECT p_workspace_id, p_scope_key, p_event_id, e.connection_id, 'dead_letter_head', p_account, e.lease_epoch
      FROM wharf.provider_event e WHERE e.id = p_event_id;
    RETURN wharf.scope_action_result(p_event_id, NULL) || '{"after_lease": true}';
  END IF;
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
                   'action', a.action, 'account', a.account, 'at', a.at,
                   'after_lease', a.after_lease_epoch IS NOT NULL) ORDER BY a.id DESC), '[]')
            FROM (SELECT * FROM wharf.scope_action x WHERE x.workspace_id = p_workspace_id
                   ORDER BY x.id DESC LIMIT p_limit) a);
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

DROP FUNCTION wharf.dead_letter_after_lease(bigint,bigint);

CREATE OR REPLACE FUNCTION wharf.dead_letter_scope_head(p_workspace_id bigint, p_scope_key text, p_event_id bigint, p_account text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
END $function$;
REVOKE ALL ON FUNCTION wharf.dead_letter_scope_head(bigint,text,bigint,text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.fail(p_id bigint, p_epoch bigint, p_kind text, p_error_class text, p_frames text[] DEFAULT NULL::text[])
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
END $function$;
REVOKE ALL ON FUNCTION wharf.fail(bigint,bigint,text,text,text[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.list_scope_actions(p_workspace_id bigint, p_limit integer DEFAULT 50)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
END $function$;
REVOKE ALL ON FUNCTION wharf.list_scope_actions(bigint,integer) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.reap()
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
AS $function$
DECLARE
  v_now          timestamptz := clock_timestamp();
  v_max_attempts integer := wharf.setting_integer('max_attempts');
  v_reaped       integer;
BEGIN
  -- The scope rows are locked here, skipping busy ones, rather than by the
  -- trigger in update order: an admission fanning out holds one scope and
  -- waits for the next, and must never wait for a reaper waiting for it.
  WITH expired AS (
    SELECT e.id
      FROM wharf.scope s
      JOIN wharf.provider_event e ON e.id = s.leased_id
     WHERE s.leased_id IS NOT NULL AND e.state = 'LEASED' AND e.leased_until < v_now
     FOR UPDATE OF e, s SKIP LOCKED
  ), reaped AS (
    UPDATE wharf.provider_event e
       SET failures        = e.failures + 1,
           error_class     = 'LeaseExpired',
           leased_until    = NULL,
           state           = CASE WHEN e.failures + 1 >= v_max_attempts THEN 'DEAD' ELSE 'QUEUED' END,
           dead_at         = CASE WHEN e.failures + 1 >= v_max_attempts THEN v_now END,
           next_attempt_at = CASE WHEN e.failures + 1 >= v_max_attempts THEN e.next_attempt_at
                                  ELSE v_now + wharf.retry_delay(e.attempt) END
      FROM expired
     WHERE e.id = expired.id
    RETURNING e.id, e.lease_epoch, e.attempt, e.leased_by, e.leased_at, e.state
  )
  INSERT INTO wharf.event_attempt (event_id, lease_epoch, attempt, worker, started_at, ended_at, ended, error_class, left_state)
  SELECT id, lease_epoch, attempt, leased_by, leased_at, v_now, 'expired', 'LeaseExpired', state FROM reaped;
  GET DIAGNOSTICS v_reaped = ROW_COUNT;

  DELETE FROM wharf.idle_listener l
   WHERE NOT EXISTS (SELECT FROM pg_stat_activity a WHERE a.pid = l.backend_pid);
  RETURN v_reaped;
END $function$;
REVOKE ALL ON FUNCTION wharf.reap() FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.stuck_scope_list(p_workspace_id bigint, p_older_than interval, p_limit integer)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
  SELECT coalesce(jsonb_agg(jsonb_build_object(
           'scope_key', t.scope_key, 'subject', h.subject,
           'reason', CASE WHEN h.state = 'LEASED' THEN 'leased'
                          WHEN s.failing_since IS NOT NULL THEN 'failing'
                          ELSE 'waiting' END,
           'waiting_since', t.since,
           'waiting_seconds', floor(extract(epoch FROM now() - t.since)),
           'behind', b.n, 'behind_capped', b.n >= 10000,
           'head', wharf.event_summary(h) || jsonb_build_object('leased_by', h.leased_by,
                                                                'leased_until', h.leased_until),
           'connection', jsonb_build_object('id', c.id, 'state', c.state)) ORDER BY t.since, t.scope_key), '[]')
    FROM wharf.scopes_stuck_since(now() - p_older_than, p_workspace_id, p_limit) t
    JOIN wharf.scope s ON s.scope_key = t.scope_key
    JOIN wharf.provider_event h ON h.id = t.head_id
    LEFT JOIN wharf.connection c ON c.id = h.connection_id
    CROSS JOIN LATERAL (SELECT count(*) AS n
                          FROM (SELECT FROM wharf.provider_event e
                                 WHERE e.scope_key = t.scope_key AND e.id > h.id AND e.state = 'QUEUED'
                                 LIMIT 10000) q) b
$function$;
GRANT EXECUTE ON FUNCTION wharf.stuck_scope_list(bigint,interval,integer) TO PUBLIC;
