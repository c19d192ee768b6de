-- wharf.scope: each scope's oldest QUEUED row (head) and LEASED row, kept
-- exact by triggers on every change, whoever makes it; and lock_scope.
BEGIN;
SELECT plan(54);

-- Fixture: workspaces 1 and 2, one generic connection each; rows admitted
-- through wharf.admit.
SELECT wharf.upsert_workspace(1), wharf.upsert_workspace(2);
SELECT wharf.upsert_connection(1, 'generic', 'https://hooks.example/1', 'webhook', 'one');
SELECT wharf.upsert_connection(2, 'generic', 'https://hooks.example/2', 'webhook', 'two');

-- The scope row of p_scope_key as (head key, head due, leased key, active).
CREATE FUNCTION pg_temp.scope(p_scope_key text)
RETURNS TABLE (head text, head_due_at timestamptz, leased text, active boolean)
LANGUAGE sql AS $$
  SELECT h.delivery_key, s.head_due_at, l.delivery_key, s.active
    FROM wharf.scope s
    LEFT JOIN wharf.provider_event h ON h.id = s.head_id
    LEFT JOIN wharf.provider_event l ON l.id = s.leased_id
   WHERE s.scope_key = p_scope_key
$$;

-- Scopes whose row disagrees with provider_event: the head must be the oldest
-- QUEUED row with its due time, ready no earlier than due, the lease the
-- LEASED row; a scope with QUEUED or LEASED rows must have a scope row.
CREATE FUNCTION pg_temp.drift() RETURNS SETOF text
LANGUAGE sql AS $$
  WITH truth AS (
    SELECT scope_key,
           min(id) FILTER (WHERE state = 'QUEUED') AS head_id,
           min(id) FILTER (WHERE state = 'LEASED') AS leased_id
      FROM wharf.provider_event GROUP BY scope_key
  )
  SELECT coalesce(s.scope_key, t.scope_key)
    FROM wharf.scope s
    FULL JOIN truth t ON t.scope_key = s.scope_key
    LEFT JOIN wharf.provider_event h ON h.id = t.head_id
   WHERE (t.head_id IS NOT NULL OR t.leased_id IS NOT NULL OR s.head_id IS NOT NULL OR s.leased_id IS NOT NULL)
     AND (s.scope_key IS NULL
          OR s.head_id IS DISTINCT FROM t.head_id
          OR s.head_due_at IS DISTINCT FROM h.next_attempt_at
          OR (s.head_id IS NOT NULL AND (s.ready_at IS NULL OR s.ready_at < s.head_due_at))
          OR s.leased_id IS DISTINCT FROM t.leased_id)
$$;

-- lock_scope
SELECT lives_ok($$SELECT wharf.lock_scope('1:generic:repo:new', 1)$$, 'lock_scope creates a missing scope row');
SELECT results_eq($$SELECT * FROM pg_temp.scope('1:generic:repo:new')$$,
                  $$VALUES (NULL::text, NULL::timestamptz, NULL::text, true)$$,
                  'a new scope row has no head, no lease, and is active');
SELECT lives_ok($$SELECT wharf.lock_scope('1:generic:repo:new', 1)$$, 'lock_scope on an existing scope row succeeds');
SELECT is((SELECT count(*) FROM wharf.scope WHERE scope_key = '1:generic:repo:new'), 1::bigint, '... and adds no second row');

-- Heads follow admission, claims, completion.
SELECT pg_temp.admit_event(1, 'repo:a', k) FROM unnest(ARRAY['a1', 'a2', 'a3']) k;
SELECT results_eq($$SELECT head, head_due_at, leased, active FROM pg_temp.scope('1:generic:repo:a')$$,
                  $$VALUES ('a1', now(), NULL::text, true)$$,
                  'the oldest admitted row heads its scope, due when admitted');
SELECT is_empty($$SELECT * FROM pg_temp.drift()$$, 'no scope drifts after admission');
SELECT is((SELECT delivery_key FROM wharf.claim('w')), 'a1', 'a1 is claimed');
SELECT results_eq($$SELECT head, leased FROM pg_temp.scope('1:generic:repo:a')$$, $$VALUES ('a2', 'a1')$$,
                  'a claim hands the head to the next row and marks the lease');
SELECT ok(wharf.complete(pg_temp.id('a1'), 1), 'a1 completes');
SELECT results_eq($$SELECT head, leased FROM pg_temp.scope('1:generic:repo:a')$$, $$VALUES ('a2', NULL::text)$$,
                  'completion clears the lease mark');

