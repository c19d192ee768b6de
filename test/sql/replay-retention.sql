-- wharf.replay, wharf.replay_installation and wharf.purge: a DEAD row goes
-- back to the head of its scope keeping its id and steps; retention forgets
-- DONE and DEAD rows after their windows, and nothing else.
BEGIN;
SELECT plan(56);

-- Fixture: workspaces 1 and 2, one generic connection in workspace 1; rows
-- admitted through wharf.admit, installation rows as GitHub control events.
SELECT wharf.upsert_workspace(1), wharf.upsert_workspace(2);
SELECT wharf.upsert_connection(1, 'generic', 'https://hooks.example/1', 'webhook', 'one');
SELECT wharf.set_setting('base_delay', '1 millisecond');

CREATE FUNCTION pg_temp.admit_installation_event(p_key text) RETURNS bigint
LANGUAGE sql AS $$
  SELECT (wharf.admit('github', 'https://github.com', p_key, 'installation',
                      '{"control": true, "installation_id": "7"}', NULL,
                      '{"action": "created", "installation": {"id": 7}}', '{}')
          -> 'events' -> 0 ->> 'event_id')::bigint
$$;

-- Claims every due head and returns the epoch p_key's row got (NULL: not claimed).
CREATE FUNCTION pg_temp.claim(p_key text) RETURNS bigint
LANGUAGE sql AS $$ SELECT lease_epoch FROM wharf.claim('w', 100) WHERE delivery_key = p_key $$;

-- Scope repo:r: r1 ends DEAD after committing step s1, r2 is handled, r3 waits.
SELECT pg_temp.admit_event('repo:r', k) FROM unnest(ARRAY['r1', 'r2', 'r3']) k;
SELECT is(pg_temp.claim('r1'), 1::bigint, 'r1 is leased');
SELECT ok(wharf.step(pg_temp.id('r1'), 1, 'issue:1'), 'r1 commits step issue:1');
SELECT is(wharf.fail(pg_temp.id('r1'), 1, 'permanent', 'SyntaxError'), 'DEAD', 'r1 fails permanently');
SELECT is(pg_temp.claim('r2'), 1::bigint, 'r2 is leased after r1 is DEAD');
SELECT ok(wharf.complete(pg_temp.id('r2'), 1), 'r2 is handled');

-- Bad input.
SELECT throws_ok($$SELECT wharf.replay(1, NULL, 'ops')$$, '22004', NULL, 'replay rejects a NULL id');
SELECT throws_ok($$SELECT wharf.replay(1, pg_temp.id('r1'), NULL)$$, '22004', NULL, 'replay rejects a NULL account');
SELECT throws_ok($$SELECT wharf.replay(1, pg_temp.id('r1'), '')$$, '22004', NULL, 'replay rejects an empty account');
SELECT throws_ok($$SELECT wharf.replay(1, pg_temp.id('r1'), 'ops', NULL)$$, '22004', NULL, 'replay rejects a NULL force');
SELECT throws_ok($$SELECT wharf.replay_installation(NULL, 'ops')$$, '22004', NULL, 'replay_installation rejects a NULL id');
SELECT throws_ok($$SELECT wharf.replay_installation(1, NULL)$$, '22004', NULL, 'replay_installation rejects a NULL account');

-- What replay refuses.
SELECT is(wharf.replay(2, pg_temp.id('r1'), 'ops'), false, 'replay in another workspace returns false');
SELECT is(wharf.replay(404, pg_temp.id('r1'), 'ops'), false, 'replay in an unknown workspace returns false');
SELECT is(wharf.replay(1, pg_temp.id('r2'), 'ops'), false, 'replay of a DONE row returns false');
SELECT is(wharf.replay(1, pg_temp.id('r3'), 'ops'), false, 'replay of a QUEUED row returns false');
SELECT is(wharf.replay(1, -1, 'ops'), false, 'replay of a missing row returns false');
SELECT results_eq($$SELECT delivery_key, state, replayed_by FROM wharf.provider_event WHERE delivery_key LIKE 'r_' ORDER BY id$$,
                  $$VALUES ('r1', 'DEAD', NULL::text), ('r2', 'DONE', NULL), ('r3', 'QUEUED', NULL)$$,
                  'the refused replays changed nothing');

