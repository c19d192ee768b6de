-- wharf.retry_delay and wharf.fail: bounded exponential delay with equal
-- jitter, the four failure kinds, the unknown-failure budget, DEAD rows
-- that keep their payload but no message, and a failure repeated after its
-- first try committed answering as that try did (contract v6), and the
-- frames a failure was thrown at kept with its attempt, never free text.
BEGIN;
SELECT plan(87);

-- Fixture: workspace 1 with one generic connection; rows admitted through
-- wharf.admit.
SELECT wharf.upsert_workspace(1);
SELECT wharf.upsert_connection(1, 'generic', 'https://hooks.example/1', 'webhook', 'one');

-- Like pg_temp.admit_event, with a payload naming its key and headers holding
-- a credential (DEAD rows must keep the one and never the other).
CREATE FUNCTION pg_temp.admit_with_headers(p_subject text, p_key text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_connection bigint := (SELECT id FROM wharf.connection WHERE workspace_id = 1);
BEGIN
  PERFORM wharf.subscribe(v_connection, p_subject);
  RETURN (wharf.admit('generic', 'https://hooks.example/1', p_key, 'ping',
                      jsonb_build_object('connection_id', v_connection), ARRAY[p_subject],
                      jsonb_build_object('key', p_key),
                      '{"x-request-id": "r-1", "Authorization": "Bearer s3cret"}') -> 'events' -> 0 ->> 'event_id')::bigint;
END $$;

-- Makes p_key's row due, claims every due head and returns p_key's new epoch.
CREATE FUNCTION pg_temp.reclaim(p_key text) RETURNS bigint
LANGUAGE sql AS $$
  UPDATE wharf.provider_event SET next_attempt_at = now() - interval '1 second' WHERE delivery_key = p_key;
  SELECT lease_epoch FROM wharf.claim('w', 10) WHERE delivery_key = p_key;
$$;

-- retry_delay: d = least(max_delay, base_delay * 2^(attempt-1)), wait in [d/2, d].
SELECT ok((SELECT bool_and(d BETWEEN interval '1 second' AND interval '2 seconds')
             FROM (SELECT wharf.retry_delay(1) AS d FROM generate_series(1, 200)) s),
          'the first retry waits between base_delay/2 and base_delay');
SELECT ok((SELECT bool_and(d BETWEEN interval '4 seconds' AND interval '8 seconds')
             FROM (SELECT wharf.retry_delay(3) AS d FROM generate_series(1, 200)) s),
          'the third retry waits between 2 and 4 times base_delay');
SELECT ok((SELECT count(DISTINCT d) > 100 FROM (SELECT wharf.retry_delay(3) AS d FROM generate_series(1, 200)) s),
          'the wait is jittered');
SELECT ok((SELECT bool_and(d BETWEEN interval '150 seconds' AND interval '5 minutes')
             FROM (SELECT wharf.retry_delay(9) AS d FROM generate_series(1, 200)) s),
          'the wait is bounded by max_delay (2^8 * 2 s > 5 min)');
SELECT ok(wharf.retry_delay(2000000000) BETWEEN interval '150 seconds' AND interval '5 minutes',
          'a huge attempt count neither overflows nor escapes max_delay');
SELECT wharf.set_setting('base_delay', '1 millisecond');
SELECT wharf.set_setting('max_delay', '4 milliseconds');
SELECT ok((SELECT bool_and(d BETWEEN interval '2 milliseconds' AND interval '4 milliseconds')
             FROM (SELECT wharf.retry_delay(5) AS d FROM generate_series(1, 50)) s),
          'base_delay and max_delay are read from the settings');
SELECT wharf.set_setting('base_delay', '2 seconds');
SELECT wharf.set_setting('max_delay', '5 minutes');

-- Bad input changes nothing.
SELECT pg_temp.admit_with_headers('repo:v', 'v1');
SELECT is((SELECT delivery_key FROM wharf.claim('w')), 'v1', 'v1 is leased under epoch 1');
SELECT throws_ok($$SELECT wharf.fail(NULL, 1, 'transient', 'Error')$$, '22004', NULL, 'fail rejects a NULL id');
SELECT throws_ok($$SELECT wharf.fail((pg_temp.event('v1')).id, NULL, 'transient', 'Error')$$, '22004', NULL,
                 'fail rejects a NULL epoch');
SELECT throws_ok($$SELECT wharf.fail((pg_temp.event('v1')).id, 1, NULL, 'Error')$$, '22004', NULL,
                 'fail rejects a NULL kind');
SELECT throws_ok($$SELECT wharf.fail((pg_temp.event('v1')).id, 1, 'transient', NULL)$$, '22004', NULL,
                 'fail rejects a NULL error class');
SELECT throws_ok($$SELECT wharf.fail((pg_temp.event('v1')).id, 1, 'fatal', 'Error')$$, '22023', NULL,
                 'fail rejects an unknown kind');
SELECT throws_ok($$SELECT wharf.fail((pg_temp.event('v1')).id, 1, 'unknown', 'connect failed: password=hunter2')$$,
                 '22023', NULL, 'fail rejects an error class that is free text (a message)');
SELECT is(wharf.fail((pg_temp.event('v1')).id, 2, 'unknown', 'Error'), NULL, 'fail under another epoch returns NULL');
SELECT results_eq($$SELECT state, failures, error_class, lease_epoch FROM wharf.provider_event WHERE delivery_key = 'v1'$$,
                  $$VALUES ('LEASED', 0, NULL::text, 1::bigint)$$,
                  'none of the rejected or stale fails changed the row');

-- transient: back to QUEUED after the delay, budget untouched; the scope waits.
SELECT pg_temp.admit_with_headers('repo:f', k) FROM unnest(ARRAY['f1', 'f2']) k;
SELECT pg_temp.admit_with_headers('repo:g', 'g1');
SELECT set_eq($$SELECT delivery_key FROM wharf.claim('w', 10)$$, ARRAY['f1', 'g1'], 'f1 and g1 are leased');
SELECT is(wharf.fail((pg_temp.event('f1')).id, 1, 'transient', 'ECONNRESET'), 'QUEUED', 'a transient failure returns QUEUED');
SELECT results_eq(
  $$SELECT state, failures, error_class, leased_until IS NULL,
           next_attempt_at BETWEEN now() + interval '1 second' AND clock_timestamp() + interval '2 seconds'
      FROM wharf.provider_event WHERE delivery_key = 'f1'$$,
  $$VALUES ('QUEUED', 0, 'ECONNRESET', true, true)$$,
  'a transient failure keeps failures, records the class and waits the first delay');
-- A repeat of a failure whose first try committed (its reply lost in a
-- failover): the first try's answer, and nothing written (a write would draw
-- a new delay, and a second history entry of the epoch would raise 23505).
UPDATE wharf.provider_event SET next_attempt_at = now() + interval '1 hour' WHERE delivery_key = 'f1';
SELECT is(wharf.fail((pg_temp.event('f1')).id, 1, 'transient', 'ECONNRESET'), 'QUEUED',
          'repeating the transient failure under its epoch returns QUEUED (the first try committed)');
