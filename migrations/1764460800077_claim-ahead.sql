-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.claim_deliveries(text,integer,integer)
--   dropped  function wharf.claim_deliveries(text,integer)

-- The grants of the functions dropped below, given again to the functions of the same name created after them.
CREATE TEMP TABLE wharf_release_grants ON COMMIT DROP AS
  SELECT p.proname::text AS name, a.grantee::regrole::text AS grantee
    FROM pg_proc p CROSS JOIN LATERAL aclexplode(p.proacl) a
   WHERE p.oid IN ('wharf.claim_deliveries(text,integer)'::regprocedure)
     AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> p.proowner;

DROP FUNCTION wharf.claim_deliveries(text,integer);

-- ======== sql/88-destinations.sql ========

-- 0.4.0's first form, before p_ahead
CREATE OR REPLACE FUNCTION wharf.claim_deliveries(p_worker text, p_max integer DEFAULT 1, p_ahead integer DEFAULT 0)
RETURNS TABLE (delivery_id bigint, epoch bigint, attempt integer, event_id bigint, destination_id bigint,
               url text, timeout_ms integer, signing_secret text, previous_signing_secret text,
               credentials text, extra_headers jsonb, provider text, event_type text, subject text,
               delivery_key text, event_headers jsonb, payload text, received_at timestamptz, probe boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_now      timestamptz := clock_timestamp();
  v_lease    interval := wharf.setting_interval('lease');
  v_left     integer := least(greatest(coalesce(p_max, 1), 0), 1000);
  v_ahead    integer := least(greatest(coalesce(p_ahead, 0), 0), 1000);
  v_dest     record;
  v_take     integer;
  v_tokens   double precision;
  v_taken    integer;
  v_until    timestamptz;
  v_any_paused boolean := EXISTS (SELECT FROM wharf.connection c WHERE c.state = 'PAUSED');
BEGIN
  IF p_worker IS NULL OR p_worker = '' THEN
    RAISE EXCEPTION 'wharf.claim_deliveries: worker is required' USING ERRCODE = '22004';
  END IF;
  IF v_left + v_ahead = 0 THEN
    v_left := 1;
  END IF;
  FOR v_dest IN
    SELECT d.id, d.state, d.max_in_flight, d.rate_limit, d.rate_period, d.tokens, d.tokens_at,
           d.signing_secret, d.previous_valid_until, d.previous_signing_secret, d.credentials,
           d.url, d.timeout_ms, d.headers
      FROM wharf.destination d
      JOIN wharf.workspace w ON w.id = d.workspace_id
     WHERE d.signing_secret IS NOT NULL AND w.state = 'ACTIVE'
       AND (d.state = 'ACTIVE' OR (d.state = 'BREAKER_OPEN' AND d.probe_at <= v_now))
       AND EXISTS (SELECT FROM wharf.destination_delivery q
                    WHERE q.destination_id = d.id AND q.state = 'QUEUED' AND q.next_attempt_at <= v_now)
     ORDER BY d.claimed_at NULLS FIRST, d.id
       FOR NO KEY UPDATE OF d SKIP LOCKED
  LOOP
    v_take := v_left + v_ahead;
    IF v_dest.state = 'BREAKER_OPEN' THEN
      v_take := least(v_left, 1);  -- the probe
    END IF;
    v_take := least(v_take, v_dest.max_in_flight - (
      SELECT count(*)::integer FROM wharf.destination_delivery q WHERE q.destination_id = v_dest.id AND q.state = 'LEASED'));
    IF v_dest.rate_limit IS NOT NULL THEN
      -- A bucket of rate_limit tokens, refilled at rate_limit per period.
      v_tokens := least(v_dest.rate_limit::double precision,
                        coalesce(v_dest.tokens, v_dest.rate_limit)
                        + extract(epoch FROM v_now - coalesce(v_dest.tokens_at, v_now))
                          * v_dest.rate_limit / CASE v_dest.rate_period WHEN 'minute' THEN 60 ELSE 1 END);
      v_take := least(v_take, v_left, floor(v_tokens)::integer);
    END IF;
    CONTINUE WHEN v_take <= 0;
    v_until := v_now + greatest(v_lease, v_dest.timeout_ms * interval '1 millisecond' + interval '5 seconds');

    RETURN QUERY
    WITH picked AS (
      -- The due deliveries, longest due first (ix_destination_delivery_due):
      -- of an ordered destination only its heads are ever due.
      SELECT q.id FROM wharf.destination_delivery q
       WHERE q.destination_id = v_dest.id AND q.state = 'QUEUED' AND q.next_attempt_at <= v_now
         AND NOT (q.ordered AND EXISTS (
               SELECT FROM wharf.destination_delivery o
                WHERE o.destination_id = v_dest.id AND o.scope_key = q.scope_key AND o.ordered
                  AND o.state IN ('QUEUED', 'LEASED') AND o.event_id < q.event_id))
         -- Read only while some connection is paused (ix_connection_paused):
         -- as an OR it stays a filter on the rows read, never an anti-join
         -- that reads every due delivery to find the few it removes.
         AND (NOT v_any_paused
              OR NOT EXISTS (SELECT FROM wharf.provider_event e JOIN wharf.connection c ON c.id = e.connection_id
                              WHERE e.id = q.event_id AND c.state = 'PAUSED'))
       -- Index order alone, so that LIMIT stops the read: within a scope at
       -- most its head is due, and across scopes there is no order to keep.
       ORDER BY q.next_attempt_at
       LIMIT v_take
         FOR UPDATE OF q SKIP LOCKED
    ), leased AS (
      UPDATE wharf.destination_delivery q
         SET state = 'LEASED', attempt = q.attempt + 1, lease_epoch = q.lease_epoch + 1,
             leased_until = v_until, leased_by = p_worker, leased_at = v_now
        FROM picked
       WHERE q.id = picked.id
      RETURNING q.id, q.lease_epoch, q.attempt, q.event_id
    )
    SELECT l.id, l.lease_epoch, l.attempt, l.event_id, v_dest.id, v_dest.url, v_dest.timeout_ms,
           v_dest.signing_secret,
           CASE WHEN v_dest.previous_valid_until > v_now THEN v_dest.previous_signing_secret END,
           v_dest.credentials, v_dest.headers, e.provider, e.event_type, e.subject, e.delivery_key,
           e.headers, e.payload::text, e.received_at, v_dest.state = 'BREAKER_OPEN'
      FROM leased l
      JOIN wharf.provider_event e ON e.id = l.event_id
     ORDER BY l.event_id;
    GET DIAGNOSTICS v_taken = ROW_COUNT;

    UPDATE wharf.destination d
       SET claimed_at = v_now,
           tokens     = CASE WHEN d.rate_limit IS NOT NULL THEN v_tokens - v_taken END,
           tokens_at  = CASE WHEN d.rate_limit IS NOT NULL THEN v_now END,
           -- One probe at a time: the next waits until this one's lease could have ended.
           probe_at   = CASE WHEN d.state = 'BREAKER_OPEN' AND v_taken > 0 THEN v_until ELSE d.probe_at END
     WHERE d.id = v_dest.id;
    -- What is sent at once first, then what is kept ahead.
    v_ahead := v_ahead - greatest(v_taken - v_left, 0);
    v_left := greatest(v_left - v_taken, 0);
    EXIT WHEN v_left + v_ahead <= 0;
  END LOOP;
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

DO $$
DECLARE g record;
BEGIN
  FOR g IN SELECT * FROM wharf_release_grants LOOP
    IF g.name = 'claim_deliveries' THEN EXECUTE format('GRANT EXECUTE ON FUNCTION wharf.claim_deliveries(text,integer,integer) TO %s', g.grantee); END IF;
  END LOOP;
END $$;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

DROP FUNCTION wharf.claim_deliveries(text,integer,integer);

CREATE OR REPLACE FUNCTION wharf.claim_deliveries(p_worker text, p_max integer DEFAULT 1)
 RETURNS TABLE(delivery_id bigint, epoch bigint, attempt integer, event_id bigint, destination_id bigint, url text, timeout_ms integer, signing_secret text, previous_signing_secret text, credentials text, extra_headers jsonb, provider text, event_type text, subject text, delivery_key text, event_headers jsonb, payload text, received_at timestamp with time zone, probe boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_now      timestamptz := clock_timestamp();
  v_lease    interval := wharf.setting_interval('lease');
  v_left     integer := least(greatest(coalesce(p_max, 1), 1), 1000);
  v_dest     record;
  v_take     integer;
  v_tokens   double precision;
  v_taken    integer;
  v_until    timestamptz;
  v_any_paused boolean := EXISTS (SELECT FROM wharf.connection c WHERE c.state = 'PAUSED');
BEGIN
  IF p_worker IS NULL OR p_worker = '' THEN
    RAISE EXCEPTION 'wharf.claim_deliveries: worker is required' USING ERRCODE = '22004';
  END IF;
  FOR v_dest IN
    SELECT d.id, d.state, d.max_in_flight, d.rate_limit, d.rate_period, d.tokens, d.tokens_at,
           d.signing_secret, d.previous_valid_until, d.previous_signing_secret, d.credentials,
           d.url, d.timeout_ms, d.headers
      FROM wharf.destination d
      JOIN wharf.workspace w ON w.id = d.workspace_id
     WHERE d.signing_secret IS NOT NULL AND w.state = 'ACTIVE'
       AND (d.state = 'ACTIVE' OR (d.state = 'BREAKER_OPEN' AND d.probe_at <= v_now))
       AND EXISTS (SELECT FROM wharf.destination_delivery q
                    WHERE q.destination_id = d.id AND q.state = 'QUEUED' AND q.next_attempt_at <= v_now)
     ORDER BY d.claimed_at NULLS FIRST, d.id
       FOR NO KEY UPDATE OF d SKIP LOCKED
  LOOP
    v_take := v_left;
    IF v_dest.state = 'BREAKER_OPEN' THEN
      v_take := 1;  -- the probe
    END IF;
    v_take := least(v_take, v_dest.max_in_flight - (
      SELECT count(*)::integer FROM wharf.destination_delivery q WHERE q.destination_id = v_dest.id AND q.state = 'LEASED'));
    IF v_dest.rate_limit IS NOT NULL THEN
      -- A bucket of rate_limit tokens, refilled at rate_limit per period.
      v_tokens := least(v_dest.rate_limit::double precision,
                        coalesce(v_dest.tokens, v_dest.rate_limit)
                        + extract(epoch FROM v_now - coalesce(v_dest.tokens_at, v_now))
                          * v_dest.rate_limit / CASE v_dest.rate_period WHEN 'minute' THEN 60 ELSE 1 END);
      v_take := least(v_take, floor(v_tokens)::integer);
    END IF;
    CONTINUE WHEN v_take <= 0;
    v_until := v_now + greatest(v_lease, v_dest.timeout_ms * interval '1 millisecond' + interval '5 seconds');

    RETURN QUERY
    WITH picked AS (
      -- The due deliveries, longest due first (ix_destination_delivery_due):
      -- of an ordered destination only its heads are ever due.
      SELECT q.id FROM wharf.destination_delivery q
       WHERE q.destination_id = v_dest.id AND q.state = 'QUEUED' AND q.next_attempt_at <= v_now
         AND NOT (q.ordered AND EXISTS (
               SELECT FROM wharf.destination_delivery o
                WHERE o.destination_id = v_dest.id AND o.scope_key = q.scope_key AND o.ordered
                  AND o.state IN ('QUEUED', 'LEASED') AND o.event_id < q.event_id))
         -- Read only while some connection is paused (ix_connection_paused):
         -- as an OR it stays a filter on the rows read, never an anti-join
         -- that reads every due delivery to find the few it removes.
         AND (NOT v_any_paused
              OR NOT EXISTS (SELECT FROM wharf.provider_event e JOIN wharf.connection c ON c.id = e.connection_id
                              WHERE e.id = q.event_id AND c.state = 'PAUSED'))
       -- Index order alone, so that LIMIT stops the read: within a scope at
       -- most its head is due, and across scopes there is no order to keep.
       ORDER BY q.next_attempt_at
       LIMIT v_take
         FOR UPDATE OF q SKIP LOCKED
    ), leased AS (
      UPDATE wharf.destination_delivery q
         SET state = 'LEASED', attempt = q.attempt + 1, lease_epoch = q.lease_epoch + 1,
             leased_until = v_until, leased_by = p_worker, leased_at = v_now
        FROM picked
       WHERE q.id = picked.id
      RETURNING q.id, q.lease_epoch, q.attempt, q.event_id
    )
    SELECT l.id, l.lease_epoch, l.attempt, l.event_id, v_dest.id, v_dest.url, v_dest.timeout_ms,
           v_dest.signing_secret,
           CASE WHEN v_dest.previous_valid_until > v_now THEN v_dest.previous_signing_secret END,
           v_dest.credentials, v_dest.headers, e.provider, e.event_type, e.subject, e.delivery_key,
           e.headers, e.payload::text, e.received_at, v_dest.state = 'BREAKER_OPEN'
      FROM leased l
      JOIN wharf.provider_event e ON e.id = l.event_id
     ORDER BY l.event_id;
    GET DIAGNOSTICS v_taken = ROW_COUNT;

    UPDATE wharf.destination d
       SET claimed_at = v_now,
           tokens     = CASE WHEN d.rate_limit IS NOT NULL THEN v_tokens - v_taken END,
           tokens_at  = CASE WHEN d.rate_limit IS NOT NULL THEN v_now END,
           -- One probe at a time: the next waits until this one's lease could have ended.
           probe_at   = CASE WHEN d.state = 'BREAKER_OPEN' AND v_taken > 0 THEN v_until ELSE d.probe_at END
     WHERE d.id = v_dest.id;
    v_left := v_left - v_taken;
    EXIT WHEN v_left <= 0;
  END LOOP;
END $function$;
REVOKE ALL ON FUNCTION wharf.claim_deliveries(text,integer) FROM PUBLIC;
