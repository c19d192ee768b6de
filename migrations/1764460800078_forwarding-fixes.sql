-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   changed  function wharf.chart_issue_failures()
--   changed  function wharf.claim_deliveries(text,integer,integer)
--   changed  function wharf.complete_deliveries(bigint[],bigint[],integer[],integer[],text[])
--   changed  function wharf.destination_summary(wharf.destination)
--   changed  function wharf.issue_history(bigint,bigint,integer)

-- The grants of the functions dropped below, given again to the functions of the same name created after them.
CREATE TEMP TABLE wharf_release_grants ON COMMIT DROP AS
  SELECT p.proname::text AS name, a.grantee::regrole::text AS grantee
    FROM pg_proc p CROSS JOIN LATERAL aclexplode(p.proacl) a
   WHERE p.oid IN ('wharf.claim_deliveries(text,integer,integer)'::regprocedure)
     AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> p.proowner;

DROP FUNCTION wharf.claim_deliveries(text,integer,integer);

-- ======== sql/88-destinations.sql ========

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
END $$;

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

-- Trigger on wharf.issue, per row: charts what an issue's counts grew by
-- in the hour (UTC) of its last failure (wharf.issue_failure_hour): a
-- statement's failures all go to the hour of its latest. It fires for
-- every path that counts into an issue, and not for a status change.
CREATE OR REPLACE FUNCTION wharf.chart_issue_failures() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  v_failures bigint := NEW.failures - CASE WHEN TG_OP = 'UPDATE' THEN OLD.failures ELSE 0 END;
  v_dead     bigint := NEW.dead - CASE WHEN TG_OP = 'UPDATE' THEN OLD.dead ELSE 0 END;
BEGIN
  INSERT INTO wharf.issue_failure_hour AS h (issue_id, hour, failures, dead)
  VALUES (NEW.id, date_trunc('hour', NEW.last_seen_at, 'UTC'), v_failures, v_dead)
  ON CONFLICT (issue_id, hour) DO UPDATE
     SET failures = h.failures + excluded.failures, dead = h.dead + excluded.dead;
  RETURN NULL;
END $$;

-- Issue p_id of workspace p_workspace_id, failures and dead letters per
-- hour of the last p_hours (1..168) hours, oldest first, one {at, failures,
-- dead} per hour (zeros included), from wharf.issue_failure_hour; NULL when
-- the workspace has no such issue. 22004 for a NULL workspace, 22023 for
-- hours outside 1..168.
CREATE OR REPLACE FUNCTION wharf.issue_history(p_workspace_id bigint, p_id bigint, p_hours integer DEFAULT 48)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_since timestamptz;
BEGIN
  IF p_workspace_id IS NULL THEN
    RAISE EXCEPTION 'wharf.issue_history: workspace is required' USING ERRCODE = '22004';
  END IF;
  IF p_hours IS NULL OR p_hours < 1 OR p_hours > 168 THEN
    RAISE EXCEPTION 'wharf.issue_history: hours must be between 1 and 168' USING ERRCODE = '22023';
  END IF;
  IF NOT EXISTS (SELECT FROM wharf.issue i WHERE i.id = p_id AND i.workspace_id = p_workspace_id) THEN
    RETURN NULL;
  END IF;
  v_since := date_trunc('hour', now(), 'UTC') - make_interval(hours => p_hours - 1);
  RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object('at', t.at, 'failures', coalesce(h.failures, 0), 'dead', coalesce(h.dead, 0))
                                    ORDER BY t.at), '[]')
            FROM generate_series(v_since, date_trunc('hour', now(), 'UTC'), interval '1 hour') AS t(at)
            LEFT JOIN wharf.issue_failure_hour h ON h.issue_id = p_id AND h.hour = t.at);
END $$;

REVOKE ALL ON FUNCTION wharf.list_issues(bigint, text, integer),
  wharf.list_installation_issues(text, integer),
  wharf.show_issue(bigint, bigint),
  wharf.set_issue_status(bigint, bigint, text, text),
  wharf.set_installation_issue_status(bigint, text, text),
  wharf.issue_events(bigint, bigint, integer, bigint),
  wharf.issue_history(bigint, bigint, integer),
  wharf.purge_issues(integer) FROM PUBLIC;

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

CREATE OR REPLACE FUNCTION wharf.chart_issue_failures()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_failures bigint := NEW.failures - CASE WHEN TG_OP = 'UPDATE' THEN OLD.failures ELSE 0 END;
  v_dead     bigint := NEW.dead - CASE WHEN TG_OP = 'UPDATE' THEN OLD.dead ELSE 0 END;