SELECT results_eq(
  $$SELECT e.state, e.failures, e.next_attempt_at = now() + interval '1 hour',
           (SELECT count(*) FROM wharf.event_attempt h WHERE h.event_id = e.id)
      FROM wharf.provider_event e WHERE e.delivery_key = 'f1'$$,
  $$VALUES ('QUEUED', 0, true, 1::bigint)$$,
  '... and writes nothing');
SELECT ok(wharf.complete((pg_temp.event('g1')).id, 1), 'g1 completes');
SELECT pg_temp.admit_with_headers('repo:g', 'g2');
SELECT set_eq($$SELECT delivery_key FROM wharf.claim('w', 10)$$, ARRAY['g2'],
              'a failed row waiting for its retry holds back its own scope (f2), not another (g2)');
SELECT is(wharf.fail((pg_temp.event('f1')).id, 1, 'unknown', 'Error'), NULL,
          'another failure under the failed lease''s epoch returns NULL: the epoch is spent');
SELECT is(wharf.fail((pg_temp.event('f1')).id, 1, 'transient', 'ETIMEDOUT'), NULL,
          '... also of the same kind with another class');

-- unknown: the budget of max_attempts.
SELECT wharf.set_setting('max_attempts', '3');
SELECT is(pg_temp.reclaim('f1'), 2::bigint, 'f1 is leased again once due, under epoch 2');
SELECT is(wharf.fail((pg_temp.event('f1')).id, 1, 'transient', 'ECONNRESET'), 'QUEUED',
          'a repeat of epoch 1''s failure still returns QUEUED once the row is leased again');