-- replay
SELECT is(wharf.replay(1, pg_temp.id('r1'), 'ops@example.com'), true, 'replay of a DEAD row of the workspace returns true');
SELECT results_eq(
  $$SELECT state, attempt, failures, outcome, dead_at, error_class, replayed_by, replayed_at = now(),
           next_attempt_at <= clock_timestamp()
      FROM wharf.provider_event WHERE delivery_key = 'r1'$$,
  $$VALUES ('QUEUED', 0, 0, NULL::text, NULL::timestamptz, 'SyntaxError', 'ops@example.com', true, true)$$,
  'a replayed row is QUEUED and due, attempt and failures reset, error_class kept, replay recorded');
SELECT is(wharf.replay(1, pg_temp.id('r1'), 'ops'), false, 'replaying it again returns false (not DEAD)');
SELECT is(pg_temp.claim('r1'), 2::bigint, 'the replayed row keeps its id and heads its scope again (before r3)');
SELECT is((pg_temp.event('r3')).state, 'QUEUED', 'the later row waits for the replayed one');
SELECT is((pg_temp.event('r2')).state, 'DONE', 'a later row already handled is not rewound');
SELECT is(wharf.step(pg_temp.id('r1'), 2, 'issue:1'), false, 'the replayed row kept its committed step');
SELECT is(wharf.step(pg_temp.id('r1'), 2, 'issue:2'), true, 'its unfinished step runs');
SELECT ok(wharf.complete(pg_temp.id('r1'), 2), 'the replayed row completes');

-- uncertain needs force.
SELECT pg_temp.admit_event('repo:u', 'u1');
SELECT is(pg_temp.claim('u1'), 1::bigint, 'u1 is leased');
SELECT is(wharf.fail(pg_temp.id('u1'), 1, 'uncertain', 'OutcomeUncertain'), 'DEAD', 'u1 ends uncertain');
SELECT is(wharf.replay(1, pg_temp.id('u1'), 'ops'), false, 'an uncertain row does not replay without force');
SELECT is((pg_temp.event('u1')).outcome, 'uncertain', '... and stays uncertain');
SELECT is(wharf.replay(1, pg_temp.id('u1'), 'ops', true), true, 'with force it replays');
SELECT is((pg_temp.event('u1')).outcome, NULL, '... and its outcome is cleared');

-- Installation rows are replayed through replay_installation only, with an audit row.
SELECT pg_temp.admit_installation_event('i1');
SELECT is(pg_temp.claim('i1'), 1::bigint, 'i1 is leased');
SELECT is(wharf.fail(pg_temp.id('i1'), 1, 'permanent', 'SyntaxError'), 'DEAD', 'i1 fails permanently');
SELECT is(wharf.replay(1, pg_temp.id('i1'), 'ops'), false, 'replay never reaches an installation row');
SELECT is(wharf.replay(NULL, pg_temp.id('i1'), 'ops'), false, 'replay with a NULL workspace returns false');
SELECT is((SELECT state FROM wharf.provider_event WHERE id = pg_temp.id('i1')), 'DEAD', '... and leaves the installation row DEAD');
SELECT is(wharf.replay_installation(pg_temp.id('r3'), 'admin'), false, 'replay_installation never reaches a workspace row');
SELECT is_empty($$SELECT 1 FROM wharf.replay_audit$$, 'a refused replay_installation writes no audit row');
SELECT is(wharf.replay_installation(pg_temp.id('i1'), 'admin'), true, 'replay_installation replays a DEAD installation row');
SELECT results_eq($$SELECT event_id, account, at FROM wharf.replay_audit$$,
                  $$SELECT pg_temp.id('i1'), 'admin'::text, now()$$,
                  'replay_installation records who replayed which row, when');

-- purge: one row per case, each in its own scope.
SELECT pg_temp.admit_event('repo:p-' || k, 'p-' || k)
  FROM unnest(ARRAY['done-old', 'done-new', 'dead-old', 'dead-new', 'queued', 'leased']) k;
