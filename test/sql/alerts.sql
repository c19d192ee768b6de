-- Alerts: rules are validated and never show their URL or secret; one host
-- holds the sender's lease; evaluation records one alert per rule and thing
-- (deduplicated), for a workspace's rule only about that workspace, for an
-- instance rule about any; delivery attempts are recorded, retried with
-- backoff and given up after 8; alerts hold no payload.
BEGIN;
SELECT plan(63);

SELECT wharf.upsert_workspace(1), wharf.upsert_workspace(2);
SELECT wharf.upsert_connection(1, 'generic', 'https://hooks.example/1', 'webhook', 'one');
SELECT wharf.upsert_connection(2, 'generic', 'https://hooks.example/2', 'webhook', 'two');

CREATE FUNCTION pg_temp.rule(p_ws bigint, p_kind text, p_threshold integer DEFAULT NULL, p_window integer DEFAULT NULL,
                             p_destination text DEFAULT 'webhook') RETURNS bigint
LANGUAGE sql AS $$
  SELECT (wharf.create_alert_rule(p_ws, p_kind || ' rule', p_kind, p_threshold, p_window, p_destination,
                                  CASE p_destination WHEN 'webhook' THEN 'https://alerts.example/in' ELSE 'https://hooks.slack.com/services/T/B/x' END,
                                  CASE p_destination WHEN 'webhook' THEN 'whsec_c2VjcmV0LXNlY3JldA==' END, 'ops') ->> 'id')::bigint
$$;