SELECT results_eq($$SELECT state, lease_epoch, failures FROM wharf.provider_event WHERE delivery_key = 'f1'$$,
                  $$VALUES ('LEASED', 2::bigint, 0)$$, '... and leaves the new lease alone');
SELECT is(wharf.fail((pg_temp.event('f1')).id, 2, 'unknown', 'TypeError'), 'QUEUED', 'an unknown failure under budget returns QUEUED');
SELECT is(wharf.fail((pg_temp.event('f1')).id, 2, 'unknown', 'TypeError'), 'QUEUED',
          'repeating it returns QUEUED, counting no second failure (below)');
SELECT results_eq(
  $$SELECT state, failures, error_class,
           next_attempt_at BETWEEN now() + interval '2 seconds' AND clock_timestamp() + interval '4 seconds'
      FROM wharf.provider_event WHERE delivery_key = 'f1'$$,
  $$VALUES ('QUEUED', 1, 'TypeError', true)$$,
  'an unknown failure counts one failure and waits the doubled delay');
SELECT is(pg_temp.reclaim('f1'), 3::bigint, 'f1 is leased under epoch 3');
SELECT is(wharf.fail((pg_temp.event('f1')).id, 3, 'transient', 'ETIMEDOUT'), 'QUEUED', 'a transient failure in between ...');
SELECT is((pg_temp.event('f1')).failures, 1, '... does not use the budget');
SELECT is(pg_temp.reclaim('f1'), 4::bigint, 'f1 is leased under epoch 4');
SELECT is(wharf.fail((pg_temp.event('f1')).id, 4, 'unknown', 'TypeError'), 'QUEUED', 'the second unknown failure is retried');
SELECT is(pg_temp.reclaim('f1'), 5::bigint, 'f1 is leased under epoch 5');
SELECT is(wharf.fail((pg_temp.event('f1')).id, 5, 'unknown', 'RangeError'), 'DEAD', 'the unknown failure that reaches max_attempts returns DEAD');
SELECT is(wharf.fail((pg_temp.event('f1')).id, 5, 'unknown', 'RangeError'), 'DEAD', 'repeating it returns DEAD');
SELECT is(wharf.fail((pg_temp.event('f1')).id, 4, 'unknown', 'TypeError'), 'QUEUED',
          'a repeat of epoch 4''s failure returns QUEUED, what it left, though the row is DEAD now');
SELECT results_eq($$SELECT lease_epoch, ended, left_state FROM wharf.event_attempt
                     WHERE event_id = (pg_temp.event('f1')).id ORDER BY lease_epoch$$,
                  $$VALUES (1::bigint, 'transient', 'QUEUED'), (2, 'unknown', 'QUEUED'), (3, 'transient', 'QUEUED'),
                           (4, 'unknown', 'QUEUED'), (5, 'unknown', 'DEAD')$$,
                  'the attempt history keeps the state each failure left');
