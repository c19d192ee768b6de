-- Stuck scopes: a scope whose head has been failing, or due and waiting,
-- past a threshold is listed with why, since when and how many wait behind
-- it, and the list counts exactly what queue_stats' gauge counts; retrying
-- its head makes it due now, moving it to the dead letters lets its
-- successor be claimed, pausing its connection pauses it; each action is
-- recorded, refused on a stale or leased head, and out of reach of another
-- workspace.
BEGIN;
SELECT plan(39);

SELECT wharf.upsert_workspace(1), wharf.upsert_workspace(2), wharf.upsert_workspace(3);
SELECT wharf.upsert_connection(1, 'generic', 'https://hooks.example/1', 'webhook', 'one');
SELECT wharf.upsert_connection(2, 'generic', 'https://hooks.example/2', 'webhook', 'two');
SELECT wharf.upsert_connection(3, 'generic', 'https://hooks.example/3', 'webhook', 'three');

-- Every kind of head, all arrived an hour ago:
--   repo:s      s1 failing for an hour (its retry not due for another), s2
--               and s3 behind it;
--   repo:t, u1  due and waiting for a claimer for an hour (workspaces 1, 2);
--   repo:p      due for an hour, but its connection is PAUSED;
--   repo:fresh  f1 just became claimable: an old arrival is not stuck.
SELECT pg_temp.admit_event('repo:s', k) FROM unnest(ARRAY['s1', 's2', 's3']) k;
SELECT wharf.fail(id, lease_epoch, 'transient', 'TimeoutError') FROM wharf.claim('w', 1) WHERE delivery_key = 's1';
UPDATE wharf.provider_event SET next_attempt_at = now() + interval '1 hour' WHERE delivery_key = 's1';
SELECT pg_temp.admit_event('repo:t', 't1');
SELECT pg_temp.admit_event(2, 'repo:u', 'u1');
SELECT pg_temp.admit_event(3, 'repo:p', 'p1');
SELECT wharf.set_connection_state((SELECT id FROM wharf.connection WHERE workspace_id = 3), 'PAUSED');
UPDATE wharf.scope SET ready_at = CASE WHEN ready_at <= clock_timestamp() THEN ready_at - interval '61 minutes' ELSE ready_at END,
                       failing_since = failing_since - interval '61 minutes';
-- As a DBA who moves ready_at back by hand: claims read their lines from the start.
SELECT wharf.reset_claim_lines();
SELECT pg_temp.admit_event('repo:fresh', 'f1');
UPDATE wharf.provider_event SET received_at = now() - interval '1 hour';

CREATE FUNCTION pg_temp.stuck(p_key text) RETURNS jsonb
LANGUAGE sql AS $$
  SELECT s FROM jsonb_array_elements(wharf.list_stuck_scopes(1, '10 minutes')) s WHERE s ->> 'scope_key' = p_key
$$;
-- Every workspace's list, under stuck_after, against the gauge.
CREATE FUNCTION pg_temp.listed() RETURNS integer
LANGUAGE sql AS $$
  SELECT sum(jsonb_array_length(wharf.list_stuck_scopes(w)))::integer FROM generate_series(1, 3) w
$$;

SELECT is((SELECT array_agg(s ->> 'subject' ORDER BY s ->> 'subject') FROM jsonb_array_elements(wharf.list_stuck_scopes(1, '10 minutes')) s),
          ARRAY['repo:s', 'repo:t'], 'the failing and the waiting scopes past the threshold, of this workspace only, not the fresh one');
SELECT is(jsonb_array_length(wharf.list_stuck_scopes(3, '10 minutes')), 0, 'a head of a paused connection is held on purpose, not stuck');
SELECT wharf.set_setting('stuck_after', '2 hours');
SELECT is(jsonb_array_length(wharf.list_stuck_scopes(1)), 0, 'without a threshold, stuck_after: none past 2 hours');
SELECT is((SELECT stuck_scopes FROM wharf.queue_stats()), 0::bigint, 'nor in the gauge');
SELECT wharf.set_setting('stuck_after', '30 minutes');
SELECT is(jsonb_array_length(wharf.list_stuck_scopes(1)), 2, 'two past 30 minutes');
SELECT results_eq($$SELECT stuck_scopes::integer, pg_temp.listed() FROM wharf.queue_stats()$$, $$VALUES (3, 3)$$,
                  'the gauge counts what the lists show: failing and waiting, not paused or fresh');
