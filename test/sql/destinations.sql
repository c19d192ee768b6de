-- Destinations: filters validate and match with every operator; admission
-- routes an event to the destinations whose rules it matches, in the same
-- transaction, counting what a filter left out and keeping forward-only
-- events from the handlers; claim_deliveries keeps order per (destination,
-- scope), the in-flight bound, the rate limit and the paused states; failures
-- retry, dead-letter, pause on 410 and open the breaker, which a probe
-- closes; repeats answer as their first try; another workspace sees nothing.
BEGIN;
SELECT plan(127);

CREATE TEMP TABLE vars (name text PRIMARY KEY, value bigint);
-- The suite runs through a plain client: what psql's; would keep, it keeps here.
CREATE FUNCTION pg_temp.put(p_name text, p_value bigint) RETURNS bigint
LANGUAGE sql AS $$
  INSERT INTO vars VALUES (p_name, p_value) ON CONFLICT (name) DO UPDATE SET value = excluded.value RETURNING value
$$;
CREATE FUNCTION pg_temp.v(p_name text) RETURNS bigint
LANGUAGE sql STABLE AS $$ SELECT value FROM vars WHERE name = p_name $$;

SELECT wharf.upsert_workspace(1), wharf.upsert_workspace(2);
SELECT wharf.upsert_connection(1, 'generic', 'https://hooks.example/1', 'webhook', 'one');
SELECT wharf.subscribe(1, 's' || g) FROM generate_series(0, 9) g;

CREATE FUNCTION pg_temp.admit(p_key text, p_subject text, p_payload jsonb, p_type text DEFAULT 'thing',
                              p_headers jsonb DEFAULT '{}')
RETURNS bigint
LANGUAGE sql AS $$
  SELECT (wharf.admit('generic', 'https://hooks.example/1', p_key, p_type, '{"connection_id": 1}', ARRAY[p_subject],
                      p_payload, p_headers) -> 'events' -> 0 ->> 'event_id')::bigint
$$;
CREATE FUNCTION pg_temp.destination(p_ws bigint, p_name text, p_spec jsonb DEFAULT '{}') RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_id bigint := (wharf.create_destination(p_ws, jsonb_build_object('name', p_name, 'url', 'https://app.example/' || p_name)
                                                   || p_spec) ->> 'id')::bigint;
BEGIN
  PERFORM wharf.set_destination_secret(p_ws, v_id, 'aes256gcm:k:iv:' || p_name);
  RETURN v_id;
END $$;
CREATE FUNCTION pg_temp.claimed(p_max integer DEFAULT 100) RETURNS TABLE (delivery_id bigint, epoch bigint, event_id bigint,
                                                                         destination_id bigint, probe boolean)
LANGUAGE sql AS $$
  SELECT c.delivery_id, c.epoch, c.event_id, c.destination_id, c.probe FROM wharf.claim_deliveries('w', p_max) c
$$;
CREATE FUNCTION pg_temp.matches(p_filter jsonb, p_payload jsonb, p_headers jsonb DEFAULT '{}') RETURNS boolean
LANGUAGE sql AS $$ SELECT wharf.filter_matches(p_filter, p_payload, p_headers) $$;

-- ---------------------------------------------------------------- filters
SELECT is(wharf.filter_problem('{"payload": {"action": "opened", "n": {"$gte": 1, "$lt": 5}}}'), NULL, 'a valid filter has no problem');
SELECT is(wharf.filter_problem('{"payload": {"a": {"$regex": "x"}}}'), 'filter.payload.a: unknown operator $regex', 'an unknown operator is named with its place');
SELECT is(wharf.filter_problem('{"payloadd": {"a": 1}}'), 'filter.payloadd: unknown field (a filter starts with payload or headers)', 'a typo at the top is refused');
SELECT is(wharf.filter_problem('{"payload": {"a": {"$in": 1}}}'), 'filter.payload.a.$in: must be an array', '$in takes an array');
SELECT is(wharf.filter_problem('{"payload": {"a": {"$eq": 1, "b": 2}}}'), 'filter.payload.a: mixes operators and field names', 'operators and fields do not mix');
SELECT is(wharf.filter_problem('{"$or": [{"payload": {"a": 1}}, {"payload": {"b": {"$exist": "yes"}}}]}'), 'filter.$or[1].payload.b.$exist: must be true or false', 'a problem inside $or names its element');
SELECT is(wharf.filter_problem('[1]'), 'filter: must be an object', 'a filter is an object');
SELECT is(wharf.filter_problem('{"payload": {}}'), 'filter.payload: is empty', 'an empty condition is refused');
SELECT is(wharf.filter_problem('{"$gt": 1}'), 'filter: $gt applies to a field, e.g. {"payload": {"action": {"$gt": …}}}', 'a comparison at the top is refused');
SELECT throws_ok($$SELECT wharf.filter_matches('{"payload": {"a": {"$nope": 1}}}', '{}', '{}')$$, '22023',
                 'wharf: filter.payload.a: unknown operator $nope', 'matching with a bad filter raises 22023');