SELECT pg_temp.claim('p-done-old');
SELECT wharf.step(pg_temp.id('p-done-old'), 1, 'issue:9');
SELECT wharf.complete(pg_temp.id(k), 1) FROM unnest(ARRAY['p-done-old', 'p-done-new']) k;
SELECT wharf.fail(pg_temp.id(k), 1, 'permanent', 'SyntaxError') FROM unnest(ARRAY['p-dead-old', 'p-dead-new']) k;
SELECT wharf.release(pg_temp.id('p-queued'), 1);
-- Each row arrived a minute before it ended (purge finds its candidates by arrival).
UPDATE wharf.provider_event SET handled_at = now() - interval '73 hours', received_at = now() - interval '73 hours 1 minute'
 WHERE delivery_key = 'p-done-old';
UPDATE wharf.provider_event SET handled_at = now() - interval '71 hours', received_at = now() - interval '71 hours 1 minute'
 WHERE delivery_key = 'p-done-new';
UPDATE wharf.provider_event SET dead_at = now() - interval '31 days', received_at = now() - interval '31 days 1 minute'
 WHERE delivery_key = 'p-dead-old';
UPDATE wharf.provider_event SET dead_at = now() - interval '29 days', received_at = now() - interval '29 days 1 minute'
 WHERE delivery_key = 'p-dead-new';
