-- The operator surface: every workspace query binds its workspace (a
-- workspace never sees another workspace's events or the installation rows,
-- which only the *_installation_* functions reach), event pages are keyset
-- paged newest first within 1..500 rows, workspaces and connections list
-- without secrets, and API tokens are kept by hash, verified while live and
-- revoked per workspace.
BEGIN;
SELECT plan(64);

-- Fixture: workspaces 1 and 2 with one generic connection each; workspace 3
-- with a GitLab and a GitHub connection and no events. Rows admitted through
-- wharf.admit, installation rows as GitHub control events.
SELECT wharf.upsert_workspace(1), wharf.upsert_workspace(2), wharf.upsert_workspace(3);
CREATE TEMP TABLE conn (name text PRIMARY KEY, id bigint);
INSERT INTO conn VALUES
  ('one', wharf.upsert_connection(1, 'generic', 'https://hooks.example/1', 'webhook', 'one')),
  ('two', wharf.upsert_connection(2, 'generic', 'https://hooks.example/2', 'webhook', 'two')),
  ('gitlab', wharf.upsert_connection(3, 'gitlab', 'https://gitlab.example.com', 'webhook', NULL,
                                     '{"subject_prefixes": ["project:"]}')),
  ('pat', wharf.upsert_connection(3, 'github', 'https://github.com', 'pat', NULL));

CREATE FUNCTION pg_temp.conn(p_name text) RETURNS bigint
LANGUAGE sql AS $$ SELECT id FROM conn WHERE name = p_name $$;

CREATE FUNCTION pg_temp.admit_installation_event(p_key text) RETURNS bigint
LANGUAGE sql AS $$
  SELECT (wharf.admit('github', 'https://github.com', p_key, 'installation',
                      '{"control": true, "installation_id": "7"}', NULL,
                      '{"action": "created", "installation": {"id": 7}}', '{}')
          -> 'events' -> 0 ->> 'event_id')::bigint
$$;

-- The event ids of a page, in page order, and the ids of rows by delivery key.
CREATE FUNCTION pg_temp.ids(p_page jsonb) RETURNS jsonb
LANGUAGE sql AS $$ SELECT jsonb_path_query_array(p_page, '$.events[*].id') $$;

CREATE FUNCTION pg_temp.ids_of(VARIADIC p_keys text[]) RETURNS jsonb
LANGUAGE sql AS $$
  SELECT coalesce(jsonb_agg(pg_temp.id(k) ORDER BY o), '[]') FROM unnest(p_keys) WITH ORDINALITY u(k, o)
$$;

-- A page as {ids, next_cursor}.
CREATE FUNCTION pg_temp.page(p_page jsonb) RETURNS jsonb
LANGUAGE sql AS $$ SELECT jsonb_build_object('ids', pg_temp.ids(p_page), 'next_cursor', p_page -> 'next_cursor') $$;

CREATE FUNCTION pg_temp.page_of(p_next text, VARIADIC p_keys text[]) RETURNS jsonb
LANGUAGE sql AS $$ SELECT jsonb_build_object('ids', pg_temp.ids_of(VARIADIC p_keys), 'next_cursor', pg_temp.id(p_next)) $$;

-- Workspace 1: e1..e5 (repo:x holds e1, e3, e5). Workspace 2: f1, about the
-- same subject. Installation rows: i1, i2.
SELECT pg_temp.admit_event(1, 'repo:x', 'e1');
SELECT pg_temp.admit_event(1, 'repo:y', 'e2');
SELECT pg_temp.admit_event(1, 'repo:x', 'e3');
SELECT pg_temp.admit_event(1, 'repo:z', 'e4');
SELECT pg_temp.admit_event(1, 'repo:x', 'e5');
SELECT pg_temp.admit_event(2, 'repo:x', 'f1');
SELECT pg_temp.admit_installation_event('i1');
SELECT pg_temp.admit_installation_event('i2');

SELECT is((SELECT array_agg(delivery_key ORDER BY id) FROM wharf.claim('w', 100)),
          ARRAY['e1', 'e2', 'e4', 'f1', 'i1'], 'fixture: the head of every scope is leased');
-- e1 commits a step and ends DEAD, e4, f1 and i1 end DEAD, e2 is handled;
-- e3, e5 and i2 wait QUEUED.
SELECT wharf.step(pg_temp.id('e1'), 1, 'issue:1');
SELECT wharf.fail(pg_temp.id(k), 1, 'permanent', 'SyntaxError') FROM unnest(ARRAY['e1', 'e4', 'f1', 'i1']) k;
SELECT wharf.complete(pg_temp.id('e2'), 1);