SELECT ok(pg_temp.matches('{"payload": {"action": "opened"}}', '{"action": "opened"}'), 'equality');
SELECT ok(NOT pg_temp.matches('{"payload": {"action": "opened"}}', '{"action": "closed"}'), 'equality fails');
SELECT ok(pg_temp.matches('{"payload": {"pr": {"draft": false}}}', '{"pr": {"draft": false}}'), 'nested fields descend');
SELECT ok(pg_temp.matches('{"payload": {"a": {"$eq": {"x": 1}}}}', '{"a": {"x": 1}}'), '$eq compares whole values');
SELECT ok(pg_temp.matches('{"payload": {"a": {"$neq": 1}}}', '{"a": 2}') AND pg_temp.matches('{"payload": {"a": {"$neq": 1}}}', '{}'), '$neq, also for a missing field');
SELECT ok(pg_temp.matches('{"payload": {"a": {"$in": [1, "x"]}}}', '{"a": "x"}') AND NOT pg_temp.matches('{"payload": {"a": {"$in": [1]}}}', '{"a": 2}'), '$in');
SELECT ok(pg_temp.matches('{"payload": {"a": {"$nin": [1]}}}', '{"a": 2}') AND NOT pg_temp.matches('{"payload": {"a": {"$nin": [2]}}}', '{"a": 2}'), '$nin');
SELECT ok(pg_temp.matches('{"payload": {"ref": {"$startsWith": "refs/heads/"}}}', '{"ref": "refs/heads/main"}')
          AND NOT pg_temp.matches('{"payload": {"ref": {"$startsWith": "refs/tags/"}}}', '{"ref": "refs/heads/main"}'), '$startsWith');
SELECT ok(pg_temp.matches('{"payload": {"f": {"$endsWith": ".md"}}}', '{"f": "README.md"}')
          AND NOT pg_temp.matches('{"payload": {"f": {"$endsWith": ".md"}}}', '{"f": 3}'), '$endsWith, strings only');
SELECT ok(pg_temp.matches('{"payload": {"t": {"$contains": "urgent"}}}', '{"t": "very urgent!"}')
          AND pg_temp.matches('{"payload": {"labels": {"$contains": "bug"}}}', '{"labels": ["bug", "ui"]}')
          AND NOT pg_temp.matches('{"payload": {"labels": {"$contains": "x"}}}', '{"labels": ["bug"]}'), '$contains on strings and arrays');
SELECT ok(pg_temp.matches('{"payload": {"n": {"$gt": 9}}}', '{"n": 10}') AND NOT pg_temp.matches('{"payload": {"n": {"$gt": 10}}}', '{"n": 10}'), '$gt compares numbers as numbers');
SELECT ok(pg_temp.matches('{"payload": {"n": {"$gte": 10, "$lte": 10}}}', '{"n": 10}'), '$gte and $lte together');
SELECT ok(pg_temp.matches('{"payload": {"d": {"$lt": "2026-02"}}}', '{"d": "2026-01-31"}') AND NOT pg_temp.matches('{"payload": {"n": {"$lt": 5}}}', '{"n": "4"}'), '$lt on strings; a string is no number');
SELECT ok(pg_temp.matches('{"payload": {"a": {"$exist": true}, "b": {"$exist": false}}}', '{"a": null}'), '$exist: a null is there, a missing key is not');
SELECT ok(pg_temp.matches('{"payload": {"pr": {"draft": {"$exist": false}}}}', '{}'), '$exist false under a missing parent');
SELECT ok(pg_temp.matches('{"$or": [{"payload": {"a": 1}}, {"headers": {"x-github-event": "push"}}]}', '{"a": 2}', '{"x-github-event": "push"}'), '$or across payload and headers');
SELECT ok(NOT pg_temp.matches('{"$and": [{"payload": {"a": 1}}, {"payload": {"b": 1}}]}', '{"a": 1, "b": 2}'), '$and needs all');
SELECT ok(pg_temp.matches('{"$not": {"payload": {"a": 1}}}', '{"a": 2}') AND NOT pg_temp.matches('{"$not": {"payload": {"a": 1}}}', '{"a": 1}'), '$not');
SELECT ok(pg_temp.matches('{"payload": {"a": {"$or": [{"$lt": 0}, {"$not": {"$lt": 10}}]}}}', '{"a": 12}')
          AND NOT pg_temp.matches('{"payload": {"a": {"$or": [{"$lt": 0}, {"$not": {"$lt": 10}}]}}}', '{"a": 5}'), 'nested $or and $not on one value');
SELECT ok(wharf.event_type_matches(ARRAY['pull_request.*'], 'pull_request.opened') AND NOT wharf.event_type_matches(ARRAY['pull_request.*'], 'pull_requestXopened')
          AND wharf.event_type_matches(ARRAY['issue*', 'push'], 'push') AND NOT wharf.event_type_matches(ARRAY['a_b'], 'axb'), 'event type patterns: * only is a wildcard');

-- ---------------------------------------------------------------- the operator's settings
SELECT throws_ok($$SELECT wharf.create_destination(1, '{"name": "x", "url": "ftp://app.example/x"}')$$, '22023',
                 'wharf: destination url: must be an https:// (or http://) URL with a host, no credentials and no fragment', 'a bad URL is refused, named');
SELECT throws_ok($$SELECT wharf.create_destination(1, '{"name": "x", "url": "https://user:pw@app.example/x"}')$$, '22023', NULL, 'a URL with credentials is refused');
SELECT throws_ok($$SELECT wharf.create_destination(1, '{"name": "x", "url": "https://app.example/x", "headers": {"Webhook-Id": "1"}}')$$, '22023',
                 'wharf: destination headers.Webhook-Id: set by Wharf (credentials go in the destination''s credentials)', 'a header Wharf sets is refused');
