-- Issues: every failed or expired lease counts into the issue of its
-- workspace, provider, event type, error class and the fingerprint of the
-- frames it was thrown at (none: ''); released leases count
-- nowhere; a resolved issue reopens when the failure returns, an ignored one
-- keeps counting and stays ignored; a workspace reaches only its own issues;
-- the table is bounded by issue_limit per workspace and by purge_issues.
BEGIN;
SELECT plan(57);

SELECT wharf.upsert_workspace(1), wharf.upsert_workspace(2);
SELECT wharf.upsert_connection(1, 'generic', 'https://hooks.example/1', 'webhook', 'one');
SELECT wharf.upsert_connection(2, 'generic', 'https://hooks.example/2', 'webhook', 'two');

-- Admits p_key of event type p_type in workspace p_ws, in a scope of its own.
CREATE FUNCTION pg_temp.admit_typed(p_ws bigint, p_key text, p_type text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_connection bigint := (SELECT id FROM wharf.connection WHERE workspace_id = p_ws);
BEGIN
  PERFORM wharf.subscribe(v_connection, 'repo:' || p_key);
  RETURN (wharf.admit('generic', 'https://hooks.example/' || p_ws, p_key, p_type,
                      jsonb_build_object('connection_id', v_connection), ARRAY['repo:' || p_key],
                      '{"n": 1}', '{}') -> 'events' -> 0 ->> 'event_id')::bigint;
END $$;

-- Claims every due head, ends p_key's lease as p_kind ('released' releases
-- it, 'expired' lets the reaper take it) and gives every other lease back.
CREATE FUNCTION pg_temp.end_lease(p_key text, p_kind text, p_class text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_row record;
BEGIN
  FOR v_row IN SELECT id, lease_epoch, delivery_key FROM wharf.claim('w', 100) LOOP
    IF v_row.delivery_key <> p_key THEN
      PERFORM wharf.release(v_row.id, v_row.lease_epoch);
    ELSIF p_kind = 'released' THEN
      PERFORM wharf.release(v_row.id, v_row.lease_epoch);
    ELSIF p_kind = 'expired' THEN
      UPDATE wharf.provider_event SET leased_until = now() - interval '1 hour' WHERE id = v_row.id;
      PERFORM wharf.reap();
    ELSE
      PERFORM wharf.fail(v_row.id, v_row.lease_epoch, p_kind, p_class);
    END IF;
  END LOOP;
END $$;

CREATE FUNCTION pg_temp.issue(p_ws bigint, p_type text, p_class text) RETURNS wharf.issue
LANGUAGE sql AS $$
  SELECT * FROM wharf.issue
   WHERE workspace_id = p_ws AND provider = 'generic' AND event_type = p_type AND error_class = p_class
$$;

-- Opened by a failure.
SELECT pg_temp.admit_typed(1, 'a1', 'push'), pg_temp.admit_typed(1, 'a2', 'push'), pg_temp.admit_typed(1, 'a3', 'push');
SELECT pg_temp.end_lease('a1', 'transient', 'TimeoutError');
SELECT results_eq($$SELECT status, status_by, failures, dead, sample_event_id, reopened FROM pg_temp.issue(1, 'push', 'TimeoutError')$$,
                  $$VALUES ('open', NULL::text, 1::bigint, 0::bigint, pg_temp.id('a1'), 0)$$,
                  'a transient failure opens an issue of its workspace, provider, event type and class');
SELECT pg_temp.end_lease('a2', 'permanent', 'TimeoutError');
SELECT results_eq($$SELECT failures, dead, sample_event_id FROM pg_temp.issue(1, 'push', 'TimeoutError')$$,
                  $$VALUES (2::bigint, 1::bigint, pg_temp.id('a2'))$$,
                  'the same failure on another event counts into it, its dead counted, the sample the latest');
SELECT ok((SELECT first_seen_at <= last_seen_at FROM pg_temp.issue(1, 'push', 'TimeoutError')), 'first seen is not after last seen');
SELECT is((SELECT count(*) FROM wharf.issue), 1::bigint, 'one issue so far');

SELECT pg_temp.end_lease('a3', 'released');
SELECT is((SELECT count(*) FROM wharf.issue), 1::bigint, 'a released lease opens nothing');
SELECT pg_temp.end_lease('a3', 'expired');
SELECT results_eq($$SELECT status, failures FROM pg_temp.issue(1, 'push', 'LeaseExpired')$$,
                  $$VALUES ('open', 1::bigint)$$, 'an expired lease counts under LeaseExpired');
SELECT pg_temp.admit_typed(1, 'b1', 'issues');
SELECT pg_temp.end_lease('b1', 'unknown', 'TimeoutError');
SELECT is((SELECT count(*) FROM wharf.issue WHERE workspace_id = 1), 3::bigint, 'another event type is another issue');

-- Workspace 2 has its own.
SELECT pg_temp.admit_typed(2, 'c1', 'push');
SELECT pg_temp.end_lease('c1', 'permanent', 'TimeoutError');
SELECT is((pg_temp.issue(2, 'push', 'TimeoutError')).failures, 1::bigint, 'the same failure in workspace 2 is its own issue');
SELECT is(jsonb_array_length(wharf.list_issues(1)), 3, 'list_issues: the three of workspace 1');
SELECT is(jsonb_array_length(wharf.list_issues(2)), 1, 'list_issues: the one of workspace 2');
SELECT is(wharf.list_issues(1) -> 0 ->> 'error_class', 'TimeoutError', 'latest seen first');
SELECT is(jsonb_array_length(wharf.list_issues(1, 'open', 2)), 2, 'a limit and a status filter');
SELECT is(wharf.show_issue(2, (pg_temp.issue(1, 'push', 'TimeoutError')).id), NULL, 'another workspace cannot see it');
SELECT is(wharf.set_issue_status(2, (pg_temp.issue(1, 'push', 'TimeoutError')).id, 'resolved', 'intruder'), NULL,
          'nor change it');
SELECT is((pg_temp.issue(1, 'push', 'TimeoutError')).status, 'open', 'which stays open');

-- Bad input.
SELECT throws_ok($$SELECT wharf.list_issues(404)$$, 'P0002', NULL, 'an unknown workspace is P0002');
SELECT throws_ok($$SELECT wharf.list_issues(1, 'closed')$$, '22023', NULL, 'an unknown status filter is 22023');
SELECT throws_ok($$SELECT wharf.list_issues(1, NULL, 0)$$, '22023', NULL, 'a limit of 0 is 22023');
SELECT throws_ok(format($$SELECT wharf.set_issue_status(1, %s, 'closed', 'ops')$$, (pg_temp.issue(1, 'push', 'TimeoutError')).id),
                 '22023', NULL, 'an unknown status is 22023');
SELECT throws_ok(format($$SELECT wharf.set_issue_status(1, %s, 'resolved', '')$$, (pg_temp.issue(1, 'push', 'TimeoutError')).id),
                 '22004', NULL, 'an empty account is 22004');
SELECT throws_ok($$SELECT wharf.set_issue_status(NULL, 1, 'resolved', 'ops')$$, '22004', NULL, 'a NULL workspace is 22004');

-- Acknowledged, resolved, reopened.
SELECT is(wharf.set_issue_status(1, (pg_temp.issue(1, 'push', 'TimeoutError')).id, 'acknowledged', 'alice') ->> 'status_by',
          'alice', 'acknowledged by alice');
SELECT pg_temp.admit_typed(1, 'a4', 'push');
SELECT pg_temp.end_lease('a4', 'transient', 'TimeoutError');
SELECT results_eq($$SELECT status, status_by, failures, reopened FROM pg_temp.issue(1, 'push', 'TimeoutError')$$,
                  $$VALUES ('acknowledged', 'alice', 3::bigint, 0)$$, 'an acknowledged issue keeps counting, still acknowledged');
SELECT is(wharf.set_issue_status(1, (pg_temp.issue(1, 'push', 'TimeoutError')).id, 'resolved', 'bob') ->> 'status',
          'resolved', 'resolved by bob');
SELECT pg_temp.admit_typed(1, 'a5', 'push');
SELECT pg_temp.end_lease('a5', 'transient', 'TimeoutError');
SELECT results_eq($$SELECT status, status_by, failures, reopened, reopened_at IS NOT NULL FROM pg_temp.issue(1, 'push', 'TimeoutError')$$,
                  $$VALUES ('open', NULL::text, 4::bigint, 1, true)$$, 'the failure returns: reopened, by Wharf');
SELECT is(wharf.set_issue_status(1, (pg_temp.issue(1, 'push', 'LeaseExpired')).id, 'ignored', 'carol') ->> 'status',
          'ignored', 'ignored by carol');
SELECT pg_temp.admit_typed(1, 'a6', 'push');
SELECT pg_temp.end_lease('a6', 'expired');
SELECT results_eq($$SELECT status, failures, reopened FROM pg_temp.issue(1, 'push', 'LeaseExpired')$$,
                  $$VALUES ('ignored', 2::bigint, 0)$$, 'an ignored issue keeps counting and stays ignored');

-- The events of an issue.
SELECT is((SELECT array_agg((e ->> 'id')::bigint) FROM jsonb_array_elements(
             wharf.issue_events(1, (pg_temp.issue(1, 'push', 'TimeoutError')).id) -> 'events') e),
          ARRAY[pg_temp.id('a5'), pg_temp.id('a4'), pg_temp.id('a2'), pg_temp.id('a1')],
          'issue_events: the events whose last cause is its class, newest first');
SELECT is(wharf.issue_events(1, (pg_temp.issue(1, 'push', 'TimeoutError')).id, 3) ->> 'next_cursor',
          pg_temp.id('a2')::text, 'paged');
SELECT is(wharf.issue_events(2, (pg_temp.issue(1, 'push', 'TimeoutError')).id), NULL, 'not to another workspace');

-- Bounded: past issue_limit groups, a workspace's new failures count into '*'.
SELECT wharf.set_setting('issue_limit', '2');
SELECT pg_temp.admit_typed(2, 'd1', 'pull_request'), pg_temp.admit_typed(2, 'd2', 'release'), pg_temp.admit_typed(2, 'd3', 'fork');
SELECT pg_temp.end_lease('d1', 'permanent', 'TypeError');
SELECT pg_temp.end_lease('d2', 'permanent', 'TypeError');
SELECT pg_temp.end_lease('d3', 'permanent', 'TypeError');
SELECT is((SELECT array_agg(event_type || ':' || failures ORDER BY event_type) FROM wharf.issue WHERE workspace_id = 2),
          ARRAY['*:2', 'pull_request:1', 'push:1'], 'past the limit, new groups count into *');
SELECT is((pg_temp.issue(2, 'push', 'TimeoutError')).failures, 1::bigint, 'an existing group keeps its own issue');

-- Per minute, and gauges.
SELECT is((SELECT sum((m ->> 'failed')::int) FROM jsonb_array_elements(wharf.failure_history(1, 1)) m)::int, 7,
          'failure_history: the seven failed or expired leases of workspace 1 in the last hour');
SELECT is(jsonb_array_length(wharf.failure_history(1, 2)), 120, 'a row per minute, zeros included');
SELECT throws_ok($$SELECT wharf.failure_history(1, 25)$$, '22023', NULL, 'more than 24 hours is 22023');
SELECT is(wharf.issue_gauges() -> 'issues', '{"open": 5, "acknowledged": 0, "resolved": 0, "ignored": 1}'::jsonb,
          'issue_gauges: the instance''s issues by status');

-- Per hour, per issue: the chart of its page.
SELECT results_eq($$SELECT sum(failures), sum(dead) FROM wharf.issue_failure_hour
                     WHERE issue_id = (pg_temp.issue(1, 'push', 'TimeoutError')).id$$,
                  $$VALUES (4::numeric, 1::numeric)$$,
                  'an issue''s hours count its four failures and one dead letter, the acknowledgement and resolution between them nothing');
DELETE FROM wharf.issue_failure_hour WHERE issue_id = (pg_temp.issue(2, 'push', 'TimeoutError')).id;
INSERT INTO wharf.issue_failure_hour (issue_id, hour, failures, dead)
VALUES ((pg_temp.issue(2, 'push', 'TimeoutError')).id, date_trunc('hour', now(), 'UTC') - interval '2 hours', 5, 1),
       ((pg_temp.issue(2, 'push', 'TimeoutError')).id, date_trunc('hour', now(), 'UTC'), 2, 0);
SELECT is((SELECT jsonb_agg(jsonb_build_array(h -> 'at', h -> 'failures', h -> 'dead'))
             FROM jsonb_array_elements(wharf.issue_history(2, (pg_temp.issue(2, 'push', 'TimeoutError')).id, 3)) h),
          jsonb_build_array(jsonb_build_array(to_jsonb(date_trunc('hour', now(), 'UTC') - interval '2 hours'), 5, 1),
                            jsonb_build_array(to_jsonb(date_trunc('hour', now(), 'UTC') - interval '1 hour'), 0, 0),
                            jsonb_build_array(to_jsonb(date_trunc('hour', now(), 'UTC')), 2, 0)),
          'issue_history: an hour per row, oldest first, zeros included, the current hour last');
SELECT is(jsonb_array_length(wharf.issue_history(1, (pg_temp.issue(1, 'push', 'TimeoutError')).id)), 48,
          'the last 48 hours by default');
SELECT is(wharf.issue_history(1, (pg_temp.issue(2, 'push', 'TimeoutError')).id), NULL, 'not to another workspace');
SELECT throws_ok($$SELECT wharf.issue_history(1, 1, 169)$$, '22023', NULL, 'more than a week is 22023');

-- Retention.
UPDATE wharf.issue SET last_seen_at = now() - interval '31 days' WHERE workspace_id = 2;
SELECT throws_ok($$SELECT wharf.purge_issues(0)$$, '22023', NULL, 'a batch of 0 is 22023');
SELECT is(wharf.purge_issues(2), 2::bigint, 'purge_issues deletes a batch of those not seen for issue_retention');
SELECT is(wharf.purge_issues(2), 1::bigint, 'then the rest');
SELECT is((SELECT count(*) FROM wharf.issue WHERE workspace_id = 1), 3::bigint, 'and keeps those seen since');
INSERT INTO wharf.issue_failure_hour (issue_id, hour, failures)
SELECT (pg_temp.issue(1, 'push', 'TimeoutError')).id, date_trunc('hour', now(), 'UTC') - age, 1
  FROM unnest(ARRAY[interval '9 days', interval '7 days']) age;
SELECT is(wharf.purge_issues(100), 1::bigint, 'then the hours past the chart''s week');
SELECT is((SELECT array_agg(hour ORDER BY hour) FROM wharf.issue_failure_hour
            WHERE issue_id = (pg_temp.issue(1, 'push', 'TimeoutError')).id AND hour < now() - interval '1 day'),
          ARRAY[date_trunc('hour', now(), 'UTC') - interval '7 days'], '... keeping the week''s');

-- Frames: a class thrown in two places is two issues; in one place, one.
SELECT wharf.set_setting('issue_limit', '100');
CREATE FUNCTION pg_temp.fail_at(p_key text, p_frames text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_row record;
BEGIN
  FOR v_row IN SELECT id, lease_epoch, delivery_key FROM wharf.claim('w', 100) LOOP
    IF v_row.delivery_key = p_key THEN
      PERFORM wharf.fail(v_row.id, v_row.lease_epoch, 'permanent', 'TypeError', p_frames);
    ELSE
      PERFORM wharf.release(v_row.id, v_row.lease_epoch);
    END IF;
  END LOOP;
END $$;
SELECT pg_temp.admit_typed(1, k, 'order') FROM unnest(ARRAY['f1', 'f2', 'f3', 'f4']) k;
SELECT pg_temp.fail_at('f1', ARRAY['app/orders.ts:10:5 charge', 'app/orders.ts:40:3 handle', 'app/main.ts:7:1', 'app/a.ts:1:1']);
SELECT pg_temp.fail_at('f2', ARRAY['app/orders.ts:10:5 charge', 'app/orders.ts:40:3 handle', 'app/main.ts:7:1', 'app/b.ts:2:2']);
SELECT pg_temp.fail_at('f3', ARRAY['app/orders.ts:22:9 ship', 'app/orders.ts:41:3 handle']);
SELECT pg_temp.fail_at('f4', NULL);
SELECT is((SELECT count(*) FROM wharf.issue WHERE workspace_id = 1 AND event_type = 'order'), 3::bigint,
          'two places and no frames: three TypeError issues of one event type');
SELECT results_eq($$SELECT failures, frames FROM wharf.issue WHERE workspace_id = 1 AND event_type = 'order' ORDER BY id$$,
                  $$VALUES (2::bigint, ARRAY['app/orders.ts:10:5 charge', 'app/orders.ts:40:3 handle', 'app/main.ts:7:1']),
                           (1::bigint, ARRAY['app/orders.ts:22:9 ship', 'app/orders.ts:41:3 handle']),
                           (1::bigint, NULL::text[])$$,
                  'the same top three frames are one issue (a deeper caller does not split it), showing them');
SELECT is((SELECT fingerprint FROM wharf.issue WHERE workspace_id = 1 AND event_type = 'order' AND frames IS NULL), '',
          'a failure without frames groups as before, by its class alone');
SELECT is((SELECT failures FROM pg_temp.issue(1, 'push', 'TimeoutError')), 4::bigint,
          'an issue of before, without frames, keeps its own count');
SELECT is(wharf.show_issue(1, (SELECT id FROM wharf.issue WHERE event_type = 'order' AND frames[1] LIKE '%ship')) -> 'frames',
          '["app/orders.ts:22:9 ship", "app/orders.ts:41:3 handle"]'::jsonb, 'show_issue: its frames');
SELECT is(wharf.show_issue(1, (SELECT id FROM wharf.issue WHERE event_type = 'order' AND frames IS NULL)) -> 'frames',
          '[]'::jsonb, '... [] for none');
SELECT is((SELECT array_agg((e ->> 'id')::bigint) FROM jsonb_array_elements(
             wharf.issue_events(1, (SELECT id FROM wharf.issue WHERE event_type = 'order' AND frames[1] LIKE '%charge')) -> 'events') e),
          ARRAY[pg_temp.id('f2'), pg_temp.id('f1')], 'issue_events: only the events last thrown at its frames');
SELECT is((SELECT array_agg((e ->> 'id')::bigint) FROM jsonb_array_elements(
             wharf.issue_events(1, (SELECT id FROM wharf.issue WHERE event_type = 'order' AND frames IS NULL)) -> 'events') e),
          ARRAY[pg_temp.id('f4')], '... and of the issue without frames, those without');
-- Past the limit, '*' gathers every place: the bound stays one issue per class.
SELECT wharf.set_setting('issue_limit', '1');
SELECT pg_temp.admit_typed(1, k, 'refund') FROM unnest(ARRAY['g1', 'g2']) k;
SELECT pg_temp.fail_at('g1', ARRAY['app/refunds.ts:1:1 one']);
SELECT pg_temp.fail_at('g2', ARRAY['app/refunds.ts:2:1 two']);
SELECT results_eq($$SELECT failures, fingerprint, frames FROM wharf.issue WHERE workspace_id = 1 AND event_type = '*'$$,
                  $$VALUES (2::bigint, '', NULL::text[])$$, 'past issue_limit, both places count into one * issue');
SELECT is((SELECT array_agg((e ->> 'id')::bigint) FROM jsonb_array_elements(
             wharf.issue_events(1, (SELECT id FROM wharf.issue WHERE workspace_id = 1 AND event_type = '*')) -> 'events') e) @>
          ARRAY[pg_temp.id('g2'), pg_temp.id('g1')], true, '... and its events are all of them');

SELECT * FROM finish();
ROLLBACK;