-- require_workspace ---------------------------------------------------------------
SELECT throws_ok($$SELECT wharf.require_workspace(NULL)$$, '22004', NULL, 'require_workspace rejects a NULL workspace');
SELECT throws_ok($$SELECT wharf.require_workspace(404)$$, 'P0002', NULL, 'require_workspace rejects an unknown workspace');

-- list_events: bound to its workspace, newest first -------------------------------
SELECT is(pg_temp.ids(wharf.list_events(1)), pg_temp.ids_of('e5', 'e4', 'e3', 'e2', 'e1'),
          'list_events gives every event of the workspace newest first, none of another workspace, no installation row');
SELECT is(pg_temp.ids(wharf.list_events(2)), pg_temp.ids_of('f1'),
          'the other workspace sees only its own event');
SELECT ok((SELECT e @> jsonb_build_object('id', pg_temp.id('e1'), 'workspace_id', 1, 'provider', 'generic',
                                          'source', 'https://hooks.example/1', 'event_type', 'ping',
                                          'subject', 'repo:x', 'state', 'DEAD', 'attempt', 1, 'failures', 0,
                                          'error_class', 'SyntaxError', 'outcome', NULL)
                  AND e ? 'dead_at' AND NOT e ?| ARRAY['payload', 'headers']
             FROM jsonb_array_elements(wharf.list_events(1) -> 'events') e
            WHERE e -> 'id' = to_jsonb(pg_temp.id('e1'))),
          'an event summary carries its state and history, not its payload or headers');
SELECT is(pg_temp.ids(wharf.list_events(1, NULL, 'repo:x')), pg_temp.ids_of('e5', 'e3', 'e1'),
          'list_events filters by subject, within the workspace only');

-- Keyset paging ---------------------------------------------------------------------
SELECT is(pg_temp.page(wharf.list_events(1, NULL, NULL, 2)), pg_temp.page_of('e4', 'e5', 'e4'),
          'a first page of 2 holds the two newest rows and the last one''s id as next_cursor');
SELECT is(pg_temp.page(wharf.list_events(1, NULL, NULL, 2, pg_temp.id('e4'))), pg_temp.page_of('e2', 'e3', 'e2'),
          'the next page starts below the cursor');
SELECT is(pg_temp.page(wharf.list_events(1, NULL, NULL, 2, pg_temp.id('e2'))), pg_temp.page_of(NULL, 'e1'),
          'the last page has next_cursor null');
SELECT is(wharf.list_events(1, NULL, NULL, 5) -> 'next_cursor', 'null'::jsonb,
          'a page filled exactly by the last rows has next_cursor null');
SELECT pg_temp.admit_event(1, 'repo:w', 'e6');
SELECT is(pg_temp.page(wharf.list_events(1, NULL, NULL, 2, pg_temp.id('e4'))), pg_temp.page_of('e2', 'e3', 'e2'),
          'a row admitted between pages does not shift a later page');
SELECT throws_ok($$SELECT wharf.list_events(1, NULL, NULL, 0)$$, '22023', NULL, 'list_events rejects a limit of 0');
SELECT throws_ok($$SELECT wharf.list_events(1, NULL, NULL, 501)$$, '22023', NULL, 'list_events rejects a limit of 501');
SELECT is(jsonb_array_length(wharf.list_events(1, NULL, NULL, 500) -> 'events'), 6,
          'a limit of 500 is allowed');
SELECT throws_ok($$SELECT wharf.list_events(1, 'dead')$$, '22023', NULL, 'list_events rejects an unknown state');

-- list_events filters: provider, event type, received between -------------------------
SELECT is(pg_temp.ids(wharf.list_events(1, NULL, NULL, 50, NULL, 'generic', 'ping')),
          pg_temp.ids(wharf.list_events(1)), 'list_events filters by provider and event type (all are generic pings)');
SELECT is(pg_temp.ids(wharf.list_events(1, NULL, NULL, 50, NULL, 'github')), '[]'::jsonb,
          'no event of another provider');
SELECT is(pg_temp.ids(wharf.list_events(1, NULL, NULL, 50, NULL, NULL, 'push')), '[]'::jsonb,
          'no event of another type');
SELECT is(pg_temp.ids(wharf.list_events(1, 'DEAD', 'repo:x', 50, NULL, 'generic', 'ping', now(), now() + interval '1 second')),
          pg_temp.ids_of('e1'), 'every filter narrows, received_after inclusive');