SELECT results_eq(
  $$SELECT state, failures, attempt, error_class, outcome, dead_at BETWEEN now() AND clock_timestamp(), leased_until IS NULL
      FROM wharf.provider_event WHERE delivery_key = 'f1'$$,
  $$VALUES ('DEAD', 3, 5, 'RangeError', NULL::text, true, true)$$,
  'the dead row records failures, attempts, the last class and its end time');
SELECT set_eq($$SELECT delivery_key FROM wharf.claim('w', 10)$$, ARRAY['f2'],
              'a DEAD row no longer holds back its scope');

-- permanent and uncertain: DEAD at once.
SELECT pg_temp.admit_with_headers('repo:h', 'h1');
SELECT pg_temp.admit_with_headers('repo:u', 'u1');
SELECT set_eq($$SELECT delivery_key FROM wharf.claim('w', 10)$$, ARRAY['h1', 'u1'], 'h1 and u1 are leased');
SELECT is(wharf.fail((pg_temp.event('h1')).id, 1, 'permanent', 'SyntaxError'), 'DEAD', 'a permanent failure returns DEAD');
SELECT is(wharf.fail((pg_temp.event('h1')).id, 1, 'permanent', 'SyntaxError'), 'DEAD', 'repeating it returns DEAD');
SELECT results_eq(
  $$SELECT state, failures, error_class, outcome FROM wharf.provider_event WHERE delivery_key = 'h1'$$,
  $$VALUES ('DEAD', 0, 'SyntaxError', NULL::text)$$,
  'a permanent failure is DEAD at once without using the budget');
SELECT is(wharf.fail((pg_temp.event('u1')).id, 1, 'uncertain', 'OutcomeUncertain'), 'DEAD', 'an uncertain failure returns DEAD');
SELECT is(wharf.fail((pg_temp.event('u1')).id, 1, 'uncertain', 'OutcomeUncertain'), 'DEAD', 'repeating it returns DEAD');
SELECT results_eq(
  $$SELECT state, outcome, error_class FROM wharf.provider_event WHERE delivery_key = 'u1'$$,
  $$VALUES ('DEAD', 'uncertain', 'OutcomeUncertain')$$,
  'an uncertain failure is DEAD with outcome uncertain');
SELECT is(wharf.fail((pg_temp.event('u1')).id, 1, 'transient', 'Error'), NULL,
          'failing the DEAD row again with another kind returns NULL');
SELECT results_eq(
  $$SELECT payload, headers, subject, received_at FROM wharf.provider_event WHERE delivery_key = 'h1'$$,
  $$VALUES ('{"key": "h1"}'::jsonb, '{"x-request-id": "r-1"}'::jsonb, 'repo:h', now())$$,
  'a DEAD row keeps payload, headers (no credential), subject and arrival time');
SELECT is_empty(
  $$SELECT 1 FROM wharf.provider_event WHERE state = 'DEAD'
      AND (error_class !~ '^[A-Za-z_$][A-Za-z0-9_$.:-]*$' OR headers::text ILIKE '%s3cret%')$$,
  'no DEAD row stores a message or a credential');

-- transient_max_age (contract v5): transient failures have a ceiling.
SELECT pg_temp.admit_with_headers('repo:t', k) FROM unnest(ARRAY['t1', 't2']) k;
SELECT is((SELECT delivery_key FROM wharf.claim('w', 10) WHERE delivery_key LIKE 't%'), 't1', 't1 heads its scope');
SELECT is(wharf.fail((pg_temp.event('t1')).id, 1, 'transient', 'HTTP503'), 'QUEUED', 'a first transient failure is retried');
SELECT ok((pg_temp.event('t1')).transient_since BETWEEN now() AND clock_timestamp(),
          'it records when the transient failures began');
SELECT ok((SELECT failing_since IS NOT NULL FROM wharf.scope WHERE scope_key = (pg_temp.event('t1')).scope_key),
          'its scope is failing since then');
