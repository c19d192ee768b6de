-- Bulk replay: every DEAD event of a workspace matching a filter goes back to
-- the queue as replay sends it, in id order, in batches; the progress is
-- recorded, events that died after the start are not taken, uncertain ones
-- only with force, a running one can be cancelled, and a workspace reaches
-- only its own bulk replays.
BEGIN;
SELECT plan(51);

SELECT wharf.upsert_workspace(1), wharf.upsert_workspace(2);
SELECT wharf.upsert_connection(1, 'generic', 'https://hooks.example/1', 'webhook', 'one');
SELECT wharf.upsert_connection(2, 'generic', 'https://hooks.example/2', 'webhook', 'two');

-- Each event has a scope of its own, so that all are claimed at once.
SELECT pg_temp.admit_event(1, 'repo:' || k, k) FROM unnest(ARRAY['d1', 'd2', 'd3', 'd4', 'd5', 'd6', 'late']) k;
SELECT pg_temp.admit_event(2, 'repo:other', 'w2');
CREATE TEMP TABLE lease AS SELECT id, lease_epoch, delivery_key FROM wharf.claim('w', 100);
SELECT wharf.fail(id, lease_epoch, 'permanent', 'TypeError') FROM lease WHERE delivery_key IN ('d1', 'd2', 'd3', 'd4', 'w2');
SELECT wharf.fail(id, lease_epoch, 'permanent', 'SyntaxError') FROM lease WHERE delivery_key = 'd5';
SELECT wharf.fail(id, lease_epoch, 'uncertain', 'TypeError') FROM lease WHERE delivery_key = 'd6';

CREATE FUNCTION pg_temp.start(p_filter jsonb, p_force boolean DEFAULT false) RETURNS bigint
LANGUAGE sql AS $$ SELECT (wharf.start_bulk_replay(1, p_filter, 'ops', p_force) ->> 'id')::bigint $$;
CREATE FUNCTION pg_temp.states(VARIADIC p_keys text[]) RETURNS text[]
LANGUAGE sql AS $$
  SELECT array_agg(state ORDER BY id) FROM wharf.provider_event WHERE delivery_key = ANY (p_keys)
$$;

-- Bad input.
SELECT throws_ok($$SELECT wharf.start_bulk_replay(404, '{}', 'ops')$$, 'P0002', NULL, 'an unknown workspace is P0002');
SELECT throws_ok($$SELECT wharf.start_bulk_replay(1, '{"state": "DONE"}', 'ops')$$, '22023', NULL, 'an unknown filter key is 22023');
SELECT throws_ok($$SELECT wharf.start_bulk_replay(1, '{"provider": 1}', 'ops')$$, '22023', NULL, 'a filter value that is not text is 22023');
SELECT throws_ok($$SELECT wharf.start_bulk_replay(1, '[]', 'ops')$$, '22023', NULL, 'a filter that is not an object is 22023');
SELECT throws_ok($$SELECT wharf.start_bulk_replay(1, '{"dead_after": "yesterday-ish"}', 'ops')$$, '22007', NULL, 'a time that does not parse is 22007');
SELECT throws_ok($$SELECT wharf.start_bulk_replay(1, '{}', '')$$, '22004', NULL, 'an empty account is 22004');

-- A filter by error class: four TypeErrors; the uncertain one waits for force.
CREATE TEMP TABLE job AS SELECT pg_temp.start('{"error_class": "TypeError", "provider": "generic"}') AS id;
SELECT results_eq($$SELECT r ->> 'state', (r ->> 'matched')::int, (r ->> 'replayed')::int, r ->> 'requested_by', r -> 'filter'
                      FROM wharf.show_bulk_replay(1, (SELECT id FROM job)) r$$,
                  $$VALUES ('running', 4, 0, 'ops', '{"error_class": "TypeError", "provider": "generic"}'::jsonb)$$,
                  'started: four events match, none replayed yet');
SELECT is(pg_temp.states('d1', 'd2', 'd3', 'd4'), ARRAY['DEAD', 'DEAD', 'DEAD', 'DEAD'], 'starting replays nothing');
SELECT throws_ok($$SELECT wharf.continue_bulk_replay(1, (SELECT id FROM job), 0)$$, '22023', NULL, 'a batch of 0 is 22023');
SELECT throws_ok($$SELECT wharf.continue_bulk_replay(2, (SELECT id FROM job), 3)$$, 'P0002', NULL,
                 'another workspace cannot run it (P0002)');
SELECT is(wharf.show_bulk_replay(2, (SELECT id FROM job)), NULL, 'nor see it');

SELECT is((wharf.continue_bulk_replay(1, (SELECT id FROM job), 3) ->> 'replayed')::int, 3, 'a batch of 3 replays 3');
SELECT is(pg_temp.states('d1', 'd2', 'd3', 'd4'), ARRAY['QUEUED', 'QUEUED', 'QUEUED', 'DEAD'], 'the first three in id order');
SELECT results_eq($$SELECT attempt, failures, dead_at, replayed_by, error_class FROM wharf.provider_event WHERE delivery_key = 'd1'$$,
                  $$VALUES (0, 0, NULL::timestamptz, 'ops', 'TypeError')$$, 'each as replay sends it');
