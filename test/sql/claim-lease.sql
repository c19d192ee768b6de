-- wharf.claim, renew, complete, release and reap: who gets which row, and
-- every later write acting only under the epoch of the claim.
BEGIN;
SELECT plan(85);

-- Fixture: workspace 1 (scopes repo:a, repo:b, repo:c, repo:d, repo:e),
-- workspace 2 (repo:z), each with its own generic connection, and one
-- installation row. Rows are admitted through
-- pg_temp.admit_event (test/sql/fixtures/inbox-rows.sql), in id order.
SELECT wharf.upsert_workspace(1), wharf.upsert_workspace(2);
SELECT wharf.upsert_connection(1, 'generic', 'https://hooks.example/1', 'webhook', 'one');
SELECT wharf.upsert_connection(2, 'generic', 'https://hooks.example/2', 'webhook', 'two');

SELECT pg_temp.admit_event(1, 'repo:a', k) FROM unnest(ARRAY['a1', 'a2', 'a3']) k;
SELECT pg_temp.admit_event(1, 'repo:b', 'b1');
SELECT pg_temp.admit_event(1, 'repo:c', k) FROM unnest(ARRAY['c1', 'c2']) k;
SELECT pg_temp.admit_event(2, 'repo:z', k) FROM unnest(ARRAY['z1', 'z2']) k;
SELECT wharf.admit('github', 'https://github.com', 'i1', 'installation',
                   '{"control": true, "installation_id": "7"}', NULL,
                   '{"action": "created", "installation": {"id": 7}}', '{}');
SELECT wharf.set_workspace_state(2, 'SUSPENDED');

-- Bad input.
SELECT throws_ok($$SELECT * FROM wharf.claim(NULL)$$, '22004', NULL, 'claim rejects a NULL worker');
SELECT throws_ok($$SELECT * FROM wharf.claim('')$$, '22004', NULL, 'claim rejects an empty worker name');
SELECT throws_ok($$SELECT * FROM wharf.claim('w', -1)$$, '22023', NULL, 'claim rejects a negative max');
SELECT throws_ok($$SELECT * FROM wharf.claim('w', NULL)$$, '22004', NULL, 'claim rejects a NULL max');
SELECT is_empty($$SELECT * FROM wharf.claim('w', 0)$$, 'claim with max 0 leases nothing');
SELECT is((SELECT count(*) FROM wharf.provider_event WHERE state = 'LEASED'), 0::bigint,
          'no rejected or empty claim leased a row');

-- One head per scope, active workspaces and installation rows only.
SELECT set_eq($$SELECT delivery_key FROM wharf.claim('w1', 10)$$,
              ARRAY['a1', 'b1', 'c1', 'i1'],
              'claim leases the oldest row of each scope, installation rows included, never a suspended workspace''s');
SELECT results_eq(
  $$SELECT state, attempt, lease_epoch, leased_by FROM wharf.provider_event
     WHERE delivery_key IN ('a1', 'b1', 'c1', 'i1') ORDER BY id$$,
  $$VALUES ('LEASED', 1, 1::bigint, 'w1'), ('LEASED', 1, 1::bigint, 'w1'),
           ('LEASED', 1, 1::bigint, 'w1'), ('LEASED', 1, 1::bigint, 'w1')$$,
  'claim increments attempt and lease_epoch and names the worker');
SELECT ok((SELECT bool_and(leased_until BETWEEN now() + interval '2 minutes' AND clock_timestamp() + interval '2 minutes')
             FROM wharf.provider_event WHERE state = 'LEASED'),
          'leased_until is the claim''s clock time plus the lease');
SELECT is_empty($$SELECT * FROM wharf.claim('w2', 10)$$,
                'no row is leased in a scope that already has a LEASED row');
SELECT is((pg_temp.event('z1')).state, 'QUEUED', 'the suspended workspace''s row stays QUEUED');

-- max bounds the batch.
SELECT ok(wharf.complete((pg_temp.event('a1')).id, 1), 'complete ends a1''s lease');
SELECT ok(wharf.complete((pg_temp.event('c1')).id, 1), 'complete ends c1''s lease');
SELECT is((SELECT count(*) FROM wharf.claim('w2', 1)), 1::bigint, 'claim leases at most max rows');
SELECT is((SELECT count(*) FROM wharf.claim('w2', 1)), 1::bigint, 'the next claim takes the other free scope');
SELECT set_eq($$SELECT delivery_key FROM wharf.provider_event WHERE state = 'LEASED'$$,
              ARRAY['a2', 'b1', 'c2', 'i1'], 'the next row of each freed scope was leased, in id order');

