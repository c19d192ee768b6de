-- Destinations (contract v6): forwarding a workspace's events to HTTP
-- endpoints of the team's own application, with no user code.
--
-- The event row (wharf.provider_event) stays the record and the state of the
-- workspace's own handlers. Each destination an event is routed to gets one
-- narrow row, wharf.destination_delivery, with its own state, attempts,
-- lease, dead letter and replay: order, the one-lease rule and retries hold
-- per (scope, destination), so a failing destination holds back only its own
-- later deliveries, never another destination's or the handlers'.
--
-- Routing happens as the event is stored, in the admission's transaction
-- (route_events, called by store_event and admit_items only for a workspace
-- that has rules): a delivery commits with its event or not at all, and
-- within a scope, whose admissions take turns on its scope row, deliveries
-- are made in the order of the scope's events.
--
-- Throttling lives in the destination's row: claim_deliveries locks it
-- (SKIP LOCKED: a second host passes over it), takes tokens from its bucket,
-- counts its leases against max_in_flight, and hands out no more than both
-- allow; so every worker host together keeps the limits, and a host that is
-- refused holds nothing while it waits. The circuit breaker lives there too.
--
-- A delivery waiting behind its (destination, scope)'s head has
-- next_attempt_at 'infinity': only heads are ever due, so a claim reads the
-- heads (ix_destination_delivery_due) and never the queue behind a failing
-- one, whatever its length. The delivery that ends a head's turn (complete,
-- a dead letter, a deletion) makes the next one due (promote_next_delivery).
-- The two meet under one advisory lock per (destination, scope): routing
-- holds it shared from before it reads whether a head exists until its
-- commit; a promotion takes it exclusive before it looks for the next, so it
-- waits for a delivery being made behind it, and one made after it sees the
-- ended head. (A claim still checks that nothing is ahead: the mark is what
-- makes it fast, not what makes it right.)
--
-- Lock order: a destination row, then its deliveries (claim_deliveries skips
-- locked deliveries, so it never waits while holding the destination); the
-- writes that end a lease lock their delivery, then its destination, and
-- never wait on a delivery while holding a destination.

-- ============================================================ filters