-- A failed row heads its scope again, with its retry time.
SELECT is((SELECT delivery_key FROM wharf.claim('w')), 'a2', 'a2 is claimed');
SELECT is(wharf.fail(pg_temp.id('a2'), 1, 'transient', 'ECONNRESET'), 'QUEUED', 'a2 fails transiently');
SELECT results_eq($$SELECT s.head, s.head_due_at = e.next_attempt_at, s.head_due_at > now(), s.leased
                      FROM pg_temp.scope('1:generic:repo:a') s, wharf.provider_event e WHERE e.delivery_key = 'a2'$$,
                  $$VALUES ('a2', true, true, NULL::text)$$,
                  'the failed row heads its scope again, due at its retry time');
UPDATE wharf.provider_event SET next_attempt_at = now() - interval '1 minute' WHERE delivery_key = 'a2';
SELECT is((SELECT head_due_at FROM pg_temp.scope('1:generic:repo:a')), now() - interval '1 minute',
          'rescheduling the head moves its due time');
UPDATE wharf.provider_event SET next_attempt_at = now() + interval '1 hour' WHERE delivery_key = 'a3';
SELECT is((SELECT head_due_at FROM pg_temp.scope('1:generic:repo:a')), now() - interval '1 minute',
          'rescheduling a later row leaves the head alone');
SELECT is_empty($$SELECT * FROM pg_temp.drift()$$, 'no scope drifts after failures and reschedules');

-- release, DEAD
SELECT is((SELECT delivery_key FROM wharf.claim('w')), 'a2', 'a2 is claimed again');
SELECT ok(wharf.release(pg_temp.id('a2'), 2), 'a2 is released');
SELECT results_eq($$SELECT head, leased FROM pg_temp.scope('1:generic:repo:a')$$, $$VALUES ('a2', NULL::text)$$,
                  'a released row heads its scope again');
SELECT is((SELECT delivery_key FROM wharf.claim('w')), 'a2', 'a2 is claimed once more');
SELECT is(wharf.fail(pg_temp.id('a2'), 3, 'permanent', 'SyntaxError'), 'DEAD', 'a2 dies');
SELECT results_eq($$SELECT head, leased FROM pg_temp.scope('1:generic:repo:a')$$, $$VALUES ('a3', NULL::text)$$,
                  'after a DEAD row the next queued row heads');

-- Deletions (erasure, cascades, a DBA) keep the scope exact too.
SELECT pg_temp.admit_event(1, 'repo:b', k) FROM unnest(ARRAY['b1', 'b2', 'b3']) k;
SELECT is((SELECT delivery_key FROM wharf.claim('w', 10)), 'b1', 'b1 is claimed (a3 is not due)');
DELETE FROM wharf.provider_event WHERE delivery_key = 'b2';
SELECT results_eq($$SELECT head, leased FROM pg_temp.scope('1:generic:repo:b')$$, $$VALUES ('b3', 'b1')$$,
                  'deleting the head hands it to the next row');
DELETE FROM wharf.provider_event WHERE delivery_key = 'b1';
SELECT results_eq($$SELECT head, leased FROM pg_temp.scope('1:generic:repo:b')$$, $$VALUES ('b3', NULL::text)$$,
                  'deleting the LEASED row clears the lease mark');
UPDATE wharf.provider_event SET state = 'DEAD', dead_at = now() WHERE delivery_key = 'b3';
SELECT results_eq($$SELECT head, leased FROM pg_temp.scope('1:generic:repo:b')$$, $$VALUES (NULL::text, NULL::text)$$,
                  'a DBA moving the head out of the queue empties the scope');
SELECT ok(wharf.replay(1, pg_temp.id('b3'), 'ops'), 'b3 is replayed');
SELECT is((SELECT head FROM pg_temp.scope('1:generic:repo:b')), 'b3', 'a replayed row heads its scope');
SELECT is_empty($$SELECT * FROM pg_temp.drift()$$, 'no scope drifts after deletions and replays');

