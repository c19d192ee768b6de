-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.destination_header_problem(text,jsonb)
--   changed  function wharf.check_destination_spec(jsonb)
--   changed  function wharf.claim_deliveries(text,integer)

-- ======== sql/88-destinations.sql ========

-- Leases up to p_max deliveries for worker p_worker, with what the forwarder
-- needs to send each (the sealed secrets, decrypted by the worker; the
-- payload as stored text). A delivery is handed out when its destination has
-- a signing secret and is ACTIVE (or its breaker is open and its probe is
-- due: one delivery, the probe), its workspace is ACTIVE, its event's
-- connection is not PAUSED, it is due, and, for an ordered destination,
-- nothing of its (destination, scope) before it is QUEUED or LEASED. At most
-- max_in_flight leases per destination across every host, and no more than
-- the rate limit's bucket holds. Destinations take turns (the one served
-- longest ago first); one a concurrent claim holds is passed over. A lease
-- lasts the setting lease, or the destination's timeout and 5 s (to record
-- the answer) when that is longer: nothing renews it, so a request still
-- open never outlives its lease.
CREATE OR REPLACE FUNCTION wharf.claim_deliveries(p_worker text, p_max integer DEFAULT 1)
RETURNS TABLE (delivery_id bigint, epoch bigint, attempt integer, event_id bigint, destination_id bigint,
               url text, timeout_ms integer, signing_secret text, previous_signing_secret text,
               credentials text, extra_headers jsonb, provider text, event_type text, subject text,
               delivery_key text, event_headers jsonb, payload text, received_at timestamptz, probe boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
END $$;

-- What is wrong with extra header p_name: p_value of a destination, or NULL:
-- a header name (RFC 9110 token), not one Wharf sets itself or one that
-- carries credentials, and a string of at most 1000 characters without
-- control characters. Internal: check_destination_spec's.
CREATE OR REPLACE FUNCTION wharf.destination_header_problem(p_name text, p_value jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN p_name !~ '^[A-Za-z0-9!#$%&''*+.^_`|~-]{1,100}$' THEN 'not a header name'
    WHEN lower(p_name) ~ '^(webhook-|wharf-|content-)'
         OR lower(p_name) IN ('host', 'authorization', 'proxy-authorization', 'cookie', 'connection', 'keep-alive',
                              'transfer-encoding', 'te', 'trailer', 'upgrade', 'expect')
      THEN 'set by Wharf (credentials go in the destination''s credentials)'
    WHEN jsonb_typeof(p_value) <> 'string' OR p_value #>> '{}' ~ '[[:cntrl:]]' OR length(p_value #>> '{}') > 1000
      THEN 'a string of at most 1000 characters without control characters'
  END
$$;

-- Raises 22023 naming the first problem of destination spec p_spec (the keys
-- it gives: name, url, timeout_ms, rate_limit, rate_period, max_in_flight,
-- ordered, headers, breaker_failures, breaker_minutes). Internal.
CREATE OR REPLACE FUNCTION wharf.check_destination_spec(p_spec jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_problem text;
  v_key     text;
BEGIN
  IF jsonb_typeof(p_spec) IS DISTINCT FROM 'object' THEN
    RAISE EXCEPTION 'wharf: destination: must be an object' USING ERRCODE = '22023';
  END IF;
  SELECT min(k) INTO v_key FROM jsonb_object_keys(p_spec) k
   WHERE k NOT IN ('name', 'url', 'timeout_ms', 'rate_limit', 'rate_period', 'max_in_flight', 'ordered',
                   'headers', 'breaker_failures', 'breaker_minutes');
  v_problem := CASE
    WHEN v_key IS NOT NULL THEN v_key || ': unknown setting'
    WHEN p_spec ? 'name' AND (jsonb_typeof(p_spec->'name') <> 'string'
                              OR p_spec->>'name' !~ '^[^[:cntrl:]]{1,100}$' OR btrim(p_spec->>'name') = '')
      THEN 'name: 1 to 100 characters'
    WHEN p_spec ? 'url' AND (jsonb_typeof(p_spec->'url') <> 'string' OR length(p_spec->>'url') > 2048
                             OR p_spec->>'url' !~ '^https?://[A-Za-z0-9._~-]+(:[0-9]{1,5})?(/[^[:space:][:cntrl:]#]*)?$'
                             AND p_spec->>'url' !~ '^https?://\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?(/[^[:space:][:cntrl:]#]*)?$')
      THEN 'url: must be an https:// (or http://) URL with a host, no credentials and no fragment'
    WHEN p_spec ? 'timeout_ms' AND NOT wharf.json_integer_between(p_spec->'timeout_ms', 100, 60000)
      THEN 'timeout_ms: an integer from 100 to 60000'
    WHEN p_spec ? 'rate_limit' AND p_spec->'rate_limit' <> 'null'
         AND NOT wharf.json_integer_between(p_spec->'rate_limit', 1, 1000000)
      THEN 'rate_limit: null or an integer from 1 to 1000000'
    WHEN p_spec ? 'rate_period' AND p_spec->>'rate_period' IS DISTINCT FROM 'second'
         AND p_spec->>'rate_period' IS DISTINCT FROM 'minute'
      THEN 'rate_period: second or minute'
    WHEN p_spec ? 'max_in_flight' AND NOT wharf.json_integer_between(p_spec->'max_in_flight', 1, 1000)
      THEN 'max_in_flight: an integer from 1 to 1000'
    WHEN p_spec ? 'ordered' AND jsonb_typeof(p_spec->'ordered') <> 'boolean'
      THEN 'ordered: true or false'
    WHEN p_spec ? 'breaker_failures' AND NOT wharf.json_integer_between(p_spec->'breaker_failures', 1, 100000)
      THEN 'breaker_failures: an integer from 1 to 100000'
    WHEN p_spec ? 'breaker_minutes' AND NOT wharf.json_integer_between(p_spec->'breaker_minutes', 1, 10080)
      THEN 'breaker_minutes: an integer from 1 to 10080'
    WHEN p_spec ? 'headers' AND jsonb_typeof(p_spec->'headers') <> 'object'
      THEN 'headers: an object of header names and string values'
    WHEN p_spec ? 'headers' AND (SELECT count(*) FROM jsonb_object_keys(p_spec->'headers')) > 32
      THEN 'headers: at most 32'
    ELSE (SELECT 'headers.' || h.key || ': ' || p.problem
            FROM jsonb_each(p_spec->'headers') h
            CROSS JOIN LATERAL (SELECT wharf.destination_header_problem(h.key, h.value) AS problem) p
           WHERE p.problem IS NOT NULL
           ORDER BY h.key LIMIT 1)
  END;
  IF v_problem IS NOT NULL THEN
    RAISE EXCEPTION 'wharf: destination %', v_problem USING ERRCODE = '22023';
  END IF;
END $$;

REVOKE ALL ON FUNCTION wharf.claim_deliveries(text, integer), wharf.next_delivery_at(),
  wharf.complete_delivery(bigint, bigint, integer, integer, text),
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

DROP FUNCTION wharf.destination_header_problem(text,jsonb);

CREATE OR REPLACE FUNCTION wharf.check_destination_spec(p_spec jsonb)
 RETURNS void
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
DECLARE
  v_problem text;
  v_key     text;
BEGIN
  IF jsonb_typeof(p_spec) IS DISTINCT FROM 'object' THEN
    RAISE EXCEPTION 'wharf: destination: must be an object' USING ERRCODE = '22023';
  END IF;
  SELECT min(k) INTO v_key FROM jsonb_object_keys(p_spec) k
   WHERE k NOT IN ('name', 'url', 'timeout_ms', 'rate_limit', 'rate_period', 'max_in_flight', 'ordered',
                   'headers', 'breaker_failures', 'breaker_minutes');
  v_problem := CASE
    WHEN v_key IS NOT NULL THEN v_key || ': unknown setting'
    WHEN p_spec ? 'name' AND (jsonb_typeof(p_spec->'name') <> 'string'
                              OR p_spec->>'name' !~ '^[^[:cntrl:]]{1,100}$' OR btrim(p_spec->>'name') = '')
      THEN 'name: 1 to 100 characters'
    WHEN p_spec ? 'url' AND (jsonb_typeof(p_spec->'url') <> 'string' OR length(p_spec->>'url') > 2048
                             OR p_spec->>'url' !~ '^https?://[A-Za-z0-9._~-]+(:[0-9]{1,5})?(/[^[:space:][:cntrl:]#]*)?$'
                             AND p_spec->>'url' !~ '^https?://\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?(/[^[:space:][:cntrl:]#]*)?$')
      THEN 'url: must be an https:// (or http://) URL with a host, no credentials and no fragment'
    WHEN p_spec ? 'timeout_ms' AND NOT wharf.json_integer_between(p_spec->'timeout_ms', 100, 60000)
      THEN 'timeout_ms: an integer from 100 to 60000'
    WHEN p_spec ? 'rate_limit' AND p_spec->'rate_limit' <> 'null'
         AND NOT wharf.json_integer_between(p_spec->'rate_limit', 1, 1000000)
      THEN 'rate_limit: null or an integer from 1 to 1000000'
    WHEN p_spec ? 'rate_period' AND p_spec->>'rate_period' IS DISTINCT FROM 'second'
         AND p_spec->>'rate_period' IS DISTINCT FROM 'minute'
      THEN 'rate_period: second or minute'
    WHEN p_spec ? 'max_in_flight' AND NOT wharf.json_integer_between(p_spec->'max_in_flight', 1, 1000)
      THEN 'max_in_flight: an integer from 1 to 1000'
    WHEN p_spec ? 'ordered' AND jsonb_typeof(p_spec->'ordered') <> 'boolean'
      THEN 'ordered: true or false'
    WHEN p_spec ? 'breaker_failures' AND NOT wharf.json_integer_between(p_spec->'breaker_failures', 1, 100000)
      THEN 'breaker_failures: an integer from 1 to 100000'
    WHEN p_spec ? 'breaker_minutes' AND NOT wharf.json_integer_between(p_spec->'breaker_minutes', 1, 10080)
      THEN 'breaker_minutes: an integer from 1 to 10080'
    WHEN p_spec ? 'headers' AND jsonb_typeof(p_spec->'headers') <> 'object'
      THEN 'headers: an object of header names and string values'
    WHEN p_spec ? 'headers' AND (SELECT count(*) FROM jsonb_object_keys(p_spec->'headers')) > 32
      THEN 'headers: at most 32'
    ELSE (SELECT 'headers.' || h.key || CASE
                   WHEN h.key !~ '^[A-Za-z0-9!#$%&''*+.^_`|~-]{1,100}$' THEN ': not a header name'
                   WHEN lower(h.key) ~ '^(webhook-|wharf-|content-)' OR lower(h.key) IN
                        ('host', 'authorization', 'proxy-authorization', 'cookie', 'connection', 'keep-alive',
                         'transfer-encoding', 'te', 'trailer', 'upgrade', 'expect')
                     THEN ': set by Wharf (credentials go in the destination''s credentials)'
                   WHEN jsonb_typeof(h.value) <> 'string' OR h.value #>> '{}' ~ '[[:cntrl:]]'
                        OR length(h.value #>> '{}') > 1000
                     THEN ': a string of at most 1000 characters without control characters' END
            FROM jsonb_each(p_spec->'headers') h
           WHERE h.key !~ '^[A-Za-z0-9!#$%&''*+.^_`|~-]{1,100}$'
              OR lower(h.key) ~ '^(webhook-|wharf-|content-)'
              OR lower(h.key) IN ('host', 'authorization', 'proxy-authorization', 'cookie', 'connection',
                                  'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'expect')
              OR jsonb_typeof(h.value) <> 'string' OR h.value #>> '{}' ~ '[[:cntrl:]]'
              OR length(h.value #>> '{}') > 1000
           ORDER BY h.key LIMIT 1)
  END;
  IF v_problem IS NOT NULL THEN
    RAISE EXCEPTION 'wharf: destination %', v_problem USING ERRCODE = '22023';
  END IF;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.check_destination_spec(jsonb) TO PUBLIC;

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
         AND NOT EXISTS (SELECT FROM wharf.provider_event e JOIN wharf.connection c ON c.id = e.connection_id
                          WHERE e.id = q.event_id AND c.state = 'PAUSED')
       -- Index order alone, so that LIMIT stops the read: within a scope at
       -- most its head is due, and across scopes there is no order to keep.
       ORDER BY q.next_attempt_at
       LIMIT v_take
         FOR UPDATE OF q SKIP LOCKED
    ), leased AS (
      UPDATE wharf.destination_delivery q
         SET state = 'LEASED', attempt = q.attempt + 1, lease_epoch = q.lease_epoch + 1,
             leased_until = v_now + v_lease, leased_by = p_worker, leased_at = v_now
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
           probe_at   = CASE WHEN d.state = 'BREAKER_OPEN' AND v_taken > 0 THEN v_now + v_lease ELSE d.probe_at END
     WHERE d.id = v_dest.id;
    v_left := v_left - v_taken;
    EXIT WHEN v_left <= 0;
  END LOOP;
END $function$;
REVOKE ALL ON FUNCTION wharf.claim_deliveries(text,integer) FROM PUBLIC;