-- renew
SELECT throws_ok($$SELECT wharf.renew(NULL, 1)$$, '22004', NULL, 'renew rejects a NULL id');
SELECT throws_ok($$SELECT wharf.renew(1, NULL)$$, '22004', NULL, 'renew rejects a NULL epoch');
SELECT wharf.set_setting('lease', '10 minutes');
SELECT ok(wharf.renew((pg_temp.event('a2')).id, 1), 'renew under the current epoch succeeds');
SELECT ok((pg_temp.event('a2')).leased_until BETWEEN now() + interval '10 minutes'
                                                AND clock_timestamp() + interval '10 minutes',
          'renew sets leased_until to the clock time plus the (new) lease');
SELECT is(wharf.renew((pg_temp.event('a2')).id, 2), false, 'renew under another epoch returns false');
UPDATE wharf.provider_event SET leased_until = now() - interval '1 minute' WHERE delivery_key = 'a2';
SELECT ok(wharf.renew((pg_temp.event('a2')).id, 1), 'renew also revives a lease that expired but was not reaped');
SELECT ok((pg_temp.event('a2')).leased_until > clock_timestamp(), 'the revived lease runs into the future');
SELECT is(wharf.renew((pg_temp.event('a3')).id, 0), false, 'renew of a QUEUED row returns false');

-- complete
SELECT throws_ok($$SELECT wharf.complete(NULL, 1)$$, '22004', NULL, 'complete rejects a NULL id');
SELECT throws_ok($$SELECT wharf.complete(1, NULL)$$, '22004', NULL, 'complete rejects a NULL epoch');
SELECT throws_ok($$SELECT wharf.complete(1, 1, NULL)$$, '22004', NULL, 'complete rejects a NULL outcome');
SELECT is(wharf.complete((pg_temp.event('a2')).id, 2), false, 'complete under another epoch returns false');
SELECT is((pg_temp.event('a2')).state, 'LEASED', '... and leaves the row LEASED');
SELECT ok(wharf.complete((pg_temp.event('a2')).id, 1), 'complete under the current epoch succeeds');
SELECT results_eq(
  $$SELECT state, outcome, handled_at BETWEEN now() AND clock_timestamp(), leased_until IS NULL
      FROM wharf.provider_event WHERE delivery_key = 'a2'$$,
  $$VALUES ('DONE', 'handled', true, true)$$,
  'a completed row is DONE, outcome handled, handled at the clock time');
-- A retry of a completion whose reply was lost: the row is DONE under its epoch.
UPDATE wharf.provider_event SET handled_at = now() - interval '1 minute' WHERE delivery_key = 'a2';
SELECT ok(wharf.complete((pg_temp.event('a2')).id, 1),
          'completing it again under its epoch, with its outcome, returns true (the first try committed)');
SELECT results_eq($$SELECT state, outcome, handled_at < now() FROM wharf.provider_event WHERE delivery_key = 'a2'$$,
                  $$VALUES ('DONE', 'handled', true)$$, '... and writes nothing');
SELECT is(wharf.complete((pg_temp.event('a2')).id, 1, 'ignored'), false,
          'completing it again with another outcome returns false');
SELECT is(wharf.complete((pg_temp.event('a2')).id, 2), false, 'completing the DONE row under another epoch returns false');
SELECT ok(wharf.complete((pg_temp.event('c2')).id, 1, 'ignored'), 'complete takes an outcome');
SELECT is((pg_temp.event('c2')).outcome, 'ignored', '... and records it');

-- release
SELECT throws_ok($$SELECT wharf.release(NULL, 1)$$, '22004', NULL, 'release rejects a NULL id');
SELECT is((SELECT delivery_key FROM wharf.claim('w3')), 'a3', 'a3 heads scope repo:a once a2 is DONE');
SELECT is(wharf.release((pg_temp.event('a3')).id, 2), false, 'release under another epoch returns false');
SELECT ok(wharf.release((pg_temp.event('a3')).id, 1), 'release under the current epoch succeeds');
SELECT results_eq(
  $$SELECT state, attempt, lease_epoch, next_attempt_at <= clock_timestamp(), leased_until IS NULL
      FROM wharf.provider_event WHERE delivery_key = 'a3'$$,
  $$VALUES ('QUEUED', 0, 1::bigint, true, true)$$,
  'a released row is QUEUED, due at once, with attempt as before the claim');