SELECT is(wharf.show_bulk_replay(1, (SELECT id FROM job)) ->> 'state', 'running', 'still running after a full batch');

SELECT results_eq($$SELECT r ->> 'state', (r ->> 'replayed')::int, (r ->> 'skipped')::int
                      FROM wharf.continue_bulk_replay(1, (SELECT id FROM job), 3) r$$,
                  $$VALUES ('finished', 4, 0)$$, 'the short last batch finishes it');
SELECT is(pg_temp.states('d4', 'd5', 'd6', 'w2'), ARRAY['QUEUED', 'DEAD', 'DEAD', 'DEAD'],
          'other error classes, the uncertain one and the other workspace stay DEAD');
SELECT is((wharf.continue_bulk_replay(1, (SELECT id FROM job), 3) ->> 'replayed')::int, 4,
          'continuing a finished one changes nothing');

-- Force takes the uncertain one.
SELECT is((wharf.start_bulk_replay(1, '{"error_class": "TypeError"}', 'ops', true) ->> 'matched')::int, 1,
          'with force, the uncertain TypeError matches');

-- An event replayed meanwhile is skipped; one that dies after the start is not taken.
CREATE TEMP TABLE job2 AS SELECT pg_temp.start('{"subject": "repo:d5"}') AS id;
CREATE TEMP TABLE job3 AS SELECT pg_temp.start('{"subject": "repo:late"}') AS id;
SELECT is(wharf.show_bulk_replay(1, (SELECT id FROM job3)) ->> 'matched', '0', 'a leased event does not match');
SELECT wharf.fail(id, lease_epoch, 'permanent', 'TypeError') FROM lease WHERE delivery_key = 'late';
SELECT ok(wharf.replay(1, pg_temp.id('d5'), 'someone'), 'd5 is replayed by hand meanwhile');
SELECT results_eq($$SELECT r ->> 'state', (r ->> 'replayed')::int, (r ->> 'skipped')::int
                      FROM wharf.continue_bulk_replay(1, (SELECT id FROM job2), 10) r$$,
                  $$VALUES ('finished', 0, 1)$$, 'an event replayed meanwhile counts as skipped');
SELECT is((wharf.continue_bulk_replay(1, (SELECT id FROM job3), 10) ->> 'replayed')::int, 0,
          'an event dead after the start is not taken');
SELECT is(pg_temp.states('late'), ARRAY['DEAD'], 'and stays DEAD');

-- Dead between two times.
SELECT is((wharf.start_bulk_replay(1, '{"dead_before": "2000-01-01T00:00:00Z"}', 'ops') ->> 'matched')::int, 0,
          'dead_before excludes later deaths');
SELECT is((wharf.start_bulk_replay(1, jsonb_build_object('dead_after', now() - interval '1 hour')::jsonb, 'ops') ->> 'matched')::int, 1,
          'dead_after includes the one left (late)');

-- Times in the filter are kept in UTC, whatever the caller's time zone.
SET LOCAL timezone = 'Asia/Tokyo';
SELECT is(wharf.start_bulk_replay(1, '{"dead_after": "2026-12-01 09:00"}', 'ops') -> 'filter' ->> 'dead_after',
          '2026-12-01T00:00:00.000000Z', 'a time without a zone is read in the caller''s and stored in UTC');
RESET timezone;

-- Listing, and a batch another transaction runs.
SELECT is(jsonb_array_length(wharf.list_bulk_replays(1)), 7, 'the workspace lists its bulk replays');
SELECT is((wharf.list_bulk_replays(1) -> 0 ->> 'id')::bigint,
          (SELECT max(id) FROM wharf.bulk_replay), 'newest first');
SELECT is(wharf.list_bulk_replays(2), '[]'::jsonb, 'another workspace lists none of them');
SELECT throws_ok($$SELECT wharf.list_bulk_replays(404)$$, 'P0002', NULL, 'an unknown workspace is P0002');
SELECT throws_ok($$SELECT wharf.continue_bulk_replay(1, -1, 3)$$, 'P0002', NULL, 'an unknown bulk replay is P0002');
SELECT is(wharf.show_bulk_replay(1, -1), NULL, 'show of an unknown one is NULL');

-- Any filter: payload and headers by containment, arrival times; the count first.
CREATE FUNCTION pg_temp.admit_payload(p_key text, p_payload jsonb, p_headers jsonb) RETURNS bigint
LANGUAGE sql AS $$
  SELECT wharf.subscribe((SELECT id FROM wharf.connection WHERE workspace_id = 1), 'repo:' || p_key);
  SELECT (wharf.admit('generic', 'https://hooks.example/1', p_key, 'push',
                      jsonb_build_object('connection_id', (SELECT id FROM wharf.connection WHERE workspace_id = 1)), ARRAY['repo:' || p_key],
                      p_payload, p_headers) -> 'events' -> 0 ->> 'event_id')::bigint
