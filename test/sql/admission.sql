-- wharf.admit: its rules in order (control events, source, activity, insert),
-- the receipt, deduplication, scope keys, the header deny-list and
-- admission_log. The lifecycle lock's race (WH409) and the wake-up need
-- several sessions: test/admission-*.test.ts prove them.
BEGIN;
SELECT plan(71);

CREATE TEMP TABLE conn (name text PRIMARY KEY, id bigint NOT NULL);
CREATE FUNCTION pg_temp.c(p_name text) RETURNS bigint LANGUAGE sql AS $$
  SELECT id FROM conn WHERE name = p_name
$$;
CREATE TEMP TABLE receipt (name text PRIMARY KEY, r jsonb NOT NULL);
CREATE FUNCTION pg_temp.r(p_name text) RETURNS jsonb LANGUAGE sql AS $$
  SELECT r FROM receipt WHERE name = p_name
$$;
-- The stored rows of one delivery, as (workspace, connection, scope key).
CREATE FUNCTION pg_temp.stored(p_delivery_key text)
RETURNS TABLE (workspace_id bigint, connection_id bigint, scope_key text) LANGUAGE sql AS $$
  SELECT workspace_id, connection_id, scope_key FROM wharf.provider_event
   WHERE delivery_key = p_delivery_key ORDER BY workspace_id NULLS FIRST
$$;
CREATE FUNCTION pg_temp.logged(p_delivery_key text)
RETURNS TABLE (connection_id bigint, workspace_id bigint, reason text) LANGUAGE sql AS $$
  SELECT connection_id, workspace_id, reason FROM wharf.admission_log
   WHERE delivery_key = p_delivery_key ORDER BY id
$$;

-- Fixtures: github.com with an App installation (workspace 1) and PATs in
-- workspaces 2 to 5; workspace 3 is suspended, workspace 4's PAT is
-- suspended, workspace 5 has one active and one suspended recipient.
SELECT wharf.upsert_workspace(w) FROM generate_series(1, 7) w;
INSERT INTO conn VALUES
  ('app1',  wharf.upsert_connection(1, 'github', 'https://github.com', 'app_installation', '100')),
  ('pat2',  wharf.upsert_connection(2, 'github', 'https://github.com', 'pat', 'p2')),
  ('pat3',  wharf.upsert_connection(3, 'github', 'https://github.com', 'pat', 'p3')),
  ('pat4',  wharf.upsert_connection(4, 'github', 'https://github.com', 'pat', 'p4')),
  ('pat5a', wharf.upsert_connection(5, 'github', 'https://github.com', 'pat', 'p5a')),
  ('pat5b', wharf.upsert_connection(5, 'github', 'https://github.com', 'pat', 'p5b')),
  ('app6',  wharf.upsert_connection(6, 'github', 'https://github.com', 'app_installation', '600')),
  ('app7',  wharf.upsert_connection(7, 'github', 'https://github.com', 'app_installation', '700')),
  ('ghe2',  wharf.upsert_connection(2, 'github', 'https://github.example.com', 'pat', 'p2')),
  ('gl2',   wharf.upsert_connection(2, 'gitlab', 'https://gitlab.example.com', 'webhook', NULL,
                                    '{"subject_prefixes": ["project:"]}')),
  ('slack1', wharf.upsert_connection(1, 'slack', 'https://slack.com', 'slack_team', 'T1'));
SELECT wharf.subscribe(pg_temp.c('app1'), 'org:acme');
SELECT wharf.subscribe(pg_temp.c(n), 'repo:acme/api') FROM unnest(ARRAY['pat2', 'pat3', 'pat4', 'pat5a']) n;
SELECT wharf.subscribe(pg_temp.c('pat5b'), 'org:acme');
SELECT wharf.subscribe(pg_temp.c(n), 'repo:acme/web') FROM unnest(ARRAY['pat3', 'pat4']) n;
SELECT wharf.subscribe(pg_temp.c('ghe2'), 'repo:acme/api');
SELECT wharf.subscribe(pg_temp.c('gl2'), s) FROM unnest(ARRAY['project:7', 'project:8']) s;
-- Narrowed after subscribing (subscribe refuses a subject outside the route):
-- project:8 stays subscribed but outside the route, for route-mismatch below.
SELECT wharf.upsert_connection(2, 'gitlab', 'https://gitlab.example.com', 'webhook', NULL,
                               '{"subject_prefixes": ["project:7"]}');