BEGIN
  INSERT INTO wharf.issue_failure_hour AS h (issue_id, hour, failures, dead)
  VALUES (NEW.id, date_trunc('hour', NEW.last_seen_at), v_failures, v_dead)
  ON CONFLICT (issue_id, hour) DO UPDATE
     SET failures = h.failures + excluded.failures, dead = h.dead + excluded.dead;
  RETURN NULL;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.chart_issue_failures() TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.claim_deliveries(p_worker text, p_max integer DEFAULT 1, p_ahead integer DEFAULT 0)
 RETURNS TABLE(delivery_id bigint, epoch bigint, attempt integer, event_id bigint, destination_id bigint, url text, timeout_ms integer, signing_secret text, previous_signing_secret text, credentials text, extra_headers jsonb, provider text, event_type text, subject text, delivery_key text, event_headers jsonb, payload text, received_at timestamp with time zone, probe boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
END $function$;
REVOKE ALL ON FUNCTION wharf.claim_deliveries(text,integer,integer) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.complete_deliveries(p_ids bigint[], p_epochs bigint[], p_statuses integer[], p_durations_ms integer[], p_responses text[])
 RETURNS boolean[]
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
END $function$;
REVOKE ALL ON FUNCTION wharf.complete_deliveries(bigint[],bigint[],integer[],integer[],text[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.destination_summary(d wharf.destination)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
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
      SELECT jsonb_build_object(
        'queued', (SELECT count(*) FROM wharf.destination_delivery q WHERE q.destination_id = d.id AND q.state = 'QUEUED'),
        'leased', (SELECT count(*) FROM wharf.destination_delivery q WHERE q.destination_id = d.id AND q.state = 'LEASED'),
        'dead', (SELECT count(*) FROM wharf.destination_delivery q WHERE q.destination_id = d.id AND q.state = 'DEAD'),
        'delivered_last_hour', count(*) FILTER (WHERE a.ended = 'handled'),
        'failed_last_hour', count(*) FILTER (WHERE a.ended IN ('transient', 'permanent', 'gone', 'expired')),
        'per_minute', count(*) FILTER (WHERE a.ended = 'handled' AND a.ended_at > now() - interval '1 minute'),
        'success_rate', round(count(*) FILTER (WHERE a.ended = 'handled')::numeric
                              / nullif(count(*) FILTER (WHERE a.ended <> 'released'), 0), 4),
        'latency_p50_ms', percentile_cont(0.5) WITHIN GROUP (ORDER BY a.duration_ms)
                            FILTER (WHERE a.duration_ms IS NOT NULL),
        'latency_p99_ms', percentile_cont(0.99) WITHIN GROUP (ORDER BY a.duration_ms)
                            FILTER (WHERE a.duration_ms IS NOT NULL),
        'filtered_last_hour', (SELECT coalesce(sum(f.filtered), 0) FROM wharf.rule_filtered_minute f
                                 JOIN wharf.destination_rule r ON r.id = f.rule_id
                                WHERE r.destination_id = d.id AND f.minute > now() - interval '1 hour'))
        FROM wharf.delivery_attempt a
       WHERE a.destination_id = d.id AND a.ended_at > now() - interval '1 hour'))
$function$;
GRANT EXECUTE ON FUNCTION wharf.destination_summary(wharf.destination) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.issue_history(p_workspace_id bigint, p_id bigint, p_hours integer DEFAULT 48)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_since timestamptz;
BEGIN
  IF p_workspace_id IS NULL THEN
    RAISE EXCEPTION 'wharf.issue_history: workspace is required' USING ERRCODE = '22004';
  END IF;
  IF p_hours IS NULL OR p_hours < 1 OR p_hours > 168 THEN
    RAISE EXCEPTION 'wharf.issue_history: hours must be between 1 and 168' USING ERRCODE = '22023';
  END IF;
  IF NOT EXISTS (SELECT FROM wharf.issue i WHERE i.id = p_id AND i.workspace_id = p_workspace_id) THEN
    RETURN NULL;
  END IF;
  v_since := date_trunc('hour', now()) - make_interval(hours => p_hours - 1);
  RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object('at', t.at, 'failures', coalesce(h.failures, 0), 'dead', coalesce(h.dead, 0))
                                    ORDER BY t.at), '[]')
            FROM generate_series(v_since, date_trunc('hour', now()), interval '1 hour') AS t(at)
            LEFT JOIN wharf.issue_failure_hour h ON h.issue_id = p_id AND h.hour = t.at);
END $function$;
REVOKE ALL ON FUNCTION wharf.issue_history(bigint,bigint,integer) FROM PUBLIC;
