-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   changed  function wharf.fail(bigint,bigint,text,text)
--   changed  function wharf.reap()
--   changed  function wharf.release(bigint,bigint)

-- ======== sql/30-claim-lease.sql ========

-- A stopping worker gives the row back: QUEUED, due at once, attempt as it
-- was before the claim, the lease kept in the attempt history as
-- 'released', and idle claimers woken. False when the row is not LEASED
-- under p_epoch.
--
-- Idempotent under its epoch: also true, writing nothing, when the attempt
-- history holds p_epoch's lease as 'released'. Only release writes that
-- entry, only under the epoch that holds the lease: it is this lease's own
-- release, which committed while its reply was lost (a connection cut after
-- COMMIT, a failover), and the worker's retry learns that it took, also once
-- the row has been claimed again. A lease that ended otherwise (completed,
-- failed, reaped, erased) still answers false.
CREATE OR REPLACE FUNCTION wharf.release(p_id bigint, p_epoch bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
  v_row record;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL THEN
    RAISE EXCEPTION 'wharf.release: id and epoch are required' USING ERRCODE = '22004';
  END IF;
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  PERFORM FROM wharf.provider_event WHERE id = p_id FOR UPDATE;  -- after its fenced writes (top of sql/30)
  UPDATE wharf.provider_event
     SET state = 'QUEUED', attempt = greatest(attempt - 1, 0), next_attempt_at = now(), leased_until = NULL
   WHERE id = p_id AND lease_epoch = p_epoch AND state COLLATE "C" = 'LEASED'  -- by primary key (top of sql/30)
  RETURNING attempt + 1 AS attempt, leased_by, leased_at INTO v_row;  -- the lease's own attempt
  IF NOT FOUND THEN
    -- Read after the row lock: a first try still in flight has committed or rolled back.
    RETURN EXISTS (SELECT FROM wharf.event_attempt h
                    WHERE h.event_id = p_id AND h.lease_epoch = p_epoch AND h.ended = 'released');  -- by primary key
  END IF;
  INSERT INTO wharf.event_attempt (event_id, lease_epoch, attempt, worker, started_at, ended_at, ended, left_state)
  VALUES (p_id, p_epoch, v_row.attempt, v_row.leased_by, v_row.leased_at, clock_timestamp(), 'released', 'QUEUED');
  PERFORM wharf.notify_idle_claimers();
  RETURN true;
END $$;

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
-- p_error_class is a class name (e.g. 'TypeError'), never a message: 22023
-- for anything else, 22023 for an unknown kind.
CREATE OR REPLACE FUNCTION wharf.fail(p_id bigint, p_epoch bigint, p_kind text, p_error_class text)
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
END $$;

REVOKE ALL ON FUNCTION wharf.fail(bigint, bigint, text, text) FROM PUBLIC;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

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
    RETURN NULL;
  END IF;

  v_dead := p_kind IN ('permanent', 'uncertain')
            OR (p_kind = 'unknown' AND v_row.failures + 1 >= wharf.setting_integer('max_attempts'))
            OR (p_kind = 'transient' AND v_row.transient_since IS NOT NULL
                AND v_now - v_row.transient_since > wharf.setting_interval('transient_max_age'));

  UPDATE wharf.provider_event
     SET failures        = failures + CASE WHEN p_kind = 'unknown' THEN 1 ELSE 0 END,
         transient_since = CASE WHEN p_kind = 'transient' THEN coalesce(transient_since, v_now) ELSE transient_since END,
         error_class     = p_error_class,
         leased_until    = NULL,
         state           = CASE WHEN v_dead THEN 'DEAD' ELSE 'QUEUED' END,
         outcome         = CASE WHEN p_kind = 'uncertain' THEN 'uncertain' END,
         dead_at         = CASE WHEN v_dead THEN v_now END,
         next_attempt_at = CASE WHEN v_dead THEN next_attempt_at
                                ELSE v_now + wharf.retry_delay(v_row.attempt) END
   WHERE id = p_id;
  INSERT INTO wharf.event_attempt (event_id, lease_epoch, attempt, worker, started_at, ended_at, ended, error_class)
  VALUES (p_id, p_epoch, v_row.attempt, v_row.leased_by, v_row.leased_at, v_now, p_kind, p_error_class);
  RETURN CASE WHEN v_dead THEN 'DEAD' ELSE 'QUEUED' END;
END $function$;
REVOKE ALL ON FUNCTION wharf.fail(bigint,bigint,text,text) FROM PUBLIC;

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
    RETURNING e.id, e.lease_epoch, e.attempt, e.leased_by, e.leased_at
  )
  INSERT INTO wharf.event_attempt (event_id, lease_epoch, attempt, worker, started_at, ended_at, ended, error_class)
  SELECT id, lease_epoch, attempt, leased_by, leased_at, v_now, 'expired', 'LeaseExpired' FROM reaped;
  GET DIAGNOSTICS v_reaped = ROW_COUNT;

  DELETE FROM wharf.idle_listener l
   WHERE NOT EXISTS (SELECT FROM pg_stat_activity a WHERE a.pid = l.backend_pid);
  RETURN v_reaped;
END $function$;
REVOKE ALL ON FUNCTION wharf.reap() FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.release(p_id bigint, p_epoch bigint)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET lock_timeout TO '5s'
AS $function$
DECLARE
  v_row record;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL THEN
    RAISE EXCEPTION 'wharf.release: id and epoch are required' USING ERRCODE = '22004';
  END IF;
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  PERFORM FROM wharf.provider_event WHERE id = p_id FOR UPDATE;  -- after its fenced writes (top of sql/30)
  UPDATE wharf.provider_event
     SET state = 'QUEUED', attempt = greatest(attempt - 1, 0), next_attempt_at = now(), leased_until = NULL
   WHERE id = p_id AND lease_epoch = p_epoch AND state COLLATE "C" = 'LEASED'  -- by primary key (top of sql/30)
  RETURNING attempt + 1 AS attempt, leased_by, leased_at INTO v_row;  -- the lease's own attempt
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  INSERT INTO wharf.event_attempt (event_id, lease_epoch, attempt, worker, started_at, ended_at, ended)
  VALUES (p_id, p_epoch, v_row.attempt, v_row.leased_by, v_row.leased_at, clock_timestamp(), 'released');
  PERFORM wharf.notify_idle_claimers();
  RETURN true;
END $function$;
REVOKE ALL ON FUNCTION wharf.release(bigint,bigint) FROM PUBLIC;