-- A retry of a release whose reply was lost: the attempt history holds the
-- epoch's lease as released.
UPDATE wharf.provider_event SET next_attempt_at = now() - interval '1 minute' WHERE delivery_key = 'a3';
SELECT ok(wharf.release((pg_temp.event('a3')).id, 1),
          'releasing it again under its epoch returns true (the first try committed)');
SELECT results_eq(
  $$SELECT e.state, e.attempt, e.next_attempt_at < now(), (SELECT count(*) FROM wharf.event_attempt h WHERE h.event_id = e.id)
      FROM wharf.provider_event e WHERE e.delivery_key = 'a3'$$,
  $$VALUES ('QUEUED', 0, true, 1::bigint)$$,
  '... and writes nothing');
SELECT results_eq($$SELECT delivery_key, attempt, lease_epoch FROM wharf.claim('w4')$$,
                  $$VALUES ('a3', 1, 2::bigint)$$,
                  'the released row is claimed again at once, under a new epoch');
SELECT ok(wharf.release((pg_temp.event('a3')).id, 1), 'a repeat of epoch 1''s release still returns true');
SELECT results_eq($$SELECT state, attempt, lease_epoch FROM wharf.provider_event WHERE delivery_key = 'a3'$$,
                  $$VALUES ('LEASED', 1, 2::bigint)$$, '... and leaves the new lease alone');

-- reap
SELECT is(wharf.reap(), 0, 'reap takes back no lease that has not expired');
UPDATE wharf.provider_event SET leased_until = clock_timestamp() - interval '1 second' WHERE delivery_key = 'a3';
SELECT is(wharf.reap(), 1, 'reap takes back the one expired lease');
SELECT results_eq(
  $$SELECT state, failures, error_class, leased_until IS NULL, next_attempt_at > clock_timestamp()
      FROM wharf.provider_event WHERE delivery_key = 'a3'$$,
  $$VALUES ('QUEUED', 1, 'LeaseExpired', true, true)$$,
  'a reaped row is QUEUED after the retry delay with failures + 1 and error_class LeaseExpired');
SELECT is(wharf.complete((pg_temp.event('a3')).id, 2), false, 'the reaped holder''s complete returns false');
SELECT is(wharf.release((pg_temp.event('a3')).id, 2), false, 'the reaped holder''s release returns false');
SELECT is(wharf.release((pg_temp.event('a2')).id, 1), false, 'releasing a completed lease returns false');
SELECT set_eq($$SELECT delivery_key FROM wharf.provider_event WHERE state = 'LEASED'$$,
              ARRAY['b1', 'i1'], 'the leases that had not expired are left alone');

SELECT wharf.set_setting('max_attempts', '2');
UPDATE wharf.provider_event SET next_attempt_at = now() - interval '1 second' WHERE delivery_key = 'a3';
SELECT is((SELECT delivery_key FROM wharf.claim('w5')), 'a3', 'a reaped row is claimed again once due');
UPDATE wharf.provider_event SET leased_until = clock_timestamp() - interval '1 second' WHERE delivery_key = 'a3';
SELECT is(wharf.reap(), 1, 'reap takes back the second expired lease');
SELECT results_eq(
  $$SELECT state, failures, error_class, dead_at BETWEEN now() AND clock_timestamp()
      FROM wharf.provider_event WHERE delivery_key = 'a3'$$,
  $$VALUES ('DEAD', 2, 'LeaseExpired', true)$$,
  'a reaped row whose failures reach max_attempts is DEAD');
SELECT results_eq($$SELECT lease_epoch, ended, error_class, left_state FROM wharf.event_attempt
                     WHERE event_id = (pg_temp.event('a3')).id ORDER BY lease_epoch$$,
                  $$VALUES (1::bigint, 'released', NULL, 'QUEUED'), (2, 'expired', 'LeaseExpired', 'QUEUED'),
                           (3, 'expired', 'LeaseExpired', 'DEAD')$$,
                  'the attempt history keeps how each lease ended and the state it left');

-- Workspace state and the one-lease backstop.
SELECT wharf.set_workspace_state(2, 'ACTIVE');
SELECT is((SELECT delivery_key FROM wharf.claim('w6')), 'z1', 'a reactivated workspace''s rows are claimed again');
SELECT throws_ok($$UPDATE wharf.provider_event SET state = 'LEASED' WHERE delivery_key = 'z2'$$,
                 '23505', NULL, 'the database refuses a second LEASED row in one scope');