SELECT ok((SELECT abs(q.oldest_stuck_age - 3660) < 60 FROM wharf.queue_stats() q), 'and its oldest is the longest stuck of them');
SELECT wharf.set_connection_state((SELECT id FROM wharf.connection WHERE workspace_id = 3), 'ACTIVE');
SELECT results_eq($$SELECT (s ->> 'subject', s ->> 'reason', (s ->> 'waiting_seconds')::int >= 3600)::text
                      FROM jsonb_array_elements(wharf.list_stuck_scopes(3)) s$$,
                  $$VALUES (('repo:p', 'waiting', true)::text)$$, 'resumed, the paused scope is stuck again, since when it was');
SELECT results_eq($$SELECT stuck_scopes::integer, pg_temp.listed() FROM wharf.queue_stats()$$, $$VALUES (4, 4)$$,
                  'in the gauge as in the list');
SELECT results_eq($$SELECT s ->> 'reason', (s ->> 'behind')::int, (s -> 'head' ->> 'id')::bigint, s -> 'head' ->> 'error_class',
                           (s ->> 'waiting_seconds')::int >= 3600
                      FROM pg_temp.stuck('1:generic:repo:s') s$$,
                  $$VALUES ('failing', 2, pg_temp.id('s1'), 'TimeoutError', true)$$,
                  'repo:s: failing, two behind its head s1, waiting an hour');
SELECT is(pg_temp.stuck('1:generic:repo:t') ->> 'reason', 'waiting', 'repo:t: waiting');
SELECT throws_ok($$SELECT wharf.list_stuck_scopes(404)$$, 'P0002', NULL, 'an unknown workspace is P0002');
SELECT throws_ok($$SELECT wharf.list_stuck_scopes(1, '-1 minute')$$, '22023', NULL, 'a negative threshold is 22023');
SELECT throws_ok($$SELECT wharf.list_stuck_scopes(1, NULL, 0)$$, '22023', NULL, 'a limit of 0 is 22023');

-- Retry the head now.
SELECT throws_ok(format($$SELECT wharf.retry_scope_head(2, '1:generic:repo:s', %s, 'intruder')$$, pg_temp.id('s1')),
                 'P0002', NULL, 'another workspace cannot act on the scope');
SELECT throws_ok(format($$SELECT wharf.retry_scope_head(1, '1:generic:repo:s', %s, '')$$, pg_temp.id('s1')),
                 '22004', NULL, 'an empty account is 22004');
SELECT results_eq(format($$SELECT r ->> 'done', r ->> 'reason' FROM wharf.retry_scope_head(1, '1:generic:repo:s', %s, 'ops') r$$, pg_temp.id('s2')),
                  $$VALUES ('false', 'not_head')$$, 'an event behind the head is refused: not_head');
SELECT is(wharf.retry_scope_head(1, '1:generic:repo:s', pg_temp.id('s1'), 'alice') ->> 'done', 'true', 'retrying the head');
SELECT ok((SELECT head_due_at <= now() FROM wharf.scope WHERE scope_key = '1:generic:repo:s'), 'makes it due now');
CREATE TEMP TABLE claimed AS SELECT id, lease_epoch, delivery_key FROM wharf.claim('w', 10);
SELECT ok('s1' = ANY (ARRAY(SELECT delivery_key FROM claimed)), 'and the next claim takes it');
SELECT wharf.release(id, lease_epoch) FROM claimed WHERE delivery_key <> 's1';
-- While a handler retries the head: moved to the dead letters when that lease fails.
SELECT results_eq(format($$SELECT r ->> 'done', r ->> 'after_lease' FROM wharf.dead_letter_scope_head(1, '1:generic:repo:s', %s, 'ops') r$$, pg_temp.id('s1')),
                  $$VALUES ('true', 'true')$$, 'a leased head is moved when its lease ends');
