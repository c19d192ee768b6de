-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.count_into_failure_minute(bigint,timestamp with time zone,bigint,bigint)
--   changed  function wharf.count_failures_into_issues()
--   changed  function wharf.fail_delivery(bigint,bigint,text,text,integer,integer,text,interval)

-- ======== sql/88-destinations.sql ========

-- Delivery p_id, LEASED under p_epoch, failed; records the attempt (status,
-- duration, at most 1 KB of the answer, error class: a class name, never a
-- message) and returns the delivery's new state; NULL when the lease is gone,
-- unless a repeat of a failure of this epoch (its first reply lost), which
-- answers as the first did. p_kind:
--   transient  QUEUED after the retry delay, or after p_retry_after (an
--              answer's Retry-After) when longer, up to max_delay; DEAD once
--              its transient failures lasted past transient_max_age while
--              its destination answered others meanwhile (a destination
--              failing for everything is the breaker's, and dead-letters
--              nothing); counts into the destination's failure run, whose
--              breaker_failures-th failure or breaker_minutes-th minute opens
--              the breaker (BREAKER_OPEN: its deliveries wait; a probe after
--              the retry delay closes it), opening an issue
--   permanent  DEAD at once (a 4xx, a redirect, a refused address)
--   gone       an HTTP 410: QUEUED, due at once, and the destination PAUSED
--              ('gone') until an operator resumes it, opening an issue
-- 22004 for a NULL argument, 22023 for an unknown kind or an error class
-- that is not a class name.
CREATE OR REPLACE FUNCTION wharf.fail_delivery(
  p_id bigint, p_epoch bigint, p_kind text, p_error_class text, p_status integer, p_duration_ms integer,
  p_response text, p_retry_after interval DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_now    timestamptz := clock_timestamp();
  v_row    record;
  v_dest   record;
  v_dead   boolean;
  v_state  text;
  v_opened boolean := false;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL OR p_kind IS NULL OR p_error_class IS NULL THEN
    RAISE EXCEPTION 'wharf.fail_delivery: id, epoch, kind and error_class are required' USING ERRCODE = '22004';
  END IF;
  IF p_kind NOT IN ('transient', 'permanent', 'gone') THEN
    RAISE EXCEPTION 'wharf.fail_delivery: unknown failure kind %', quote_literal(p_kind) USING ERRCODE = '22023';
  END IF;
  IF p_error_class !~ '^[A-Za-z_$][A-Za-z0-9_$.:-]{0,127}$' THEN
    RAISE EXCEPTION 'wharf.fail_delivery: error_class must be a class name, not free text' USING ERRCODE = '22023';
  END IF;

  SELECT q.destination_id, q.event_id, q.workspace_id, q.attempt, q.leased_by, q.leased_at, q.transient_since, q.ordered, q.scope_key
    INTO v_row
    FROM wharf.destination_delivery q
   WHERE q.id = p_id AND q.lease_epoch = p_epoch AND q.state = 'LEASED'
     FOR UPDATE;
  IF NOT FOUND THEN
    RETURN (SELECT h.left_state FROM wharf.delivery_attempt h
             WHERE h.delivery_id = p_id AND h.lease_epoch = p_epoch AND h.ended = p_kind
               AND h.error_class = p_error_class);
  END IF;
  SELECT d.state, d.name, d.consecutive_failures, d.failing_since, d.breaker_failures, d.breaker_minutes INTO v_dest
    FROM wharf.destination d WHERE d.id = v_row.destination_id
     FOR NO KEY UPDATE;

  v_dead := p_kind = 'permanent'
            OR (p_kind = 'transient' AND v_row.transient_since IS NOT NULL
                AND v_now - v_row.transient_since > wharf.setting_interval('transient_max_age')
                AND v_dest.failing_since IS NOT NULL AND v_dest.failing_since > v_row.transient_since);
  v_state := CASE WHEN v_dead THEN 'DEAD' ELSE 'QUEUED' END;

  UPDATE wharf.destination_delivery q
     SET state           = v_state,
         error_class     = p_error_class,
         last_status     = p_status,
         leased_until    = NULL,
         failures        = q.failures + CASE WHEN p_kind = 'transient' THEN 1 ELSE 0 END,
         transient_since = CASE WHEN p_kind = 'transient' THEN coalesce(q.transient_since, v_now) ELSE q.transient_since END,
         dead_at         = CASE WHEN v_dead THEN v_now END,
         -- A 410 gives the delivery back as it was: it waits for the resume.
         attempt         = CASE WHEN p_kind = 'gone' THEN q.attempt - 1 ELSE q.attempt END,
         next_attempt_at = CASE WHEN v_dead OR p_kind = 'gone' THEN v_now
                                ELSE v_now + greatest(wharf.retry_delay(v_row.attempt),
                                                      least(p_retry_after, wharf.setting_interval('max_delay'))) END
   WHERE q.id = p_id;
  INSERT INTO wharf.delivery_attempt (delivery_id, lease_epoch, destination_id, attempt, worker, started_at,
                                      ended_at, ended, left_state, error_class, status, duration_ms, response)
  VALUES (p_id, p_epoch, v_row.destination_id, v_row.attempt, v_row.leased_by, v_row.leased_at,
          v_now, p_kind, v_state, p_error_class, p_status, p_duration_ms, left(p_response, 1024));

  IF p_kind = 'gone' THEN
    UPDATE wharf.destination d
       SET state = 'PAUSED', paused_reason = 'gone', paused_by = NULL, probe_at = NULL, updated_at = v_now
     WHERE d.id = v_row.destination_id;
    PERFORM wharf.count_delivery_issue(v_row.destination_id, v_row.event_id, 'DestinationGone', v_now, false);
  ELSIF p_kind = 'transient' THEN
    v_opened := v_dest.state = 'ACTIVE'
                AND (v_dest.consecutive_failures + 1 >= v_dest.breaker_failures
                     OR v_now - coalesce(v_dest.failing_since, v_now) >= v_dest.breaker_minutes * interval '1 minute');
    UPDATE wharf.destination d
       SET consecutive_failures = d.consecutive_failures + 1,
           failing_since        = coalesce(d.failing_since, v_now),
           state                = CASE WHEN v_opened THEN 'BREAKER_OPEN' ELSE d.state END,
           paused_reason        = CASE WHEN v_opened THEN 'breaker' ELSE d.paused_reason END,
           -- Closed by a probe: the first after the retry delay of the run so far.
           probe_at             = CASE WHEN v_opened OR d.state = 'BREAKER_OPEN'
                                       THEN v_now + wharf.retry_delay(d.consecutive_failures + 1)
                                       ELSE d.probe_at END
     WHERE d.id = v_row.destination_id;
    IF v_opened THEN
      PERFORM wharf.count_delivery_issue(v_row.destination_id, v_row.event_id, 'DestinationBreakerOpen', v_now, false);
    END IF;
  END IF;
  IF p_kind <> 'gone' THEN
    PERFORM wharf.count_delivery_issue(v_row.destination_id, v_row.event_id, p_error_class, v_now, v_dead);
  END IF;
  -- A dead delivery is a dead letter as a handler's is: the dead-letter rate counts it (sql/97).
  PERFORM wharf.count_into_failure_minute(v_row.workspace_id, date_trunc('minute', v_now), 1, CASE WHEN v_dead THEN 1 ELSE 0 END);
  IF v_dead AND v_row.ordered THEN
    PERFORM wharf.promote_next_delivery(v_row.destination_id, v_row.scope_key);
  END IF;
  RETURN v_state;
END $$;

REVOKE ALL ON FUNCTION wharf.claim_deliveries(text, integer, integer), wharf.next_delivery_at(),
  wharf.complete_delivery(bigint, bigint, integer, integer, text),
  wharf.complete_deliveries(bigint[], bigint[], integer[], integer[], text[]),
  wharf.fail_delivery(bigint, bigint, text, text, integer, integer, text, interval),
  wharf.release_delivery(bigint, bigint), wharf.reap_deliveries(),
  wharf.create_destination(bigint, jsonb), wharf.update_destination(bigint, bigint, jsonb),
  wharf.set_destination_secret(bigint, bigint, text, boolean, interval),
  wharf.set_destination_credentials(bigint, bigint, text, text),
  wharf.set_destination_state(bigint, bigint, text, text), wharf.delete_destination(bigint, bigint),
  wharf.list_destinations(bigint), wharf.show_destination(bigint, bigint),
  wharf.create_destination_rule(bigint, jsonb), wharf.update_destination_rule(bigint, bigint, jsonb),
  wharf.delete_destination_rule(bigint, bigint), wharf.list_destination_rules(bigint, bigint),
  wharf.test_destination_filter(bigint, jsonb, bigint),
  wharf.list_deliveries(bigint, bigint, text, integer, bigint), wharf.show_delivery(bigint, bigint),
  wharf.event_deliveries(bigint, bigint), wharf.replay_delivery(bigint, bigint, text),
  wharf.count_dead_deliveries(bigint, bigint, jsonb),
  wharf.replay_deliveries(bigint, bigint, jsonb, text, integer) FROM PUBLIC;

-- ======== sql/97-issues.sql ========

-- Counts p_failed failures, p_dead of them dead letters, into workspace
-- p_workspace_id's minute p_minute (wharf.failure_minute: the dead-letter
-- rate's alerts, the failure chart, the metrics): a handler's failed or
-- expired lease (below) and a failed delivery to a destination (sql/88)
-- alike. Internal.
CREATE OR REPLACE FUNCTION wharf.count_into_failure_minute(
  p_workspace_id bigint, p_minute timestamptz, p_failed bigint, p_dead bigint)
RETURNS void
LANGUAGE sql AS $$
  INSERT INTO wharf.failure_minute AS m (workspace_id, minute, failed, dead)
  VALUES (p_workspace_id, p_minute, p_failed, p_dead)
  ON CONFLICT (workspace_id, minute) DO UPDATE
     SET failed = m.failed + excluded.failed, dead = m.dead + excluded.dead
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

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

DROP FUNCTION wharf.count_into_failure_minute(bigint,timestamp with time zone,bigint,bigint);

CREATE OR REPLACE FUNCTION wharf.count_failures_into_issues()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
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
END $function$;
GRANT EXECUTE ON FUNCTION wharf.count_failures_into_issues() TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.fail_delivery(p_id bigint, p_epoch bigint, p_kind text, p_error_class text, p_status integer, p_duration_ms integer, p_response text, p_retry_after interval DEFAULT NULL::interval)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_now    timestamptz := clock_timestamp();
  v_row    record;
  v_dest   record;
  v_dead   boolean;
  v_state  text;
  v_opened boolean := false;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL OR p_kind IS NULL OR p_error_class IS NULL THEN
    RAISE EXCEPTION 'wharf.fail_delivery: id, epoch, kind and error_class are required' USING ERRCODE = '22004';
  END IF;
  IF p_kind NOT IN ('transient', 'permanent', 'gone') THEN
    RAISE EXCEPTION 'wharf.fail_delivery: unknown failure kind %', quote_literal(p_kind) USING ERRCODE = '22023';
  END IF;
  IF p_error_class !~ '^[A-Za-z_$][A-Za-z0-9_$.:-]{0,127}$' THEN
    RAISE EXCEPTION 'wharf.fail_delivery: error_class must be a class name, not free text' USING ERRCODE = '22023';
  END IF;

  SELECT q.destination_id, q.event_id, q.attempt, q.leased_by, q.leased_at, q.transient_since, q.ordered, q.scope_key
    INTO v_row
    FROM wharf.destination_delivery q
   WHERE q.id = p_id AND q.lease_epoch = p_epoch AND q.state = 'LEASED'
     FOR UPDATE;
  IF NOT FOUND THEN
    RETURN (SELECT h.left_state FROM wharf.delivery_attempt h
             WHERE h.delivery_id = p_id AND h.lease_epoch = p_epoch AND h.ended = p_kind
               AND h.error_class = p_error_class);
  END IF;
  SELECT d.state, d.name, d.consecutive_failures, d.failing_since, d.breaker_failures, d.breaker_minutes INTO v_dest
    FROM wharf.destination d WHERE d.id = v_row.destination_id
     FOR NO KEY UPDATE;

  v_dead := p_kind = 'permanent'
            OR (p_kind = 'transient' AND v_row.transient_since IS NOT NULL
                AND v_now - v_row.transient_since > wharf.setting_interval('transient_max_age')
                AND v_dest.failing_since IS NOT NULL AND v_dest.failing_since > v_row.transient_since);
  v_state := CASE WHEN v_dead THEN 'DEAD' ELSE 'QUEUED' END;

  UPDATE wharf.destination_delivery q
     SET state           = v_state,
         error_class     = p_error_class,
         last_status     = p_status,
         leased_until    = NULL,
         failures        = q.failures + CASE WHEN p_kind = 'transient' THEN 1 ELSE 0 END,
         transient_since = CASE WHEN p_kind = 'transient' THEN coalesce(q.transient_since, v_now) ELSE q.transient_since END,
         dead_at         = CASE WHEN v_dead THEN v_now END,
         -- A 410 gives the delivery back as it was: it waits for the resume.
         attempt         = CASE WHEN p_kind = 'gone' THEN q.attempt - 1 ELSE q.attempt END,
         next_attempt_at = CASE WHEN v_dead OR p_kind = 'gone' THEN v_now
                                ELSE v_now + greatest(wharf.retry_delay(v_row.attempt),
                                                      least(p_retry_after, wharf.setting_interval('max_delay'))) END
   WHERE q.id = p_id;
  INSERT INTO wharf.delivery_attempt (delivery_id, lease_epoch, destination_id, attempt, worker, started_at,
                                      ended_at, ended, left_state, error_class, status, duration_ms, response)
  VALUES (p_id, p_epoch, v_row.destination_id, v_row.attempt, v_row.leased_by, v_row.leased_at,
          v_now, p_kind, v_state, p_error_class, p_status, p_duration_ms, left(p_response, 1024));

  IF p_kind = 'gone' THEN
    UPDATE wharf.destination d
       SET state = 'PAUSED', paused_reason = 'gone', paused_by = NULL, probe_at = NULL, updated_at = v_now
     WHERE d.id = v_row.destination_id;
    PERFORM wharf.count_delivery_issue(v_row.destination_id, v_row.event_id, 'DestinationGone', v_now, false);
  ELSIF p_kind = 'transient' THEN
    v_opened := v_dest.state = 'ACTIVE'
                AND (v_dest.consecutive_failures + 1 >= v_dest.breaker_failures
                     OR v_now - coalesce(v_dest.failing_since, v_now) >= v_dest.breaker_minutes * interval '1 minute');
    UPDATE wharf.destination d
       SET consecutive_failures = d.consecutive_failures + 1,
           failing_since        = coalesce(d.failing_since, v_now),
           state                = CASE WHEN v_opened THEN 'BREAKER_OPEN' ELSE d.state END,
           paused_reason        = CASE WHEN v_opened THEN 'breaker' ELSE d.paused_reason END,
           -- Closed by a probe: the first after the retry delay of the run so far.
           probe_at             = CASE WHEN v_opened OR d.state = 'BREAKER_OPEN'
                                       THEN v_now + wharf.retry_delay(d.consecutive_failures + 1)
                                       ELSE d.probe_at END
     WHERE d.id = v_row.destination_id;
    IF v_opened THEN
      PERFORM wharf.count_delivery_issue(v_row.destination_id, v_row.event_id, 'DestinationBreakerOpen', v_now, false);
    END IF;
  END IF;
  IF p_kind <> 'gone' THEN
    PERFORM wharf.count_delivery_issue(v_row.destination_id, v_row.event_id, p_error_class, v_now, v_dead);
  END IF;
  IF v_dead AND v_row.ordered THEN
    PERFORM wharf.promote_next_delivery(v_row.destination_id, v_row.scope_key);
  END IF;
  RETURN v_state;
END $function$;
REVOKE ALL ON FUNCTION wharf.fail_delivery(bigint,bigint,text,text,integer,integer,text,interval) FROM PUBLIC;