-- Old arrivals and an end time no QUEUED or LEASED row would carry: purge must
-- go by state too. (dead_at is DEAD's alone: a CHECK refuses it elsewhere.)
UPDATE wharf.provider_event SET handled_at = now() - interval '1 year', received_at = now() - interval '1 year'
 WHERE delivery_key IN ('p-queued', 'p-leased');
SELECT is((SELECT array_agg(state ORDER BY id) FROM wharf.provider_event WHERE delivery_key LIKE 'p-%'),
          ARRAY['DONE', 'DONE', 'DEAD', 'DEAD', 'QUEUED', 'LEASED'], 'the purge fixture is in place');

SELECT results_eq($$SELECT * FROM wharf.purge()$$, $$VALUES (1::bigint, 1::bigint)$$,
                  'purge deletes one DONE row past replay_window and one DEAD row past dead_retention');
SELECT set_eq($$SELECT delivery_key FROM wharf.provider_event WHERE delivery_key LIKE 'p-%'$$,
              ARRAY['p-done-new', 'p-dead-new', 'p-queued', 'p-leased'],
              'recent DONE and DEAD rows and every QUEUED or LEASED row are kept');
SELECT is((SELECT count(*) FROM wharf.provider_event_step WHERE step_name = 'issue:9'), 0::bigint,
          'a purged row''s steps go with it');
SELECT set_eq($$SELECT scope_key FROM wharf.scope WHERE scope_key LIKE '%repo:p-%'$$,
              ARRAY['1:generic:repo:p-queued', '1:generic:repo:p-leased'],
              'purge also forgets the scope rows left with nothing queued or leased');

SELECT wharf.set_setting('replay_window', '70 hours');
SELECT wharf.set_setting('dead_retention', '28 days');
SELECT results_eq($$SELECT * FROM wharf.purge()$$, $$VALUES (1::bigint, 1::bigint)$$,
                  'purge reads replay_window and dead_retention from the settings');
SELECT results_eq($$SELECT * FROM wharf.purge()$$, $$VALUES (0::bigint, 0::bigint)$$, 'a second purge finds nothing');

-- Bounded work: at most purge_batch rows of each kind per call, oldest first.
SELECT wharf.set_setting('purge_batch', '2');
INSERT INTO wharf.provider_event (workspace_id, provider, delivery_key, event_type, subject, scope_key, source,
                                  payload, state, outcome, received_at, handled_at)
SELECT 1, 'generic', 'batch-' || n, 'ping', 'repo:batch', '1:generic:repo:batch', 'https://hooks.example/1',
       '{}', 'DONE', 'handled', now() - interval '10 days' + n * interval '1 minute',
       now() - interval '10 days' + n * interval '1 minute'
  FROM generate_series(1, 5) n;
SELECT results_eq($$SELECT * FROM wharf.purge()$$, $$VALUES (2::bigint, 0::bigint)$$,
                  'one purge deletes at most purge_batch rows');
SELECT set_eq($$SELECT delivery_key FROM wharf.provider_event WHERE delivery_key LIKE 'batch-%'$$,
              ARRAY['batch-3', 'batch-4', 'batch-5'], '... the oldest arrivals first');
SELECT results_eq($$SELECT sum(done_deleted) FROM (SELECT (wharf.purge()).done_deleted FROM generate_series(1, 3)) p$$,
                  $$VALUES (3::numeric)$$, 'calls repeated until one deletes nothing remove the rest');

-- The tables that grow with traffic besides the inbox have a retention too.
INSERT INTO wharf.admission_log (at, provider, source, delivery_key, reason)
SELECT now() - n * interval '20 days', 'github', 'https://github.com', 'log-' || n, 'unknown-source'
  FROM generate_series(0, 4) n;  -- 0, 20, 40, 60 and 80 days old
INSERT INTO wharf.replay_audit (event_id, account, at) VALUES (1, 'ops', now() - interval '400 days'), (2, 'ops', now());
SELECT is(wharf.purge_logs(), 3::bigint,
          'purge_logs deletes a batch: two admission log entries past log_retention and the audit past audit_retention');
SELECT is(wharf.purge_logs() + wharf.purge_logs(), 1::bigint, '... then the last old entry, then nothing');
SELECT results_eq($$SELECT delivery_key FROM wharf.admission_log WHERE delivery_key LIKE 'log-%' ORDER BY at DESC$$,
                  $$VALUES ('log-0'), ('log-1')$$, 'entries within log_retention (30 days) stay');

-- The on-call tables that grow with traffic go in the same loop: issues not
-- seen for issue_retention, failure counts older than a day, stuck-scope
-- actions and finished alerts past issue_retention; a pending alert stays.
INSERT INTO wharf.issue (workspace_id, provider, event_type, error_class, first_seen_at, last_seen_at, sample_event_id)
VALUES (1, 'generic', 'ping', 'OldError', now() - interval '90 days', now() - interval '60 days', 1),
       (1, 'generic', 'ping', 'NewError', now(), now(), 1);
INSERT INTO wharf.failure_minute (workspace_id, minute, failed) VALUES (1, now() - interval '2 days', 3), (1, now() - interval '2 hours', 1);
INSERT INTO wharf.scope_action (workspace_id, scope_key, action, account, at)
VALUES (1, '1:generic:repo:old', 'retry_head', 'ops', now() - interval '60 days');
INSERT INTO wharf.alert_rule (workspace_id, name, kind, destination, url, created_by)
VALUES (1, 'old-issues', 'issue_opened', 'slack', 'https://hooks.slack.example/x', 'ops');
INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts, created_at, state)
SELECT id, 1, k, 'issue_opened', '{}', now() - interval '60 days', st
  FROM wharf.alert_rule, (VALUES ('a-delivered', 'delivered'), ('a-pending', 'pending')) v(k, st);
SELECT is((SELECT sum(n) FROM (SELECT wharf.purge_logs() AS n FROM generate_series(1, 4)) p), 4::numeric,
          'the retention loop''s purge_logs also forgets an old issue, old failure counts, an old scope action and a finished alert');
SELECT results_eq($$SELECT (SELECT array_agg(error_class ORDER BY error_class) FROM wharf.issue WHERE error_class IN ('OldError', 'NewError')),
                           (SELECT array_agg(failed) FROM wharf.failure_minute WHERE minute < now() - interval '1 hour'),
                           (SELECT count(*) FROM wharf.scope_action), (SELECT array_agg(dedupe_key) FROM wharf.alert)$$,
                  $$VALUES (ARRAY['NewError'], ARRAY[1::bigint], 0::bigint, ARRAY['a-pending'])$$,
                  'what is recent, and the pending alert, stay');

SELECT * FROM finish();
ROLLBACK;
