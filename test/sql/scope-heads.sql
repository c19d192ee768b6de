-- wharf.scope: each scope's oldest QUEUED row (head) and LEASED row, kept
-- exact by triggers on every change, whoever makes it; and lock_scope.
BEGIN;
SELECT plan(64);

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
SELECT is_empty($$SELECT * FROM pg_temp.scope('1:generic:repo:b')$$,
                'a DBA moving the head out of the queue empties the scope, whose row goes');
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
                  $$SELECT NULL::text, NULL::text WHERE false$$,
                  'a statement taking the head and the rows behind it out of the queue empties the scopes, whose rows go');
UPDATE wharf.provider_event SET state = 'QUEUED', dead_at = NULL, next_attempt_at = now() WHERE delivery_key IN ('c3', 'c2');
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
-- once per session instead of on every call; the scope trigger's and
-- free_scopes' lookups; the reaper's lookups of the leases its scope rows
-- name; admission's read of its recipients by subject
-- (sql/80-admission.sql), planned once per session too. The readers of
-- scopes_stuck_since (sql/30) run without JIT: their plans are priced far
-- above what they read, and compiling one costs more than running it. So
-- does claim, whose turned-off scan methods price its lookup of the claim
-- line's one-row reset table at 10^10 (18 ms of compiling per claim).
SELECT set_eq($$SELECT p.proname::text, c.setting
                 FROM pg_proc p, unnest(p.proconfig) AS c(setting)
                WHERE p.pronamespace = 'wharf'::regnamespace
                  AND (c.setting LIKE 'enable_%' OR c.setting LIKE 'plan_cache_mode=%' OR c.setting LIKE 'jit=%')$$,
              $$VALUES ('lock_scopes', 'enable_seqscan=off'), ('keep_scope_heads', 'enable_seqscan=off'),
                       ('free_scopes', 'enable_seqscan=off'), ('free_scopes', 'enable_hashjoin=off'), ('free_scopes', 'enable_mergejoin=off'),
                       ('claim', 'enable_seqscan=off'), ('claim', 'enable_bitmapscan=off'), ('claim', 'enable_mergejoin=off'),
                       ('claim', 'enable_hashjoin=off'), ('claim', 'plan_cache_mode=force_generic_plan'), ('claim', 'jit=off'),
                       ('claim', 'enable_indexscan=on'),
                       ('complete_many', 'enable_seqscan=off'), ('complete_many', 'enable_mergejoin=off'),
                       ('complete_many', 'enable_hashjoin=off'), ('reap', 'enable_hashjoin=off'), ('reap', 'enable_mergejoin=off'),
                       ('admission_recipients', 'enable_seqscan=off'), ('admission_recipients', 'enable_bitmapscan=off'),
                       ('admission_recipients', 'enable_mergejoin=off'), ('admission_recipients', 'enable_hashjoin=off'),
                       ('admission_recipients', 'plan_cache_mode=force_generic_plan'), ('admission_recipients', 'jit=off'),
                       ('admit_items', 'enable_seqscan=off'), ('admit_items', 'enable_mergejoin=off'),
                       ('admit_items', 'enable_hashjoin=off'), ('admit_items', 'plan_cache_mode=force_generic_plan'),
                       ('admit_items', 'jit=off'),
                       ('queue_stats', 'jit=off'), ('list_stuck_scopes', 'jit=off'), ('evaluate_alert_rules', 'jit=off')$$,
              'the scope lookups, claim and admission''s recipients run with their plans pinned to the indexes, claim''s and admission''s kept generic; claim and the stuck scopes'' readers never JIT-compile');

-- One row trigger for every write the lease path does not make itself:
-- deletes only of QUEUED or LEASED rows, so that purge, deleting DONE and
-- DEAD rows by the million, fires nothing.
SELECT results_eq($$SELECT tgname::text COLLATE "default", (tgtype & 1) = 1, tgoldtable IS NOT NULL OR tgnewtable IS NOT NULL,
                           tgfoid::regproc::text COLLATE "default"
                      FROM pg_trigger
                     WHERE tgrelid = 'wharf.provider_event'::regclass AND tgname::text LIKE 'provider_event_keep_scope_%'
                     ORDER BY 1$$,
                  $$VALUES ('provider_event_keep_scope_delete', true, false, 'wharf.keep_scope_heads'),
                           ('provider_event_keep_scope_insert', true, false, 'wharf.keep_scope_heads'),
                           ('provider_event_keep_scope_update', true, false, 'wharf.keep_scope_heads')$$,
                  'the scope triggers: per row, no transition tables');

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

-- The rule of one LEASED row per scope holds against any write. A claim has
-- leased e1; a DBA's UPDATE leasing e2 of the same scope is refused, so is
-- a second leased row inserted by hand, and a row moved into a leased scope.
SELECT pg_temp.admit_event(1, 'repo:e', k) FROM unnest(ARRAY['e1', 'e2']) k;
SELECT ok('e1' IN (SELECT delivery_key FROM wharf.claim('w', 100)), 'e1 is claimed');
SELECT throws_ok($$UPDATE wharf.provider_event SET state = 'LEASED', lease_epoch = lease_epoch + 1 WHERE delivery_key = 'e2'$$,
                 '23505', NULL, 'a direct UPDATE leasing a second row of a scope is refused');
SELECT throws_ok($$INSERT INTO wharf.provider_event (workspace_id, provider, delivery_key, event_type, subject, scope_key, source, payload, state, lease_epoch)
                   VALUES (1, 'generic', 'e-hand', 'ping', 'repo:e', '1:generic:repo:e', 'https://hooks.example/1', '{}', 'LEASED', 1)$$,
                 '23505', NULL, 'a second LEASED row inserted by hand is refused');
SELECT pg_temp.admit_event(1, 'repo:f', 'f1');
SELECT ok('f1' IN (SELECT delivery_key FROM wharf.claim('w', 100)), 'f1 is claimed');
SELECT throws_ok($$UPDATE wharf.provider_event SET scope_key = '1:generic:repo:e' WHERE delivery_key = 'f1'$$,
                 '23505', NULL, 'moving a LEASED row into a scope leased already is refused');
SELECT results_eq($$SELECT head, leased FROM pg_temp.scope('1:generic:repo:e')$$, $$VALUES ('e2'::text, 'e1'::text)$$,
                  'the refused writes left the scope as it was');
SELECT ok(wharf.complete(pg_temp.id('e1'), 1), 'e1 completes');
SELECT lives_ok($$UPDATE wharf.provider_event SET state = 'LEASED', lease_epoch = lease_epoch + 1 WHERE delivery_key = 'e2'$$,
                'once the scope is free, a direct UPDATE may lease its head');
SELECT results_eq($$SELECT head, leased FROM pg_temp.scope('1:generic:repo:e')$$, $$VALUES (NULL::text, 'e2'::text)$$,
                  '... and the scope row follows it');
SELECT is(current_setting('wharf.keeping_scopes', true), 'off', 'the lease path turns its trigger setting off again');

SELECT * FROM finish();
ROLLBACK;
