-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.alert_about(wharf.alert)
--   new      function wharf.alert_summary(wharf.alert,text)
--   new      function wharf.check_alert_rule(text,text,integer,integer,text,text,text,text)
--   new      function wharf.edit_alert_rule(bigint,bigint,text,text,integer,integer,text,text,text,text)
--   new      function wharf.send_test_alert(bigint,bigint,text)
--   changed  function wharf.add_alert_rule(bigint,text,text,integer,integer,text,text,text,text)
--   changed  function wharf.alert_rule_summary(wharf.alert_rule)
--   changed  function wharf.due_alerts(uuid,integer)
--   changed  function wharf.list_alerts(bigint,integer)

-- ======== sql/99-alerts.sql ========

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

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

DROP FUNCTION wharf.alert_about(wharf.alert);

DROP FUNCTION wharf.alert_summary(wharf.alert,text);

DROP FUNCTION wharf.check_alert_rule(text,text,integer,integer,text,text,text,text);

DROP FUNCTION wharf.edit_alert_rule(bigint,bigint,text,text,integer,integer,text,text,text,text);

DROP FUNCTION wharf.send_test_alert(bigint,bigint,text);

CREATE OR REPLACE FUNCTION wharf.add_alert_rule(p_workspace_id bigint, p_name text, p_kind text, p_threshold integer, p_window_seconds integer, p_destination text, p_url text, p_secret text, p_account text)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_rule wharf.alert_rule;
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
  INSERT INTO wharf.alert_rule (workspace_id, name, kind, threshold, window_seconds, destination, url, secret, created_by)
  VALUES (p_workspace_id, p_name, p_kind, p_threshold, p_window_seconds, p_destination, p_url, p_secret, p_account)
  RETURNING * INTO v_rule;
  RETURN wharf.alert_rule_summary(v_rule);
END $function$;
GRANT EXECUTE ON FUNCTION wharf.add_alert_rule(bigint,text,text,integer,integer,text,text,text,text) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.alert_rule_summary(r wharf.alert_rule)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
  SELECT jsonb_build_object(
    'id', r.id, 'workspace_id', r.workspace_id, 'name', r.name, 'kind', r.kind, 'threshold', r.threshold,
    'window_seconds', r.window_seconds, 'destination', r.destination,
    'destination_host', substring(r.url FROM '^https?://([^/?#]+)'),
    'created_by', r.created_by, 'created_at', r.created_at)
$function$;
GRANT EXECUTE ON FUNCTION wharf.alert_rule_summary(wharf.alert_rule) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.due_alerts(p_token uuid, p_limit integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
  PERFORM wharf.held_alert_sender(p_token);
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 1000' USING ERRCODE = '22023';
  END IF;
  RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', a.id, 'rule_id', r.id, 'rule_name', r.name, 'workspace_id', a.workspace_id, 'kind', a.kind,
                   'facts', a.facts, 'created_at', a.created_at, 'attempts', a.attempts,
                   'destination', r.destination, 'url', r.url, 'secret', r.secret) ORDER BY a.next_attempt_at, a.id), '[]')
            FROM (SELECT * FROM wharf.alert x
                   WHERE x.state = 'pending' AND x.next_attempt_at <= clock_timestamp()
                   ORDER BY x.next_attempt_at, x.id
                   LIMIT p_limit) a
            JOIN wharf.alert_rule r ON r.id = a.rule_id);
END $function$;
REVOKE ALL ON FUNCTION wharf.due_alerts(uuid,integer) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.list_alerts(p_workspace_id bigint, p_limit integer DEFAULT 50)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
  IF p_workspace_id IS NOT NULL THEN
    PERFORM wharf.require_workspace(p_workspace_id);
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 500' USING ERRCODE = '22023';
  END IF;
  RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', a.id, 'rule_id', a.rule_id, 'rule_name', a.rule_name, 'workspace_id', a.workspace_id,
                   'kind', a.kind, 'facts', a.facts, 'created_at', a.created_at, 'state', a.state,
                   'attempts', a.attempts, 'last_attempt_at', a.last_attempt_at, 'last_status', a.last_status,
                   'last_error', a.last_error, 'delivered_at', a.delivered_at) ORDER BY a.id DESC), '[]')
            FROM (SELECT x.*, r.name AS rule_name
                    FROM wharf.alert_rule r
                    JOIN wharf.alert x ON x.rule_id = r.id
                   WHERE r.workspace_id = p_workspace_id OR (p_workspace_id IS NULL AND r.workspace_id IS NULL)
                   ORDER BY x.id DESC
                   LIMIT p_limit) a);
END $function$;
REVOKE ALL ON FUNCTION wharf.list_alerts(bigint,integer) FROM PUBLIC;