SELECT is((SELECT (s -> 'head' ->> 'dead_letter_pending')::boolean FROM jsonb_array_elements(wharf.list_stuck_scopes(1, '0 seconds')) s
            WHERE s ->> 'subject' = 'repo:s'), true, 'the stuck list says the move waits for the lease');
SELECT is((SELECT state FROM pg_temp.event('s1')), 'LEASED', 'the running attempt is left alone');
SELECT is(wharf.fail(id, lease_epoch, 'transient', 'TimeoutError'), 'DEAD', 's1 fails again: a dead letter, not another retry')
  FROM pg_temp.event('s1');
SELECT ok(wharf.replay(1, pg_temp.id('s1'), 'ops'), 'replayed, it heads its scope again');
SELECT is(wharf.fail(id, lease_epoch, 'transient', 'TimeoutError'), 'QUEUED', 'and its next lease retries as usual: the move was for that lease')
  FROM wharf.claim('w', 10) WHERE delivery_key = 's1';
UPDATE wharf.provider_event SET next_attempt_at = now() + interval '1 hour' WHERE delivery_key = 's1';
SELECT wharf.release(id, lease_epoch) FROM wharf.provider_event WHERE state = 'LEASED';

-- Move the head to the dead letters: its successor runs.
SELECT is(wharf.dead_letter_scope_head(1, '1:generic:repo:s', pg_temp.id('s1'), 'bob') -> 'event' ->> 'state', 'DEAD',
          'moving the head to the dead letters');
SELECT results_eq($$SELECT state, error_class, dead_at IS NOT NULL FROM pg_temp.event('s1')$$,
                  $$VALUES ('DEAD', 'TimeoutError', true)$$, 's1 is DEAD with its error class');
SELECT is((SELECT head_id FROM wharf.scope WHERE scope_key = '1:generic:repo:s'), pg_temp.id('s2'), 's2 heads the scope');
SELECT is((SELECT array_agg(delivery_key ORDER BY delivery_key) FROM wharf.claim('w', 10) WHERE workspace_id = 1), ARRAY['f1', 's2', 't1'],
          'and is claimed');
SELECT ok(wharf.replay(1, pg_temp.id('s1'), 'bob'), 's1 can be replayed like any dead letter');
SELECT is(wharf.dead_letter_scope_head(1, '1:generic:repo:t', pg_temp.id('t1'), 'bob') ->> 'after_lease', 'true',
          'a claimed head is moved when its lease ends');
UPDATE wharf.provider_event SET leased_until = now() - interval '1 second' WHERE delivery_key = 't1';
SELECT ok(wharf.reap() >= 1, 'its lease expires');
SELECT is((SELECT state FROM pg_temp.event('t1')), 'DEAD', 'reaped, it is a dead letter');

-- Pause the connection.
SELECT is(wharf.pause_scope_connection(1, '1:generic:repo:t', pg_temp.id('t1'), 'carol') ->> 'state', 'PAUSED',
          'pausing the connection of the head');
SELECT is((SELECT state FROM wharf.connection WHERE workspace_id = 1), 'PAUSED', 'pauses it');

-- The record.
SELECT is((SELECT array_agg((a ->> 'action') || ':' || (a ->> 'account')) FROM jsonb_array_elements(wharf.list_scope_actions(1)) a),
          ARRAY['pause_connection:carol', 'dead_letter_head:bob', 'dead_letter_head:bob', 'dead_letter_head:ops', 'retry_head:alice'],
          'every action done is recorded, newest first; refusals are not');
SELECT is(jsonb_array_length(wharf.list_scope_actions(2)), 0, 'another workspace sees none of them');
UPDATE wharf.scope_action SET at = now() - interval '31 days' WHERE action <> 'pause_connection';
SELECT is(wharf.purge_scope_actions(), 4::bigint, 'retention forgets those older than issue_retention');

SELECT * FROM finish();
ROLLBACK;