SELECT is(pg_temp.ids(wharf.list_events(1, NULL, NULL, 50, NULL, NULL, NULL, NULL, now())), '[]'::jsonb,
          'received_before is exclusive');
SELECT is(pg_temp.ids(wharf.list_installation_events(NULL, NULL, 50, NULL, 'github', 'installation')),
          pg_temp.ids_of('i2', 'i1'), 'list_installation_events takes the same filters');
SELECT throws_ok($$SELECT wharf.list_events(404)$$, 'P0002', NULL, 'list_events rejects an unknown workspace');
SELECT throws_ok($$SELECT wharf.list_events(NULL)$$, '22004', NULL,
                 'list_events with a NULL workspace is refused, not a way to the installation rows');

-- list_dead and the installation lists ------------------------------------------------
SELECT is(pg_temp.ids(wharf.list_dead(1)), pg_temp.ids_of('e4', 'e1'),
          'list_dead gives the workspace''s DEAD rows newest first, not another workspace''s');
SELECT is(pg_temp.page(wharf.list_dead(1, 'repo:x', 1)), pg_temp.page_of(NULL, 'e1'),
          'list_dead filters by subject and pages');
SELECT is(pg_temp.ids(wharf.list_installation_events()), pg_temp.ids_of('i2', 'i1'),
          'list_installation_events gives the installation rows only, newest first');
SELECT is(pg_temp.ids(wharf.list_installation_dead()), pg_temp.ids_of('i1'),
          'list_installation_dead gives the DEAD installation rows only');

-- show_event and show_installation_event ----------------------------------------------
SELECT results_eq(
  $$SELECT d ->> 'delivery_key', d ->> 'scope_key', (d ->> 'connection_id')::bigint, d -> 'payload', d -> 'headers',
           (d ->> 'lease_epoch')::bigint, d ->> 'leased_by', jsonb_path_query_array(d, '$.steps[*].name'), d ->> 'state'
      FROM wharf.show_event(1, pg_temp.id('e1')) d$$,
  $$VALUES ('e1', '1:generic:repo:x', pg_temp.conn('one'), '{"n": 1}'::jsonb, '{}'::jsonb,
            1::bigint, 'w', '["issue:1"]'::jsonb, 'DEAD')$$,
  'show_event gives the event with payload, headers, lease facts and committed steps');
SELECT is(wharf.show_event(2, pg_temp.id('e1')), NULL, 'show_event of another workspace''s event is NULL');

-- Attempt history: every lease of e3, however it ended -------------------------------
-- e3 (repo:x, behind the DEAD e1) is leased, fails transiently, is released,
-- expires and is reaped, then is handled.
SELECT wharf.set_setting('base_delay', '1 millisecond'), wharf.set_setting('max_delay', '1 millisecond');
CREATE FUNCTION pg_temp.lease_e3(p_worker text) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_sleep(0.01);  -- the 1 ms retry delay is over
  RETURN (SELECT lease_epoch FROM wharf.claim(p_worker, 100) WHERE delivery_key = 'e3');
END $$;
SELECT wharf.fail(pg_temp.id('e3'), pg_temp.lease_e3('w1'), 'transient', 'ECONNRESET');
SELECT wharf.release(pg_temp.id('e3'), pg_temp.lease_e3('w2'));
SELECT wharf.set_setting('lease', '1 millisecond');
SELECT pg_temp.lease_e3('w3');
SELECT pg_sleep(0.01), wharf.reap();
SELECT wharf.set_setting('lease', '2 minutes');
SELECT is(jsonb_path_query_array(wharf.show_event(1, pg_temp.id('e3')), '$.attempts[*].ended'),
          '["transient", "released", "expired"]'::jsonb, 'a failure, a release and an expiry are each recorded');
SELECT pg_temp.lease_e3('w4');
SELECT is(wharf.show_event(1, pg_temp.id('e3')) -> 'attempts' -> 3 ->> 'ended', 'running', 'a lease in progress is running');
SELECT wharf.complete(pg_temp.id('e3'), 4);
SELECT results_eq(
  $$SELECT (a ->> 'attempt')::int, (a ->> 'epoch')::bigint, a ->> 'worker', a ->> 'ended', a ->> 'error_class',
           (a ->> 'started_at')::timestamptz <= (a ->> 'ended_at')::timestamptz
      FROM jsonb_array_elements(wharf.show_event(1, pg_temp.id('e3')) -> 'attempts') a$$,
  $$VALUES (1, 1::bigint, 'w1', 'transient', 'ECONNRESET', true), (2, 2::bigint, 'w2', 'released', NULL, true),
           (2, 3::bigint, 'w3', 'expired', 'LeaseExpired', true), (3, 4::bigint, 'w4', 'handled', NULL, true)$$,
  'every lease of e3 in order: attempt, epoch, worker, how it ended, error class, start before end');