-- Within transient_max_age: retried, the start kept.
UPDATE wharf.provider_event SET transient_since = clock_timestamp() - interval '23 hours' WHERE delivery_key = 't1';
SELECT is(pg_temp.reclaim('t1'), 2::bigint, 't1 is leased again');
SELECT is(wharf.fail((pg_temp.event('t1')).id, 2, 'transient', 'HTTP503'), 'QUEUED',
          'transient failures younger than transient_max_age are retried');
SELECT ok((pg_temp.event('t1')).transient_since < now() - interval '22 hours', 'the first failure''s time is kept');
-- A scope failing longer than stuck_after is counted stuck.
UPDATE wharf.scope SET failing_since = clock_timestamp() - interval '1 hour'
 WHERE scope_key = (pg_temp.event('t1')).scope_key;
SELECT ok((SELECT stuck_scopes >= 1 AND oldest_stuck_age >= 3600 FROM wharf.queue_stats()),
          'queue_stats counts the failing scope as stuck, with its age');
-- Past it: DEAD with its class, and the scope moves on.
UPDATE wharf.provider_event SET transient_since = clock_timestamp() - interval '25 hours' WHERE delivery_key = 't1';
SELECT is(pg_temp.reclaim('t1'), 3::bigint, 't1 is leased a third time');
SELECT is(wharf.fail((pg_temp.event('t1')).id, 3, 'transient', 'HTTP503'), 'DEAD',
          'a transient failure older than transient_max_age returns DEAD');
SELECT is(wharf.fail((pg_temp.event('t1')).id, 3, 'transient', 'HTTP503'), 'DEAD', 'repeating it returns DEAD');
SELECT results_eq(
  $$SELECT state, failures, error_class FROM wharf.provider_event WHERE delivery_key = 't1'$$,
  $$VALUES ('DEAD', 0, 'HTTP503')$$,
  'the dead row keeps its transient error class, failures untouched');
SELECT ok((SELECT failing_since IS NULL FROM wharf.scope WHERE scope_key = (pg_temp.event('t1')).scope_key),
          'its scope is no longer failing');
SELECT set_eq($$SELECT delivery_key FROM wharf.claim('w', 10) WHERE delivery_key LIKE 't%'$$, ARRAY['t2'],
              'the next event of the scope runs');

-- A repeat answers from the attempt history, not from the row: a DEAD row
-- replayed since still gets DEAD, what its failure left.
SELECT ok(wharf.replay(1, (pg_temp.event('h1')).id, 'ops'), 'h1 is replayed');
SELECT is(wharf.fail((pg_temp.event('h1')).id, 1, 'permanent', 'SyntaxError'), 'DEAD',
          'a repeat of the failure that killed h1 returns DEAD, though h1 is QUEUED again');
SELECT results_eq($$SELECT state, error_class, dead_at IS NULL FROM wharf.provider_event WHERE delivery_key = 'h1'$$,
                  $$VALUES ('QUEUED', 'SyntaxError', true)$$, '... and leaves the replayed row alone');

-- A lease that ended otherwise is lost, however its fail is repeated: NULL.
SELECT pg_temp.admit_with_headers(k, k) FROM unnest(ARRAY['x-reaped', 'x-released', 'x-done']) k;
SELECT set_eq($$SELECT delivery_key FROM wharf.claim('w', 10) WHERE delivery_key LIKE 'x-%'$$,
              ARRAY['x-reaped', 'x-released', 'x-done'], 'three more leases, under epoch 1');
UPDATE wharf.provider_event SET leased_until = clock_timestamp() - interval '1 second' WHERE delivery_key = 'x-reaped';
SELECT is(wharf.reap(), 1, 'the reaper takes back x-reaped');
SELECT ok(wharf.release((pg_temp.event('x-released')).id, 1), 'x-released is given back');
SELECT ok(wharf.complete((pg_temp.event('x-done')).id, 1), 'x-done completes');
SELECT is(wharf.fail((pg_temp.event('x-reaped')).id, 1, 'transient', 'ECONNRESET'), NULL, 'failing a reaped lease returns NULL');
SELECT is(wharf.fail((pg_temp.event('x-reaped')).id, 1, 'unknown', 'LeaseExpired'), NULL,
          '... also as the reaper recorded it');