-- One statement moving rows of several scopes at once (a claim, a batch of
-- completions, a DBA's UPDATE) moves each scope as the rows would one by one.
SELECT pg_temp.admit_event(1, 'repo:c', k) FROM unnest(ARRAY['c1', 'c2', 'c3']) k;
SELECT pg_temp.admit_event(1, 'repo:d', k) FROM unnest(ARRAY['d1', 'd2']) k;
SELECT set_eq($$SELECT delivery_key FROM wharf.claim('w', 10) WHERE delivery_key LIKE '_1'$$, ARRAY['c1', 'd1'],
              'one claim leases the heads of both scopes');
SELECT results_eq($$SELECT head, leased FROM pg_temp.scope('1:generic:repo:c')
                    UNION ALL SELECT head, leased FROM pg_temp.scope('1:generic:repo:d')$$,
                  $$VALUES ('c2', 'c1'), ('d2', 'd1')$$, 'each scope''s head moved on and its lease is marked');
SELECT set_eq(format('SELECT * FROM wharf.complete_many(%L, %L, %L)', ARRAY[pg_temp.id('c1'), pg_temp.id('d1')],
                     ARRAY[1, 1], ARRAY['handled', 'handled']),
              ARRAY[pg_temp.id('c1'), pg_temp.id('d1')], 'one statement completes both');
SELECT results_eq($$SELECT head, leased FROM pg_temp.scope('1:generic:repo:c')
                    UNION ALL SELECT head, leased FROM pg_temp.scope('1:generic:repo:d')$$,
                  $$VALUES ('c2', NULL::text), ('d2', NULL::text)$$, 'both lease marks are cleared');
UPDATE wharf.provider_event SET state = 'DEAD', dead_at = now() WHERE delivery_key IN ('c2', 'c3', 'd2');
SELECT results_eq($$SELECT head, leased FROM pg_temp.scope('1:generic:repo:c')
                    UNION ALL SELECT head, leased FROM pg_temp.scope('1:generic:repo:d')$$,
                  $$VALUES (NULL::text, NULL::text), (NULL, NULL)$$,
                  'a statement taking the head and the rows behind it out of the queue empties the scope');
UPDATE wharf.provider_event SET state = 'QUEUED', next_attempt_at = now() WHERE delivery_key IN ('c3', 'c2');
SELECT is((SELECT head FROM pg_temp.scope('1:generic:repo:c')), 'c2', 'of rows queued together the oldest heads');
SELECT is_empty($$SELECT * FROM pg_temp.drift()$$, 'no scope drifts after statements that move many rows');
SELECT pg_temp.admit_event(1, 'repo:e', 'e1');
SELECT is((SELECT delivery_key FROM wharf.claim('w', 10) WHERE delivery_key = 'e1'), 'e1', 'e1 is claimed');
SELECT ok(wharf.complete(pg_temp.id('e1'), 1), 'e1 completes, and nothing is queued behind it');
SELECT is_empty($$SELECT * FROM pg_temp.scope('1:generic:repo:e')$$, 'a scope whose last lease ends with nothing queued is deleted');
SELECT pg_temp.admit_event(1, 'repo:e', 'e2');
SELECT results_eq($$SELECT head, leased, active FROM pg_temp.scope('1:generic:repo:e')$$, $$VALUES ('e2', NULL::text, true)$$,
                  'the next admission makes it again, headed by its row');

-- Workspace activity.
SELECT pg_temp.admit_event(2, 'repo:z', 'z1');
SELECT wharf.set_workspace_state(2, 'SUSPENDED');
SELECT is((SELECT active FROM pg_temp.scope('2:generic:repo:z')), false, 'suspending a workspace deactivates its scopes');
SELECT is((SELECT bool_and(active) FROM wharf.scope WHERE workspace_id = 1), true, '... not another workspace''s');
SELECT wharf.lock_scope('2:generic:repo:late', 2);
SELECT is((SELECT active FROM pg_temp.scope('2:generic:repo:late')), false, 'a scope created while suspended starts inactive');
SELECT wharf.set_workspace_state(2, 'ACTIVE');
SELECT is((SELECT bool_and(active) FROM wharf.scope WHERE workspace_id = 2), true, 'reactivation activates every scope again');
SELECT wharf.admit('github', 'https://github.com', 'i1', 'installation', '{"control": true, "installation_id": "7"}',
                   NULL, '{"action": "created", "installation": {"id": 7}}', '{}');
SELECT results_eq($$SELECT head, active FROM pg_temp.scope('system:github:https://github.com')$$,
                  $$VALUES ('i1', true)$$, 'an installation scope (no workspace) is always active');

-- Scopes are served longest ready first: a scope that was just served queues
-- behind the scopes that were ready before it, even when its next row is older.
-- (On an inbox emptied of the rows above.)
DELETE FROM wharf.provider_event;
SELECT pg_temp.admit_event(1, 'repo:rr-x', k) FROM unnest(ARRAY['rr-x1', 'rr-x2']) k;
SELECT pg_temp.admit_event(1, 'repo:rr-y', 'rr-y1');
SELECT is((SELECT delivery_key FROM wharf.claim('rr')), 'rr-x1',
          'the scope ready first is served first');
SELECT ok(wharf.complete(pg_temp.id('rr-x1'), 1), 'rr-x1 completes');
SELECT is((SELECT delivery_key FROM wharf.claim('rr')), 'rr-y1',
          'then the scope that waited, not the one just served (rr-x2 is older than rr-y1)');

-- Cached generic plans must keep to the indexes of a table that bloats
-- between vacuums (sql/20-scope-heads.sql, sql/30-claim-lease.sql): lookups
-- by scope_key and claim's walk of ix_scope_claim, which claim also plans
-- once per session instead of on every call; the reaper's read of the
-- leased rows; admission's read of its recipients by subject
-- (sql/80-admission.sql), planned once per session too.
SELECT set_eq($$SELECT p.proname::text, c.setting
                 FROM pg_proc p, unnest(p.proconfig) AS c(setting)
                WHERE p.pronamespace = 'wharf'::regnamespace
                  AND (c.setting LIKE 'enable_%' OR c.setting LIKE 'plan_cache_mode=%')$$,
              $$VALUES ('lock_scope', 'enable_seqscan=off'), ('sync_scope_head', 'enable_seqscan=off'), ('sync_scope_head', 'enable_hashjoin=on'), ('sync_scope_head', 'plan_cache_mode=force_generic_plan'),
                       ('claim', 'enable_seqscan=off'), ('claim', 'enable_bitmapscan=off'), ('claim', 'enable_mergejoin=off'),
                       ('claim', 'enable_hashjoin=off'), ('claim', 'plan_cache_mode=force_generic_plan'),
                       ('complete_many', 'enable_seqscan=off'), ('complete_many', 'enable_mergejoin=off'),
                       ('complete_many', 'enable_hashjoin=off'), ('reap', 'enable_seqscan=off'),
                       ('admission_snapshot', 'enable_seqscan=off'), ('admission_snapshot', 'enable_bitmapscan=off'),
                       ('admission_snapshot', 'enable_mergejoin=off'), ('admission_snapshot', 'enable_hashjoin=off'),
                       ('admission_snapshot', 'plan_cache_mode=force_generic_plan')$$,
              'the scope lookups, claim, reap and admission''s recipients run with their plans pinned to the indexes, claim''s and admission''s kept generic');

-- Updates move scopes once per statement; inserts and deletes per QUEUED or
-- LEASED row, so that purge, deleting DONE and DEAD rows by the million,
-- fires nothing and copies no row into a transition table. A QUEUED insert
-- (an admission) has a one-statement function of its own.
SELECT results_eq($$SELECT tgname::text COLLATE "default", (tgtype & 1) = 1, tgoldtable IS NOT NULL OR tgnewtable IS NOT NULL,
                           tgfoid::regproc::text COLLATE "default"
                      FROM pg_trigger
                     WHERE tgrelid = 'wharf.provider_event'::regclass AND tgname::text LIKE 'provider_event_sync_scope_%'
                     ORDER BY 1$$,
                  $$VALUES ('provider_event_sync_scope_delete', true, false, 'wharf.sync_scope_head'),
                           ('provider_event_sync_scope_insert', true, false, 'wharf.head_scope_on_insert'),
                           ('provider_event_sync_scope_insert_leased', true, false, 'wharf.sync_scope_head'),
                           ('provider_event_sync_scope_update', false, true, 'wharf.sync_scope_head')$$,
                  'the scope triggers: per statement with transition tables for updates, per row for inserts and deletes');

-- Rows inserted by hand, as a DBA might: a LEASED row marks its scope's
-- lease, a QUEUED row into a scope without a row makes one and heads it, an
-- older QUEUED row takes the head from a younger one.
INSERT INTO wharf.provider_event (workspace_id, provider, delivery_key, event_type, subject, scope_key, source, payload, state, lease_epoch)
VALUES (2, 'generic', 'hand-leased', 'ping', 'repo:hand', '2:generic:repo:hand', 'https://hooks.example/2', '{}', 'LEASED', 1);
SELECT results_eq($$SELECT head, leased FROM pg_temp.scope('2:generic:repo:hand')$$,
                  $$VALUES (NULL::text, 'hand-leased'::text)$$,
                  'a LEASED row inserted by hand marks its scope''s lease');
INSERT INTO wharf.provider_event (id, workspace_id, provider, delivery_key, event_type, subject, scope_key, source, payload)
OVERRIDING SYSTEM VALUE
VALUES (900000002, 2, 'generic', 'hand-young', 'ping', 'repo:hand2', '2:generic:repo:hand2', 'https://hooks.example/2', '{}');
SELECT results_eq($$SELECT head, leased FROM pg_temp.scope('2:generic:repo:hand2')$$,
                  $$VALUES ('hand-young'::text, NULL::text)$$,
                  'a QUEUED row inserted by hand into a scope without a row makes the row and heads it');
INSERT INTO wharf.provider_event (id, workspace_id, provider, delivery_key, event_type, subject, scope_key, source, payload)
OVERRIDING SYSTEM VALUE
VALUES (900000001, 2, 'generic', 'hand-old', 'ping', 'repo:hand2', '2:generic:repo:hand2', 'https://hooks.example/2', '{}');
SELECT results_eq($$SELECT head FROM pg_temp.scope('2:generic:repo:hand2')$$,
                  $$VALUES ('hand-old'::text)$$,
                  'an older QUEUED row takes the head from a younger one');
SELECT is_empty($$SELECT * FROM pg_temp.drift()$$, 'no scope drifts after rows inserted by hand');

SELECT * FROM finish();
ROLLBACK;