SELECT is(jsonb_path_query_array(wharf.show_event(1, pg_temp.id('e1')), '$.attempts[*].ended'), '["permanent"]'::jsonb,
          'a DEAD event shows the failure that ended it');
SELECT is(wharf.show_event(1, pg_temp.id('i1')), NULL, 'show_event never reaches an installation row');
SELECT throws_ok(format($$SELECT wharf.show_event(NULL, %s)$$, pg_temp.id('i1')), '22004', NULL,
                 'show_event with a NULL workspace is refused');
SELECT results_eq(
  $$SELECT d ->> 'delivery_key', d -> 'workspace_id', d ->> 'state'
      FROM wharf.show_installation_event(pg_temp.id('i1')) d$$,
  $$VALUES ('i1', 'null'::jsonb, 'DEAD')$$,
  'show_installation_event gives an installation row');
SELECT is(wharf.show_installation_event(pg_temp.id('e1')), NULL,
          'show_installation_event never reaches a workspace''s event');

-- Workspaces and connections ---------------------------------------------------------------
SELECT wharf.set_workspace_state(2, 'SUSPENDED');
SELECT wharf.subscribe(pg_temp.conn('gitlab'), s) FROM unnest(ARRAY['project:9', 'project:1']) s;
SELECT wharf.set_connection_secret(pg_temp.conn('gitlab'), 'glpat-operator-token');
SELECT is((SELECT jsonb_agg(w - 'created_at' ORDER BY o)
             FROM jsonb_array_elements(wharf.list_workspaces()) WITH ORDINALITY a(w, o)),
          '[{"id": 1, "state": "ACTIVE", "connections": 1},
            {"id": 2, "state": "SUSPENDED", "connections": 1},
            {"id": 3, "state": "ACTIVE", "connections": 2}]'::jsonb,
          'list_workspaces gives every workspace by id with its state and connection count');
SELECT is(wharf.show_connection(pg_temp.conn('gitlab')) - 'id' - 'created_at' - 'updated_at',
          '{"workspace_id": 3, "provider": "gitlab", "source": "https://gitlab.example.com", "kind": "webhook",
            "external_id": null, "route": {"subject_prefixes": ["project:"]}, "state": "ACTIVE",
            "generation": 4, "subscriptions": ["project:1", "project:9"]}'::jsonb,
          'show_connection gives the connection and its subscriptions in order, and no secret');
SELECT is(jsonb_path_query_array(wharf.list_connections(3), '$[*].id'),
          jsonb_build_array(pg_temp.conn('gitlab'), pg_temp.conn('pat')),
          'list_connections gives the workspace''s connections by id, no other workspace''s');

-- Tokens ----------------------------------------------------------------------------------------
CREATE TEMP TABLE tok (name text PRIMARY KEY, id bigint);
INSERT INTO tok SELECT 'ci', (wharf.create_token(1, 'ci', sha256('token-ci'::bytea)) ->> 'id')::bigint;
SELECT is((wharf.list_tokens(1) -> 0) - 'created_at',
          jsonb_build_object('id', (SELECT id FROM tok), 'workspace_id', 1, 'name', 'ci',
                             'last_used_at', NULL, 'revoked_at', NULL),
          'create_token records the token; list_tokens shows it without its hash');
SELECT throws_ok($$SELECT wharf.create_token(1, 'ci', sha256('token-other'::bytea))$$, '23505', NULL,
                 'a live token name is unique within its workspace');
SELECT throws_ok($$SELECT wharf.create_token(1, 'ci token', sha256('token-x'::bytea))$$, '22023', NULL,
                 'create_token rejects a name with a space');
SELECT throws_ok($$SELECT wharf.create_token(1, 'short', '\x00112233'::bytea)$$, '22023', NULL,
                 'create_token rejects a hash that is not a SHA-256 digest');
SELECT throws_ok($$SELECT wharf.create_token(404, 'ci', sha256('token-x'::bytea))$$, 'P0002', NULL,
                 'create_token rejects an unknown workspace');

SELECT is(wharf.verify_token(sha256('token-ci'::bytea)),
          jsonb_build_object('id', (SELECT id FROM tok), 'workspace_id', 1, 'name', 'ci'),
          'verify_token finds the live token by the hash of its secret');
