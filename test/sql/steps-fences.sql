-- wharf.fence and wharf.step: a handler's write proves it still holds the
-- lease; each committed step is recorded once, so a retry resumes after it.
-- (Lock contention, 55P03, needs two sessions: test/lease-fencing.test.ts.)
BEGIN;
SELECT plan(45);

-- Fixture: workspace 1 with one generic connection; rows admitted through
-- wharf.admit.
SELECT wharf.upsert_workspace(1);
SELECT wharf.upsert_connection(1, 'generic', 'https://hooks.example/1', 'webhook', 'one');

-- The step names recorded for p_key's row, in name order.
CREATE FUNCTION pg_temp.steps(p_key text) RETURNS text[]
LANGUAGE sql AS $$
  SELECT coalesce(array_agg(step_name ORDER BY step_name), '{}')
    FROM wharf.provider_event_step WHERE event_id = pg_temp.id(p_key)
$$;

SELECT pg_temp.admit_event('repo:a', 'a1');
SELECT pg_temp.admit_event('repo:b', 'b1');
SELECT pg_temp.admit_event('repo:a', 'a2');
SELECT set_eq($$SELECT delivery_key FROM wharf.claim('w', 10)$$, ARRAY['a1', 'b1'], 'a1 and b1 are leased under epoch 1');

-- The contract around the functions.
SELECT is_definer('wharf', 'fence', ARRAY['bigint', 'bigint'], 'fence is SECURITY DEFINER');
SELECT is_definer('wharf', 'step', ARRAY['bigint', 'bigint', 'text'], 'step is SECURITY DEFINER');
SELECT ok(NOT has_function_privilege('public', 'wharf.fence(bigint, bigint)', 'EXECUTE')
          AND NOT has_function_privilege('public', 'wharf.step(bigint, bigint, text)', 'EXECUTE'),
          'PUBLIC may not execute fence or step');

-- fence
SELECT throws_ok($$SELECT wharf.fence(NULL, 1)$$, '22004', NULL, 'fence rejects a NULL id');
SELECT throws_ok($$SELECT wharf.fence(pg_temp.id('a1'), NULL)$$, '22004', NULL, 'fence rejects a NULL epoch');
SELECT lives_ok($$SELECT wharf.fence(pg_temp.id('a1'), 1)$$, 'fence passes under the current epoch');
SELECT throws_ok($$SELECT wharf.fence(pg_temp.id('a1'), 2)$$, 'WH412', NULL, 'fence under a later epoch raises WH412');
SELECT throws_ok($$SELECT wharf.fence(pg_temp.id('a1'), 0)$$, 'WH412', NULL, 'fence under an earlier epoch raises WH412');
SELECT throws_ok($$SELECT wharf.fence(pg_temp.id('a2'), 0)$$, 'WH412', NULL, 'fence on a QUEUED row raises WH412');
SELECT throws_ok($$SELECT wharf.fence(-1, 1)$$, 'WH410', NULL, 'fence on an event that does not exist raises WH410');

-- step
SELECT throws_ok($$SELECT wharf.step(NULL, 1, 's')$$, '22004', NULL, 'step rejects a NULL id');
SELECT throws_ok($$SELECT wharf.step(pg_temp.id('a1'), NULL, 's')$$, '22004', NULL, 'step rejects a NULL epoch');
SELECT throws_ok($$SELECT wharf.step(pg_temp.id('a1'), 1, NULL)$$, '22004', NULL, 'step rejects a NULL name');
SELECT throws_ok($$SELECT wharf.step(pg_temp.id('a1'), 1, '')$$, '22023', NULL, 'step rejects an empty name');
SELECT throws_ok($$SELECT wharf.step(pg_temp.id('a1'), 1, repeat('x', 201))$$, '22023', NULL,
                 'step rejects a name over 200 characters');
SELECT is(pg_temp.steps('a1'), '{}'::text[], 'no rejected step left a record');

SELECT is(wharf.step(pg_temp.id('a1'), 1, 'commit:1:abc'), true, 'a new step returns true: run its writes');
SELECT is(wharf.step(pg_temp.id('a1'), 1, 'commit:1:abc'), false, 'the same step again returns false: skip its writes');
SELECT is(wharf.step(pg_temp.id('a1'), 1, 'commit:1:def'), true, 'another step returns true');
SELECT is(wharf.step(pg_temp.id('b1'), 1, 'commit:1:abc'), true, 'step names are per event');
SELECT throws_ok($$SELECT wharf.step(pg_temp.id('a1'), 2, 'commit:1:abc')$$, 'WH412', NULL,
                 'step under another epoch raises WH412 even for a committed step (never false)');
