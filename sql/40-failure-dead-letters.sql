-- Failure and dead letters: a failed lease goes back to the queue after a
-- bounded exponential delay, or ends DEAD keeping its payload. A failed row
-- stays the head of its scope, so later rows of that scope wait for it.

-- The wait before attempt p_attempt + 1: d = least(max_delay, base_delay *
-- 2^(attempt-1)), then d/2 + random() * d/2 (equal jitter).
CREATE OR REPLACE FUNCTION wharf.retry_delay(p_attempt integer) RETURNS interval
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_delay interval := least(
    wharf.setting_interval('max_delay'),
    -- The exponent is capped so that the product cannot overflow an interval.
    wharf.setting_interval('base_delay') * power(2, least(greatest(coalesce(p_attempt, 1), 1) - 1, 30)));
BEGIN
  RETURN v_delay / 2 + random() * (v_delay / 2);
END $$;

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