SELECT throws_ok($$SELECT wharf.create_destination(1, '{"name": "x", "url": "https://app.example/x", "max_in_flight": 0}')$$, '22023',
                 'wharf: destination max_in_flight: an integer from 1 to 1000', 'a bound out of range is refused');
SELECT throws_ok($$SELECT wharf.create_destination(1, '{"name": "x", "url": "https://app.example/x", "colour": 1}')$$, '22023',
                 'wharf: destination colour: unknown setting', 'an unknown setting is refused');
SELECT is((SELECT count(*) FROM wharf.destination), 0::bigint, 'nothing refused was saved');

SELECT pg_temp.put('app', pg_temp.destination(1, 'app'));
SELECT throws_ok($$SELECT wharf.create_destination(1, '{"name": "app", "url": "https://app.example/2"}')$$, '22023',
                 'wharf: destination name: ''app'' is already used in this workspace', 'a name is used once per workspace');
SELECT throws_ok(format('SELECT wharf.set_destination_secret(1, %s, %L)', pg_temp.v('app'), 'whsec_plain'), '22023', NULL, 'a secret arrives sealed');
SELECT is(wharf.show_destination(2, pg_temp.v('app')), NULL, 'another workspace does not see it');
SELECT is(wharf.update_destination(2, pg_temp.v('app'), '{"name": "mine"}'), NULL, 'nor change it');
SELECT ok(NOT wharf.delete_destination(2, pg_temp.v('app')), 'nor delete it');
SELECT is(wharf.set_destination_state(2, pg_temp.v('app'), 'PAUSED', 'x'), NULL, 'nor pause it');
SELECT ok(NOT (wharf.show_destination(1, pg_temp.v('app')) ?| ARRAY['signing_secret', 'previous_signing_secret', 'credentials']), 'no secret is shown');
SELECT throws_ok(format($$SELECT wharf.create_destination_rule(2, '{"destination_id": %s}')$$, pg_temp.v('app')), '22023',
                 'wharf: rule destination_id: no such destination in this workspace', 'a rule cannot name another workspace''s destination');
SELECT throws_ok(format($$SELECT wharf.create_destination_rule(1, '{"destination_id": %s, "filter": {"payload": {"a": {"$in": 3}}}}')$$, pg_temp.v('app')), '22023',
                 'wharf: rule filter.payload.a.$in: must be an array', 'a bad filter is refused when saved, named');
SELECT throws_ok(format($$SELECT wharf.create_destination_rule(1, '{"destination_id": "x%s"}')$$, pg_temp.v('app')), '22023', NULL, 'a destination id that is no number is refused, not cast');
SELECT is((SELECT count(*) FROM wharf.destination_rule), 0::bigint, 'no refused rule was saved');

-- ---------------------------------------------------------------- routing
SELECT is(pg_temp.admit('before', 's0', '{"n": 5}'), 1::bigint, 'an event admitted before any rule');
SELECT is((SELECT count(*) FROM wharf.destination_delivery), 0::bigint, 'makes no delivery');
SELECT pg_temp.put('rule', (wharf.create_destination_rule(1, jsonb_build_object('destination_id', pg_temp.v('app'), 'filter', '{"payload": {"n": {"$gte": 2}}}'::jsonb)) ->> 'id')::bigint);
SELECT pg_temp.put('audit', pg_temp.destination(1, 'audit', '{"ordered": false}'));
SELECT wharf.create_destination_rule(1, jsonb_build_object('destination_id', pg_temp.v('audit'), 'subject_prefix', 's1'));
SELECT pg_temp.admit('k' || g, 's' || (g % 2), jsonb_build_object('n', g)) FROM generate_series(1, 6) g;
SELECT is((SELECT array_agg(e.delivery_key ORDER BY q.id) FROM wharf.destination_delivery q JOIN wharf.provider_event e ON e.id = q.event_id
            WHERE q.destination_id = pg_temp.v('app')), ARRAY['k2', 'k3', 'k4', 'k5', 'k6'], 'the filter routes n >= 2 to app, in event order');
SELECT is((SELECT array_agg(e.delivery_key ORDER BY q.id) FROM wharf.destination_delivery q JOIN wharf.provider_event e ON e.id = q.event_id
            WHERE q.destination_id = pg_temp.v('audit')), ARRAY['k1', 'k3', 'k5'], 'the subject prefix routes s1 to audit');
SELECT is((SELECT sum(filtered) FROM wharf.rule_filtered_minute WHERE rule_id = pg_temp.v('rule')), 1::numeric, 'what the filter left out is counted');
SELECT is((SELECT count(*) FROM wharf.provider_event WHERE state = 'QUEUED' AND delivery_key LIKE 'k%'), 6::bigint, 'the handlers still receive every event');
SELECT is((wharf.admit_many(jsonb_build_array(
             jsonb_build_object('provider', 'generic', 'source', 'https://hooks.example/1', 'delivery_key', 'm1', 'event_type', 'thing',
                                'route', '{"connection_id": 1}'::jsonb, 'subjects', ARRAY['s1'], 'payload', '{"n": 7}'::jsonb, 'headers', '{}'::jsonb),
             jsonb_build_object('provider', 'generic', 'source', 'https://hooks.example/1', 'delivery_key', 'm2', 'event_type', 'thing',
                                'route', '{"connection_id": 1}'::jsonb, 'subjects', ARRAY['s1'], 'payload', '{"n": 8}'::jsonb, 'headers', '{}'::jsonb)))
          -> 1 -> 'events' -> 0 ->> 'outcome'), 'stored', 'a batch is stored');