SELECT is((SELECT last_used_at FROM wharf.api_token WHERE id = (SELECT id FROM tok)), now(),
          'verify_token records last_used_at');
UPDATE wharf.api_token SET last_used_at = now() - interval '30 seconds' WHERE id = (SELECT id FROM tok);
SELECT wharf.verify_token(sha256('token-ci'::bytea));
SELECT is((SELECT last_used_at FROM wharf.api_token WHERE id = (SELECT id FROM tok)), now() - interval '30 seconds',
          'a use within a minute of the last does not write last_used_at');
UPDATE wharf.api_token SET last_used_at = now() - interval '61 seconds' WHERE id = (SELECT id FROM tok);
SELECT wharf.verify_token(sha256('token-ci'::bytea));
SELECT is((SELECT last_used_at FROM wharf.api_token WHERE id = (SELECT id FROM tok)), now(),
          'a use more than a minute after the last writes last_used_at again');

SELECT is(wharf.revoke_token(2, (SELECT id FROM tok)), false, 'revoke_token does not reach another workspace''s token');
SELECT is(wharf.revoke_token(1, (SELECT id FROM tok)), true, 'revoke_token revokes a live token of the workspace');
SELECT is(wharf.revoke_token(1, (SELECT id FROM tok)), false, 'revoking it again returns false');
SELECT is(wharf.verify_token(sha256('token-ci'::bytea)), NULL, 'a revoked token verifies NULL');
SELECT lives_ok($$SELECT wharf.create_token(1, 'ci', sha256('token-ci-2'::bytea))$$,
                'the name of a revoked token may be used again');
SELECT wharf.create_token(2, 'other', sha256('token-other-ws'::bytea));
SELECT is((SELECT array_agg(h ORDER BY h) FROM jsonb_array_elements_text(wharf.live_token_hashes()) h),
          (SELECT array_agg(encode(sha256(t::bytea), 'hex') ORDER BY 1) FROM unnest(ARRAY['token-ci-2', 'token-other-ws']) t),
          'live_token_hashes gives the hex SHA-256 of every live token, of every workspace, and no revoked one');
SELECT is(jsonb_typeof(wharf.live_token_hashes()), 'array', 'live_token_hashes is a jsonb array');
SELECT ok(NOT has_function_privilege('public', 'wharf.live_token_hashes()', 'EXECUTE'),
          'live_token_hashes is not executable by PUBLIC');

-- The admission log, bound to its workspace: a drop names the source
-- connection, a refusal its workspace; another workspace's stays out.
DELETE FROM wharf.admission_log;
SELECT wharf.admit('generic', 'https://hooks.example/1', 'adm-drop-1', 'x', jsonb_build_object('connection_id', pg_temp.conn('one')),
                   ARRAY['never:subscribed'], '{}', '{}');
SELECT wharf.admit('generic', 'https://hooks.example/2', 'adm-drop-2', 'x', jsonb_build_object('connection_id', pg_temp.conn('two')),
                   ARRAY['never:subscribed'], '{}', '{}');
SELECT wharf.admit('generic', 'https://hooks.example/1', 'adm-drop-3', 'x', '{}', ARRAY['a'], '{}', '{}');
SELECT is((SELECT jsonb_agg(e->>'delivery_key') FROM jsonb_array_elements(wharf.list_admissions(1)->'entries') e),
          '["adm-drop-1"]'::jsonb, 'a workspace sees the drops of its own connections only');
SELECT is((wharf.list_admissions(1)->'entries'->0->>'reason'), 'no-subscriber', '... with the reason');
SELECT is((SELECT jsonb_agg(e->>'delivery_key') FROM jsonb_array_elements(wharf.list_all_admissions()->'entries') e),
          '["adm-drop-3", "adm-drop-2", "adm-drop-1"]'::jsonb, 'the instance admin sees every one, newest first');
SELECT is(jsonb_array_length(wharf.list_all_admissions(2)->'entries'), 2, 'a page holds at most the limit');
SELECT is((SELECT jsonb_agg(e->>'delivery_key') FROM jsonb_array_elements(
             wharf.list_all_admissions(2, (wharf.list_all_admissions(2)->>'next_cursor')::bigint)->'entries') e),
          '["adm-drop-1"]'::jsonb, 'the next page follows from next_cursor');
SELECT throws_ok($$SELECT wharf.list_admissions(987654)$$, 'P0002', NULL, 'an unknown workspace is P0002');

SELECT * FROM finish();
ROLLBACK;
