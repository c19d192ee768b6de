-- Alerts: rules per workspace, or for the whole instance (NULL workspace),
-- say what to tell whom: an issue opened or reopened, a dead-letter rate, an
-- event due and unclaimed too long, a stuck scope; to an HTTPS endpoint
-- signed with Standard Webhooks or to a Slack incoming webhook.
--
-- One worker host at a time holds the sender's lease (a random token, like
-- the redelivery sweeper's in sql/85): it evaluates the rules, which records
-- one alert per rule and dedupe key (an issue's opening, a reopening, a
-- window of a rate, a stuck head), sends the due ones and records each
-- attempt's outcome, retrying with a bounded exponential backoff. An alert
-- holds names, ids, counts and times: never a payload, a header or a secret.

-- ---- rules (the operator surface) -----------------------------------------

-- A rule as the operator surface shows it: its destination's host, never
-- its URL (a Slack webhook's URL is its credential) or its secret. Internal.
CREATE OR REPLACE FUNCTION wharf.alert_rule_summary(r wharf.alert_rule) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', r.id, 'workspace_id', r.workspace_id, 'name', r.name, 'kind', r.kind, 'threshold', r.threshold,
    'window_seconds', r.window_seconds, 'destination', r.destination,
    'destination_host', substring(r.url FROM '^https?://([^/?#]+)'),
    'created_by', r.created_by, 'created_at', r.created_at, 'updated_by', r.updated_by, 'updated_at', r.updated_at)
$$;