SELECT is((SELECT count(*) FROM wharf.destination_delivery q JOIN wharf.provider_event e ON e.id = q.event_id WHERE e.delivery_key IN ('m1', 'm2')),
          4::bigint, 'and routed like single admissions');
SELECT pg_temp.admit('k1', 's1', '{"n": 1}');
SELECT is((SELECT count(*) FROM wharf.destination_delivery), 12::bigint, 'a redelivery routes nothing again');

-- ---------------------------------------------------------------- claim, order, bounds
SELECT is((SELECT array_agg(c.event_id ORDER BY c.event_id) FROM pg_temp.claimed() c WHERE c.destination_id = pg_temp.v('app')),
          (SELECT array_agg(id ORDER BY id) FROM wharf.provider_event WHERE delivery_key IN ('k2', 'k3')),
          'an ordered destination hands out one delivery per scope: the oldest');
SELECT is((SELECT count(*) FROM wharf.destination_delivery WHERE destination_id = pg_temp.v('audit') AND state = 'LEASED'), 5::bigint,
          'an unordered one hands out a scope''s deliveries together');
SELECT is((SELECT count(*) FROM pg_temp.claimed()), 0::bigint, 'nothing more while the heads are leased');
SELECT throws_ok(format($$UPDATE wharf.destination_delivery SET state = 'LEASED'
                          WHERE destination_id = %s AND event_id = (SELECT id FROM wharf.provider_event WHERE delivery_key = 'k4')$$, pg_temp.v('app')),
                 '23505', NULL, 'a second lease in a (destination, scope) is refused by the database, whoever writes it');

SELECT pg_temp.put('k2', q.id), pg_temp.put('k2_epoch', q.lease_epoch) FROM wharf.destination_delivery q JOIN wharf.provider_event e ON e.id = q.event_id
 WHERE q.destination_id = pg_temp.v('app') AND e.delivery_key = 'k2';
SELECT ok(wharf.complete_delivery(pg_temp.v('k2'), pg_temp.v('k2_epoch'), 200, 12, 'ok'), 'complete');
SELECT ok(wharf.complete_delivery(pg_temp.v('k2'), pg_temp.v('k2_epoch'), 200, 12, 'ok'), 'a repeat of complete answers true');
SELECT ok(NOT wharf.complete_delivery(pg_temp.v('k2'), pg_temp.v('k2_epoch') + 1, 200, 12, 'ok'), 'another epoch answers false');
SELECT is((SELECT e.delivery_key FROM pg_temp.claimed() c JOIN wharf.provider_event e ON e.id = c.event_id), 'k4', 'the next of the scope follows');

-- Completions that finish together: one statement, each answered for its own lease.
CREATE TEMP TABLE audit_leases AS
SELECT q.id, q.lease_epoch, row_number() OVER (ORDER BY q.id) AS n FROM wharf.destination_delivery q
 WHERE q.destination_id = pg_temp.v('audit') AND q.state = 'LEASED';
SELECT is(wharf.complete_deliveries(
            ARRAY(SELECT id FROM audit_leases ORDER BY n DESC),
            ARRAY(SELECT CASE WHEN n = 2 THEN lease_epoch + 1 ELSE lease_epoch END FROM audit_leases ORDER BY n DESC),
            ARRAY(SELECT 200 + n::integer FROM audit_leases ORDER BY n DESC),
            ARRAY(SELECT 10 FROM audit_leases ORDER BY n DESC),
            ARRAY(SELECT 'ok' FROM audit_leases ORDER BY n DESC)),
          ARRAY[true, true, true, false, true],
          'complete_deliveries answers each in the order given: false for the one whose epoch is not its lease''s');
SELECT is((SELECT array_agg(q.state || ' ' || coalesce(h.status::text, '-') ORDER BY a.n) FROM audit_leases a
             JOIN wharf.destination_delivery q ON q.id = a.id LEFT JOIN wharf.delivery_attempt h ON h.delivery_id = a.id),
          ARRAY['DONE 201', 'LEASED -', 'DONE 203', 'DONE 204', 'DONE 205'],
          '... each DONE with its own attempt and status; the stale one still leased, recording nothing');
SELECT is(wharf.complete_deliveries(ARRAY(SELECT id FROM audit_leases WHERE n IN (1, 2) ORDER BY n),
                                    ARRAY(SELECT lease_epoch FROM audit_leases WHERE n IN (1, 2) ORDER BY n),
                                    ARRAY[201, 202], ARRAY[10, 10], ARRAY['ok', 'ok']),
          ARRAY[true, true], 'a repeat answers true again, and the rest completes');
SELECT throws_ok($$SELECT wharf.complete_deliveries(ARRAY[1, 2]::bigint[], ARRAY[1]::bigint[], ARRAY[200], ARRAY[1], ARRAY['ok'])$$,
                 '22004', NULL, 'arrays of different lengths are 22004');

SELECT pg_temp.put('k3', q.id), pg_temp.put('k3_epoch', q.lease_epoch) FROM wharf.destination_delivery q JOIN wharf.provider_event e ON e.id = q.event_id
 WHERE q.destination_id = pg_temp.v('app') AND e.delivery_key = 'k3';