-- The first problem of condition p_cond at p_path ('filter.payload.action:
-- unknown operator $regex'), or NULL when it is valid. A condition is a
-- literal (equality), an object of operators (keys starting with $), or an
-- object of field names, each with a condition on that field. p_top: the
-- filter itself, whose fields are payload and headers and which is an object.
-- Internal: filter_problem's.
CREATE OR REPLACE FUNCTION wharf.filter_condition_problem(p_cond jsonb, p_path text, p_depth integer, p_top boolean)
RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_part    record;
  v_problem text;
  v_type    text;
BEGIN
  IF p_depth > 16 THEN
    RETURN p_path || ': nested deeper than 16 levels';
  END IF;
  IF jsonb_typeof(p_cond) <> 'object' THEN
    RETURN CASE WHEN p_top THEN p_path || ': must be an object' END;
  END IF;
  IF p_cond = '{}' THEN
    RETURN p_path || ': is empty';
  END IF;
  IF EXISTS (SELECT FROM jsonb_object_keys(p_cond) k WHERE left(k, 1) = '$')
     AND EXISTS (SELECT FROM jsonb_object_keys(p_cond) k WHERE left(k, 1) <> '$') THEN
    RETURN p_path || ': mixes operators and field names';
  END IF;
  FOR v_part IN SELECT key, value FROM jsonb_each(p_cond) ORDER BY key LOOP
    v_type := jsonb_typeof(v_part.value);
    v_problem := CASE
      WHEN left(v_part.key, 1) <> '$' THEN
        CASE WHEN p_top AND v_part.key NOT IN ('payload', 'headers')
             THEN p_path || '.' || v_part.key || ': unknown field (a filter starts with payload or headers)'
             ELSE wharf.filter_condition_problem(v_part.value, p_path || '.' || v_part.key, p_depth + 1, false) END
      WHEN v_part.key IN ('$and', '$or') THEN
        CASE WHEN v_type <> 'array' OR jsonb_array_length(v_part.value) = 0
             THEN p_path || '.' || v_part.key || ': must be a non-empty array'
             ELSE (SELECT i.problem FROM jsonb_array_elements(v_part.value) WITH ORDINALITY AS a(item, n)
                     CROSS JOIN LATERAL (SELECT wharf.filter_condition_problem(
                                           a.item, p_path || '.' || v_part.key || '[' || (a.n - 1) || ']',
                                           p_depth + 1, p_top) AS problem) i
                    WHERE i.problem IS NOT NULL ORDER BY a.n LIMIT 1) END
      WHEN v_part.key = '$not' THEN
        wharf.filter_condition_problem(v_part.value, p_path || '.$not', p_depth + 1, p_top)
      WHEN p_top THEN
        p_path || ': ' || v_part.key || ' applies to a field, e.g. {"payload": {"action": {"' || v_part.key || '": …}}}'
      WHEN v_part.key IN ('$eq', '$neq') THEN NULL
      WHEN v_part.key IN ('$in', '$nin') THEN
        CASE WHEN v_type <> 'array' THEN p_path || '.' || v_part.key || ': must be an array' END
      WHEN v_part.key IN ('$startsWith', '$endsWith') THEN
        CASE WHEN v_type <> 'string' THEN p_path || '.' || v_part.key || ': must be a string' END
      WHEN v_part.key = '$contains' THEN
        CASE WHEN v_type IN ('object', 'array') THEN p_path || '.$contains: must be a string, number, boolean or null' END
      WHEN v_part.key IN ('$gt', '$gte', '$lt', '$lte') THEN
        CASE WHEN v_type NOT IN ('number', 'string') THEN p_path || '.' || v_part.key || ': must be a number or a string' END
      WHEN v_part.key = '$exist' THEN
        CASE WHEN v_type <> 'boolean' THEN p_path || '.$exist: must be true or false' END
      ELSE p_path || ': unknown operator ' || v_part.key
    END;
    IF v_problem IS NOT NULL THEN
      RETURN v_problem;
    END IF;
  END LOOP;
  RETURN NULL;
END $$;

-- The first problem of rule filter p_filter, a text naming its place, or
-- NULL when it is valid (or NULL: no filter). At most 16384 characters and
-- 16 levels. The language is in docs/forwarding.md ("Filters").
CREATE OR REPLACE FUNCTION wharf.filter_problem(p_filter jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p_filter IS NULL THEN NULL
              WHEN length(p_filter::text) > 16384 THEN 'filter: longer than 16384 characters'
              ELSE wharf.filter_condition_problem(p_filter, 'filter', 1, true) END
$$;

-- Whether value p_value (NULL: the field is missing) meets condition p_cond,
-- a valid one (filter_condition_problem). Numbers compare as numbers,
-- strings by code point. Internal: filter_matches'.
CREATE OR REPLACE FUNCTION wharf.filter_condition_matches(p_cond jsonb, p_value jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_part   record;
  v_ok     boolean;
  v_string boolean := jsonb_typeof(p_value) = 'string';
BEGIN
  IF jsonb_typeof(p_cond) <> 'object' THEN
    RETURN coalesce(p_value = p_cond, false);
  END IF;
  FOR v_part IN SELECT key, value FROM jsonb_each(p_cond) LOOP
    v_ok := CASE
      WHEN left(v_part.key, 1) <> '$' THEN
        wharf.filter_condition_matches(v_part.value,
                                       CASE WHEN jsonb_typeof(p_value) = 'object' THEN p_value -> v_part.key END)
      WHEN v_part.key = '$and' THEN
        NOT EXISTS (SELECT FROM jsonb_array_elements(v_part.value) c
                     WHERE NOT wharf.filter_condition_matches(c, p_value))
      WHEN v_part.key = '$or' THEN
        EXISTS (SELECT FROM jsonb_array_elements(v_part.value) c WHERE wharf.filter_condition_matches(c, p_value))
      WHEN v_part.key = '$not' THEN NOT wharf.filter_condition_matches(v_part.value, p_value)
      WHEN v_part.key = '$eq' THEN p_value = v_part.value
      WHEN v_part.key = '$neq' THEN p_value IS DISTINCT FROM v_part.value
      WHEN v_part.key = '$in' THEN EXISTS (SELECT FROM jsonb_array_elements(v_part.value) c WHERE c = p_value)
      WHEN v_part.key = '$nin' THEN NOT EXISTS (SELECT FROM jsonb_array_elements(v_part.value) c WHERE c = p_value)
      WHEN v_part.key = '$startsWith' THEN v_string AND starts_with(p_value #>> '{}', v_part.value #>> '{}')
      WHEN v_part.key = '$endsWith' THEN
        v_string AND right(p_value #>> '{}', length(v_part.value #>> '{}')) = v_part.value #>> '{}'
      WHEN v_part.key = '$contains' THEN
        CASE jsonb_typeof(p_value)
          WHEN 'string' THEN jsonb_typeof(v_part.value) = 'string' AND strpos(p_value #>> '{}', v_part.value #>> '{}') > 0
          WHEN 'array' THEN EXISTS (SELECT FROM jsonb_array_elements(p_value) e WHERE e = v_part.value)
          ELSE false END
      WHEN v_part.key IN ('$gt', '$gte', '$lt', '$lte') THEN
        CASE WHEN jsonb_typeof(p_value) = 'number' AND jsonb_typeof(v_part.value) = 'number' THEN
               CASE v_part.key WHEN '$gt' THEN p_value::numeric > v_part.value::numeric
                               WHEN '$gte' THEN p_value::numeric >= v_part.value::numeric
                               WHEN '$lt' THEN p_value::numeric < v_part.value::numeric
                               ELSE p_value::numeric <= v_part.value::numeric END
             WHEN v_string AND jsonb_typeof(v_part.value) = 'string' THEN
               CASE v_part.key WHEN '$gt' THEN (p_value #>> '{}') COLLATE "C" > (v_part.value #>> '{}')
                               WHEN '$gte' THEN (p_value #>> '{}') COLLATE "C" >= (v_part.value #>> '{}')
                               WHEN '$lt' THEN (p_value #>> '{}') COLLATE "C" < (v_part.value #>> '{}')
                               ELSE (p_value #>> '{}') COLLATE "C" <= (v_part.value #>> '{}') END
             ELSE false END
      WHEN v_part.key = '$exist' THEN (p_value IS NOT NULL) = (v_part.value = 'true')
      ELSE false
    END;
    IF NOT coalesce(v_ok, false) THEN
      RETURN false;
    END IF;
  END LOOP;
  RETURN true;
END $$;

-- Whether an event with payload p_payload and (kept, lower-case) headers
-- p_headers meets filter p_filter; true for a NULL filter. 22023 naming the
-- problem for an invalid filter.
CREATE OR REPLACE FUNCTION wharf.filter_matches(p_filter jsonb, p_payload jsonb, p_headers jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_problem text := wharf.filter_problem(p_filter);
BEGIN
  IF v_problem IS NOT NULL THEN
    RAISE EXCEPTION 'wharf: %', v_problem USING ERRCODE = '22023';
  END IF;
  RETURN p_filter IS NULL
      OR wharf.filter_condition_matches(p_filter, jsonb_build_object('payload', p_payload, 'headers', p_headers));
END $$;

-- Whether event type p_type matches one of patterns p_patterns, in which `*`
-- stands for any run of characters (`pull_request.*`, `issue*`, `*`); true
-- for NULL patterns.
CREATE OR REPLACE FUNCTION wharf.event_type_matches(p_patterns text[], p_type text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT p_patterns IS NULL
      OR EXISTS (SELECT FROM unnest(p_patterns) p
                  WHERE p_type LIKE replace(replace(replace(replace(p, '\', '\\'), '%', '\%'), '_', '\_'), '*', '%'))
$$;

-- ============================================================ routing

-- The advisory lock of (destination, scope) that routing holds shared and a
-- promotion exclusive (see the top of this file). Internal.
CREATE OR REPLACE FUNCTION wharf.delivery_scope_key(p_destination_id bigint, p_scope_key text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT wharf.lifecycle_key('delivery-scope', p_destination_id || ' ' || p_scope_key)
$$;

-- Routes the stored events p_ids (their ids, in any order) to the
-- destinations whose rules they match: one QUEUED delivery per (event,
-- matched destination), made in event order, due at once when it heads its
-- (destination, scope) and 'infinity' (waiting) behind a head; an event
-- matched by a forward_only rule is DONE for the workspace's handlers
-- (outcome 'forwarded'); what a rule's filter alone left out is counted per
-- rule and minute. Wakes the forwarders (channel wharf_delivery) when it made
-- a delivery. Internal: admission's, for the workspaces that have rules.
CREATE OR REPLACE FUNCTION wharf.route_events(p_ids bigint[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_events       bigint[];
  v_rules        bigint[];
  v_destinations bigint[];
  v_passed       boolean[];
  v_made         integer;
BEGIN
  SELECT coalesce(array_agg(e.id ORDER BY e.id, r.id), '{}'), array_agg(r.id ORDER BY e.id, r.id),
         array_agg(r.destination_id ORDER BY e.id, r.id),
         array_agg(wharf.filter_matches(r.filter, e.payload, e.headers) ORDER BY e.id, r.id)
    INTO v_events, v_rules, v_destinations, v_passed
    FROM wharf.provider_event e
    JOIN wharf.destination_rule r ON r.workspace_id = e.workspace_id
   WHERE e.id = ANY (p_ids)
     AND (r.connection_id IS NULL OR r.connection_id = e.connection_id)
     AND (r.provider IS NULL OR r.provider = e.provider)
     AND wharf.event_type_matches(r.event_types, e.event_type)
     AND (r.subject_prefix IS NULL OR starts_with(e.subject, r.subject_prefix));
  IF cardinality(v_events) = 0 THEN
    RETURN 0;
  END IF;

  -- Before reading whether a head exists, in key order (top of this file).
  PERFORM pg_advisory_xact_lock_shared(k.key)
     FROM (SELECT DISTINCT wharf.delivery_scope_key(m.destination_id, e.scope_key) AS key
             FROM unnest(v_events, v_destinations, v_passed) AS m(event_id, destination_id, passed)
             JOIN wharf.provider_event e ON e.id = m.event_id
            WHERE m.passed
            ORDER BY 1) k;

  WITH matched AS (
    SELECT DISTINCT ON (m.event_id, m.destination_id) m.event_id, m.destination_id, e.workspace_id, e.scope_key,
           d.ordered
      FROM unnest(v_events, v_destinations, v_passed) AS m(event_id, destination_id, passed)
      JOIN wharf.provider_event e ON e.id = m.event_id
      JOIN wharf.destination d ON d.id = m.destination_id
     WHERE m.passed
     ORDER BY m.event_id, m.destination_id
  )
  INSERT INTO wharf.destination_delivery (event_id, destination_id, workspace_id, scope_key, ordered, next_attempt_at)
  SELECT m.event_id, m.destination_id, m.workspace_id, m.scope_key, m.ordered,
         CASE WHEN m.ordered
                   AND (row_number() OVER (PARTITION BY m.destination_id, m.scope_key ORDER BY m.event_id) > 1
                        OR EXISTS (SELECT FROM wharf.destination_delivery o
                                    WHERE o.destination_id = m.destination_id AND o.scope_key = m.scope_key
                                      AND o.ordered AND o.state IN ('QUEUED', 'LEASED')))
              THEN 'infinity' ELSE clock_timestamp() END
    FROM matched m
   ORDER BY m.event_id, m.destination_id
  ON CONFLICT (event_id, destination_id) DO NOTHING;
  GET DIAGNOSTICS v_made = ROW_COUNT;

  UPDATE wharf.provider_event e
     SET state = 'DONE', outcome = 'forwarded', handled_at = clock_timestamp()
   WHERE e.id IN (SELECT m.event_id
                    FROM unnest(v_events, v_rules, v_passed) AS m(event_id, rule_id, passed)
                    JOIN wharf.destination_rule r ON r.id = m.rule_id
                   WHERE m.passed AND r.forward_only)
     AND e.state = 'QUEUED';

  -- In rule order: two admissions counting into the same rows take their
  -- locks in one order.
  INSERT INTO wharf.rule_filtered_minute AS f (rule_id, minute, filtered)
  SELECT m.rule_id, date_trunc('minute', clock_timestamp()), count(*)
    FROM unnest(v_rules, v_passed) AS m(rule_id, passed) WHERE NOT m.passed
   GROUP BY m.rule_id ORDER BY m.rule_id
  ON CONFLICT (rule_id, minute) DO UPDATE SET filtered = f.filtered + excluded.filtered;

  IF v_made > 0 THEN
    PERFORM pg_notify('wharf_delivery', '');
  END IF;
  RETURN v_made;
END $$;

-- Makes the first QUEUED delivery of (p_destination_id, p_scope_key) due at
-- once when it was waiting ('infinity'): its head's turn ended. Under the
-- (destination, scope)'s advisory lock, exclusive, so that a delivery being
-- routed behind the ended head has committed first (top of this file).
-- Internal: what ends a head's turn calls it, in key order when several.
CREATE OR REPLACE FUNCTION wharf.promote_next_delivery(p_destination_id bigint, p_scope_key text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(wharf.delivery_scope_key(p_destination_id, p_scope_key));
  UPDATE wharf.destination_delivery q
     SET next_attempt_at = clock_timestamp()
   WHERE q.id = (SELECT o.id FROM wharf.destination_delivery o
                  WHERE o.destination_id = p_destination_id AND o.scope_key = p_scope_key AND o.ordered
                    AND o.state IN ('QUEUED', 'LEASED')
                  ORDER BY o.event_id LIMIT 1)
     AND q.state = 'QUEUED' AND q.next_attempt_at = 'infinity';
END $$;

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

DROP TRIGGER IF EXISTS destination_delivery_promote_after_delete ON wharf.destination_delivery;
CREATE TRIGGER destination_delivery_promote_after_delete
  AFTER DELETE ON wharf.destination_delivery
  REFERENCING OLD TABLE AS deliveries_deleted
  FOR EACH STATEMENT EXECUTE FUNCTION wharf.promote_after_deleted_deliveries();

-- Whether any of workspaces p_workspace_ids has a rule: what admission asks
-- before it routes, one index probe (ix_destination_rule_workspace) each.
-- plpgsql for the plan it keeps per session. Internal.
CREATE OR REPLACE FUNCTION wharf.workspaces_route(p_workspace_ids bigint[]) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN EXISTS (SELECT FROM wharf.destination_rule r WHERE r.workspace_id = ANY (p_workspace_ids));
END $$;

-- ============================================================ the lease of a delivery

-- Leases up to p_max deliveries for worker p_worker, and up to p_ahead more
-- that the forwarder keeps to start as its requests end (so that one claim
-- serves several requests), with what the forwarder needs to send each (the
-- sealed secrets, decrypted by the worker; the payload as stored text). A
-- rate-limited destination's deliveries and a probe are only ever leased
-- within p_max, to be sent at once, so that the bucket's rate is the rate
-- requests leave at; send_now marks the rows within p_max. A delivery is
-- handed out when its destination has
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
CREATE OR REPLACE FUNCTION wharf.claim_deliveries(p_worker text, p_max integer DEFAULT 1, p_ahead integer DEFAULT 0)
RETURNS TABLE (delivery_id bigint, epoch bigint, attempt integer, event_id bigint, destination_id bigint,
               url text, timeout_ms integer, signing_secret text, previous_signing_secret text,
               credentials text, extra_headers jsonb, provider text, event_type text, subject text,
               delivery_key text, event_headers jsonb, payload text, received_at timestamptz, probe boolean,
               send_now boolean)
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
           e.headers, e.payload::text, e.received_at, v_dest.state = 'BREAKER_OPEN',
           -- Within p_max: to be sent at once (all of a rate-limited destination's, and a probe).
           row_number() OVER (ORDER BY l.event_id) <= v_left
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

-- When a claim_deliveries could next hand something out: the earliest due
-- time of a queued delivery of a destination that may send, or of a probe,
-- or of a rate limit's next token; NULL when nothing waits. The forwarder
-- sleeps until then (or a wake-up). It may be early (a head held back by a
-- paused connection), never late.
CREATE OR REPLACE FUNCTION wharf.next_delivery_at() RETURNS timestamptz
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT nullif(min(greatest(
           q.due,
           CASE WHEN d.state = 'BREAKER_OPEN' THEN d.probe_at END,
           CASE WHEN d.rate_limit IS NOT NULL AND d.tokens < 1 THEN
             d.tokens_at + (1 - d.tokens) * CASE d.rate_period WHEN 'minute' THEN 60 ELSE 1 END
                           / d.rate_limit * interval '1 second' END)), 'infinity')
    FROM wharf.destination d
    JOIN wharf.workspace w ON w.id = d.workspace_id AND w.state = 'ACTIVE'
    CROSS JOIN LATERAL (SELECT min(x.next_attempt_at) AS due FROM wharf.destination_delivery x
                         WHERE x.destination_id = d.id AND x.state = 'QUEUED') q
   WHERE d.signing_secret IS NOT NULL AND d.state <> 'PAUSED' AND q.due IS NOT NULL
$$;

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

-- Delivery p_id, LEASED under p_epoch, was answered 2xx: complete_deliveries
-- of one. True; false when the lease is gone, unless this epoch's lease was
-- completed before (a repeat whose first reply was lost).
CREATE OR REPLACE FUNCTION wharf.complete_delivery(
  p_id bigint, p_epoch bigint, p_status integer, p_duration_ms integer, p_response text)
RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT (wharf.complete_deliveries(ARRAY[p_id], ARRAY[p_epoch], ARRAY[p_status], ARRAY[p_duration_ms], ARRAY[p_response]))[1]
$$;

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

-- A stopping forwarder gives delivery p_id, LEASED under p_epoch, back:
-- QUEUED, due at once, attempt as before the claim. True; false when the
-- lease is gone, unless this epoch's lease was released before.
CREATE OR REPLACE FUNCTION wharf.release_delivery(p_id bigint, p_epoch bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_now timestamptz := clock_timestamp();
  v_row record;
BEGIN
  UPDATE wharf.destination_delivery q
     SET state = 'QUEUED', attempt = q.attempt - 1, leased_until = NULL, next_attempt_at = v_now
   WHERE q.id = p_id AND q.lease_epoch = p_epoch AND q.state = 'LEASED'
  RETURNING q.destination_id, q.attempt + 1 AS attempt, q.leased_by, q.leased_at INTO v_row;
  IF NOT FOUND THEN
    RETURN EXISTS (SELECT FROM wharf.delivery_attempt h
                    WHERE h.delivery_id = p_id AND h.lease_epoch = p_epoch AND h.ended = 'released');
  END IF;
  INSERT INTO wharf.delivery_attempt (delivery_id, lease_epoch, destination_id, attempt, worker, started_at,
                                      ended_at, ended, left_state)
  VALUES (p_id, p_epoch, v_row.destination_id, v_row.attempt, v_row.leased_by, v_row.leased_at,
          v_now, 'released', 'QUEUED');
  PERFORM pg_notify('wharf_delivery', '');
  RETURN true;
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

-- ============================================================ the operator's destinations

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

-- Whether JSON value p_value is an integer from p_low to p_high. Internal.
CREATE OR REPLACE FUNCTION wharf.json_integer_between(p_value jsonb, p_low bigint, p_high bigint) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_typeof(p_value) = 'number' AND p_value::numeric = trunc(p_value::numeric)
     AND p_value::numeric BETWEEN p_low AND p_high
$$;

-- Destination d as the operator surface shows it: its settings, state and
-- figures (queued and dead, counted up to 10000; leased; over the last
-- hour, or its latest 10000 attempts, delivered, failed, success rate,
-- latency p50/p99; delivered in the last minute), never a secret. Internal.
CREATE OR REPLACE FUNCTION wharf.destination_summary(d wharf.destination) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', d.id, 'workspace_id', d.workspace_id, 'name', d.name, 'url', d.url, 'timeout_ms', d.timeout_ms,
    'rate_limit', d.rate_limit, 'rate_period', d.rate_period, 'max_in_flight', d.max_in_flight,
    'ordered', d.ordered, 'headers', d.headers, 'breaker_failures', d.breaker_failures,
    'breaker_minutes', d.breaker_minutes, 'state', d.state, 'paused_reason', d.paused_reason,
    'paused_by', d.paused_by, 'consecutive_failures', d.consecutive_failures,
    'failing_since', d.failing_since, 'probe_at', d.probe_at,
    'has_secret', d.signing_secret IS NOT NULL,
    'has_credentials', d.credentials IS NOT NULL, 'credentials_type', d.credentials_type,
    'secret_rotating_until', CASE WHEN d.previous_valid_until > now() THEN d.previous_valid_until END,
    'created_at', d.created_at, 'updated_at', d.updated_at,
    'stats', (
      -- Bounded whatever the traffic: the deliveries waiting and dead are
      -- counted up to 10000 (queued_capped, dead_capped), and the last hour's
      -- figures read its latest 10000 attempts at most (ix_delivery_attempt_destination,
      -- backwards; last_hour_sampled says when the hour held more).
      WITH recent AS (
        SELECT a.ended, a.ended_at, a.duration_ms FROM wharf.delivery_attempt a
         WHERE a.destination_id = d.id AND a.ended_at > now() - interval '1 hour'
         ORDER BY a.ended_at DESC
         LIMIT 10000
      ), waiting AS (
        SELECT (SELECT count(*) FROM (SELECT FROM wharf.destination_delivery q
                                       WHERE q.destination_id = d.id AND q.state = 'QUEUED' LIMIT 10000) x) AS queued,
               (SELECT count(*) FROM (SELECT FROM wharf.destination_delivery q
                                       WHERE q.destination_id = d.id AND q.state = 'DEAD' LIMIT 10000) x) AS dead
      )
      SELECT jsonb_build_object(
        'queued', w.queued, 'queued_capped', w.queued >= 10000,
        'leased', (SELECT count(*) FROM wharf.destination_delivery q WHERE q.destination_id = d.id AND q.state = 'LEASED'),
        'dead', w.dead, 'dead_capped', w.dead >= 10000,
        'delivered_last_hour', count(r.*) FILTER (WHERE r.ended = 'handled'),
        'failed_last_hour', count(r.*) FILTER (WHERE r.ended IN ('transient', 'permanent', 'gone', 'expired')),
        'last_hour_sampled', count(r.*) >= 10000,
        -- The last minute's successes; when the sample spans less than that, its rate scaled to a minute.
        'per_minute', CASE WHEN count(r.*) >= 10000 AND min(r.ended_at) > now() - interval '1 minute'
                           THEN round(count(r.*) FILTER (WHERE r.ended = 'handled') * 60
                                      / greatest(extract(epoch FROM now() - min(r.ended_at)), 0.001))::bigint
                           ELSE count(r.*) FILTER (WHERE r.ended = 'handled' AND r.ended_at > now() - interval '1 minute') END,
        'success_rate', round(count(r.*) FILTER (WHERE r.ended = 'handled')::numeric
                              / nullif(count(r.*) FILTER (WHERE r.ended <> 'released'), 0), 4),
        'latency_p50_ms', percentile_cont(0.5) WITHIN GROUP (ORDER BY r.duration_ms)
                            FILTER (WHERE r.duration_ms IS NOT NULL),
        'latency_p99_ms', percentile_cont(0.99) WITHIN GROUP (ORDER BY r.duration_ms)
                            FILTER (WHERE r.duration_ms IS NOT NULL),
        'filtered_last_hour', (SELECT coalesce(sum(f.filtered), 0) FROM wharf.rule_filtered_minute f
                                 JOIN wharf.destination_rule dr ON dr.id = f.rule_id
                                WHERE dr.destination_id = d.id AND f.minute > now() - interval '1 hour'))
        FROM waiting w LEFT JOIN recent r ON true
       GROUP BY w.queued, w.dead))
$$;

-- Destination p_id of workspace p_workspace_id, locked for a change; raises
-- P0002 for an unknown workspace; NULL id when it is not one of that
-- workspace's. Internal.
CREATE OR REPLACE FUNCTION wharf.destination_for_change(p_workspace_id bigint, p_id bigint) RETURNS wharf.destination
LANGUAGE plpgsql AS $$
DECLARE
  v_dest wharf.destination;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  SELECT * INTO v_dest FROM wharf.destination WHERE id = p_id AND workspace_id = p_workspace_id FOR NO KEY UPDATE;
  RETURN v_dest;
END $$;

-- Creates a destination of workspace p_workspace_id from spec p_spec (name
-- and url required; see check_destination_spec) and returns it (see
-- destination_summary). It has no signing secret yet and is never claimed
-- until set_destination_secret gives it one: the caller seals the secret
-- with the returned id and sets it in the same transaction. 22023 naming the
-- bad part (a name already used included), P0002 unknown workspace.
CREATE OR REPLACE FUNCTION wharf.create_destination(p_workspace_id bigint, p_spec jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_dest wharf.destination;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  PERFORM wharf.check_destination_spec(p_spec);
  IF NOT (p_spec ? 'name' AND p_spec ? 'url') THEN
    RAISE EXCEPTION 'wharf: destination %: required', CASE WHEN p_spec ? 'name' THEN 'url' ELSE 'name' END
      USING ERRCODE = '22023';
  END IF;
  INSERT INTO wharf.destination (workspace_id, name, url, timeout_ms, rate_limit, rate_period, max_in_flight,
                                 ordered, headers, breaker_failures, breaker_minutes)
  VALUES (p_workspace_id, btrim(p_spec->>'name'), p_spec->>'url', coalesce((p_spec->>'timeout_ms')::integer, 10000),
          (p_spec->>'rate_limit')::integer, coalesce(p_spec->>'rate_period', 'second'),
          coalesce((p_spec->>'max_in_flight')::integer, 10), coalesce((p_spec->>'ordered')::boolean, true),
          coalesce(p_spec->'headers', '{}'), coalesce((p_spec->>'breaker_failures')::integer, 20),
          coalesce((p_spec->>'breaker_minutes')::integer, 10))
  ON CONFLICT ON CONSTRAINT uq_destination_name DO NOTHING
  RETURNING * INTO v_dest;
  IF v_dest.id IS NULL THEN
    RAISE EXCEPTION 'wharf: destination name: % is already used in this workspace', quote_literal(btrim(p_spec->>'name'))
      USING ERRCODE = '22023';
  END IF;
  RETURN wharf.destination_summary(v_dest);
END $$;

-- Changes the settings p_spec gives of destination p_id of workspace
-- p_workspace_id (see check_destination_spec) and returns it; NULL when it
-- is not one of that workspace's. A change of ordered applies to the
-- deliveries still queued. 22023 naming the bad part, P0002 unknown workspace.
CREATE OR REPLACE FUNCTION wharf.update_destination(p_workspace_id bigint, p_id bigint, p_spec jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_dest wharf.destination := wharf.destination_for_change(p_workspace_id, p_id);
BEGIN
  PERFORM wharf.check_destination_spec(p_spec);
  IF v_dest.id IS NULL THEN
    RETURN NULL;
  END IF;
  IF p_spec ? 'name' AND EXISTS (SELECT FROM wharf.destination WHERE workspace_id = p_workspace_id
                                    AND name = btrim(p_spec->>'name') AND id <> p_id) THEN
    RAISE EXCEPTION 'wharf: destination name: % is already used in this workspace', quote_literal(btrim(p_spec->>'name'))
      USING ERRCODE = '22023';
  END IF;
  UPDATE wharf.destination d
     SET name             = coalesce(btrim(p_spec->>'name'), d.name),
         url              = coalesce(p_spec->>'url', d.url),
         timeout_ms       = coalesce((p_spec->>'timeout_ms')::integer, d.timeout_ms),
         rate_limit       = CASE WHEN p_spec ? 'rate_limit' THEN (p_spec->>'rate_limit')::integer ELSE d.rate_limit END,
         rate_period      = coalesce(p_spec->>'rate_period', d.rate_period),
         tokens           = CASE WHEN p_spec ? 'rate_limit' OR p_spec ? 'rate_period' THEN NULL ELSE d.tokens END,
         max_in_flight    = coalesce((p_spec->>'max_in_flight')::integer, d.max_in_flight),
         ordered          = coalesce((p_spec->>'ordered')::boolean, d.ordered),
         headers          = coalesce(p_spec->'headers', d.headers),
         breaker_failures = coalesce((p_spec->>'breaker_failures')::integer, d.breaker_failures),
         breaker_minutes  = coalesce((p_spec->>'breaker_minutes')::integer, d.breaker_minutes),
         updated_at       = now()
   WHERE d.id = p_id
  RETURNING * INTO v_dest;
  -- Unordered, every queued delivery is due; ordered, those behind a head wait.
  UPDATE wharf.destination_delivery q
     SET ordered = v_dest.ordered,
         next_attempt_at = CASE WHEN NOT v_dest.ordered AND q.next_attempt_at = 'infinity' THEN now()
                                WHEN v_dest.ordered AND EXISTS (
                                       SELECT FROM wharf.destination_delivery o
                                        WHERE o.destination_id = p_id AND o.scope_key = q.scope_key
                                          AND o.state IN ('QUEUED', 'LEASED') AND o.event_id < q.event_id)
                                  THEN 'infinity'
                                ELSE q.next_attempt_at END
   WHERE q.destination_id = p_id AND q.state = 'QUEUED' AND q.ordered <> v_dest.ordered;
  RETURN wharf.destination_summary(v_dest);
END $$;

-- Sets the signing secret of destination p_id of workspace p_workspace_id,
-- sealed (aes256gcm:…, by the key ring the database never sees). The secret
-- it replaces keeps signing beside the new one for p_overlap unless
-- p_keep_previous is false (a leaked secret: cut it off at once). Returns the
-- destination; NULL when it is not one of that workspace's. 22004 for a NULL
-- secret, 22023 for one not sealed.
CREATE OR REPLACE FUNCTION wharf.set_destination_secret(
  p_workspace_id bigint, p_id bigint, p_sealed text, p_keep_previous boolean DEFAULT true,
  p_overlap interval DEFAULT '24 hours')
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_dest wharf.destination := wharf.destination_for_change(p_workspace_id, p_id);
BEGIN
  IF p_sealed IS NULL THEN
    RAISE EXCEPTION 'wharf: destination signing secret is required' USING ERRCODE = '22004';
  END IF;
  IF p_sealed NOT LIKE 'aes256gcm:%' THEN
    RAISE EXCEPTION 'wharf: destination signing secret must arrive sealed (aes256gcm:…)' USING ERRCODE = '22023';
  END IF;
  IF v_dest.id IS NULL THEN
    RETURN NULL;
  END IF;
  UPDATE wharf.destination d
     SET previous_signing_secret = CASE WHEN p_keep_previous AND d.signing_secret IS NOT NULL THEN d.signing_secret END,
         previous_valid_until    = CASE WHEN p_keep_previous AND d.signing_secret IS NOT NULL THEN now() + p_overlap END,
         signing_secret          = p_sealed,
         updated_at              = now()
   WHERE d.id = p_id
  RETURNING * INTO v_dest;
  RETURN wharf.destination_summary(v_dest);
END $$;

-- Sets (or, with NULL, clears) the credentials destination p_id of
-- workspace p_workspace_id sends to an endpoint behind an API gateway:
-- sealed JSON, of type p_type ('bearer', 'basic' or 'header'). Returns the
-- destination; NULL when it is not one of that workspace's. 22023 for a
-- value not sealed or an unknown type.
CREATE OR REPLACE FUNCTION wharf.set_destination_credentials(
  p_workspace_id bigint, p_id bigint, p_sealed text, p_type text)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_dest wharf.destination := wharf.destination_for_change(p_workspace_id, p_id);
BEGIN
  IF p_sealed IS NOT NULL AND p_sealed NOT LIKE 'aes256gcm:%' THEN
    RAISE EXCEPTION 'wharf: destination credentials must arrive sealed (aes256gcm:…)' USING ERRCODE = '22023';
  END IF;
  IF p_sealed IS NOT NULL AND p_type IS DISTINCT FROM 'bearer' AND p_type IS DISTINCT FROM 'basic'
     AND p_type IS DISTINCT FROM 'header' THEN
    RAISE EXCEPTION 'wharf: destination credentials type: bearer, basic or header' USING ERRCODE = '22023';
  END IF;
  IF v_dest.id IS NULL THEN
    RETURN NULL;
  END IF;
  UPDATE wharf.destination d
     SET credentials = p_sealed, credentials_type = CASE WHEN p_sealed IS NOT NULL THEN p_type END, updated_at = now()
   WHERE d.id = p_id
  RETURNING * INTO v_dest;
  RETURN wharf.destination_summary(v_dest);
END $$;

-- Pauses (p_state 'PAUSED': its deliveries wait) or resumes ('ACTIVE')
-- destination p_id of workspace p_workspace_id, recording p_account; a
-- resume also closes an open breaker and ends a 410's pause at once, and
-- wakes the forwarders. Returns the destination; NULL when it is not one of
-- that workspace's. 22023 for another state.
CREATE OR REPLACE FUNCTION wharf.set_destination_state(
  p_workspace_id bigint, p_id bigint, p_state text, p_account text)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_dest wharf.destination := wharf.destination_for_change(p_workspace_id, p_id);
BEGIN
  IF p_state IS DISTINCT FROM 'ACTIVE' AND p_state IS DISTINCT FROM 'PAUSED' THEN
    RAISE EXCEPTION 'wharf: destination state: ACTIVE or PAUSED' USING ERRCODE = '22023';
  END IF;
  IF v_dest.id IS NULL THEN
    RETURN NULL;
  END IF;
  UPDATE wharf.destination d
     SET state = p_state,
         paused_reason = CASE WHEN p_state = 'PAUSED' THEN 'operator' END,
         paused_by = CASE WHEN p_state = 'PAUSED' THEN p_account END,
         consecutive_failures = CASE WHEN p_state = 'ACTIVE' THEN 0 ELSE d.consecutive_failures END,
         failing_since = CASE WHEN p_state = 'ACTIVE' THEN NULL ELSE d.failing_since END,
         probe_at = NULL, updated_at = now()
   WHERE d.id = p_id
  RETURNING * INTO v_dest;
  IF p_state = 'ACTIVE' THEN
    PERFORM pg_notify('wharf_delivery', '');
  END IF;
  RETURN wharf.destination_summary(v_dest);
END $$;

-- Deletes destination p_id of workspace p_workspace_id with its rules and
-- deliveries (the events stay); false when it is not one of that
-- workspace's. P0002 unknown workspace.
CREATE OR REPLACE FUNCTION wharf.delete_destination(p_workspace_id bigint, p_id bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  DELETE FROM wharf.destination WHERE id = p_id AND workspace_id = p_workspace_id;
  RETURN FOUND;
END $$;

-- The destinations of workspace p_workspace_id by name (see
-- destination_summary). P0002 unknown workspace.
CREATE OR REPLACE FUNCTION wharf.list_destinations(p_workspace_id bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN (SELECT coalesce(jsonb_agg(wharf.destination_summary(d) ORDER BY d.name, d.id), '[]')
            FROM wharf.destination d WHERE d.workspace_id = p_workspace_id);
END $$;

-- Destination p_id of workspace p_workspace_id (see destination_summary);
-- NULL when it is not one of that workspace's.
CREATE OR REPLACE FUNCTION wharf.show_destination(p_workspace_id bigint, p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.destination_summary(d) FROM wharf.destination d WHERE d.id = p_id AND d.workspace_id = p_workspace_id
$$;

-- ============================================================ the operator's rules

-- Rule r as the operator surface shows it. Internal.
CREATE OR REPLACE FUNCTION wharf.rule_summary(r wharf.destination_rule) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', r.id, 'workspace_id', r.workspace_id, 'destination_id', r.destination_id,
    'connection_id', r.connection_id, 'provider', r.provider, 'event_types', to_jsonb(r.event_types),
    'subject_prefix', r.subject_prefix, 'filter', r.filter, 'forward_only', r.forward_only,
    'filtered_last_hour', (SELECT coalesce(sum(f.filtered), 0) FROM wharf.rule_filtered_minute f
                            WHERE f.rule_id = r.id AND f.minute > now() - interval '1 hour'),
    'created_at', r.created_at, 'updated_at', r.updated_at)
$$;

-- Raises 22023 naming the first problem of rule spec p_spec in workspace
-- p_workspace_id (keys: destination_id, connection_id, provider,
-- event_types, subject_prefix, filter, forward_only; the destination and the
-- connection must be the workspace's). Internal.
CREATE OR REPLACE FUNCTION wharf.check_rule_spec(p_workspace_id bigint, p_spec jsonb) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_problem text;
  v_key     text;
BEGIN
  IF jsonb_typeof(p_spec) IS DISTINCT FROM 'object' THEN
    RAISE EXCEPTION 'wharf: rule: must be an object' USING ERRCODE = '22023';
  END IF;
  SELECT min(k) INTO v_key FROM jsonb_object_keys(p_spec) k
   WHERE k NOT IN ('destination_id', 'connection_id', 'provider', 'event_types', 'subject_prefix', 'filter',
                   'forward_only');
  v_problem := CASE
    WHEN v_key IS NOT NULL THEN v_key || ': unknown setting'
    WHEN p_spec ? 'destination_id' AND NOT EXISTS (
           SELECT FROM wharf.destination d
            WHERE d.id = CASE WHEN wharf.json_integer_between(p_spec->'destination_id', 1, 9223372036854775807)
                              THEN (p_spec->>'destination_id')::bigint END
              AND d.workspace_id = p_workspace_id)
      THEN 'destination_id: no such destination in this workspace'
    WHEN p_spec ? 'connection_id' AND p_spec->'connection_id' <> 'null' AND NOT EXISTS (
           SELECT FROM wharf.connection c
            WHERE c.id = CASE WHEN wharf.json_integer_between(p_spec->'connection_id', 1, 9223372036854775807)
                              THEN (p_spec->>'connection_id')::bigint END
              AND c.workspace_id = p_workspace_id)
      THEN 'connection_id: no such connection in this workspace'
    WHEN p_spec ? 'provider' AND p_spec->'provider' <> 'null'
         AND NOT wharf.provider_known(p_spec->>'provider')
      THEN 'provider: unknown provider'
    WHEN p_spec ? 'event_types' AND p_spec->'event_types' <> 'null'
         AND (jsonb_typeof(p_spec->'event_types') <> 'array' OR jsonb_array_length(p_spec->'event_types') NOT BETWEEN 1 AND 100
              OR EXISTS (SELECT FROM jsonb_array_elements(p_spec->'event_types') t
                          WHERE jsonb_typeof(t) <> 'string' OR t #>> '{}' !~ '^[^[:cntrl:]]{1,255}$'))
      THEN 'event_types: null or 1 to 100 patterns of 1 to 255 characters (* stands for any run)'
    WHEN p_spec ? 'subject_prefix' AND p_spec->'subject_prefix' <> 'null'
         AND (jsonb_typeof(p_spec->'subject_prefix') <> 'string' OR p_spec->>'subject_prefix' !~ '^[^[:cntrl:]]{1,255}$')
      THEN 'subject_prefix: null or 1 to 255 characters'
    WHEN p_spec ? 'forward_only' AND jsonb_typeof(p_spec->'forward_only') <> 'boolean'
      THEN 'forward_only: true or false'
    WHEN p_spec ? 'filter' AND p_spec->'filter' <> 'null'
      THEN wharf.filter_problem(p_spec->'filter')
  END;
  IF v_problem IS NOT NULL THEN
    RAISE EXCEPTION 'wharf: rule %', v_problem USING ERRCODE = '22023';
  END IF;
END $$;

-- Creates a rule of workspace p_workspace_id from p_spec (destination_id
-- required; see check_rule_spec) and returns it. It routes the events
-- admitted after it commits. 22023 naming the bad part, P0002 unknown workspace.
CREATE OR REPLACE FUNCTION wharf.create_destination_rule(p_workspace_id bigint, p_spec jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_rule wharf.destination_rule;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  PERFORM wharf.check_rule_spec(p_workspace_id, p_spec);
  IF NOT p_spec ? 'destination_id' THEN
    RAISE EXCEPTION 'wharf: rule destination_id: required' USING ERRCODE = '22023';
  END IF;
  INSERT INTO wharf.destination_rule (workspace_id, destination_id, connection_id, provider, event_types,
                                      subject_prefix, filter, forward_only)
  VALUES (p_workspace_id, (p_spec->>'destination_id')::bigint, (p_spec->>'connection_id')::bigint,
          p_spec->>'provider',
          CASE WHEN jsonb_typeof(p_spec->'event_types') = 'array'
               THEN ARRAY(SELECT jsonb_array_elements_text(p_spec->'event_types')) END,
          p_spec->>'subject_prefix', nullif(p_spec->'filter', 'null'),
          coalesce((p_spec->>'forward_only')::boolean, false))
  RETURNING * INTO v_rule;
  RETURN wharf.rule_summary(v_rule);
END $$;

-- Changes what p_spec gives of rule p_id of workspace p_workspace_id (a key
-- given as null clears that criterion) and returns it; NULL when it is not
-- one of that workspace's. 22023 naming the bad part.
CREATE OR REPLACE FUNCTION wharf.update_destination_rule(p_workspace_id bigint, p_id bigint, p_spec jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_rule wharf.destination_rule;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  PERFORM wharf.check_rule_spec(p_workspace_id, p_spec);
  IF p_spec->'destination_id' = 'null' THEN
    RAISE EXCEPTION 'wharf: rule destination_id: required' USING ERRCODE = '22023';
  END IF;
  UPDATE wharf.destination_rule r
     SET destination_id = coalesce((p_spec->>'destination_id')::bigint, r.destination_id),
         connection_id  = CASE WHEN p_spec ? 'connection_id' THEN (p_spec->>'connection_id')::bigint ELSE r.connection_id END,
         provider       = CASE WHEN p_spec ? 'provider' THEN p_spec->>'provider' ELSE r.provider END,
         event_types    = CASE WHEN p_spec ? 'event_types'
                               THEN CASE WHEN jsonb_typeof(p_spec->'event_types') = 'array'
                                         THEN ARRAY(SELECT jsonb_array_elements_text(p_spec->'event_types')) END
                               ELSE r.event_types END,
         subject_prefix = CASE WHEN p_spec ? 'subject_prefix' THEN p_spec->>'subject_prefix' ELSE r.subject_prefix END,
         filter         = CASE WHEN p_spec ? 'filter' THEN nullif(p_spec->'filter', 'null') ELSE r.filter END,
         forward_only   = coalesce((p_spec->>'forward_only')::boolean, r.forward_only),
         updated_at     = now()
   WHERE r.id = p_id AND r.workspace_id = p_workspace_id
  RETURNING * INTO v_rule;
  RETURN CASE WHEN v_rule.id IS NOT NULL THEN wharf.rule_summary(v_rule) END;
END $$;

-- Deletes rule p_id of workspace p_workspace_id; false when it is not one of
-- that workspace's. Deliveries it made stay.
CREATE OR REPLACE FUNCTION wharf.delete_destination_rule(p_workspace_id bigint, p_id bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  DELETE FROM wharf.destination_rule WHERE id = p_id AND workspace_id = p_workspace_id;
  RETURN FOUND;
END $$;

-- The rules of workspace p_workspace_id (of destination p_destination_id
-- when given), oldest first. P0002 unknown workspace.
CREATE OR REPLACE FUNCTION wharf.list_destination_rules(p_workspace_id bigint, p_destination_id bigint DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN (SELECT coalesce(jsonb_agg(wharf.rule_summary(r) ORDER BY r.id), '[]')
            FROM wharf.destination_rule r
           WHERE r.workspace_id = p_workspace_id
             AND (p_destination_id IS NULL OR r.destination_id = p_destination_id));
END $$;

-- Whether filter p_filter matches event p_event_id of workspace
-- p_workspace_id, as a rule would: {"matched": true|false}; NULL when the
-- event is not one of that workspace's. 22023 naming the problem of a bad filter.
CREATE OR REPLACE FUNCTION wharf.test_destination_filter(p_workspace_id bigint, p_filter jsonb, p_event_id bigint)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_problem text := wharf.filter_problem(p_filter);
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF v_problem IS NOT NULL THEN
    RAISE EXCEPTION 'wharf: %', v_problem USING ERRCODE = '22023';
  END IF;
  RETURN (SELECT jsonb_build_object('matched', wharf.filter_matches(p_filter, e.payload, e.headers))
            FROM wharf.provider_event e WHERE e.id = p_event_id AND e.workspace_id = p_workspace_id);
END $$;

-- ============================================================ the operator's deliveries

-- Delivery q as a listing shows it, with its event's facts. Internal.
CREATE OR REPLACE FUNCTION wharf.delivery_summary(q wharf.destination_delivery) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', q.id, 'event_id', q.event_id, 'destination_id', q.destination_id, 'state', q.state,
    'attempt', q.attempt, 'failures', q.failures,
    -- Behind its scope's head it has no time of its own: it waits its turn.
    'next_attempt_at', nullif(q.next_attempt_at, 'infinity'), 'waiting_behind_head', q.next_attempt_at = 'infinity',
    'error_class', q.error_class, 'outcome', q.outcome, 'last_status', q.last_status,
    'handled_at', q.handled_at, 'dead_at', q.dead_at, 'replayed_by', q.replayed_by,
    'replayed_at', q.replayed_at, 'provider', e.provider, 'event_type', e.event_type, 'subject', e.subject,
    'received_at', e.received_at)
    FROM wharf.provider_event e WHERE e.id = q.event_id
$$;

-- The deliveries of destination p_destination_id of workspace
-- p_workspace_id, newest first, of state p_state when given, at most p_limit
-- (1..500), older than p_before_id when given: {deliveries, next_cursor};
-- NULL when the destination is not one of that workspace's. 22023 for an
-- unknown state or a limit outside 1..500.
CREATE OR REPLACE FUNCTION wharf.list_deliveries(
  p_workspace_id bigint, p_destination_id bigint, p_state text DEFAULT NULL, p_limit integer DEFAULT 50,
  p_before_id bigint DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_page jsonb;
BEGIN
  IF p_state IS NOT NULL AND p_state NOT IN ('QUEUED', 'LEASED', 'DONE', 'DEAD') THEN
    RAISE EXCEPTION 'wharf: delivery state: QUEUED, LEASED, DONE or DEAD' USING ERRCODE = '22023';
  END IF;
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 500 THEN
    RAISE EXCEPTION 'wharf: limit: from 1 to 500' USING ERRCODE = '22023';
  END IF;
  IF NOT EXISTS (SELECT FROM wharf.destination WHERE id = p_destination_id AND workspace_id = p_workspace_id) THEN
    RETURN NULL;
  END IF;
  SELECT coalesce(jsonb_agg(wharf.delivery_summary(q) ORDER BY q.id DESC), '[]') INTO v_page
    FROM (SELECT * FROM wharf.destination_delivery q
           WHERE q.destination_id = p_destination_id
             AND (p_state IS NULL OR q.state = p_state)
             AND (p_before_id IS NULL OR q.id < p_before_id)
           ORDER BY q.id DESC LIMIT p_limit) q;
  RETURN jsonb_build_object('deliveries', v_page,
                            'next_cursor', CASE WHEN jsonb_array_length(v_page) = p_limit
                                                THEN v_page -> (p_limit - 1) -> 'id' END);
END $$;

-- Delivery p_id of workspace p_workspace_id with its attempts (status,
-- duration, at most 1 KB of the answer); NULL when it is not one of that
-- workspace's.
CREATE OR REPLACE FUNCTION wharf.show_delivery(p_workspace_id bigint, p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.delivery_summary(q) || jsonb_build_object(
           'webhook_id', 'wd_' || q.id,
           'attempts', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                          'attempt', a.attempt, 'epoch', a.lease_epoch, 'worker', a.worker,
                          'started_at', a.started_at, 'ended_at', a.ended_at, 'ended', a.ended,
                          'error_class', a.error_class, 'status', a.status, 'duration_ms', a.duration_ms,
                          'response', a.response) ORDER BY a.lease_epoch), '[]')
                          FROM wharf.delivery_attempt a WHERE a.delivery_id = q.id))
    FROM wharf.destination_delivery q WHERE q.id = p_id AND q.workspace_id = p_workspace_id
$$;

-- Every destination delivery of event p_event_id of workspace
-- p_workspace_id, with its destination's name (the event page); NULL when
-- the event is not one of that workspace's.
CREATE OR REPLACE FUNCTION wharf.event_deliveries(p_workspace_id bigint, p_event_id bigint) RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT (SELECT coalesce(jsonb_agg(wharf.delivery_summary(q) || jsonb_build_object('destination_name', d.name)
                                    ORDER BY q.destination_id), '[]')
            FROM wharf.destination_delivery q JOIN wharf.destination d ON d.id = q.destination_id
           WHERE q.event_id = e.id)
    FROM wharf.provider_event e WHERE e.id = p_event_id AND e.workspace_id = p_workspace_id
$$;

-- Replays DEAD delivery p_id of workspace p_workspace_id: QUEUED, due at
-- once, attempt 0, failures 0, error class kept as its last cause, recorded
-- as replayed by p_account. It keeps its id, so its webhook-id, and heads its
-- (destination, scope) again. False when it is not a DEAD delivery of that
-- workspace.
CREATE OR REPLACE FUNCTION wharf.replay_delivery(p_workspace_id bigint, p_id bigint, p_account text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  UPDATE wharf.destination_delivery q
     SET state = 'QUEUED', attempt = 0, failures = 0, dead_at = NULL, outcome = NULL, transient_since = NULL,
         next_attempt_at = clock_timestamp(), replayed_by = p_account, replayed_at = clock_timestamp()
   WHERE q.id = p_id AND q.workspace_id = p_workspace_id AND q.state = 'DEAD';
  IF FOUND THEN
    PERFORM pg_notify('wharf_delivery', '');
  END IF;
  RETURN FOUND;
END $$;

-- The DEAD deliveries of destination p_destination_id of workspace
-- p_workspace_id that filter p_filter selects: event_type, error_class,
-- dead_after, dead_before (each optional). Internal.
CREATE OR REPLACE FUNCTION wharf.dead_deliveries(p_workspace_id bigint, p_destination_id bigint, p_filter jsonb)
RETURNS SETOF wharf.destination_delivery
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_key text;
BEGIN
  SELECT min(k) INTO v_key FROM jsonb_object_keys(coalesce(p_filter, '{}')) k
   WHERE k NOT IN ('event_type', 'error_class', 'dead_after', 'dead_before');
  IF v_key IS NOT NULL THEN
    RAISE EXCEPTION 'wharf: replay filter %: unknown (event_type, error_class, dead_after, dead_before)', v_key
      USING ERRCODE = '22023';
  END IF;
  RETURN QUERY
  SELECT q.* FROM wharf.destination_delivery q
   WHERE q.destination_id = p_destination_id AND q.workspace_id = p_workspace_id AND q.state = 'DEAD'
     AND (p_filter->>'error_class' IS NULL OR q.error_class = p_filter->>'error_class')
     AND (p_filter->>'dead_after' IS NULL OR q.dead_at >= (p_filter->>'dead_after')::timestamptz)
     AND (p_filter->>'dead_before' IS NULL OR q.dead_at < (p_filter->>'dead_before')::timestamptz)
     AND (p_filter->>'event_type' IS NULL
          OR EXISTS (SELECT FROM wharf.provider_event e WHERE e.id = q.event_id AND e.event_type = p_filter->>'event_type'));
END $$;

-- How many DEAD deliveries of destination p_destination_id of workspace
-- p_workspace_id filter p_filter selects (see dead_deliveries): what a bulk
-- replay shows before it starts. 22023 for an unknown filter key.
CREATE OR REPLACE FUNCTION wharf.count_dead_deliveries(p_workspace_id bigint, p_destination_id bigint, p_filter jsonb)
RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT count(*) FROM wharf.dead_deliveries(p_workspace_id, p_destination_id, p_filter)
$$;

-- Replays, as replay_delivery does, at most p_batch (1..5000) of the DEAD
-- deliveries filter p_filter selects (see dead_deliveries), in id order, and
-- returns how many; the caller repeats until 0, so that each transaction
-- stays short. 22023 for an unknown filter key or a batch outside 1..5000.
CREATE OR REPLACE FUNCTION wharf.replay_deliveries(
  p_workspace_id bigint, p_destination_id bigint, p_filter jsonb, p_account text, p_batch integer DEFAULT 500)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_count bigint;
BEGIN
  IF p_batch IS NULL OR p_batch NOT BETWEEN 1 AND 5000 THEN
    RAISE EXCEPTION 'wharf: batch: from 1 to 5000' USING ERRCODE = '22023';
  END IF;
  UPDATE wharf.destination_delivery q
     SET state = 'QUEUED', attempt = 0, failures = 0, dead_at = NULL, outcome = NULL, transient_since = NULL,
         next_attempt_at = clock_timestamp(), replayed_by = p_account, replayed_at = clock_timestamp()
   WHERE q.id IN (SELECT d.id FROM wharf.dead_deliveries(p_workspace_id, p_destination_id, p_filter) d
                   ORDER BY d.id LIMIT p_batch)
     AND q.state = 'DEAD';
  GET DIAGNOSTICS v_count = ROW_COUNT;
  IF v_count > 0 THEN
    PERFORM pg_notify('wharf_delivery', '');
  END IF;
  RETURN v_count;
END $$;

-- Retention of what forwarding adds besides the deliveries (which go with
-- their event): at most p_batch rule_filtered_minute rows older than
-- log_retention. Returns how many it deleted. Internal: purge_logs'.
CREATE OR REPLACE FUNCTION wharf.purge_forwarding(p_batch integer) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_deleted bigint;
BEGIN
  DELETE FROM wharf.rule_filtered_minute f
   WHERE (f.rule_id, f.minute) IN (SELECT x.rule_id, x.minute FROM wharf.rule_filtered_minute x
                                    WHERE x.minute < now() - wharf.setting_interval('log_retention')
                                    LIMIT p_batch);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  RETURN v_deleted;
END $$;

-- Whether event p_event_id's deliveries let purge delete it (and them, by
-- cascade): each is DONE before p_done_before or DEAD before p_dead_before,
-- the same retention as the event's own; true for an event with none. One
-- probe of uq_destination_delivery_event. Internal: purge's.
CREATE OR REPLACE FUNCTION wharf.deliveries_purgeable(p_event_id bigint, p_done_before timestamptz,
                                                      p_dead_before timestamptz)
RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT NOT EXISTS (SELECT FROM wharf.destination_delivery q
                      WHERE q.event_id = p_event_id
                        AND NOT ((q.state = 'DONE' AND q.handled_at < p_done_before)
                                 OR (q.state = 'DEAD' AND q.dead_at < p_dead_before)))
$$;

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