-- Fails p_key permanently (claims every due head, gives the others back).
CREATE FUNCTION pg_temp.kill(p_key text, p_class text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_row record;
BEGIN
  FOR v_row IN SELECT id, lease_epoch, delivery_key FROM wharf.claim('w', 100) LOOP
    IF v_row.delivery_key = p_key THEN
      PERFORM wharf.fail(v_row.id, v_row.lease_epoch, 'permanent', p_class);
    ELSE
      PERFORM wharf.release(v_row.id, v_row.lease_epoch);
    END IF;
  END LOOP;
END $$;

-- Rules: validation.
SELECT throws_ok($$SELECT wharf.create_alert_rule(1, 'r', 'issue_closed', NULL, NULL, 'slack', 'https://hooks.slack.com/x', NULL, 'ops')$$,
                 '22023', NULL, 'an unknown kind is 22023');
SELECT throws_ok($$SELECT wharf.create_alert_rule(1, 'r', 'dead_letter_rate', NULL, 60, 'slack', 'https://hooks.slack.com/x', NULL, 'ops')$$,
                 '22023', NULL, 'a rate without a threshold is 22023');
SELECT throws_ok($$SELECT wharf.create_alert_rule(1, 'r', 'issue_opened', 5, NULL, 'slack', 'https://hooks.slack.com/x', NULL, 'ops')$$,
                 '22023', NULL, 'a parameter the kind does not take is 22023');
SELECT throws_ok($$SELECT wharf.create_alert_rule(1, 'r', 'issue_opened', NULL, NULL, 'slack', 'http://hooks.slack.com/x', NULL, 'ops')$$,
                 '22023', NULL, 'plain http to another host is 22023');
SELECT throws_ok($$SELECT wharf.create_alert_rule(1, 'r', 'issue_opened', NULL, NULL, 'webhook', 'https://a.example/', NULL, 'ops')$$,
                 '22023', NULL, 'a webhook without a secret is 22023');
SELECT throws_ok($$SELECT wharf.create_alert_rule(1, 'r', 'issue_opened', NULL, NULL, 'slack', 'https://a.example/', 'whsec_AAAA', 'ops')$$,
                 '22023', NULL, 'a Slack rule with a secret is 22023');
SELECT throws_ok($$SELECT wharf.create_alert_rule(404, 'r', 'issue_opened', NULL, NULL, 'slack', 'https://a.example/', NULL, 'ops')$$,
                 'P0002', NULL, 'an unknown workspace is P0002');
SELECT lives_ok($$SELECT wharf.create_alert_rule(1, 'local', 'issue_opened', NULL, NULL, 'webhook', 'http://127.0.0.1:9/in', 'whsec_AAAA', 'ops')$$,
                'http to a loopback address is accepted');
SELECT is(wharf.delete_alert_rule(2, (SELECT id FROM wharf.alert_rule WHERE name = 'local')), false, 'another workspace cannot delete it');
SELECT is(wharf.delete_alert_rule(1, (SELECT id FROM wharf.alert_rule WHERE name = 'local')), true, 'its own can');

CREATE TEMP TABLE r AS SELECT pg_temp.rule(1, 'issue_opened') AS opened, pg_temp.rule(1, 'issue_reopened', p_destination => 'slack') AS reopened,
                              pg_temp.rule(1, 'dead_letter_rate', 2, 600) AS rate, pg_temp.rule(1, 'oldest_due_age', NULL, 60) AS due,
                              pg_temp.rule(1, 'stuck_scope', NULL, 60) AS stuck,
                              (wharf.create_instance_alert_rule('everything', 'issue_opened', NULL, NULL, 'slack', 'https://hooks.slack.com/services/T/B/y', NULL, 'admin') ->> 'id')::bigint AS instance;
SELECT is(jsonb_array_length(wharf.list_alert_rules(1)), 5, 'list_alert_rules: the workspace''s five');
SELECT is(jsonb_array_length(wharf.list_instance_alert_rules()), 1, 'list_instance_alert_rules: the instance''s one');
SELECT is(wharf.list_alert_rules(1) -> 0 ->> 'destination_host', 'alerts.example', 'a rule shows its destination''s host');
SELECT ok(NOT (wharf.list_alert_rules(1)::text ~ 'whsec_|/services/|/in"'), 'and neither its secret nor its URL');

-- The sender's lease.
SELECT throws_ok($$SELECT wharf.take_alert_sender('h', '0 seconds')$$, '22023', NULL, 'a lease that is not positive is 22023');
CREATE TEMP TABLE lease AS SELECT wharf.take_alert_sender('host-a', '1 minute') AS token;
SELECT isnt((SELECT token FROM lease), NULL, 'host-a takes the lease');
SELECT is(wharf.take_alert_sender('host-b', '1 minute'), NULL, 'host-b does not while it holds');
SELECT is(wharf.take_alert_sender('host-a', '1 minute', (SELECT token FROM lease)), (SELECT token FROM lease), 'host-a extends it with its token');
SELECT throws_ok($$SELECT wharf.evaluate_alert_rules(gen_random_uuid())$$, 'WH412', NULL, 'evaluating without the lease is WH412');
SELECT throws_ok($$SELECT wharf.due_alerts(gen_random_uuid(), 10)$$, 'WH412', NULL, 'so is reading the due alerts');

-- Nothing to say yet.
SELECT is(wharf.evaluate_alert_rules((SELECT token FROM lease)), 0, 'nothing fires on an empty inbox');

-- A failure in workspace 1 opens an issue: the workspace rule and the instance rule fire, once each.
SELECT pg_temp.admit_event('repo:a', 'a1');
SELECT pg_temp.kill('a1', 'TypeError');
SELECT is(wharf.evaluate_alert_rules((SELECT token FROM lease)), 2, 'an issue opened: the workspace''s and the instance''s rule fire');
SELECT is(wharf.evaluate_alert_rules((SELECT token FROM lease)), 0, 'evaluating again adds nothing (deduplicated)');
SELECT results_eq($$SELECT kind, workspace_id, facts -> 'issue' ->> 'error_class' FROM wharf.alert WHERE rule_id = (SELECT opened FROM r)$$,
                  $$VALUES ('issue_opened', 1::bigint, 'TypeError')$$, 'the alert names the issue');
SELECT ok(NOT (SELECT bool_or(facts::text ~ '"n"|payload|headers|whsec_') FROM wharf.alert), 'no alert holds a payload, a header or a secret');

-- Workspace 2's failure: only the instance rule.
SELECT pg_temp.admit_event(2, 'repo:b', 'b1');
SELECT pg_temp.kill('b1', 'TypeError');
SELECT is(wharf.evaluate_alert_rules((SELECT token FROM lease)), 1, 'another workspace''s issue: the instance rule only');
SELECT is(jsonb_array_length(wharf.list_alerts(2)), 0, 'workspace 2 has no rule, so no alerts of its own');
SELECT is(jsonb_array_length(wharf.list_alerts(NULL)), 2, 'the instance rule has two');

-- The dead-letter rate: a second dead letter within 10 minutes reaches 2.
SELECT pg_temp.admit_event('repo:c', 'c1');
SELECT pg_temp.kill('c1', 'TypeError');
SELECT is(wharf.evaluate_alert_rules((SELECT token FROM lease)), 1, 'two dead letters within the window: the rate fires');
SELECT is((SELECT (facts ->> 'dead')::int FROM wharf.alert WHERE rule_id = (SELECT rate FROM r)), 2, 'counting them');

-- Reopened: resolved, then the failure returns.
SELECT wharf.set_issue_status(1, (SELECT id FROM wharf.issue WHERE workspace_id = 1), 'resolved', 'ops');
SELECT pg_temp.admit_event('repo:d', 'd1');
SELECT pg_temp.kill('d1', 'TypeError');
SELECT is((SELECT count(*)::int FROM wharf.alert WHERE rule_id = (SELECT reopened FROM r) AND dedupe_key LIKE 'issue-reopened:%'),
          0, 'before evaluation, nothing');
SELECT ok(wharf.evaluate_alert_rules((SELECT token FROM lease)) >= 1, 'the reopening fires');
SELECT is((SELECT count(*)::int FROM wharf.alert WHERE rule_id = (SELECT reopened FROM r)), 1, 'once');

-- Oldest due and stuck: an event due and waiting for a claimer for two minutes.
SELECT pg_temp.admit_event('repo:e', 'e1');
UPDATE wharf.provider_event SET received_at = now() - interval '2 minutes', next_attempt_at = now() - interval '2 minutes'
 WHERE delivery_key = 'e1';
UPDATE wharf.scope SET ready_at = ready_at - interval '2 minutes' WHERE head_id = pg_temp.id('e1');
SELECT ok(wharf.evaluate_alert_rules((SELECT token FROM lease)) >= 2, 'the oldest due age and the stuck scope fire');
SELECT is((SELECT facts -> 'head' ->> 'id' FROM wharf.alert WHERE rule_id = (SELECT stuck FROM r) AND facts ->> 'scope_key' = '1:generic:repo:e'),
          pg_temp.id('e1')::text, 'the stuck alert names the head');
SELECT ok((SELECT (facts ->> 'age_seconds')::int >= 120 FROM wharf.alert WHERE rule_id = (SELECT due FROM r)), 'the due alert its age');

-- Delivery: due ones, attempts recorded, backoff, given up after 8.
SELECT ok((SELECT bool_and(a ->> 'url' IS NOT NULL) FROM jsonb_array_elements(wharf.due_alerts((SELECT token FROM lease), 100)) a),
          'due_alerts gives the sender its URLs');
CREATE TEMP TABLE first_alert AS SELECT id FROM wharf.alert WHERE rule_id = (SELECT opened FROM r);
SELECT is(wharf.record_alert_attempt((SELECT token FROM lease), (SELECT id FROM first_alert), true, 204, NULL, '1 second'),
          'delivered', 'a delivered alert');
SELECT is(wharf.record_alert_attempt((SELECT token FROM lease), (SELECT id FROM first_alert), true, 204, NULL, '1 second'),
          NULL, 'is recorded once');
CREATE TEMP TABLE flaky AS SELECT id FROM wharf.alert WHERE rule_id = (SELECT rate FROM r);
SELECT is(wharf.record_alert_attempt((SELECT token FROM lease), (SELECT id FROM flaky), false, 503, NULL, '10 seconds'),
          'pending', 'a failed attempt leaves it pending');
SELECT ok((SELECT next_attempt_at > clock_timestamp() + interval '4 seconds' FROM wharf.alert WHERE id = (SELECT id FROM flaky)),
          'due again after the backoff');
SELECT throws_ok(format($$SELECT wharf.record_alert_attempt('%s', %s, false, NULL, 'connect ECONNREFUSED 10.0.0.1', '1 second')$$,
                        (SELECT token FROM lease), (SELECT id FROM flaky)), '22023', NULL, 'an error message instead of a class is 22023');
SELECT is((SELECT wharf.record_alert_attempt((SELECT token FROM lease), (SELECT id FROM flaky), false, NULL, 'ECONNREFUSED', '1 second')
             FROM generate_series(2, 8) ORDER BY 1 LIMIT 1), 'failed', 'after 8 attempts it has failed for good');

-- The sent-alerts list names what each alert was about.
SELECT is((SELECT (a ->> 'issue_id')::bigint FROM jsonb_array_elements(wharf.list_alerts(1)) a
            WHERE (a ->> 'rule_id')::bigint = (SELECT opened FROM r)),
          (SELECT id FROM wharf.issue WHERE workspace_id = 1), 'list_alerts names an issue alert''s issue');
SELECT is((SELECT a ->> 'about' FROM jsonb_array_elements(wharf.list_alerts(1)) a WHERE (a ->> 'rule_id')::bigint = (SELECT opened FROM r)),
          format('issue %s: generic ping TypeError', (SELECT id FROM wharf.issue WHERE workspace_id = 1)), 'and says what fails');
SELECT is((SELECT a ->> 'scope_key' FROM jsonb_array_elements(wharf.list_alerts(1)) a WHERE (a ->> 'rule_id')::bigint = (SELECT stuck FROM r)),
          '1:generic:repo:e', 'a stuck-scope alert''s scope');

-- A test alert: through the rule's channel, marked.
SELECT is(wharf.send_test_alert(2, (SELECT opened FROM r), 'ops'), NULL, 'another workspace cannot test a rule');
SELECT throws_ok(format('SELECT wharf.send_test_alert(1, %s, NULL)', (SELECT opened FROM r)), '22004', NULL, 'a test needs an account');
CREATE TEMP TABLE tried AS SELECT wharf.send_test_alert(1, (SELECT opened FROM r), 'ops') AS alert;
SELECT is((SELECT alert ->> 'test' FROM tried), 'true', 'send_test_alert records a test');
SELECT is((SELECT alert ->> 'about' FROM tried), 'test alert', 'which the list says');
SELECT is((SELECT a ->> 'test' FROM jsonb_array_elements(wharf.due_alerts((SELECT token FROM lease), 100)) a
            WHERE a ->> 'id' = (SELECT alert ->> 'id' FROM tried)), 'true', 'due at once, marked for the sender');

-- Editing a rule keeps it, and its alerts.
CREATE TEMP TABLE before_edit AS SELECT count(*) AS alerts FROM wharf.alert WHERE rule_id = (SELECT opened FROM r);
SELECT is(wharf.edit_alert_rule(2, (SELECT opened FROM r), 'pager', 'issue_opened', NULL, NULL, 'webhook', NULL, NULL, 'ops2'),
          NULL, 'another workspace cannot edit it');
SELECT throws_ok(format($$SELECT wharf.edit_alert_rule(1, %s, 'pager', 'dead_letter_rate', NULL, 60, 'webhook', NULL, NULL, 'ops2')$$,
                        (SELECT opened FROM r)), '22023', NULL, 'an edit is validated as a new rule is');
SELECT is(wharf.edit_alert_rule(1, (SELECT opened FROM r), 'pager', 'issue_reopened', NULL, NULL, 'webhook', NULL, NULL, 'ops2')
            - 'created_at' - 'updated_at',
          jsonb_build_object('id', (SELECT opened FROM r), 'workspace_id', 1, 'name', 'pager', 'kind', 'issue_reopened',
                             'threshold', NULL, 'window_seconds', NULL, 'destination', 'webhook', 'destination_host', 'alerts.example',
                             'created_by', 'ops', 'updated_by', 'ops2'),
          'edit_alert_rule changes it in place and says who edited it');
SELECT results_eq(format('SELECT url, secret FROM wharf.alert_rule WHERE id = %s', (SELECT opened FROM r)),
                  $$VALUES ('https://alerts.example/in', 'whsec_c2VjcmV0LXNlY3JldA==')$$, 'keeping the URL and secret not given');
SELECT is((SELECT count(*) FROM wharf.alert WHERE rule_id = (SELECT opened FROM r)), (SELECT alerts FROM before_edit),
          'and its alerts');
SELECT throws_ok(format($$SELECT wharf.edit_alert_rule(1, %s, 'pager', 'issue_reopened', NULL, NULL, 'slack', NULL, NULL, 'ops2')$$,
                        (SELECT opened FROM r)), '22023', 'wharf: a new destination needs its URL', 'a new destination needs its URL');
SELECT is(wharf.edit_alert_rule(1, (SELECT opened FROM r), 'pager', 'issue_reopened', NULL, NULL, 'slack',
                                'https://hooks.slack.com/services/T/B/z', NULL, 'ops2') ->> 'destination_host',
          'hooks.slack.com', 'a new destination');
SELECT is((SELECT secret FROM wharf.alert_rule WHERE id = (SELECT opened FROM r)), NULL, 'a Slack rule drops the secret');

-- Retention and the lease's end.
UPDATE wharf.failure_minute SET minute = minute - interval '2 days';
SELECT wharf.purge_issues();
SELECT is((SELECT count(*)::int FROM wharf.failure_minute), 0, 'purge_issues forgets failure counts older than a day');
UPDATE wharf.alert SET created_at = now() - interval '31 days';
SELECT is(wharf.purge_alerts(), 2::bigint, 'purge_alerts forgets delivered and failed alerts past issue_retention, not pending ones');
SELECT ok(wharf.release_alert_sender((SELECT token FROM lease)), 'host-a gives the lease back');
SELECT isnt(wharf.take_alert_sender('host-b', '1 minute'), NULL, 'and host-b takes it');

SELECT * FROM finish();
ROLLBACK;