SELECT is(wharf.fail_delivery(pg_temp.v('k3'), pg_temp.v('k3_epoch'), 'transient', 'HTTP503', 503, 40, 'busy', '1 hour'), 'QUEUED', 'a transient failure goes back to the queue');
SELECT is(wharf.fail_delivery(pg_temp.v('k3'), pg_temp.v('k3_epoch'), 'transient', 'HTTP503', 503, 40, 'busy', '1 hour'), 'QUEUED', 'a repeat answers as the first try');
SELECT ok((SELECT next_attempt_at BETWEEN now() + wharf.setting_interval('max_delay') - interval '1 second'
                                      AND clock_timestamp() + wharf.setting_interval('max_delay') FROM wharf.destination_delivery WHERE id = pg_temp.v('k3')),
          'Retry-After is honoured up to max_delay');
SELECT is((SELECT count(*) FROM pg_temp.claimed() c WHERE c.destination_id = pg_temp.v('app')), 0::bigint, 'a waiting head holds back its scope: nothing of s1 is handed out');
SELECT is((SELECT failures FROM wharf.issue WHERE fingerprint = 'destination:' || pg_temp.v('app') AND error_class = 'HTTP503'), 1::bigint, 'the failure counts into an issue of its destination');
SELECT is((SELECT array_agg((x ->> 'id')::bigint) FROM jsonb_array_elements(wharf.issue_events(1,
             (SELECT id FROM wharf.issue WHERE fingerprint = 'destination:' || pg_temp.v('app') AND error_class = 'HTTP503')) -> 'events') x),
          ARRAY[(SELECT event_id FROM wharf.destination_delivery WHERE id = pg_temp.v('k3'))],
          'the destination''s issue lists the event whose delivery failed so, and no other');
UPDATE wharf.issue SET status = 'resolved' WHERE fingerprint = 'destination:' || pg_temp.v('app') AND error_class = 'HTTP503';
SELECT wharf.count_delivery_issue(pg_temp.v('app'), (SELECT event_id FROM wharf.destination_delivery WHERE id = pg_temp.v('k3')), 'HTTP503', clock_timestamp(), false);
SELECT is((SELECT status || ' ' || failures || ' ' || reopened FROM wharf.issue WHERE fingerprint = 'destination:' || pg_temp.v('app') AND error_class = 'HTTP503'),
          'open 2 1', 'a failure after the issue was resolved reopens it, as a handler''s does');
SELECT is((SELECT status || ' ' || duration_ms || ' ' || response FROM wharf.delivery_attempt WHERE delivery_id = pg_temp.v('k3')), '503 40 busy', 'the attempt records status, duration and answer');

-- a permanent failure is dead, replayed with its id
SELECT pg_temp.put('k4', q.id), pg_temp.put('k4_epoch', q.lease_epoch) FROM wharf.destination_delivery q JOIN wharf.provider_event e ON e.id = q.event_id
 WHERE q.destination_id = pg_temp.v('app') AND e.delivery_key = 'k4';
SELECT pg_temp.put('minute_dead', coalesce((SELECT sum(dead) FROM wharf.failure_minute WHERE workspace_id = 1), 0)::bigint);
SELECT is(wharf.fail_delivery(pg_temp.v('k4'), pg_temp.v('k4_epoch'), 'permanent', 'HTTP400', 400, 3, NULL), 'DEAD', 'a permanent failure is a dead letter');
SELECT is((SELECT sum(dead) FROM wharf.failure_minute WHERE workspace_id = 1)::bigint, pg_temp.v('minute_dead') + 1,
          '... counted in its workspace''s minute, so the dead-letter rate''s alerts see it');
SELECT is(wharf.count_dead_deliveries(1, pg_temp.v('app'), '{"error_class": "HTTP400"}'), 1::bigint, 'counted for a bulk replay');
SELECT ok(NOT wharf.replay_delivery(2, pg_temp.v('k4'), 'eve'), 'another workspace cannot replay it');
SELECT ok(wharf.replay_delivery(1, pg_temp.v('k4'), 'ops'), 'the workspace replays it');
SELECT is((SELECT state || ' ' || attempt || ' ' || replayed_by FROM wharf.destination_delivery WHERE id = pg_temp.v('k4')), 'QUEUED 0 ops', 'queued again, same row');

-- release gives the attempt back
SELECT pg_temp.put('k6', c.delivery_id), pg_temp.put('k6_epoch', c.epoch) FROM pg_temp.claimed() c JOIN wharf.provider_event e ON e.id = c.event_id WHERE e.delivery_key = 'k4';
SELECT ok(wharf.release_delivery(pg_temp.v('k6'), pg_temp.v('k6_epoch')) AND wharf.release_delivery(pg_temp.v('k6'), pg_temp.v('k6_epoch')), 'release, and its repeat, answer true');
SELECT is((SELECT attempt FROM wharf.destination_delivery WHERE id = pg_temp.v('k6')), 0, 'release restores the attempt');

-- in-flight bound and rate limit
SELECT wharf.update_destination(1, pg_temp.v('audit'), '{"max_in_flight": 2}');
UPDATE wharf.destination_delivery SET state = 'QUEUED', leased_until = NULL WHERE destination_id = pg_temp.v('audit');
SELECT is((SELECT count(*) FROM pg_temp.claimed() WHERE destination_id = pg_temp.v('audit')), 2::bigint, 'no more than max_in_flight leases');
UPDATE wharf.destination_delivery SET state = 'QUEUED', leased_until = NULL WHERE destination_id = pg_temp.v('audit');
SELECT wharf.update_destination(1, pg_temp.v('audit'), '{"max_in_flight": 100, "rate_limit": 3, "rate_period": "minute"}');
SELECT is((SELECT count(*) FROM pg_temp.claimed() WHERE destination_id = pg_temp.v('audit')), 3::bigint, 'no more than the bucket holds');
UPDATE wharf.destination_delivery SET state = 'QUEUED', leased_until = NULL WHERE destination_id = pg_temp.v('audit');
SELECT is((SELECT count(*) FROM pg_temp.claimed() WHERE destination_id = pg_temp.v('audit')), 0::bigint, 'an empty bucket hands out nothing');
SELECT wharf.set_destination_state(1, pg_temp.v('app'), 'PAUSED', 'ops');
SELECT ok(wharf.next_delivery_at() > clock_timestamp() + interval '10 seconds', 'next_delivery_at waits for the next token');
SELECT wharf.set_destination_state(1, pg_temp.v('app'), 'ACTIVE', 'ops');

