-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.complete_deliveries(bigint[],bigint[],integer[],integer[],text[])
--   changed  function wharf.complete_delivery(bigint,bigint,integer,integer,text)

-- ======== sql/88-destinations.sql ========

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
  v_now       timestamptz := clock_timestamp();
  v_done                 bigint[];
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
     WHERE q.id = l.id AND a.id = l.id
    RETURNING q.id, q.lease_epoch, q.destination_id, q.attempt, q.leased_by, q.leased_at, q.ordered, q.scope_key,
              a.status, a.duration_ms, a.response
  ), recorded AS (
    INSERT INTO wharf.delivery_attempt (delivery_id, lease_epoch, destination_id, attempt, worker, started_at,
                                        ended_at, ended, left_state, status, duration_ms, response)
    SELECT d.id, d.lease_epoch, d.destination_id, d.attempt, d.leased_by, d.leased_at,
           v_now, 'handled', 'DONE', d.status, d.duration_ms, left(d.response, 1024)
      FROM done d
    RETURNING delivery_id
  )
  SELECT ARRAY(SELECT r.delivery_id FROM recorded r),
         ARRAY(SELECT DISTINCT d.destination_id FROM done d),
         ARRAY(SELECT d.destination_id FROM done d WHERE d.ordered ORDER BY d.id),
         ARRAY(SELECT d.scope_key FROM done d WHERE d.ordered ORDER BY d.id)
    INTO v_done, v_dests, v_ordered_destinations, v_ordered_scope_keys;
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
  RETURN ARRAY(
    SELECT u.id = ANY (v_done)
           OR EXISTS (SELECT FROM wharf.delivery_attempt h
                       WHERE h.delivery_id = u.id AND h.lease_epoch = u.epoch AND h.ended = 'handled')
      FROM unnest(p_ids, p_epochs) WITH ORDINALITY AS u(id, epoch, n)
     ORDER BY u.n);
END $$;

-- Delivery p_id, LEASED under p_epoch, was answered 2xx: complete_deliveries
-- of one. True; false when the lease is gone, unless this epoch's lease was
-- completed before (a repeat whose first reply was lost).
CREATE OR REPLACE FUNCTION wharf.complete_delivery(
  p_id bigint, p_epoch bigint, p_status integer, p_duration_ms integer, p_response text)
RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT (wharf.complete_deliveries(ARRAY[p_id], ARRAY[p_epoch], ARRAY[p_status], ARRAY[p_duration_ms], ARRAY[p_response]))[1]
$$;

REVOKE ALL ON FUNCTION wharf.claim_deliveries(text, integer), wharf.next_delivery_at(),
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

DROP FUNCTION wharf.complete_deliveries(bigint[],bigint[],integer[],integer[],text[]);

CREATE OR REPLACE FUNCTION wharf.complete_delivery(p_id bigint, p_epoch bigint, p_status integer, p_duration_ms integer, p_response text)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_now timestamptz := clock_timestamp();
  v_row record;
BEGIN
  UPDATE wharf.destination_delivery q
     SET state = 'DONE', outcome = 'delivered', handled_at = v_now, last_status = p_status,
         leased_until = NULL, transient_since = NULL
   WHERE q.id = p_id AND q.lease_epoch = p_epoch AND q.state = 'LEASED'
  RETURNING q.destination_id, q.attempt, q.leased_by, q.leased_at, q.ordered, q.scope_key INTO v_row;
  IF NOT FOUND THEN
    RETURN EXISTS (SELECT FROM wharf.delivery_attempt h
                    WHERE h.delivery_id = p_id AND h.lease_epoch = p_epoch AND h.ended = 'handled');
  END IF;
  INSERT INTO wharf.delivery_attempt (delivery_id, lease_epoch, destination_id, attempt, worker, started_at,
                                      ended_at, ended, left_state, status, duration_ms, response)
  VALUES (p_id, p_epoch, v_row.destination_id, v_row.attempt, v_row.leased_by, v_row.leased_at,
          v_now, 'handled', 'DONE', p_status, p_duration_ms, left(p_response, 1024));
  UPDATE wharf.destination d
     SET consecutive_failures = 0, failing_since = NULL,
         state         = CASE WHEN d.state = 'BREAKER_OPEN' THEN 'ACTIVE' ELSE d.state END,
         paused_reason = CASE WHEN d.state = 'BREAKER_OPEN' THEN NULL ELSE d.paused_reason END,
         probe_at      = NULL
   WHERE d.id = v_row.destination_id
     AND (d.consecutive_failures <> 0 OR d.failing_since IS NOT NULL OR d.state = 'BREAKER_OPEN');
  IF v_row.ordered THEN
    PERFORM wharf.promote_next_delivery(v_row.destination_id, v_row.scope_key);
  END IF;
  RETURN true;
END $function$;
REVOKE ALL ON FUNCTION wharf.complete_delivery(bigint,bigint,integer,integer,text) FROM PUBLIC;