-- A head that is not due holds back every later row of its scope, and only those.
SELECT pg_temp.admit_event(1, 'repo:d', k) FROM unnest(ARRAY['d1', 'd2']) k;
SELECT pg_temp.admit_event(1, 'repo:e', 'e1');
UPDATE wharf.provider_event SET next_attempt_at = now() + interval '1 hour' WHERE delivery_key = 'd1';
SELECT set_eq($$SELECT delivery_key FROM wharf.claim('w7', 10)$$, ARRAY['e1'],
              'a head waiting for its time holds back its scope (d2 too), not another scope');
-- Due after this transaction began but before the claim: claim goes by the clock, not now().
UPDATE wharf.provider_event SET next_attempt_at = now() + interval '1 millisecond' WHERE delivery_key = 'd1';
SELECT pg_sleep(0.01);
SELECT set_eq($$SELECT delivery_key FROM wharf.claim('w7', 10)$$, ARRAY['d1'],
              'once due by the clock, the head is claimed, still before the later row');

-- A host claims only what it has a handler for (p_handles): a head it does
-- not handle keeps its scope waiting, in order, for a host that does.
CREATE FUNCTION pg_temp.admit_typed(p_subject text, p_key text, p_type text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_connection bigint := (SELECT id FROM wharf.connection WHERE workspace_id = 2);
BEGIN
  PERFORM wharf.subscribe(v_connection, p_subject);
  RETURN (wharf.admit('generic', 'https://hooks.example/2', p_key, p_type, jsonb_build_object('connection_id', v_connection),
                      ARRAY[p_subject], '{}', '{}') -> 'events' -> 0 ->> 'event_id')::bigint;
END $$;
UPDATE wharf.provider_event SET state = 'DONE', leased_until = NULL WHERE state IN ('QUEUED', 'LEASED');
SELECT pg_temp.admit_typed('repo:h1', 'h1-x', 'x'), pg_temp.admit_typed('repo:h1', 'h1-y', 'y'), pg_temp.admit_typed('repo:h2', 'h2-y', 'y');
SELECT results_eq($$SELECT delivery_key FROM wharf.claim('hy', 10, ARRAY['generic:y'])$$, ARRAY['h2-y'],
                  'a host handling only y claims the y head of another scope, never the y behind an x head');
SELECT is_empty($$SELECT 1 FROM wharf.claim('hy', 10, ARRAY['generic:y', 'github:*'])$$,
                'the x head keeps its scope waiting for a host that handles it');
SELECT results_eq($$SELECT delivery_key FROM wharf.claim('hx', 10, ARRAY['generic:x'])$$, ARRAY['h1-x'],
                  'a host handling x claims it');
SELECT ok(wharf.complete(pg_temp.id('h1-x'), (pg_temp.event('h1-x')).lease_epoch), 'x is handled');
SELECT results_eq($$SELECT delivery_key FROM wharf.claim('any', 10, ARRAY['generic:*'])$$, ARRAY['h1-y'],
                  'a provider:* host takes the y that waited behind x, in order');

-- next_due_at: the earliest retry still to fall due.
SELECT is(wharf.next_due_at(), NULL, 'nothing waits for its delay: NULL');
SELECT pg_temp.admit_event('repo:due', 'due-1');
SELECT wharf.set_setting('base_delay', '1 hour'), wharf.set_setting('max_delay', '1 hour');
SELECT wharf.fail(id, lease_epoch, 'transient', 'ECONNRESET') FROM wharf.claim('due', 10) WHERE delivery_key = 'due-1';
SELECT is(wharf.next_due_at(), (SELECT next_attempt_at FROM wharf.provider_event WHERE delivery_key = 'due-1'),
          'a retry waiting out its delay: its next_attempt_at');
SELECT ok(wharf.next_due_at() > clock_timestamp() + interval '29 minutes', 'which is in the future (half to all of an hour)');
SELECT is(wharf.release(pg_temp.id('due-1'), 1), false, 'releasing a failed lease returns false');

-- complete_many: many leases ended in one statement, each as complete would.
SELECT throws_ok($$SELECT wharf.complete_many(NULL, '{1}', '{handled}')$$, '22004', NULL, 'complete_many rejects NULL ids');
SELECT throws_ok($$SELECT wharf.complete_many('{1,2}', '{1}', '{handled,handled}')$$, '22023', NULL,
                 'complete_many rejects arrays of different lengths');
SELECT throws_ok($$SELECT wharf.complete_many('{1}', '{1}', '{""}')$$, '22004', NULL, 'complete_many rejects an empty outcome');
SELECT throws_ok($$SELECT wharf.complete_many('{1,NULL}', '{1,1}', '{handled,handled}')$$, '22004', NULL,
                 'complete_many rejects a NULL id among others');
SELECT pg_temp.admit_event('repo:many-1', k) FROM unnest(ARRAY['m1-a', 'm1-b']) k;
SELECT pg_temp.admit_event('repo:many-2', 'm2-a');
SELECT pg_temp.admit_event('repo:many-3', 'm3-a');
SELECT set_eq($$SELECT delivery_key FROM wharf.claim('many', 10) WHERE delivery_key LIKE 'm%'$$,
              ARRAY['m1-a', 'm2-a', 'm3-a'], 'the heads of three scopes are leased');
SELECT set_eq(format('SELECT * FROM wharf.complete_many(%L, %L, %L)',
                     ARRAY[pg_temp.id('m1-a'), pg_temp.id('m2-a'), pg_temp.id('m3-a'), pg_temp.id('due-1')],
                     ARRAY[1, 1, 2, 1], ARRAY['handled', 'ignored', 'handled', 'handled']),
              ARRAY[pg_temp.id('m1-a'), pg_temp.id('m2-a')],
              'complete_many returns the ids it completed: not a lease under another epoch, nor a row not LEASED');
SELECT results_eq($$SELECT delivery_key, state, outcome, handled_at IS NOT NULL, leased_until IS NULL
                      FROM wharf.provider_event WHERE delivery_key LIKE 'm%' ORDER BY delivery_key$$,
                  $$VALUES ('m1-a', 'DONE', 'handled', true, true), ('m1-b', 'QUEUED', NULL, false, true),
                           ('m2-a', 'DONE', 'ignored', true, true), ('m3-a', 'LEASED', NULL, false, false)$$,
                  'each completed row is DONE with its own outcome; the other lease is untouched');
SELECT results_eq($$SELECT delivery_key FROM wharf.claim('many', 10) WHERE delivery_key LIKE 'm%'$$, ARRAY['m1-b'],
                  'the scopes it freed are claimable again, and the one still leased is not');
-- The same batch again, as after a commit that could not be confirmed: the
-- rows it completed are reported completed again and nothing is written; the
-- lease under another epoch is still not completed, and a third outcome is not
-- what the first try wrote.
UPDATE wharf.provider_event SET handled_at = now() - interval '1 minute' WHERE delivery_key IN ('m1-a', 'm2-a');
SELECT set_eq(format('SELECT * FROM wharf.complete_many(%L, %L, %L)',
                     ARRAY[pg_temp.id('m1-a'), pg_temp.id('m2-a'), pg_temp.id('m3-a'), pg_temp.id('due-1')],
                     ARRAY[1, 1, 2, 1], ARRAY['handled', 'ignored', 'handled', 'handled']),
              ARRAY[pg_temp.id('m1-a'), pg_temp.id('m2-a')],
              'complete_many retried under the same epochs returns the ids its first try completed');
SELECT results_eq($$SELECT delivery_key, state, handled_at < now() FROM wharf.provider_event
                     WHERE delivery_key IN ('m1-a', 'm2-a', 'm3-a') ORDER BY delivery_key$$,
                  $$VALUES ('m1-a', 'DONE', true), ('m2-a', 'DONE', true), ('m3-a', 'LEASED', NULL::boolean)$$,
                  '... writing nothing');
SELECT is_empty(format('SELECT * FROM wharf.complete_many(%L, %L, %L)',
                       ARRAY[pg_temp.id('m1-a'), pg_temp.id('m2-a')], ARRAY[2, 1], ARRAY['handled', 'handled']),
                'a DONE row under another epoch, or with another outcome, is not reported completed');

-- A claim's transaction commits without waiting for its WAL flush; a crash
-- can only forget a claim nothing durable depends on (sql/30, claim).
SET LOCAL synchronous_commit = on;
SELECT is(current_setting('synchronous_commit'), 'on', 'a transaction commits synchronously by default');
SELECT is((SELECT count(*) FROM wharf.claim('sc', 0)), 0::bigint, 'an empty claim');
SELECT is(current_setting('synchronous_commit'), 'off', '... leaves its transaction to commit without waiting for the WAL flush');

SELECT * FROM finish();
ROLLBACK;