-- kept ahead: within p_ahead for an unlimited destination, never for a rate-limited one
SELECT wharf.set_destination_state(1, pg_temp.v('app'), 'PAUSED', 'ops');
UPDATE wharf.destination_delivery SET state = 'QUEUED', leased_until = NULL WHERE destination_id = pg_temp.v('audit');
UPDATE wharf.destination SET tokens = NULL, tokens_at = NULL WHERE id = pg_temp.v('audit');
SELECT is((SELECT count(*) FROM wharf.claim_deliveries('w', 0, 5) c WHERE c.destination_id = pg_temp.v('audit')), 0::bigint,
          'a rate-limited destination''s deliveries are never claimed ahead, though its bucket is full');
SELECT is((SELECT count(*) FROM wharf.claim_deliveries('w', 1, 5) c WHERE c.destination_id = pg_temp.v('audit')), 1::bigint,
          '... only one per idle slot');
SELECT wharf.update_destination(1, pg_temp.v('audit'), '{"rate_limit": null}');
UPDATE wharf.destination_delivery SET state = 'QUEUED', leased_until = NULL WHERE destination_id = pg_temp.v('audit');
SELECT is((SELECT count(*) FROM wharf.claim_deliveries('w', 0, 3) c WHERE c.destination_id = pg_temp.v('audit')), 3::bigint,
          'an unlimited destination''s are claimed ahead, as many as asked');
UPDATE wharf.destination_delivery SET state = 'QUEUED', leased_until = NULL WHERE destination_id = pg_temp.v('audit');
SELECT wharf.set_destination_state(1, pg_temp.v('app'), 'ACTIVE', 'ops');

-- pause, workspace pause
SELECT wharf.update_destination(1, pg_temp.v('audit'), '{"rate_limit": null}');
SELECT wharf.set_destination_state(1, pg_temp.v('audit'), 'PAUSED', 'ops');
SELECT is((SELECT count(*) FROM pg_temp.claimed() WHERE destination_id = pg_temp.v('audit')), 0::bigint, 'a paused destination''s deliveries wait');
SELECT wharf.set_destination_state(1, pg_temp.v('audit'), 'ACTIVE', 'ops');
SELECT wharf.set_workspace_state(1, 'PAUSED');
SELECT is((SELECT count(*) FROM pg_temp.claimed()), 0::bigint, 'a paused workspace''s deliveries wait');
SELECT wharf.set_workspace_state(1, 'ACTIVE');
SELECT wharf.set_connection_state(1, 'PAUSED');
SELECT is((SELECT count(*) FROM pg_temp.claimed()), 0::bigint, 'a paused connection''s deliveries wait');
SELECT wharf.set_connection_state(1, 'ACTIVE');

-- the breaker
SELECT wharf.update_destination(1, pg_temp.v('audit'), '{"breaker_failures": 2}');
SELECT pg_temp.put('b1', c.delivery_id), pg_temp.put('b1_epoch', c.epoch) FROM pg_temp.claimed() c WHERE c.destination_id = pg_temp.v('audit') ORDER BY c.event_id LIMIT 1;
SELECT is(wharf.fail_delivery(pg_temp.v('b1'), pg_temp.v('b1_epoch'), 'transient', 'ConnectionRefused', NULL, 1, NULL), 'QUEUED', 'first failure');
SELECT is((SELECT state FROM wharf.destination WHERE id = pg_temp.v('audit')), 'ACTIVE', 'one failure leaves the breaker closed');
SELECT pg_temp.put('b2', q.id), pg_temp.put('b2_epoch', q.lease_epoch) FROM wharf.destination_delivery q
 WHERE q.destination_id = pg_temp.v('audit') AND q.state = 'LEASED' ORDER BY q.id LIMIT 1;
SELECT is(wharf.fail_delivery(pg_temp.v('b2'), pg_temp.v('b2_epoch'), 'transient', 'ConnectionRefused', NULL, 1, NULL), 'QUEUED', 'second failure');
SELECT is((SELECT state || ' ' || paused_reason FROM wharf.destination WHERE id = pg_temp.v('audit')), 'BREAKER_OPEN breaker', 'the breaker opens');
SELECT is((SELECT status FROM wharf.issue WHERE fingerprint = 'destination:' || pg_temp.v('audit') AND error_class = 'DestinationBreakerOpen'), 'open', 'an issue opens');
SELECT is((SELECT array_agg((x ->> 'id')::bigint ORDER BY (x ->> 'id')::bigint) FROM jsonb_array_elements(wharf.issue_events(1,
             (SELECT id FROM wharf.issue WHERE fingerprint = 'destination:' || pg_temp.v('audit') AND error_class = 'DestinationBreakerOpen')) -> 'events') x),
          (SELECT array_agg(q.event_id ORDER BY q.event_id) FROM wharf.destination_delivery q JOIN wharf.provider_event e ON e.id = q.event_id
            WHERE q.id IN (pg_temp.v('b1'), pg_temp.v('b2'))
              AND e.event_type = (SELECT event_type FROM wharf.issue WHERE fingerprint = 'destination:' || pg_temp.v('audit') AND error_class = 'DestinationBreakerOpen')),
          '... and lists the failures the destination holds, whatever their class');