$$;
SELECT pg_temp.admit_payload('p1', '{"repository": {"full_name": "acme/api", "id": 7}, "n": 1}', '{"x-github-event": "push"}'),
       pg_temp.admit_payload('p2', '{"repository": {"full_name": "acme/web"}}', '{"x-github-event": "push"}');
CREATE TEMP TABLE lease2 AS SELECT id, lease_epoch, delivery_key FROM wharf.claim('w', 100);
SELECT wharf.fail(id, lease_epoch, 'permanent', 'TypeError') FROM lease2 WHERE delivery_key IN ('p1', 'p2');
SELECT wharf.release(id, lease_epoch) FROM lease2 WHERE delivery_key NOT IN ('p1', 'p2');
SELECT is(wharf.count_bulk_replay(1, '{"payload": {"repository": {"full_name": "acme/api"}}}'), 1::bigint,
          'count first: one dead letter''s payload contains the value');
SELECT is(wharf.count_bulk_replay(1, '{"headers": {"x-github-event": "push"}}'), 2::bigint, 'two whose headers do');
SELECT is(wharf.count_bulk_replay(1, '{"headers": {"x-github-event": "push"}, "received_before": "2000-01-01T00:00:00Z"}'), 0::bigint,
          'combined with the arrival time');
SELECT is(wharf.count_bulk_replay(2, '{"headers": {"x-github-event": "push"}}'), 0::bigint, 'none in another workspace');
SELECT is(pg_temp.states('p1', 'p2'), ARRAY['DEAD', 'DEAD'], 'counting replays nothing');
SELECT throws_ok($$SELECT wharf.count_bulk_replay(1, '{"payload": "acme"}')$$, '22023', NULL, 'a payload filter that is not an object is 22023');
SELECT throws_ok($$SELECT wharf.count_bulk_replay(404, '{}')$$, 'P0002', NULL, 'count: an unknown workspace is P0002');
CREATE TEMP TABLE job4 AS SELECT (wharf.start_bulk_replay(1, '{"payload": {"repository": {"full_name": "acme/api"}}}', 'ops') ->> 'id')::bigint AS id;
SELECT is((wharf.continue_bulk_replay(1, (SELECT id FROM job4), 10) ->> 'replayed')::int, 1, 'a bulk replay by payload replays it');
SELECT is(pg_temp.states('p1', 'p2'), ARRAY['QUEUED', 'DEAD'], 'and only it');

-- Cancel: a running bulk replay stops after the batch it is in; what it
-- replayed stays replayed.
SELECT pg_temp.admit_event(1, 'repo:' || k, k) FROM unnest(ARRAY['c1', 'c2', 'c3']) k;
CREATE TEMP TABLE cancel_lease AS SELECT id, lease_epoch, delivery_key FROM wharf.claim('w', 100);
SELECT wharf.fail(id, lease_epoch, 'permanent', 'CancelMe') FROM cancel_lease WHERE delivery_key IN ('c1', 'c2', 'c3');
SELECT wharf.release(id, lease_epoch) FROM cancel_lease WHERE delivery_key NOT IN ('c1', 'c2', 'c3');
CREATE TEMP TABLE job5 AS SELECT pg_temp.start('{"error_class": "CancelMe"}') AS id;
SELECT is((wharf.continue_bulk_replay(1, (SELECT id FROM job5), 1) ->> 'replayed')::int, 1, 'one batch of one');
SELECT throws_ok(format($$SELECT wharf.cancel_bulk_replay(2, %s, 'intruder')$$, (SELECT id FROM job5)), 'P0002', NULL,
                 'another workspace cannot cancel it');
SELECT throws_ok(format($$SELECT wharf.cancel_bulk_replay(1, %s, '')$$, (SELECT id FROM job5)), '22004', NULL,
                 'an empty account is 22004');
SELECT results_eq(format($$SELECT r ->> 'cancelled', r ->> 'state', r ->> 'cancelled_by', (r ->> 'skipped')::int
                             FROM wharf.cancel_bulk_replay(1, %s, 'alice') r$$, (SELECT id FROM job5)),
                  $$VALUES ('true', 'cancelled', 'alice', 0)$$, 'cancelled by alice, nothing counted as skipped');
SELECT is(wharf.continue_bulk_replay(1, (SELECT id FROM job5), 10) ->> 'state', 'cancelled', 'a runner''s next batch replays nothing');
SELECT is(pg_temp.states('c1', 'c2', 'c3'), ARRAY['QUEUED', 'DEAD', 'DEAD'], 'the first stays replayed, the rest stay dead');
SELECT is((wharf.show_bulk_replay(1, (SELECT id FROM job5)) ->> 'replayed')::int, 1, 'its progress kept');
SELECT is(wharf.cancel_bulk_replay(1, (SELECT id FROM job5), 'bob') ->> 'cancelled', 'false', 'cancelled once');
SELECT results_eq(format($$SELECT r ->> 'cancelled', r ->> 'state' FROM wharf.cancel_bulk_replay(1, %s, 'bob') r$$, (SELECT id FROM job4)),
                  $$VALUES ('false', 'finished')$$, 'a finished one is not cancelled');

SELECT * FROM finish();
ROLLBACK;