-- Raises unless the rule's fields are valid together: 22004 for a missing
-- argument, 22023 for a bad one: an unknown kind or destination, a parameter
-- the kind does not take or lacks, a URL that is neither https nor http to a
-- loopback address, a webhook without a `whsec_` secret or a Slack rule with
-- one. The one check of add_alert_rule and edit_alert_rule. Internal.
CREATE OR REPLACE FUNCTION wharf.check_alert_rule(
  p_name text, p_kind text, p_threshold integer, p_window_seconds integer,
  p_destination text, p_url text, p_secret text, p_account text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF p_name IS NULL OR p_kind IS NULL OR p_destination IS NULL OR p_url IS NULL OR p_account IS NULL OR p_account = '' THEN
    RAISE EXCEPTION 'wharf: an alert rule needs a name, a kind, a destination, a URL and an account' USING ERRCODE = '22004';
  END IF;
  IF p_name !~ '^[A-Za-z0-9][A-Za-z0-9 _.:@-]{0,63}$' THEN
    RAISE EXCEPTION 'wharf: a rule name is 1 to 64 letters, digits, spaces or _.:@-' USING ERRCODE = '22023';
  END IF;
  IF p_kind NOT IN ('issue_opened', 'issue_reopened', 'dead_letter_rate', 'oldest_due_age', 'stuck_scope') THEN
    RAISE EXCEPTION 'wharf: unknown alert kind %', quote_literal(p_kind) USING ERRCODE = '22023';
  END IF;
  IF (p_kind = 'dead_letter_rate') <> (p_threshold IS NOT NULL) OR p_threshold <= 0 THEN
    RAISE EXCEPTION 'wharf: a positive threshold is required for dead_letter_rate, and taken by no other kind'
      USING ERRCODE = '22023';
  END IF;
  IF (p_kind IN ('dead_letter_rate', 'oldest_due_age', 'stuck_scope')) <> (p_window_seconds IS NOT NULL)
     OR p_window_seconds <= 0 THEN
    RAISE EXCEPTION 'wharf: a positive window_seconds is required for dead_letter_rate, oldest_due_age and stuck_scope, and taken by no other kind'
      USING ERRCODE = '22023';
  END IF;
  IF p_destination NOT IN ('webhook', 'slack') THEN
    RAISE EXCEPTION 'wharf: unknown alert destination %', quote_literal(p_destination) USING ERRCODE = '22023';
  END IF;
  IF length(p_url) > 2000
     OR NOT (p_url ~ '^https://[^/?#@\s]+' OR p_url ~ '^http://(127\.0\.0\.1|localhost|\[::1\])(:[0-9]+)?(/|$)') THEN
    RAISE EXCEPTION 'wharf: an alert URL is https:// (or http:// to a loopback address)' USING ERRCODE = '22023';
  END IF;
  IF p_destination = 'webhook' AND (p_secret IS NULL OR p_secret !~ '^whsec_[A-Za-z0-9+/]+=*$') THEN
    RAISE EXCEPTION 'wharf: a webhook destination needs a Standard Webhooks secret (whsec_ and base64)' USING ERRCODE = '22023';
  END IF;
  IF p_destination = 'slack' AND p_secret IS NOT NULL THEN
    RAISE EXCEPTION 'wharf: a Slack destination takes no secret (its URL is one)' USING ERRCODE = '22023';
  END IF;
END $$;

-- Records a rule of workspace p_workspace_id (NULL: the instance) and
-- returns it (alert_rule_summary). 22004/22023 as check_alert_rule.
-- Internal: callers use create_alert_rule / create_instance_alert_rule.
CREATE OR REPLACE FUNCTION wharf.add_alert_rule(
  p_workspace_id bigint, p_name text, p_kind text, p_threshold integer, p_window_seconds integer,
  p_destination text, p_url text, p_secret text, p_account text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_rule wharf.alert_rule;
BEGIN
  PERFORM wharf.check_alert_rule(p_name, p_kind, p_threshold, p_window_seconds, p_destination, p_url, p_secret, p_account);
  INSERT INTO wharf.alert_rule (workspace_id, name, kind, threshold, window_seconds, destination, url, secret, created_by)
  VALUES (p_workspace_id, p_name, p_kind, p_threshold, p_window_seconds, p_destination, p_url, p_secret, p_account)
  RETURNING * INTO v_rule;
  RETURN wharf.alert_rule_summary(v_rule);
END $$;

-- A rule of workspace p_workspace_id (see add_alert_rule); P0002 for an unknown workspace.
CREATE OR REPLACE FUNCTION wharf.create_alert_rule(
  p_workspace_id bigint, p_name text, p_kind text, p_threshold integer, p_window_seconds integer,
  p_destination text, p_url text, p_secret text, p_account text)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN wharf.add_alert_rule(p_workspace_id, p_name, p_kind, p_threshold, p_window_seconds,
                              p_destination, p_url, p_secret, p_account);
END $$;

-- Instance admin only: a rule over every workspace and the installation rows.
CREATE OR REPLACE FUNCTION wharf.create_instance_alert_rule(
  p_name text, p_kind text, p_threshold integer, p_window_seconds integer,
  p_destination text, p_url text, p_secret text, p_account text)
RETURNS jsonb
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.add_alert_rule(NULL, p_name, p_kind, p_threshold, p_window_seconds,
                              p_destination, p_url, p_secret, p_account)
$$;

-- The rules of workspace p_workspace_id, by id; P0002 for an unknown workspace.
CREATE OR REPLACE FUNCTION wharf.list_alert_rules(p_workspace_id bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN (SELECT coalesce(jsonb_agg(wharf.alert_rule_summary(r) ORDER BY r.id), '[]')
            FROM wharf.alert_rule r WHERE r.workspace_id = p_workspace_id);
END $$;

-- Instance admin only: the instance's rules, by id.
CREATE OR REPLACE FUNCTION wharf.list_instance_alert_rules() RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT coalesce(jsonb_agg(wharf.alert_rule_summary(r) ORDER BY r.id), '[]')
    FROM wharf.alert_rule r WHERE r.workspace_id IS NULL
$$;

-- Deletes rule p_id of workspace p_workspace_id (NULL: an instance rule)
-- with its alerts; true when it did.
CREATE OR REPLACE FUNCTION wharf.delete_alert_rule(p_workspace_id bigint, p_id bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  DELETE FROM wharf.alert_rule
   WHERE id = p_id AND (workspace_id = p_workspace_id OR (p_workspace_id IS NULL AND workspace_id IS NULL));
  RETURN FOUND;
END $$;

-- Edits rule p_id of workspace p_workspace_id (NULL: an instance rule) in
-- place and returns it (alert_rule_summary), or NULL when the owner has no
-- such rule. Its id stays, and with it the alerts it raised; a NULL p_url
-- keeps the URL, a NULL p_secret keeps a webhook's secret (neither is ever
-- shown, so an edit need not repeat them), and a Slack rule drops it;
-- p_account is recorded as who edited it. 22004/22023 as check_alert_rule,
-- on the rule as it would be after; 22023 too for a new destination without
-- its URL (the old one, a Slack URL a credential, would go to the other).
CREATE OR REPLACE FUNCTION wharf.edit_alert_rule(
  p_workspace_id bigint, p_id bigint, p_name text, p_kind text, p_threshold integer, p_window_seconds integer,
  p_destination text, p_url text, p_secret text, p_account text)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_rule   wharf.alert_rule;
  v_secret text;
BEGIN
  SELECT * INTO v_rule FROM wharf.alert_rule
   WHERE id = p_id AND (workspace_id = p_workspace_id OR (p_workspace_id IS NULL AND workspace_id IS NULL))
     FOR UPDATE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF p_destination IS DISTINCT FROM v_rule.destination AND p_url IS NULL THEN
    RAISE EXCEPTION 'wharf: a new destination needs its URL' USING ERRCODE = '22023';
  END IF;
  v_secret := CASE WHEN p_destination = 'slack' THEN p_secret ELSE coalesce(p_secret, v_rule.secret) END;
  PERFORM wharf.check_alert_rule(p_name, p_kind, p_threshold, p_window_seconds, p_destination,
                                 coalesce(p_url, v_rule.url), v_secret, p_account);
  UPDATE wharf.alert_rule
     SET name = p_name, kind = p_kind, threshold = p_threshold, window_seconds = p_window_seconds,
         destination = p_destination, url = coalesce(p_url, v_rule.url), secret = v_secret,
         updated_by = p_account, updated_at = now()
   WHERE id = p_id
  RETURNING * INTO v_rule;
  RETURN wharf.alert_rule_summary(v_rule);
END $$;

-- Records a test alert of rule p_id of workspace p_workspace_id (NULL: an
-- instance rule), requested by p_account, for the sender's next turn: it
-- goes through the rule's channel, signed as usual, and is marked as a test
-- there and in list_alerts. Returns it as list_alerts does, or NULL when the
-- owner has no such rule. 22004 without an account.
CREATE OR REPLACE FUNCTION wharf.send_test_alert(p_workspace_id bigint, p_id bigint, p_account text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_alert wharf.alert;
  v_rule  wharf.alert_rule;
BEGIN
  IF p_account IS NULL OR p_account = '' THEN
    RAISE EXCEPTION 'wharf: a test alert needs an account' USING ERRCODE = '22004';
  END IF;
  SELECT * INTO v_rule FROM wharf.alert_rule
   WHERE id = p_id AND (workspace_id = p_workspace_id OR (p_workspace_id IS NULL AND workspace_id IS NULL));
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts, test)
  VALUES (v_rule.id, v_rule.workspace_id, 'test:' || gen_random_uuid(), v_rule.kind,
          jsonb_build_object('test', true, 'requested_by', p_account), true)
  RETURNING * INTO v_alert;
  RETURN wharf.alert_summary(v_alert, v_rule.name);
END $$;

-- What an alert is about, in a few words for a list: its issue (with what
-- fails), its stuck scope (with its head), or its rule's measure; a test
-- says so. Names and ids only. Internal.
CREATE OR REPLACE FUNCTION wharf.alert_about(a wharf.alert) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN a.test THEN 'test alert'
    WHEN a.facts ? 'issue' THEN format('issue %s: %s %s %s', a.facts -> 'issue' ->> 'id', a.facts -> 'issue' ->> 'provider',
                                       a.facts -> 'issue' ->> 'event_type', a.facts -> 'issue' ->> 'error_class')
    WHEN a.facts ? 'scope_key' THEN format('scope %s (head event %s)', a.facts ->> 'scope_key', a.facts -> 'head' ->> 'id')
    WHEN a.kind = 'dead_letter_rate' THEN format('%s dead letters in %ss', a.facts ->> 'dead', a.facts ->> 'window_seconds')
    WHEN a.kind = 'oldest_due_age' THEN format('an event due for %ss', a.facts ->> 'age_seconds')
    ELSE a.kind
  END
$$;

-- An alert as list_alerts shows it, p_rule_name its rule's: with what it is
-- about (about, and issue_id or scope_key when it names one) and how its
-- delivery went. Internal.
CREATE OR REPLACE FUNCTION wharf.alert_summary(a wharf.alert, p_rule_name text) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object(
    'id', a.id, 'rule_id', a.rule_id, 'rule_name', p_rule_name, 'workspace_id', a.workspace_id,
    'kind', a.kind, 'test', a.test, 'about', wharf.alert_about(a),
    'issue_id', (a.facts -> 'issue' ->> 'id')::bigint, 'scope_key', a.facts ->> 'scope_key',
    'facts', a.facts, 'created_at', a.created_at, 'state', a.state,
    'attempts', a.attempts, 'last_attempt_at', a.last_attempt_at, 'last_status', a.last_status,
    'last_error', a.last_error, 'delivered_at', a.delivered_at)
$$;

-- The newest alerts of the rules of workspace p_workspace_id (NULL: of the
-- instance's rules), at most p_limit, each with what it is about and how its
-- delivery went (alert_summary), tests included and marked. P0002 for
-- an unknown workspace, 22023 for a limit outside 1..500.
CREATE OR REPLACE FUNCTION wharf.list_alerts(p_workspace_id bigint, p_limit integer DEFAULT 50) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_workspace_id IS NOT NULL THEN
    PERFORM wharf.require_workspace(p_workspace_id);
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 500' USING ERRCODE = '22023';
  END IF;
  RETURN (SELECT coalesce(jsonb_agg(wharf.alert_summary(a.x, a.rule_name) ORDER BY (a.x).id DESC), '[]')
            FROM (SELECT x, r.name AS rule_name
                    FROM wharf.alert_rule r
                    JOIN wharf.alert x ON x.rule_id = r.id
                   WHERE r.workspace_id = p_workspace_id OR (p_workspace_id IS NULL AND r.workspace_id IS NULL)
                   ORDER BY x.id DESC
                   LIMIT p_limit) a);
END $$;

-- ---- the sender (one worker host at a time) --------------------------------

-- Takes or extends the sender's lease for p_lease: with p_token, the lease
-- it names when still held by it; without, a free or expired lease. The
-- token, or NULL when another host holds the lease. 22004/22023 for a
-- missing or non-positive lease.
CREATE OR REPLACE FUNCTION wharf.take_alert_sender(p_holder text, p_lease interval, p_token uuid DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_token uuid;
BEGIN
  IF p_holder IS NULL OR p_holder = '' OR p_lease IS NULL THEN
    RAISE EXCEPTION 'wharf: take_alert_sender needs a holder and a lease' USING ERRCODE = '22004';
  END IF;
  IF p_lease <= interval '0' THEN
    RAISE EXCEPTION 'wharf: the lease must be positive' USING ERRCODE = '22023';
  END IF;
  UPDATE wharf.alert_sender
     SET leased_by = p_holder,
         lease_token = CASE WHEN p_token IS NOT NULL AND lease_token = p_token THEN p_token ELSE gen_random_uuid() END,
         leased_until = clock_timestamp() + p_lease
   WHERE id = 1
     AND ((p_token IS NOT NULL AND lease_token = p_token)
          OR lease_token IS NULL OR leased_until < clock_timestamp())
  RETURNING lease_token INTO v_token;
  RETURN v_token;
END $$;

-- Gives the sender's lease of p_token back; true when it held it.
CREATE OR REPLACE FUNCTION wharf.release_alert_sender(p_token uuid) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  UPDATE wharf.alert_sender SET leased_by = NULL, lease_token = NULL, leased_until = NULL
   WHERE id = 1 AND lease_token = p_token;
  RETURN FOUND;
END $$;

-- Raises WH412 unless p_token holds the sender's lease (an expired lease
-- that nobody took over still holds), locking the lease row until the
-- caller's commit so that a take-over waits for it. Internal.
CREATE OR REPLACE FUNCTION wharf.held_alert_sender(p_token uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM FROM wharf.alert_sender WHERE id = 1 AND lease_token = p_token FOR UPDATE;
  IF p_token IS NULL OR NOT FOUND THEN
    RAISE EXCEPTION 'wharf: the alert sender lease is no longer held with this token' USING ERRCODE = 'WH412';
  END IF;
END $$;

-- What an issue alert says: names, counts and times of the issue. Internal.
CREATE OR REPLACE FUNCTION wharf.issue_alert_facts(i wharf.issue) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object('issue', jsonb_build_object(
    'id', i.id, 'workspace_id', i.workspace_id, 'provider', i.provider, 'event_type', i.event_type,
    'error_class', i.error_class, 'status', i.status, 'failures', i.failures, 'dead', i.dead,
    'first_seen_at', i.first_seen_at, 'last_seen_at', i.last_seen_at, 'reopened', i.reopened,
    'reopened_at', i.reopened_at))
$$;

-- Evaluates every rule and records an alert for each thing it fires on
-- that has none yet (rule and dedupe key); returns how many it recorded.
--   issue_opened      an issue first seen since the rule exists (and within a
--                     day), not ignored: one alert per issue
--   issue_reopened    an open issue reopened since then: one per reopening
--   dead_letter_rate  dead letters in the minutes covering the last
--                     window_seconds at least threshold: one per window
--   oldest_due_age    a scope head due and unclaimed for window_seconds:
--                     one per window while it lasts
--   stuck_scope       a scope stuck for window_seconds (scopes_stuck_since,
--                     the stuck-scopes list's rule): one per head, at most
--                     1000 per evaluation
-- An instance rule covers every workspace and the installation rows. WH412
-- when p_token does not hold the sender's lease. JIT off, as queue_stats
-- (sql/30): the stuck scopes' scans are priced far above what they read.
CREATE OR REPLACE FUNCTION wharf.evaluate_alert_rules(p_token uuid) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off AS $$
DECLARE
  v_now   timestamptz := now();
  v_count integer;
  v_total integer := 0;
BEGIN
  PERFORM wharf.held_alert_sender(p_token);

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, i.workspace_id, 'issue-opened:' || i.id, r.kind, wharf.issue_alert_facts(i)
    FROM wharf.alert_rule r
    JOIN wharf.issue i ON (r.workspace_id IS NULL OR i.workspace_id = r.workspace_id)
   WHERE r.kind = 'issue_opened' AND i.status <> 'ignored'
     AND i.last_seen_at >= greatest(r.created_at, v_now - interval '1 day')
     AND i.first_seen_at >= greatest(r.created_at, v_now - interval '1 day')
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  v_total := v_total + v_count;

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, i.workspace_id, 'issue-reopened:' || i.id || ':' || i.reopened, r.kind, wharf.issue_alert_facts(i)
    FROM wharf.alert_rule r
    JOIN wharf.issue i ON (r.workspace_id IS NULL OR i.workspace_id = r.workspace_id)
   WHERE r.kind = 'issue_reopened' AND i.status = 'open'
     AND i.last_seen_at >= greatest(r.created_at, v_now - interval '1 day')
     AND i.reopened_at >= greatest(r.created_at, v_now - interval '1 day')
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  v_total := v_total + v_count;

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, r.workspace_id, 'dead-rate:' || floor(extract(epoch FROM v_now) / r.window_seconds)::bigint, r.kind,
         jsonb_build_object('dead', c.dead, 'threshold', r.threshold, 'window_seconds', r.window_seconds)
    FROM wharf.alert_rule r
    CROSS JOIN LATERAL (SELECT coalesce(sum(m.dead), 0) AS dead FROM wharf.failure_minute m
                         WHERE (r.workspace_id IS NULL OR m.workspace_id = r.workspace_id)
                           AND m.minute >= date_trunc('minute', v_now - make_interval(secs => r.window_seconds))) c
   WHERE r.kind = 'dead_letter_rate' AND c.dead >= r.threshold
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  v_total := v_total + v_count;

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, r.workspace_id, 'oldest-due:' || floor(extract(epoch FROM v_now) / r.window_seconds)::bigint, r.kind,
         jsonb_build_object('oldest_due_at', o.due, 'age_seconds', floor(extract(epoch FROM v_now - o.due)),
                            'window_seconds', r.window_seconds)
    FROM wharf.alert_rule r
    CROSS JOIN LATERAL (SELECT min(s.head_due_at) AS due FROM wharf.scope s
                         WHERE (r.workspace_id IS NULL OR s.workspace_id = r.workspace_id)
                           AND s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active) o
   WHERE r.kind = 'oldest_due_age' AND o.due < v_now - make_interval(secs => r.window_seconds)
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  v_total := v_total + v_count;

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, t.workspace_id, 'stuck:' || t.scope_key || ':' || h.id, r.kind,
         jsonb_build_object('scope_key', t.scope_key, 'subject', h.subject, 'waiting_since', t.since,
                            'head', jsonb_build_object('id', h.id, 'provider', h.provider, 'event_type', h.event_type,
                                                       'state', h.state, 'attempt', h.attempt,
                                                       'error_class', h.error_class))
    FROM wharf.alert_rule r
    CROSS JOIN LATERAL wharf.scopes_stuck_since(v_now - make_interval(secs => r.window_seconds), r.workspace_id, 1000) t
    JOIN wharf.provider_event h ON h.id = t.head_id
   WHERE r.kind = 'stuck_scope'
   LIMIT 1000
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  RETURN v_total + v_count;
END $$;

-- The alerts due for delivery, oldest due first, at most p_limit, each with
-- what the sender needs: {id, rule_id, rule_name, workspace_id, kind, test,
-- facts, created_at, attempts, destination, url, secret}. The only function that
-- returns a rule's URL and secret: the sender's. WH412 when p_token does not
-- hold the sender's lease.
CREATE OR REPLACE FUNCTION wharf.due_alerts(p_token uuid, p_limit integer) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.held_alert_sender(p_token);
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 1000' USING ERRCODE = '22023';
  END IF;
  RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', a.id, 'rule_id', r.id, 'rule_name', r.name, 'workspace_id', a.workspace_id, 'kind', a.kind,
                   'test', a.test, 'facts', a.facts, 'created_at', a.created_at, 'attempts', a.attempts,
                   'destination', r.destination, 'url', r.url, 'secret', r.secret) ORDER BY a.next_attempt_at, a.id), '[]')
            FROM (SELECT * FROM wharf.alert x
                   WHERE x.state = 'pending' AND x.next_attempt_at <= clock_timestamp()
                   ORDER BY x.next_attempt_at, x.id
                   LIMIT p_limit) a
            JOIN wharf.alert_rule r ON r.id = a.rule_id);
END $$;

-- Records an attempt to deliver alert p_id: delivered (p_delivered), or
-- failed with the receiver's status p_status or the class of the error that
-- prevented an answer (p_error, a class name, never a message), then pending
-- again after a bounded exponential delay from p_base_delay (up to an hour,
-- equal jitter) or, after 8 attempts, failed for good. Returns the alert's
-- state after; NULL when it is not pending (delivered or failed already, or
-- gone with its rule). WH412 when p_token does not hold the sender's lease.
CREATE OR REPLACE FUNCTION wharf.record_alert_attempt(
  p_token uuid, p_id bigint, p_delivered boolean, p_status integer, p_error text, p_base_delay interval)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_state text;
BEGIN
  PERFORM wharf.held_alert_sender(p_token);
  IF p_id IS NULL OR p_delivered IS NULL OR p_base_delay IS NULL THEN
    RAISE EXCEPTION 'wharf: record_alert_attempt needs an alert, whether it was delivered, and a base delay'
      USING ERRCODE = '22004';
  END IF;
  IF p_error IS NOT NULL AND p_error !~ '^[A-Za-z_$][A-Za-z0-9_$.:-]{0,127}$' THEN
    RAISE EXCEPTION 'wharf: an alert error is a class name, not free text' USING ERRCODE = '22023';
  END IF;
  UPDATE wharf.alert a
     SET attempts = a.attempts + 1,
         last_attempt_at = clock_timestamp(),
         last_status = p_status,
         last_error = p_error,
         delivered_at = CASE WHEN p_delivered THEN clock_timestamp() END,
         state = CASE WHEN p_delivered THEN 'delivered' WHEN a.attempts + 1 >= 8 THEN 'failed' ELSE 'pending' END,
         next_attempt_at = CASE WHEN p_delivered OR a.attempts + 1 >= 8 THEN a.next_attempt_at
                                ELSE clock_timestamp() + d.delay / 2 + random() * (d.delay / 2) END
    FROM (SELECT least(interval '1 hour', p_base_delay * power(2, least(x.attempts, 20))) AS delay
            FROM wharf.alert x WHERE x.id = p_id) d
   WHERE a.id = p_id AND a.state = 'pending'
  RETURNING a.state INTO v_state;
  RETURN v_state;
END $$;

-- Retention: deletes at most p_batch alerts delivered or failed longer than
-- issue_retention ago and returns how many; the retention loop calls it
-- until it returns less than p_batch.
CREATE OR REPLACE FUNCTION wharf.purge_alerts(p_batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_deleted bigint;
BEGIN
  IF p_batch IS NULL OR p_batch < 1 THEN
    RAISE EXCEPTION 'wharf: purge_alerts needs a positive batch size' USING ERRCODE = '22023';
  END IF;
  DELETE FROM wharf.alert
   WHERE id IN (SELECT id FROM wharf.alert
                 WHERE created_at < now() - wharf.setting_interval('issue_retention') AND state <> 'pending'
                 ORDER BY created_at LIMIT p_batch);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  RETURN v_deleted;
END $$;

REVOKE ALL ON FUNCTION wharf.create_alert_rule(bigint, text, text, integer, integer, text, text, text, text),
  wharf.create_instance_alert_rule(text, text, integer, integer, text, text, text, text),
  wharf.list_alert_rules(bigint),
  wharf.list_instance_alert_rules(),
  wharf.delete_alert_rule(bigint, bigint),
  wharf.edit_alert_rule(bigint, bigint, text, text, integer, integer, text, text, text, text),
  wharf.send_test_alert(bigint, bigint, text),
  wharf.list_alerts(bigint, integer),
  wharf.take_alert_sender(text, interval, uuid),
  wharf.release_alert_sender(uuid),
  wharf.evaluate_alert_rules(uuid),
  wharf.due_alerts(uuid, integer),
  wharf.record_alert_attempt(uuid, bigint, boolean, integer, text, interval),
  wharf.purge_alerts(integer) FROM PUBLIC;
