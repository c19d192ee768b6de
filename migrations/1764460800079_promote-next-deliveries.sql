-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.promote_next_deliveries(bigint[],text[])
--   changed  function wharf.complete_deliveries(bigint[],bigint[],integer[],integer[],text[])
--   changed  function wharf.promote_after_deleted_deliveries()
--   changed  function wharf.reap_deliveries()

-- ======== sql/88-destinations.sql ========

-- promote_next_delivery for each distinct (destination, scope) of the
-- parallel arrays, in the advisory locks' key order, so that two
-- transactions ending turns in several scopes never wait on each other in a
-- cycle. Internal.
CREATE OR REPLACE FUNCTION wharf.promote_next_deliveries(p_destination_ids bigint[], p_scope_keys text[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM wharf.promote_next_delivery(k.destination_id, k.scope_key)
     FROM (SELECT DISTINCT o.destination_id, o.scope_key, wharf.delivery_scope_key(o.destination_id, o.scope_key) AS key
             FROM unnest(p_destination_ids, p_scope_keys) AS o(destination_id, scope_key)
            ORDER BY 3) k;
END $$;

-- Trigger on wharf.destination_delivery, per statement: a delivery deleted
-- while QUEUED or LEASED (its event erased or deleted) ends its turn; the
-- next of its (destination, scope) becomes due.
CREATE OR REPLACE FUNCTION wharf.promote_after_deleted_deliveries() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM wharf.promote_next_deliveries(array_agg(d.destination_id), array_agg(d.scope_key))
     FROM deliveries_deleted d
    WHERE d.ordered AND d.state IN ('QUEUED', 'LEASED')
      AND EXISTS (SELECT FROM wharf.destination x WHERE x.id = d.destination_id);
  RETURN NULL;
END $$;

-- Deliveries p_ids (LEASED under p_epochs) were answered 2xx, with
-- p_statuses, in p_durations_ms, with p_responses: each DONE, recorded with
-- its status, duration and (at most 1 KB of) body; their destinations'
-- failure runs end, and a probe closes its breaker; an ordered delivery's
-- successor in its scope becomes due. One statement for the completions a
-- forwarder finishes together (the arrays are parallel). Answers, in the
-- order given, true; false where the lease is gone, unless that epoch's
-- lease was completed before (a repeat whose first reply was lost). 22004
-- for arrays of different lengths.
CREATE OR REPLACE FUNCTION wharf.complete_deliveries(
  p_ids bigint[], p_epochs bigint[], p_statuses integer[], p_durations_ms integer[], p_responses text[])
RETURNS boolean[]
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_now                  timestamptz := clock_timestamp();
  v_dests                bigint[];
  v_ordered_destinations bigint[];
  v_ordered_scope_keys   text[];
BEGIN
  IF cardinality(p_ids) IS DISTINCT FROM cardinality(p_epochs) OR cardinality(p_ids) IS DISTINCT FROM cardinality(p_statuses)
     OR cardinality(p_ids) IS DISTINCT FROM cardinality(p_durations_ms) OR cardinality(p_ids) IS DISTINCT FROM cardinality(p_responses) THEN
    RAISE EXCEPTION 'wharf.complete_deliveries: the arrays must be of one length' USING ERRCODE = '22004';
  END IF;
  WITH answered AS (
    SELECT u.id, u.epoch, u.status, u.duration_ms, u.response
      FROM unnest(p_ids, p_epochs, p_statuses, p_durations_ms, p_responses) AS u(id, epoch, status, duration_ms, response)
  ), locked AS (
    -- In id order: two forwarders completing overlapping sets never deadlock.
    SELECT q.id FROM wharf.destination_delivery q JOIN answered a ON a.id = q.id AND a.epoch = q.lease_epoch
     WHERE q.state = 'LEASED'
     ORDER BY q.id
       FOR UPDATE OF q
  ), done AS (
    UPDATE wharf.destination_delivery q
       SET state = 'DONE', outcome = 'delivered', handled_at = v_now, last_status = a.status,
           leased_until = NULL, transient_since = NULL
      FROM locked l, answered a
     WHERE q.id = l.id AND a.id = l.id AND a.epoch = q.lease_epoch
    RETURNING q.id, q.lease_epoch, q.destination_id, q.attempt, q.leased_by, q.leased_at, q.ordered, q.scope_key,
              a.status, a.duration_ms, a.response
  ), recorded AS (
    INSERT INTO wharf.delivery_attempt (delivery_id, lease_epoch, destination_id, attempt, worker, started_at,
                                        ended_at, ended, left_state, status, duration_ms, response)
    SELECT d.id, d.lease_epoch, d.destination_id, d.attempt, d.leased_by, d.leased_at,
           v_now, 'handled', 'DONE', d.status, d.duration_ms, left(d.response, 1024)
      FROM done d
  )
  SELECT ARRAY(SELECT DISTINCT d.destination_id FROM done d),
         ARRAY(SELECT d.destination_id FROM done d WHERE d.ordered ORDER BY d.id),
         ARRAY(SELECT d.scope_key FROM done d WHERE d.ordered ORDER BY d.id)
    INTO v_dests, v_ordered_destinations, v_ordered_scope_keys;
  UPDATE wharf.destination d
     SET consecutive_failures = 0, failing_since = NULL,
         state         = CASE WHEN d.state = 'BREAKER_OPEN' THEN 'ACTIVE' ELSE d.state END,
         paused_reason = CASE WHEN d.state = 'BREAKER_OPEN' THEN NULL ELSE d.paused_reason END,
         probe_at      = NULL
   WHERE d.id IN (SELECT x.id FROM wharf.destination x
                   WHERE x.id = ANY (v_dests)
                     AND (x.consecutive_failures <> 0 OR x.failing_since IS NOT NULL OR x.state = 'BREAKER_OPEN')
                   ORDER BY x.id
                     FOR NO KEY UPDATE);
  -- Each ordered delivery's turn ended: the next of its scope is due.
  PERFORM wharf.promote_next_deliveries(v_ordered_destinations, v_ordered_scope_keys);
  -- True where that lease ended handled: now, or by a completion before this one.
  RETURN ARRAY(
    SELECT EXISTS (SELECT FROM wharf.delivery_attempt h
                    WHERE h.delivery_id = u.id AND h.lease_epoch = u.epoch AND h.ended = 'handled')
      FROM unnest(p_ids, p_epochs) WITH ORDINALITY AS u(id, epoch, n)
     ORDER BY u.n);
END $$;

-- Every delivery lease past its leased_until goes back to QUEUED after the
-- retry delay with failures + 1 and error class 'LeaseExpired' (a forwarder
-- died mid-request: the request is sent again, with the same webhook-id);
-- DEAD when its failures reach max_attempts. Returns how many it reaped.
-- SKIP LOCKED: it never waits on a lease being ended.
CREATE OR REPLACE FUNCTION wharf.reap_deliveries() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_now   timestamptz := clock_timestamp();
  v_max               integer := wharf.setting_integer('max_attempts');
  v_count             integer;
  v_dead_destinations bigint[];
  v_dead_scope_keys   text[];
BEGIN
  WITH expired AS (
    SELECT q.id FROM wharf.destination_delivery q
     WHERE q.state = 'LEASED' AND q.leased_until < v_now
     ORDER BY q.id
       FOR UPDATE SKIP LOCKED
  ), reaped AS (
    UPDATE wharf.destination_delivery q
       SET state = CASE WHEN q.failures + 1 >= v_max THEN 'DEAD' ELSE 'QUEUED' END,
           failures = q.failures + 1, error_class = 'LeaseExpired', leased_until = NULL,
           dead_at = CASE WHEN q.failures + 1 >= v_max THEN v_now END,
           next_attempt_at = CASE WHEN q.failures + 1 >= v_max THEN q.next_attempt_at
                                  ELSE v_now + wharf.retry_delay(q.attempt) END
      FROM expired
     WHERE q.id = expired.id
    RETURNING q.id, q.lease_epoch, q.destination_id, q.attempt, q.leased_by, q.leased_at, q.state, q.ordered,
              q.scope_key
  ), recorded AS (
    INSERT INTO wharf.delivery_attempt (delivery_id, lease_epoch, destination_id, attempt, worker, started_at,
                                        ended_at, ended, left_state, error_class)
    SELECT r.id, r.lease_epoch, r.destination_id, r.attempt, r.leased_by, r.leased_at, v_now, 'expired', r.state,
           'LeaseExpired'
      FROM reaped r
    RETURNING 1
  )
  SELECT (SELECT count(*)::integer FROM recorded),
         ARRAY(SELECT r.destination_id FROM reaped r WHERE r.state = 'DEAD' AND r.ordered ORDER BY r.id),
         ARRAY(SELECT r.scope_key FROM reaped r WHERE r.state = 'DEAD' AND r.ordered ORDER BY r.id)
    INTO v_count, v_dead_destinations, v_dead_scope_keys;
  -- A head reaped into the dead letters ends its turn.
  PERFORM wharf.promote_next_deliveries(v_dead_destinations, v_dead_scope_keys);
  IF v_count > 0 THEN
    PERFORM pg_notify('wharf_delivery', '');
  END IF;
  RETURN v_count;
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

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

DROP FUNCTION wharf.promote_next_deliveries(bigint[],text[]);

CREATE OR REPLACE FUNCTION wharf.complete_deliveries(p_ids bigint[], p_epochs bigint[], p_statuses integer[], p_durations_ms integer[], p_responses text[])
 RETURNS boolean[]
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_now       timestamptz := clock_timestamp();
  v_dests                bigint[];
  v_ordered_destinations bigint[];
  v_ordered_scope_keys   text[];
BEGIN
  IF cardinality(p_ids) IS DISTINCT FROM cardinality(p_epochs) OR cardinality(p_ids) IS DISTINCT FROM cardinality(p_statuses)
     OR cardinality(p_ids) IS DISTINCT FROM cardinality(p_durations_ms) OR cardinality(p_ids) IS DISTINCT FROM cardinality(p_responses) THEN
    RAISE EXCEPTION 'wharf.complete_deliveries: the arrays must be of one length' USING ERRCODE = '22004';
  END IF;
  WITH answered AS (
    SELECT u.id, u.epoch, u.status, u.duration_ms, u.response
      FROM unnest(p_ids, p_epochs, p_statuses, p_durations_ms, p_responses) AS u(id, epoch, status, duration_ms, response)
  ), locked AS (
    -- In id order: two forwarders completing overlapping sets never deadlock.
    SELECT q.id FROM wharf.destination_delivery q JOIN answered a ON a.id = q.id AND a.epoch = q.lease_epoch
     WHERE q.state = 'LEASED'
     ORDER BY q.id
       FOR UPDATE OF q
  ), done AS (
    UPDATE wharf.destination_delivery q
       SET state = 'DONE', outcome = 'delivered', handled_at = v_now, last_status = a.status,
           leased_until = NULL, transient_since = NULL
      FROM locked l, answered a
     WHERE q.id = l.id AND a.id = l.id AND a.epoch = q.lease_epoch
    RETURNING q.id, q.lease_epoch, q.destination_id, q.attempt, q.leased_by, q.leased_at, q.ordered, q.scope_key,
              a.status, a.duration_ms, a.response
  ), recorded AS (
    INSERT INTO wharf.delivery_attempt (delivery_id, lease_epoch, destination_id, attempt, worker, started_at,
                                        ended_at, ended, left_state, status, duration_ms, response)
    SELECT d.id, d.lease_epoch, d.destination_id, d.attempt, d.leased_by, d.leased_at,
           v_now, 'handled', 'DONE', d.status, d.duration_ms, left(d.response, 1024)
      FROM done d
  )
  SELECT ARRAY(SELECT DISTINCT d.destination_id FROM done d),
         ARRAY(SELECT d.destination_id FROM done d WHERE d.ordered ORDER BY d.id),
         ARRAY(SELECT d.scope_key FROM done d WHERE d.ordered ORDER BY d.id)
    INTO v_dests, v_ordered_destinations, v_ordered_scope_keys;
  UPDATE wharf.destination d
     SET consecutive_failures = 0, failing_since = NULL,
         state         = CASE WHEN d.state = 'BREAKER_OPEN' THEN 'ACTIVE' ELSE d.state END,
         paused_reason = CASE WHEN d.state = 'BREAKER_OPEN' THEN NULL ELSE d.paused_reason END,
         probe_at      = NULL
   WHERE d.id IN (SELECT x.id FROM wharf.destination x
                   WHERE x.id = ANY (v_dests)
                     AND (x.consecutive_failures <> 0 OR x.failing_since IS NOT NULL OR x.state = 'BREAKER_OPEN')
                   ORDER BY x.id
                     FOR NO KEY UPDATE);
  -- Each ordered delivery's turn ended: the next of its scope is due, in the advisory locks' order.
  PERFORM wharf.promote_next_delivery(k.destination_id, k.scope_key)
     FROM (SELECT DISTINCT o.destination_id, o.scope_key, wharf.delivery_scope_key(o.destination_id, o.scope_key) AS key
             FROM unnest(v_ordered_destinations, v_ordered_scope_keys) AS o(destination_id, scope_key)
            ORDER BY 3) k;
  -- True where that lease ended handled: now, or by a completion before this one.
  RETURN ARRAY(
    SELECT EXISTS (SELECT FROM wharf.delivery_attempt h
                    WHERE h.delivery_id = u.id AND h.lease_epoch = u.epoch AND h.ended = 'handled')
      FROM unnest(p_ids, p_epochs) WITH ORDINALITY AS u(id, epoch, n)
     ORDER BY u.n);
END $function$;
REVOKE ALL ON FUNCTION wharf.complete_deliveries(bigint[],bigint[],integer[],integer[],text[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.promote_after_deleted_deliveries()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
  PERFORM wharf.promote_next_delivery(k.destination_id, k.scope_key)
     FROM (SELECT DISTINCT d.destination_id, d.scope_key,
                  wharf.delivery_scope_key(d.destination_id, d.scope_key) AS key
             FROM deliveries_deleted d
            WHERE d.ordered AND d.state IN ('QUEUED', 'LEASED')
              AND EXISTS (SELECT FROM wharf.destination x WHERE x.id = d.destination_id)
            ORDER BY 3) k;
  RETURN NULL;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.promote_after_deleted_deliveries() TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.reap_deliveries()
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_now   timestamptz := clock_timestamp();
  v_max               integer := wharf.setting_integer('max_attempts');
  v_count             integer;
  v_dead_destinations bigint[];
  v_dead_scope_keys   text[];
BEGIN
  WITH expired AS (
    SELECT q.id FROM wharf.destination_delivery q
     WHERE q.state = 'LEASED' AND q.leased_until < v_now
     ORDER BY q.id
       FOR UPDATE SKIP LOCKED
  ), reaped AS (
    UPDATE wharf.destination_delivery q
       SET state = CASE WHEN q.failures + 1 >= v_max THEN 'DEAD' ELSE 'QUEUED' END,
           failures = q.failures + 1, error_class = 'LeaseExpired', leased_until = NULL,
           dead_at = CASE WHEN q.failures + 1 >= v_max THEN v_now END,
           next_attempt_at = CASE WHEN q.failures + 1 >= v_max THEN q.next_attempt_at
                                  ELSE v_now + wharf.retry_delay(q.attempt) END
      FROM expired
     WHERE q.id = expired.id
    RETURNING q.id, q.lease_epoch, q.destination_id, q.attempt, q.leased_by, q.leased_at, q.state, q.ordered,
              q.scope_key
  ), recorded AS (
    INSERT INTO wharf.delivery_attempt (delivery_id, lease_epoch, destination_id, attempt, worker, started_at,
                                        ended_at, ended, left_state, error_class)
    SELECT r.id, r.lease_epoch, r.destination_id, r.attempt, r.leased_by, r.leased_at, v_now, 'expired', r.state,
           'LeaseExpired'
      FROM reaped r
    RETURNING 1
  )
  SELECT (SELECT count(*)::integer FROM recorded),
         ARRAY(SELECT r.destination_id FROM reaped r WHERE r.state = 'DEAD' AND r.ordered ORDER BY r.id),
         ARRAY(SELECT r.scope_key FROM reaped r WHERE r.state = 'DEAD' AND r.ordered ORDER BY r.id)
    INTO v_count, v_dead_destinations, v_dead_scope_keys;
  -- A head reaped into the dead letters ends its turn.
  PERFORM wharf.promote_next_delivery(k.destination_id, k.scope_key)
     FROM (SELECT DISTINCT d.destination_id, d.scope_key, wharf.delivery_scope_key(d.destination_id, d.scope_key) AS key
             FROM unnest(v_dead_destinations, v_dead_scope_keys) AS d(destination_id, scope_key)
            ORDER BY 3) k;
  IF v_count > 0 THEN
    PERFORM pg_notify('wharf_delivery', '');
  END IF;
  RETURN v_count;
END $function$;
REVOKE ALL ON FUNCTION wharf.reap_deliveries() FROM PUBLIC;