SELECT wharf.subscribe(pg_temp.c('slack1'), 'channel:C1');
SELECT wharf.set_workspace_state(3, 'SUSPENDED');
SELECT wharf.set_workspace_state(6, 'SUSPENDED');
SELECT wharf.set_connection_state(pg_temp.c('pat4'), 'SUSPENDED');
SELECT wharf.set_connection_state(pg_temp.c('pat5b'), 'SUSPENDED');
SELECT wharf.set_connection_state(pg_temp.c('app7'), 'SUSPENDED');

-- 1. Control events ----------------------------------------------------------------
INSERT INTO receipt VALUES
  ('c1', wharf.admit('github', 'https://github.com', 'c1', 'installation',
                     '{"control": true, "installation_id": "555"}', NULL,
                     '{"action": "created", "installation": {"id": 555, "account": {"login": "acme"}}}', '{}')),
  ('c2', wharf.admit('github', 'https://github.com', 'c2', 'installation_repositories',
                     '{"control": true, "installation_id": 556}', '{org:globex}',
                     '{"action": "added", "installation": {"id": 556, "account": {"login": "globex"}}}', '{}')),
  ('c3', wharf.admit('github', 'https://github.com', 'c3', 'installation_target',
                     '{"control": true, "installation_id": "700"}', NULL,
                     '{"action": "renamed", "installation": {"id": "700"}}', '{}'));
SELECT is(pg_temp.r('c1')->'events',
          jsonb_build_array(jsonb_build_object('workspace_id', NULL, 'outcome', 'stored',
            'event_id', (SELECT id FROM wharf.provider_event WHERE delivery_key = 'c1'))),
          'a control event without any connection is stored once, with NULL workspace');
SELECT results_eq($$SELECT * FROM pg_temp.stored('c1') UNION ALL SELECT * FROM pg_temp.stored('c2')$$,
                  $$VALUES (NULL::bigint, NULL::bigint, 'system:github:https://github.com'),
                           (NULL, NULL, 'system:github:https://github.com')$$,
                  'control events of any organization share the system scope system:github:<source>');
SELECT is(pg_temp.r('c2')->'events'->0->>'outcome', 'stored',
          'installation ids are compared as text (a number in the route matches)');
SELECT is(pg_temp.r('c3')->'events'->0->>'outcome', 'stored',
          'a control event is stored while its installation''s connection is suspended');
SELECT is(wharf.admit('github', 'https://github.com', 'c1', 'installation',
                      '{"control": true, "installation_id": "555"}', NULL,
                      '{"action": "created", "installation": {"id": 555}}', '{}')->'events',
          jsonb_build_array(jsonb_build_object('workspace_id', NULL, 'outcome', 'duplicate',
            'event_id', (SELECT id FROM wharf.provider_event WHERE delivery_key = 'c1'))),
          'a redelivered control event is a duplicate naming the stored id (NULL workspaces dedupe)');
SELECT is((SELECT count(*) FROM wharf.provider_event WHERE delivery_key = 'c1'), 1::bigint,
          'the redelivery added no row');

INSERT INTO receipt VALUES
  ('x-push', wharf.admit('github', 'https://github.com', 'x-push', 'push',
                         '{"control": true, "installation_id": "100"}', '{repo:acme/api}',
                         '{"action": "created", "installation": {"id": 100}}', '{}')),
  ('x-other-id', wharf.admit('github', 'https://github.com', 'x-other-id', 'installation',
                             '{"control": true, "installation_id": "557"}', NULL,
                             '{"action": "created", "installation": {"id": 555}}', '{}')),
  ('x-no-route-id', wharf.admit('github', 'https://github.com', 'x-no-route-id', 'installation',
                                '{"control": true}', NULL,
                                '{"action": "created", "installation": {"id": 555}}', '{}')),
  ('x-no-installation', wharf.admit('github', 'https://github.com', 'x-no-installation', 'installation',
                                    '{"control": true, "installation_id": "555"}', NULL,
                                    '{"action": "created"}', '{}')),
  ('x-no-action', wharf.admit('github', 'https://github.com', 'x-no-action', 'installation',
                              '{"control": true, "installation_id": "555"}', NULL,
                              '{"installation": {"id": 555}}', '{}')),
  ('x-gitlab', wharf.admit('gitlab', 'https://gitlab.example.com', 'x-gitlab', 'installation',
                           '{"control": true, "installation_id": "555"}', NULL,
                           '{"action": "created", "installation": {"id": 555}}', '{}'));
SELECT results_eq(
  $$SELECT name, r->>'dropped', jsonb_array_length(r->'events') FROM receipt WHERE name LIKE 'x-%' ORDER BY name$$,
  $$VALUES ('x-gitlab', 'invalid-event-route', 0), ('x-no-action', 'invalid-event-route', 0),
           ('x-no-installation', 'invalid-event-route', 0), ('x-no-route-id', 'invalid-event-route', 0),
           ('x-other-id', 'invalid-event-route', 0), ('x-push', 'invalid-event-route', 0)$$,
  'a work type, a wrong or missing installation id, no action or another provider marked control: invalid-event-route');