SELECT throws_ok($$SELECT wharf.step(pg_temp.id('a1'), 2, 'commit:1:xyz')$$, 'WH412', NULL,
                 'step under another epoch raises WH412 for a new step');
SELECT throws_ok($$SELECT wharf.step(pg_temp.id('a2'), 0, 'commit:1:abc')$$, 'WH412', NULL,
                 'step on a QUEUED row raises WH412');
SELECT throws_ok($$SELECT wharf.step(-1, 1, 'commit:1:abc')$$, 'WH410', NULL, 'step on an event that does not exist raises WH410');
SELECT is(pg_temp.steps('a1'), ARRAY['commit:1:abc', 'commit:1:def'], 'only the fenced steps were recorded, once each');
SELECT ok((SELECT bool_and(committed_at = now()) FROM wharf.provider_event_step), 'each step records its commit time');
SELECT throws_ok($$SELECT wharf.step(pg_temp.id('a1'), 1, 'commit:1:ghi'), wharf.fence(pg_temp.id('a1'), 2)$$,
                 'WH412', NULL, 'a step followed by a failing fence ...');
SELECT is(pg_temp.steps('a1'), ARRAY['commit:1:abc', 'commit:1:def'], '... rolls back with its step record');

-- After the lease ends.
SELECT ok(wharf.complete(pg_temp.id('a1'), 1), 'a1 completes');
SELECT throws_ok($$SELECT wharf.fence(pg_temp.id('a1'), 1)$$, 'WH412', NULL, 'fence on a DONE row raises WH412');
SELECT throws_ok($$SELECT wharf.step(pg_temp.id('a1'), 1, 'commit:1:abc')$$, 'WH412', NULL, 'step on a DONE row raises WH412');
SELECT is((SELECT delivery_key FROM wharf.claim('w')), 'a2', 'a2 is leased next');
SELECT is(wharf.step(pg_temp.id('a2'), 1, 'commit:1:abc'), true, 'a2''s steps are its own');

-- An erased event is gone, and so are its steps.
CREATE TEMP TABLE erased AS SELECT pg_temp.id('b1') AS id;
DELETE FROM wharf.provider_event WHERE delivery_key = 'b1';
SELECT throws_ok($$SELECT wharf.fence((SELECT id FROM erased), 1)$$, 'WH410', NULL, 'fence on a deleted event raises WH410');
SELECT is((SELECT count(*) FROM wharf.provider_event_step s
            WHERE NOT EXISTS (SELECT FROM wharf.provider_event e WHERE e.id = s.event_id)), 0::bigint,
          'a deleted event''s steps are deleted with it');

-- The overloads a handler's role calls present the lease's token: an id and
-- an epoch alone, guessed, no longer reach another lease.
SELECT is_definer('wharf', 'fence', ARRAY['bigint', 'bigint', 'uuid'], 'fence with a token is SECURITY DEFINER');
SELECT is_definer('wharf', 'step', ARRAY['bigint', 'bigint', 'text', 'uuid'], 'step with a token is SECURITY DEFINER');
SELECT ok(NOT has_function_privilege('public', 'wharf.fence(bigint, bigint, uuid)', 'EXECUTE')
          AND NOT has_function_privilege('public', 'wharf.step(bigint, bigint, text, uuid)', 'EXECUTE'),
          'PUBLIC may not execute the token overloads either');
SELECT pg_temp.admit_event('repo:t', 't1');
SELECT is((SELECT count(*) FROM wharf.claim('w', 10) WHERE delivery_key = 't1'), 1::bigint, 't1 is leased');
SELECT isnt((pg_temp.event('t1')).lease_token, NULL, 'the claim drew a lease token');
SELECT throws_ok(format($$SELECT wharf.step(%s, %s, 'guessed', gen_random_uuid())$$, pg_temp.id('t1'), (pg_temp.event('t1')).lease_epoch),
                 'WH412', NULL, 'a step under the right id and epoch but a guessed token is refused');
SELECT throws_ok(format($$SELECT wharf.fence(%s, %s, NULL::uuid)$$, pg_temp.id('t1'), (pg_temp.event('t1')).lease_epoch),
                 '22004', NULL, 'a fence with a NULL token is refused');
SELECT ok(wharf.step(pg_temp.id('t1'), (pg_temp.event('t1')).lease_epoch, 'real', (pg_temp.event('t1')).lease_token),
          'a step under the lease''s token runs');
SELECT is(pg_temp.steps('t1'), ARRAY['real'], 'the guessed step left no record; the genuine one is recorded');

SELECT * FROM finish();
ROLLBACK;