UPDATE wharf.destination_delivery SET state = 'QUEUED', leased_until = NULL, next_attempt_at = now() WHERE destination_id = pg_temp.v('audit');
SELECT is((SELECT count(*) FROM pg_temp.claimed() WHERE destination_id = pg_temp.v('audit')), 0::bigint, 'an open breaker holds its deliveries');
SELECT is((SELECT count(*) FROM wharf.destination_delivery WHERE destination_id = pg_temp.v('audit') AND state = 'DEAD'), 0::bigint, 'and dead-letters none');
UPDATE wharf.destination SET probe_at = now() - interval '1 second' WHERE id = pg_temp.v('audit');
SELECT pg_temp.put('p1', c.delivery_id), pg_temp.put('p1_epoch', c.epoch) FROM pg_temp.claimed() c WHERE c.destination_id = pg_temp.v('audit') AND c.probe;
SELECT is((SELECT count(*) FROM wharf.destination_delivery WHERE destination_id = pg_temp.v('audit') AND state = 'LEASED'), 1::bigint, 'a due probe is one delivery');
SELECT ok(wharf.complete_delivery(pg_temp.v('p1'), pg_temp.v('p1_epoch'), 204, 5, NULL), 'the probe succeeds');
SELECT is((SELECT state || ' ' || consecutive_failures FROM wharf.destination WHERE id = pg_temp.v('audit')), 'ACTIVE 0', 'and closes the breaker');

-- a 410 pauses
SELECT pg_temp.put('g1', c.delivery_id), pg_temp.put('g1_epoch', c.epoch) FROM pg_temp.claimed() c WHERE c.destination_id = pg_temp.v('audit') ORDER BY c.event_id LIMIT 1;
SELECT is(wharf.fail_delivery(pg_temp.v('g1'), pg_temp.v('g1_epoch'), 'gone', 'HTTP410', 410, 2, NULL), 'QUEUED', 'a 410 gives the delivery back');
SELECT is((SELECT state || ' ' || paused_reason FROM wharf.destination WHERE id = pg_temp.v('audit')), 'PAUSED gone', 'and pauses the destination');

-- reaping
UPDATE wharf.destination_delivery SET leased_until = now() - interval '1 second' WHERE state = 'LEASED';
SELECT ok(wharf.reap_deliveries() > 0, 'expired leases are reaped');
SELECT is((SELECT count(*) FROM wharf.destination_delivery WHERE state = 'LEASED'), 0::bigint, 'none is left leased');

-- forward only, and retention
SELECT wharf.create_destination_rule(1, jsonb_build_object('destination_id', pg_temp.v('app'), 'event_types', '["deploy.*"]'::jsonb, 'forward_only', true));
SELECT pg_temp.put('fo', pg_temp.admit('fo', 's7', '{"n": 9}', 'deploy.done'));
SELECT is((SELECT state || ' ' || outcome FROM wharf.provider_event WHERE id = pg_temp.v('fo')), 'DONE forwarded', 'a forward-only event is not the handlers''');
SELECT is((SELECT count(*) FROM wharf.destination_delivery WHERE event_id = pg_temp.v('fo')), 1::bigint, 'it is the destination''s');
UPDATE wharf.provider_event SET received_at = now() - interval '30 days', handled_at = now() - interval '30 days' WHERE id = pg_temp.v('fo');
SELECT wharf.purge();
SELECT is((SELECT count(*) FROM wharf.provider_event WHERE id = pg_temp.v('fo')), 1::bigint, 'purge keeps an event whose delivery is still queued');
SELECT pg_temp.put('fod', (SELECT c.delivery_id FROM pg_temp.claimed() c WHERE c.event_id = pg_temp.v('fo')));
SELECT ok(wharf.complete_delivery(pg_temp.v('fod'), (SELECT lease_epoch FROM wharf.destination_delivery WHERE id = pg_temp.v('fod')), 200, 3, NULL),
          'its delivery is answered');
SELECT wharf.purge();
SELECT is((SELECT count(*) FROM wharf.provider_event WHERE id = pg_temp.v('fo')), 1::bigint, 'and kept while that answer is within replay_window');
UPDATE wharf.destination_delivery SET handled_at = now() - interval '30 days' WHERE id = pg_temp.v('fod');
SELECT is((SELECT (wharf.purge()).done_deleted >= 1), true, 'past it, purge deletes the event in its batch');
SELECT is((SELECT count(*) FROM wharf.provider_event WHERE id = pg_temp.v('fo'))
          + (SELECT count(*) FROM wharf.destination_delivery WHERE id = pg_temp.v('fod'))
          + (SELECT count(*) FROM wharf.delivery_attempt WHERE delivery_id = pg_temp.v('fod')), 0::bigint,
          'with its delivery and the delivery''s attempts');