SELECT is((SELECT count(*) FROM wharf.provider_event WHERE delivery_key LIKE 'x-%'), 0::bigint,
          'an invalid control event stores no row (a work payload does not reach workspace 1)');
SELECT is((SELECT count(*) FROM wharf.admission_log WHERE delivery_key LIKE 'x-%' AND reason = 'invalid-event-route'),
          6::bigint, 'every invalid control event is logged');

-- 2. Source ---------------------------------------------------------------------
INSERT INTO receipt VALUES
  ('s-no-source', wharf.admit('github', 'https://github.com', 's-no-source', 'push', '{}',
                              '{repo:acme/api}', '{}', '{}')),
  ('s-null-route', wharf.admit('github', 'https://github.com', 's-null-route', 'push', NULL,
                               '{repo:acme/api}', '{}', '{}')),
  ('s-unknown-installation', wharf.admit('github', 'https://github.com', 's-unknown-installation', 'push',
                                         '{"installation_id": "999"}', '{repo:acme/api}', '{}', '{}')),
  ('s-other-provider', wharf.admit('github', 'https://gitlab.example.com', 's-other-provider', 'push',
                                   jsonb_build_object('connection_id', pg_temp.c('gl2')), '{project:7}', '{}', '{}')),
  ('s-other-source', wharf.admit('github', 'https://github.com', 's-other-source', 'push',
                                 jsonb_build_object('connection_id', pg_temp.c('ghe2')), '{repo:acme/api}', '{}', '{}')),
  ('s-bad-connection-id', wharf.admit('gitlab', 'https://gitlab.example.com', 's-bad-connection-id', 'push',
                                      '{"connection_id": "seven"}', '{project:7}', '{}', '{}')),
  ('s-installation-elsewhere', wharf.admit('github', 'https://github.example.com', 's-installation-elsewhere', 'push',
                                           '{"installation_id": "100"}', '{repo:acme/api}', '{}', '{}')),
  ('s-null-subjects', wharf.admit('github', 'https://github.com', 's-null-subjects', 'push',
                                  '{"installation_id": "100"}', NULL, '{}', '{}')),
  ('s-empty-subjects', wharf.admit('github', 'https://github.com', 's-empty-subjects', 'push',
                                   '{"installation_id": "100"}', '{}', '{}', '{}')),
  ('s-mismatch', wharf.admit('gitlab', 'https://gitlab.example.com', 's-mismatch', 'push',
                             jsonb_build_object('connection_id', pg_temp.c('gl2')), '{project:8}', '{}', '{}')),
  ('s-match', wharf.admit('gitlab', 'https://gitlab.example.com', 's-match', 'push',
                          jsonb_build_object('connection_id', pg_temp.c('gl2')::text), '{project:7}', '{}', '{}')),
  ('s-slack', wharf.admit('slack', 'https://slack.com', 's-slack', 'message',
                          '{"team_id": "T1"}', '{channel:C1}', '{}', '{}'));
SELECT results_eq(
  $$SELECT name, r->>'dropped' FROM receipt WHERE name LIKE 's-%' ORDER BY name$$,
  $$VALUES ('s-bad-connection-id', 'unknown-source'), ('s-empty-subjects', 'work-event-without-subject'),
           ('s-installation-elsewhere', 'unknown-source'), ('s-match', NULL),
           ('s-mismatch', 'route-mismatch'), ('s-no-source', 'work-event-without-source'),
           ('s-null-route', 'work-event-without-source'), ('s-null-subjects', 'work-event-without-subject'),
           ('s-other-provider', 'unknown-source'), ('s-other-source', 'unknown-source'),
           ('s-slack', NULL), ('s-unknown-installation', 'unknown-source')$$,
  'source rules: no source fact, an unknown source (another provider or source too), no subject, a route mismatch');
SELECT is((SELECT count(*) FROM wharf.provider_event
            WHERE delivery_key LIKE 's-%' AND delivery_key NOT IN ('s-match', 's-slack')), 0::bigint,
          'a delivery dropped by a source rule stores no row (no fall-back into the system scope)');
SELECT results_eq($$SELECT * FROM pg_temp.stored('s-match')$$,
                  $$VALUES (2::bigint, pg_temp.c('gl2'), '2:gitlab:project:7')$$,
                  'a connection_id route of this provider and source, within subject_prefixes, is stored');