SELECT is(wharf.fail((pg_temp.event('x-released')).id, 1, 'transient', 'ECONNRESET'), NULL, 'failing a released lease returns NULL');
SELECT is(wharf.fail((pg_temp.event('x-done')).id, 1, 'transient', 'ECONNRESET'), NULL, 'failing a completed lease returns NULL');
SELECT results_eq(
  $$SELECT e.delivery_key, e.state, e.failures, (SELECT array_agg(h.ended) FROM wharf.event_attempt h WHERE h.event_id = e.id)
      FROM wharf.provider_event e WHERE e.delivery_key LIKE 'x-%' ORDER BY e.id$$,
  $$VALUES ('x-reaped', 'QUEUED', 1, ARRAY['expired']), ('x-released', 'QUEUED', 0, ARRAY['released']),
           ('x-done', 'DONE', 0, NULL::text[])$$,
  'none of them changed a row or its history');

-- Frames: where the failure was thrown, kept with the attempt; never free text.
SELECT pg_temp.admit_with_headers(k, k) FROM unnest(ARRAY['fr-1', 'fr-2', 'fr-3']) k;
SELECT set_eq($$SELECT delivery_key FROM wharf.claim('w', 10) WHERE delivery_key LIKE 'fr-%'$$,
              ARRAY['fr-1', 'fr-2', 'fr-3'], 'three leases for frames');
SELECT is(wharf.fail((pg_temp.event('fr-1')).id, 1, 'unknown', 'TypeError',
                     ARRAY['app/handlers/orders.ts:12:7 handleOrder', 'app/main.ts:3:1', '../shared/x.js:1:2 Object.<anonymous>']),
          'QUEUED', 'fail takes frames as a trailing argument');
SELECT is((SELECT frames FROM wharf.event_attempt WHERE event_id = (pg_temp.event('fr-1')).id),
          ARRAY['app/handlers/orders.ts:12:7 handleOrder', 'app/main.ts:3:1', '../shared/x.js:1:2 Object.<anonymous>'],
          '... and the attempt history keeps them');
SELECT is(wharf.fail((pg_temp.event('fr-2')).id, 1, 'unknown', 'TypeError', '{}'), 'QUEUED', 'no frames: an empty array');
SELECT is((SELECT frames FROM wharf.event_attempt WHERE event_id = (pg_temp.event('fr-2')).id), NULL,
          '... is kept as none, as a worker that passes no frames');
SELECT throws_ok(format($$SELECT wharf.fail(%s, 1, 'unknown', 'TypeError', ARRAY['app.ts:1:2 token=sk_live_51Hx'])$$,
                        (pg_temp.event('fr-3')).id), '22023', NULL, 'a frame carrying text is 22023');
SELECT throws_ok(format($$SELECT wharf.fail(%s, 1, 'unknown', 'TypeError', ARRAY['/home/alice/app.ts:1:2 f'])$$,
                        (pg_temp.event('fr-3')).id), '22023', NULL, 'an absolute path (a home directory) is 22023');
SELECT throws_ok(format($$SELECT wharf.fail(%s, 1, 'unknown', 'TypeError', array_fill('a.ts:1:1'::text, ARRAY[9]))$$,
                        (pg_temp.event('fr-3')).id), '22023', NULL, 'more than 8 frames is 22023');
SELECT results_eq($$SELECT state, (SELECT count(*) FROM wharf.event_attempt h WHERE h.event_id = e.id)
                      FROM wharf.provider_event e WHERE delivery_key = 'fr-3'$$,
                  $$VALUES ('LEASED', 0::bigint)$$, 'a refused fail changes nothing');

SELECT * FROM finish();
ROLLBACK;