INSERT INTO wharf.rule_filtered_minute (rule_id, minute, filtered)
VALUES (pg_temp.v('rule'), date_trunc('minute', now()) - interval '400 days', 5);
SELECT ok(wharf.purge_logs() >= 1, 'purge_logs forgets what filters left out past log_retention');
SELECT is((SELECT count(*) FROM wharf.rule_filtered_minute WHERE rule_id = pg_temp.v('rule') AND minute < now() - interval '1 day'), 0::bigint,
          'the old minute is gone');
SELECT ok((SELECT count(*) FROM wharf.rule_filtered_minute WHERE rule_id = pg_temp.v('rule')) >= 1, 'the recent ones stay');

-- only heads are due; what ends a head's turn makes the next due
SELECT pg_temp.put('q1', pg_temp.admit('q1', 's8', '{"n": 10}'));
SELECT pg_temp.put('q2', pg_temp.admit('q2', 's8', '{"n": 11}'));
SELECT pg_temp.put('q3', pg_temp.admit('q3', 's8', '{"n": 12}'));
SELECT is((SELECT array_agg(next_attempt_at = 'infinity' ORDER BY event_id) FROM wharf.destination_delivery
            WHERE destination_id = pg_temp.v('app') AND event_id IN (pg_temp.v('q1'), pg_temp.v('q2'), pg_temp.v('q3'))),
          ARRAY[false, true, true], 'behind its head a delivery waits at infinity: a claim never reads it');
DELETE FROM wharf.provider_event WHERE id = pg_temp.v('q1');
SELECT is((SELECT array_agg(next_attempt_at = 'infinity' ORDER BY event_id) FROM wharf.destination_delivery
            WHERE destination_id = pg_temp.v('app') AND event_id IN (pg_temp.v('q2'), pg_temp.v('q3'))),
          ARRAY[false, true], 'a head deleted with its event (erasure, retention) makes the next due');
SELECT pg_temp.put('q2d', (SELECT c.delivery_id FROM pg_temp.claimed() c WHERE c.event_id = pg_temp.v('q2')));
SELECT pg_temp.put('q2e', (SELECT lease_epoch FROM wharf.destination_delivery WHERE id = pg_temp.v('q2d')));
SELECT is(wharf.fail_delivery(pg_temp.v('q2d'), pg_temp.v('q2e'), 'permanent', 'HTTP422', 422, 1, NULL), 'DEAD', 'a head dead-lettered');
SELECT is((SELECT next_attempt_at = 'infinity' FROM wharf.destination_delivery
            WHERE destination_id = pg_temp.v('app') AND event_id = pg_temp.v('q3')), false, 'makes the next due');

-- the operator's figures stay bounded: counts stop at 10000, the hour's figures read its latest 10000 attempts
SELECT pg_temp.put('big', pg_temp.destination(1, 'big', '{"ordered": false}'));
INSERT INTO wharf.provider_event (workspace_id, provider, delivery_key, event_type, subject, scope_key, source,
                                  connection_id, payload, headers, state, outcome, handled_at)
SELECT 1, 'generic', 'big' || g, 'thing', 's1', '1:generic:s1', 'https://hooks.example/1', 1, '{"n": 1}', '{}', 'DONE', 'forwarded', now()
  FROM generate_series(1, 10050) g;
INSERT INTO wharf.destination_delivery (event_id, destination_id, workspace_id, scope_key, ordered, next_attempt_at, state)
SELECT e.id, pg_temp.v('big'), 1, e.scope_key, false, 'infinity', CASE WHEN e.id % 2 = 0 THEN 'QUEUED' ELSE 'DONE' END
  FROM wharf.provider_event e WHERE e.delivery_key LIKE 'big%';
INSERT INTO wharf.delivery_attempt (delivery_id, lease_epoch, destination_id, attempt, worker, started_at, ended_at, ended,
                                    left_state, status, duration_ms)
SELECT q.id, 1, q.destination_id, 1, 'w', now() - interval '1 second', now() - (n % 50) * interval '1 second', 'handled', 'DONE', 200, 7
  FROM (SELECT q.*, row_number() OVER (ORDER BY q.id) AS n FROM wharf.destination_delivery q WHERE q.destination_id = pg_temp.v('big')) q;
SELECT is((wharf.show_destination(1, pg_temp.v('big')) -> 'stats') - 'filtered_last_hour' - 'success_rate' - 'latency_p50_ms'
            - 'latency_p99_ms' - 'leased' - 'per_minute',
          '{"queued": 5025, "queued_capped": false, "dead": 0, "dead_capped": false, "delivered_last_hour": 10000,
            "failed_last_hour": 0, "last_hour_sampled": true}'::jsonb,
          'an hour of 10050 attempts: its figures are the latest 10000''s, and say so');
SELECT ok((wharf.show_destination(1, pg_temp.v('big')) -> 'stats' ->> 'per_minute')::bigint >= 10000,
          '... the last minute''s deliveries are all of them, not a sample''s');
INSERT INTO wharf.destination_delivery (event_id, destination_id, workspace_id, scope_key, ordered, next_attempt_at, state)
SELECT e.id, pg_temp.v('audit'), 1, e.scope_key, false, 'infinity', 'QUEUED'
  FROM wharf.provider_event e WHERE e.delivery_key LIKE 'big%';
SELECT is((SELECT wharf.show_destination(1, pg_temp.v('audit')) -> 'stats' -> 'queued_capped'), 'true'::jsonb,
          '10050 queued: counted up to 10000, capped');
SELECT is((SELECT (wharf.show_destination(1, pg_temp.v('audit')) -> 'stats' ->> 'queued')::integer), 10000, '... which it shows');

SELECT * FROM finish();
ROLLBACK;