SELECT results_eq($$SELECT * FROM pg_temp.stored('s-slack')$$,
                  $$VALUES (1::bigint, pg_temp.c('slack1'), '1:slack:channel:C1')$$,
                  'a Slack team_id route finds its slack_team connection');
SELECT results_eq($$SELECT * FROM pg_temp.logged('s-mismatch')$$,
                  $$VALUES (pg_temp.c('gl2'), NULL::bigint, 'route-mismatch')$$,
                  'a drop is logged with the source connection when it is known');
SELECT results_eq($$SELECT * FROM pg_temp.logged('s-no-source')$$,
                  $$VALUES (NULL::bigint, NULL::bigint, 'work-event-without-source')$$,
                  'a drop without a source connection is logged too');

-- 3-5. Activity, fan-out and insert ----------------------------------------------------------
INSERT INTO receipt VALUES
  ('d1', wharf.admit('github', 'https://github.com', 'd1', 'push', '{"installation_id": "100"}',
                     '{repo:acme/api, org:acme}', '{"ref": "refs/heads/main"}',
                     '{"Authorization": "Bearer t", "COOKIE": "s=1", "X-Gitlab-Token": "g",
                       "X-Hub-Signature-256": "sha256=x", "x-slack-signature": "v0=x", "Webhook-Signature": "v1,x",
                       "X-GitHub-Event": "push", "Content-Type": "application/json"}'));
SELECT is(pg_temp.r('d1')->'events',
          (SELECT jsonb_agg(jsonb_build_object('workspace_id', workspace_id, 'event_id', id, 'outcome', 'stored')
                            ORDER BY workspace_id)
             FROM wharf.provider_event WHERE delivery_key = 'd1'),
          'the receipt lists one stored event per admitted workspace, with its id');
SELECT results_eq($$SELECT * FROM pg_temp.stored('d1')$$,
                  $$VALUES (1::bigint, pg_temp.c('app1'), '1:github:repo:acme/api'),
                           (2, pg_temp.c('pat2'), '2:github:repo:acme/api'),
                           (5, pg_temp.c('pat5a'), '5:github:repo:acme/api')$$,
                  'fan-out through App and PAT subscriptions to any subject; scope_key is <workspace>:<provider>:<first subject>');
SELECT is(pg_temp.r('d1')->'refused',
          jsonb_build_array(
            jsonb_build_object('connection_id', pg_temp.c('pat3'), 'workspace_id', 3, 'reason', 'workspace-inactive'),
            jsonb_build_object('connection_id', pg_temp.c('pat4'), 'workspace_id', 4, 'reason', 'connection-inactive')),
          'a suspended workspace and a workspace whose only recipient is suspended are refused, per recipient');
SELECT is(pg_temp.r('d1')->'dropped', 'null'::jsonb, 'an admitted delivery is not dropped');
SELECT is((SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(pg_temp.r('d1')) k),
          ARRAY['delivery_key', 'dropped', 'events', 'refused'], 'the receipt has the keys of the contract');
SELECT is(pg_temp.r('d1')->>'delivery_key', 'd1', 'the receipt names the delivery');
SELECT results_eq($$SELECT * FROM pg_temp.logged('d1')$$,
                  $$VALUES (pg_temp.c('pat3'), 3::bigint, 'workspace-inactive'),
                           (pg_temp.c('pat4'), 4::bigint, 'connection-inactive')$$,
                  'every refusal is written to admission_log');
SELECT results_eq(
  $$SELECT DISTINCT subject, state, event_type, source, provider, payload, attempt, next_attempt_at <= now()
      FROM wharf.provider_event WHERE delivery_key = 'd1'$$,
  $$VALUES ('repo:acme/api', 'QUEUED', 'push', 'https://github.com', 'github', '{"ref": "refs/heads/main"}'::jsonb, 0, true)$$,
  'each row holds the first subject and the payload, QUEUED and due at once');
SELECT is((SELECT DISTINCT headers FROM wharf.provider_event WHERE delivery_key = 'd1'),
          '{"x-github-event": "push", "content-type": "application/json"}'::jsonb,
          'authorization, cookie, x-gitlab-token and every signature header are dropped, whatever their case');
SELECT is(wharf.safe_headers('{"Proxy-Authorization": "x", "X-Signature-Timestamp": "1", "X-Request-Id": "r"}'),
          '{"x-request-id": "r"}'::jsonb, 'the deny-list matches signature anywhere in the name');
SELECT is(wharf.safe_headers('["authorization"]'), '{}'::jsonb, 'headers that are not an object keep nothing');
SELECT is(wharf.safe_headers('{"authorization": "a", "proxy-authorization": "p", "cookie": "c", "set-cookie": "s",
                               "x-gitlab-token": "t", "x-github-event": "push", "x-github-delivery": "d"}'),
          '{"x-github-event": "push", "x-github-delivery": "d"}'::jsonb,
          'lower-case names without a signature lose exactly the credentials');
SELECT is(wharf.safe_headers('{"x-hub-signature-256": "sha256=1", "x-github-event": "push"}'),
          '{"x-github-event": "push"}'::jsonb, 'a lower-case signature header is dropped too');
SELECT is(wharf.safe_headers('{"x-request-id": "r", "Cookie": "c", "x-Gitlab-Token": "t"}'),
          '{"x-request-id": "r"}'::jsonb, 'one name not lower-case: every name is lower-cased and checked');
SELECT is(wharf.safe_headers(NULL), '{}'::jsonb, 'no headers keep nothing');

-- Deduplication.
INSERT INTO receipt VALUES
  ('d1-again', wharf.admit('github', 'https://github.com', 'd1', 'push', '{"installation_id": "100"}',
                           '{repo:acme/api, org:acme}', '{"ref": "other"}', '{}'));
SELECT is(pg_temp.r('d1-again')->'events',
          (SELECT jsonb_agg(jsonb_build_object('workspace_id', workspace_id, 'event_id', id, 'outcome', 'duplicate')
                            ORDER BY workspace_id)
             FROM wharf.provider_event WHERE delivery_key = 'd1'),
          'a redelivery reports duplicate with the stored event ids');
SELECT results_eq($$SELECT count(*), min(payload->>'ref') FROM wharf.provider_event WHERE delivery_key = 'd1'$$,
                  $$VALUES (3::bigint, 'refs/heads/main')$$, 'a redelivery adds no row and keeps the first payload');
SELECT is((SELECT count(*) FROM wharf.provider_event WHERE delivery_key = 'd1' AND provider = 'github'), 3::bigint,
          'the dedupe key is (workspace, provider, delivery key)');
SELECT is(wharf.admit('gitlab', 'https://gitlab.example.com', 'd1', 'push',
                      jsonb_build_object('connection_id', pg_temp.c('gl2')), '{project:7}', '{}', '{}')->'events'->0->>'outcome',
          'stored', 'the same delivery key from another provider is another delivery');

-- All recipients refused.
INSERT INTO receipt VALUES
  ('all-refused', wharf.admit('github', 'https://github.com', 'all-refused', 'push', '{"installation_id": "100"}',
                              '{repo:acme/web}', '{}', '{}'));
SELECT results_eq(
  $$SELECT r->'events', r->'dropped', jsonb_array_length(r->'refused') FROM receipt WHERE name = 'all-refused'$$,
  $$VALUES ('[]'::jsonb, 'null'::jsonb, 2)$$,
  'when every recipient is refused: no events, dropped is null, refused says why');
SELECT is((SELECT count(*) FROM wharf.provider_event WHERE delivery_key = 'all-refused'), 0::bigint,
          'a refused workspace adds no row');

-- No subscriber.
INSERT INTO receipt VALUES
  ('no-sub', wharf.admit('github', 'https://github.com', 'no-sub', 'push', '{"installation_id": "100"}',
                         '{repo:nobody/x, org:nobody}', '{}', '{}'));
SELECT is(pg_temp.r('no-sub')->>'dropped', 'no-subscriber', 'no subscription to any subject: dropped no-subscriber');
SELECT results_eq($$SELECT * FROM pg_temp.logged('no-sub')$$,
                  $$VALUES (pg_temp.c('app1'), NULL::bigint, 'no-subscriber')$$, 'no-subscriber is logged');

-- Only the source's own state counts.
INSERT INTO receipt VALUES
  ('src-ws-suspended', wharf.admit('github', 'https://github.com', 'src-ws-suspended', 'push',
                                   '{"installation_id": "600"}', '{repo:acme/api}', '{}', '{}'));
SELECT results_eq($$SELECT workspace_id FROM pg_temp.stored('src-ws-suspended')$$,
                  $$VALUES (2::bigint), (5::bigint)$$,
                  'an ACTIVE source delivers while its own workspace is suspended (only its state counts)');
SELECT wharf.set_connection_state(pg_temp.c('app1'), 'SUSPENDED');
INSERT INTO receipt VALUES
  ('src-inactive', wharf.admit('github', 'https://github.com', 'src-inactive', 'push', '{"installation_id": "100"}',
                               '{repo:acme/api, org:acme}', '{}', '{}'));
SELECT results_eq($$SELECT r->>'dropped', r->'events', r->'refused' FROM receipt WHERE name = 'src-inactive'$$,
                  $$VALUES ('source-inactive', '[]'::jsonb, '[]'::jsonb)$$,
                  'a suspended source is dropped source-inactive, also for workspaces reached through an ACTIVE PAT');
SELECT is((SELECT count(*) FROM wharf.provider_event WHERE delivery_key = 'src-inactive'), 0::bigint,
          'a source-inactive delivery stores no row');
SELECT results_eq($$SELECT * FROM pg_temp.logged('src-inactive')$$,
                  $$VALUES (pg_temp.c('app1'), NULL::bigint, 'source-inactive')$$, 'source-inactive is logged');
SELECT wharf.set_connection_state(pg_temp.c('app1'), 'REVOKED');
SELECT is(wharf.admit('github', 'https://github.com', 'src-revoked', 'push', '{"installation_id": "100"}',
                      '{repo:acme/api}', '{}', '{}')->>'dropped', 'source-inactive', 'a revoked source is inactive too');
SELECT wharf.set_connection_state(pg_temp.c('app1'), 'ACTIVE');

-- A workspace in DELETING admits nothing.
SELECT wharf.set_workspace_state(2, 'DELETING');
SELECT is(wharf.admit('github', 'https://github.com', 'ws-deleting', 'push', '{"installation_id": "100"}',
                      '{repo:acme/api}', '{}', '{}')->'refused',
          jsonb_build_array(
            jsonb_build_object('connection_id', pg_temp.c('pat2'), 'workspace_id', 2, 'reason', 'workspace-inactive'),
            jsonb_build_object('connection_id', pg_temp.c('pat3'), 'workspace_id', 3, 'reason', 'workspace-inactive'),
            jsonb_build_object('connection_id', pg_temp.c('pat4'), 'workspace_id', 4, 'reason', 'connection-inactive')),
          'a DELETING workspace is refused workspace-inactive');
SELECT is((SELECT array_agg(workspace_id) FROM wharf.provider_event WHERE delivery_key = 'ws-deleting'), ARRAY[5::bigint],
          'the other workspaces still get their row');
SELECT wharf.set_workspace_state(2, 'ACTIVE');

-- A workspace with two recipients, both suspended, is listed once per recipient.
SELECT wharf.set_connection_state(pg_temp.c('pat5a'), 'SUSPENDED');
SELECT is(wharf.admit('github', 'https://github.com', 'ws5-off', 'push', '{"installation_id": "100"}',
                      '{repo:acme/api, org:acme}', '{}', '{}')->'refused',
          jsonb_build_array(
            jsonb_build_object('connection_id', pg_temp.c('pat3'), 'workspace_id', 3, 'reason', 'workspace-inactive'),
            jsonb_build_object('connection_id', pg_temp.c('pat4'), 'workspace_id', 4, 'reason', 'connection-inactive'),
            jsonb_build_object('connection_id', pg_temp.c('pat5a'), 'workspace_id', 5, 'reason', 'connection-inactive'),
            jsonb_build_object('connection_id', pg_temp.c('pat5b'), 'workspace_id', 5, 'reason', 'connection-inactive')),
          'every inactive recipient of a refused workspace is listed');
SELECT wharf.set_connection_state(pg_temp.c('pat5a'), 'ACTIVE');

-- Subjects: NULL and empty elements are ignored; the first real one is the subject.
INSERT INTO receipt VALUES
  ('holes', wharf.admit('github', 'https://github.com', 'holes', 'push', '{"installation_id": "100"}',
                        ARRAY[NULL, '', 'repo:acme/api'], '{}', '{}'));
SELECT results_eq(
  $$SELECT subject, scope_key FROM wharf.provider_event WHERE delivery_key = 'holes' AND workspace_id = 2$$,
  $$VALUES ('repo:acme/api', '2:github:repo:acme/api')$$,
  'NULL and empty subjects are skipped');

-- admission_log holds no payload or header.
SELECT columns_are('wharf', 'admission_log',
                   ARRAY['id', 'at', 'provider', 'source', 'delivery_key', 'connection_id', 'workspace_id', 'reason'],
                   'admission_log has no column for a payload, a header or a credential');
SELECT is((SELECT count(*) FROM wharf.admission_log WHERE at IS NULL OR provider IS NULL OR source IS NULL
                                                      OR delivery_key IS NULL OR reason IS NULL), 0::bigint,
          'every log row says when, from which provider and source, which delivery and why');

-- Bad input: a clear error, nothing written.
SELECT throws_ok($$SELECT wharf.admit(NULL, 'https://github.com', 'bad', 'push', '{"installation_id": "100"}', '{repo:acme/api}', '{}', '{}')$$,
                 '22004', NULL, 'a NULL provider is an error');
SELECT throws_ok($$SELECT wharf.admit('github', 'https://github.com', NULL, 'push', '{"installation_id": "100"}', '{repo:acme/api}', '{}', '{}')$$,
                 '22004', NULL, 'a NULL delivery key is an error');
SELECT throws_ok($$SELECT wharf.admit('github', 'https://github.com', '', 'push', '{"installation_id": "100"}', '{repo:acme/api}', '{}', '{}')$$,
                 '22004', NULL, 'an empty delivery key is an error');
SELECT throws_ok($$SELECT wharf.admit('github', NULL, 'bad', 'push', '{"installation_id": "100"}', '{repo:acme/api}', '{}', '{}')$$,
                 '22004', NULL, 'a NULL source is an error');
SELECT throws_ok($$SELECT wharf.admit('github', 'https://github.com', 'bad', NULL, '{"installation_id": "100"}', '{repo:acme/api}', '{}', '{}')$$,
                 '22004', NULL, 'a NULL event type is an error');
SELECT throws_ok($$SELECT wharf.admit('github', 'https://github.com', 'bad', 'push', '{"installation_id": "100"}', '{repo:acme/api}', NULL, '{}')$$,
                 '22004', NULL, 'a NULL payload is an error');
SELECT throws_ok($$SELECT wharf.admit('nosuch', 'https://github.com', 'bad', 'push', '{"installation_id": "100"}', '{repo:acme/api}', '{}', '{}')$$,
                 '22023', NULL, 'an unknown provider is an error');
SELECT throws_ok($$SELECT wharf.admit('github', 'https://github.com', 'bad', 'push', '["installation_id"]', '{repo:acme/api}', '{}', '{}')$$,
                 '22023', NULL, 'a route that is not an object is an error');
SELECT throws_ok($$SELECT wharf.admit('github', 'https://github.com', 'bad', 'push', '"100"', '{repo:acme/api}', '{}', '{}')$$,
                 '22023', NULL, 'a route that is a string is an error');

-- Tenant isolation: a connection-signed delivery (GitLab here) reaches its own
-- connection only, whatever subjects the signed body names. Workspace 8 (the
-- victim) has its own GitLab connection on the same server, subscribed to
-- group:victim; workspace 9 (the attacker) signs with its own token and
-- names the victim's subject.
SELECT wharf.upsert_workspace(8), wharf.upsert_workspace(9);
INSERT INTO conn VALUES
  ('gl8', wharf.upsert_connection(8, 'gitlab', 'https://gitlab.example.com', 'webhook', 'victim')),
  ('gl9', wharf.upsert_connection(9, 'gitlab', 'https://gitlab.example.com', 'webhook', 'attacker'));
SELECT wharf.subscribe(pg_temp.c('gl8'), 'group:victim'), wharf.subscribe(pg_temp.c('gl9'), 'project:attacker/x');
INSERT INTO receipt VALUES
  ('inject', wharf.admit('gitlab', 'https://gitlab.example.com', 'K-planted', 'push',
                         jsonb_build_object('connection_id', pg_temp.c('gl9')), '{project:attacker/x,group:victim}',
                         '{"planted": true}', '{}')),
  ('inject-only', wharf.admit('gitlab', 'https://gitlab.example.com', 'K-only-victim', 'push',
                              jsonb_build_object('connection_id', pg_temp.c('gl9')), '{group:victim}', '{}', '{}'));
SELECT results_eq($$SELECT * FROM pg_temp.stored('K-planted')$$,
                  format('VALUES (9::bigint, %s::bigint, %L)', pg_temp.c('gl9'), '9:gitlab:project:attacker/x'),
                  'a connection-signed body naming another workspace''s subject is stored in its own workspace only');
SELECT is(pg_temp.r('inject-only')->>'dropped', 'no-subscriber',
          'naming only another workspace''s subject stores nothing: the source connection does not subscribe to it');
SELECT is_empty($$SELECT 1 FROM wharf.provider_event WHERE workspace_id = 8$$, 'nothing reached the victim''s workspace');
-- Pre-emption: the victim's genuine delivery of the planted key is its own.
INSERT INTO receipt VALUES
  ('genuine', wharf.admit('gitlab', 'https://gitlab.example.com', 'K-planted', 'push',
                          jsonb_build_object('connection_id', pg_temp.c('gl8')), '{group:victim}', '{"genuine": true}', '{}'));
SELECT is(pg_temp.r('genuine')->'events'->0->>'outcome', 'stored', 'the victim''s delivery of the planted key is stored, not a duplicate');
SELECT is((SELECT payload FROM wharf.provider_event WHERE workspace_id = 8 AND delivery_key = 'K-planted'), '{"genuine": true}'::jsonb,
          '... with the victim''s own payload');
-- Provider-signed fan-out stays: the GitHub App delivery earlier in this
-- suite reached the App's workspace and the PAT connections' workspaces.
SELECT ok((SELECT count(DISTINCT workspace_id) > 1 FROM wharf.provider_event WHERE provider = 'github' AND workspace_id IS NOT NULL),
          'a provider-signed delivery still fans out to several workspaces');

-- A body signed alone (GitHub, Forgejo) is deduplicated by its SHA-256 too:
-- the same body under another delivery id, or relabelled as a control event,
-- answers with the rows already stored, within replay_window.
INSERT INTO receipt VALUES
  ('body-1', wharf.admit('github', 'https://github.com', 'body-1', 'push', '{"installation_id": "100"}', '{repo:acme/api}',
                         '{"action": "deleted", "installation": {"id": 100}}', '{}', repeat('ab', 32))),
  ('body-2', wharf.admit('github', 'https://github.com', 'body-2', 'issues', '{"installation_id": "100"}', '{repo:acme/api}',
                         '{"action": "deleted", "installation": {"id": 100}}', '{}', repeat('ab', 32))),
  ('body-3', wharf.admit('github', 'https://github.com', 'body-3', 'installation', '{"installation_id": "100", "control": true}', '{}',
                         '{"action": "deleted", "installation": {"id": 100}}', '{}', repeat('ab', 32)));
SELECT is(jsonb_array_length(pg_temp.r('body-1')->'events') > 0 AND pg_temp.r('body-1')->'events'->0->>'outcome' = 'stored', true,
          'a body-signed delivery is stored');
SELECT is(pg_temp.r('body-2')->'events', (SELECT jsonb_agg(e || '{"outcome": "duplicate"}') FROM jsonb_array_elements(pg_temp.r('body-1')->'events') e),
          'the same body under another delivery id and event type names the stored rows as duplicates');
SELECT is(pg_temp.r('body-3')->'events', pg_temp.r('body-2')->'events',
          'the same body relabelled as an installation event is a duplicate, not a control row');
UPDATE wharf.provider_event SET received_at = now() - interval '4 days' WHERE delivery_key = 'body-1';
SELECT is(wharf.admit('github', 'https://github.com', 'body-4', 'push', '{"installation_id": "100"}', '{repo:acme/api}',
                      '{"action": "deleted", "installation": {"id": 100}}', '{}', repeat('ab', 32))->'events'->0->>'outcome', 'stored',
          'past replay_window the same body is stored again');
SELECT throws_ok($$SELECT wharf.admit('github', 'https://github.com', 'body-x', 'push', '{"installation_id": "100"}', '{repo:acme/api}', '{}', '{}', 'ABC')$$,
                 '22023', NULL, 'a body digest that is not lower-case hex SHA-256 is an error');

-- Two workspaces' Forgejo webhooks on one repository receive byte-identical
-- bodies: each stores its own, neither sees nor pre-empts the other's.
SELECT wharf.upsert_workspace(10), wharf.upsert_workspace(11);
INSERT INTO conn VALUES
  ('fj10', wharf.upsert_connection(10, 'forgejo', 'https://code.example.com', 'webhook', 'ten')),
  ('fj11', wharf.upsert_connection(11, 'forgejo', 'https://code.example.com', 'webhook', 'eleven'));
SELECT wharf.subscribe(pg_temp.c('fj10'), 'repo:shared/x'), wharf.subscribe(pg_temp.c('fj11'), 'repo:shared/x');
INSERT INTO receipt VALUES
  ('fj-a', wharf.admit('forgejo', 'https://code.example.com', 'fj-a', 'push', jsonb_build_object('connection_id', pg_temp.c('fj10')),
                       '{repo:shared/x}', '{"same": true}', '{}', repeat('cd', 32))),
  ('fj-b', wharf.admit('forgejo', 'https://code.example.com', 'fj-b', 'push', jsonb_build_object('connection_id', pg_temp.c('fj11')),
                       '{repo:shared/x}', '{"same": true}', '{}', repeat('cd', 32)));
SELECT is(pg_temp.r('fj-b')->'events'->0->>'outcome', 'stored',
          'an identical body through another workspace''s connection is stored, not a duplicate');
SELECT is((pg_temp.r('fj-b')->'events'->0->>'workspace_id')::bigint, 11::bigint, '... in that workspace, naming no other');

SELECT * FROM finish();
ROLLBACK;
