-- Connection lifecycle: upsert_workspace, set_workspace_state,
-- upsert_connection, set_connection_state, subscribe, unsubscribe, the
-- exclusive lifecycle locks they take, and the cascade of a workspace delete.
BEGIN;
SELECT plan(62);

-- The lifecycle locks this transaction holds, as (mode, key) pairs. An
-- advisory lock on a bigint key shows in pg_locks as classid (high 32 bits)
-- and objid (low 32 bits).
CREATE TEMP VIEW held_lifecycle_lock AS
  SELECT mode, ((classid::bigint << 32) | objid::bigint) AS key
    FROM pg_locks
   WHERE locktype = 'advisory' AND objsubid = 1 AND pid = pg_backend_pid();

CREATE TEMP TABLE conn (name text PRIMARY KEY, id bigint);

-- Workspaces ---------------------------------------------------------------
SELECT is(wharf.upsert_workspace(10), 10::bigint, 'upsert_workspace returns the id');
SELECT is((SELECT state FROM wharf.workspace WHERE id = 10), 'ACTIVE', 'a new workspace is ACTIVE');
SELECT lives_ok($$SELECT wharf.set_workspace_state(10, 'SUSPENDED')$$, 'a workspace can be suspended');
SELECT is(wharf.upsert_workspace(10), 10::bigint, 'upsert_workspace of an existing workspace returns its id');
SELECT is((SELECT state FROM wharf.workspace WHERE id = 10), 'SUSPENDED',
          'upsert_workspace changes nothing in an existing workspace');
SELECT ok(EXISTS (SELECT FROM held_lifecycle_lock
                   WHERE mode = 'ExclusiveLock' AND key = wharf.lifecycle_key('workspace', '10')),
          'set_workspace_state holds the workspace''s lifecycle lock in exclusive mode');
SELECT lives_ok($$SELECT wharf.set_workspace_state(10, 'DELETING')$$, 'DELETING is a workspace state');
SELECT lives_ok($$SELECT wharf.set_workspace_state(10, 'ACTIVE')$$, 'a workspace can be made ACTIVE again');
SELECT is((SELECT state FROM wharf.workspace WHERE id = 10), 'ACTIVE', 'the state is written');
SELECT throws_ok($$SELECT wharf.upsert_workspace(NULL)$$, '22004', NULL, 'upsert_workspace rejects a NULL id');
SELECT lives_ok($$SELECT wharf.set_workspace_state(10, 'PAUSED')$$, 'PAUSED is a workspace state');
SELECT wharf.set_workspace_state(10, 'ACTIVE');
SELECT throws_ok($$SELECT wharf.set_workspace_state(10, 'NAPPING')$$, '22023', NULL,
                 'set_workspace_state rejects an unknown state');
SELECT throws_ok($$SELECT wharf.set_workspace_state(10, NULL)$$, '22004', NULL,
                 'set_workspace_state rejects a NULL state');
SELECT throws_ok($$SELECT wharf.set_workspace_state(NULL, 'ACTIVE')$$, '22004', NULL,
                 'set_workspace_state rejects a NULL id');
SELECT throws_ok($$SELECT wharf.set_workspace_state(99, 'SUSPENDED')$$, 'P0002', NULL,
                 'set_workspace_state rejects an unknown workspace');

-- Connections --------------------------------------------------------------
SELECT wharf.upsert_workspace(20);
INSERT INTO conn VALUES
  ('app', wharf.upsert_connection(10, 'github', 'https://github.com', 'app_installation', '100')),
  ('pat', wharf.upsert_connection(10, 'github', 'https://github.com', 'pat', NULL)),
  ('hook', wharf.upsert_connection(20, 'gitlab', 'https://gitlab.example.com', 'webhook', NULL,
                                   '{"subject_prefixes": ["project:"]}'));

SELECT results_eq(
  $$SELECT state, generation, route FROM wharf.connection WHERE id = (SELECT id FROM conn WHERE name = 'hook')$$,
  $$VALUES ('ACTIVE', 1::bigint, '{"subject_prefixes": ["project:"]}'::jsonb)$$,
  'a new connection is ACTIVE, generation 1, with the given route');
SELECT is((SELECT route FROM wharf.connection WHERE id = (SELECT id FROM conn WHERE name = 'app')), '{}'::jsonb,
          'the route defaults to {}');
SELECT is(wharf.upsert_connection(10, 'github', 'https://github.com', 'app_installation', '100'),
          (SELECT id FROM conn WHERE name = 'app'), 'the natural key finds the existing connection');
SELECT is(wharf.upsert_connection(10, 'github', 'https://github.com', 'pat', NULL),
          (SELECT id FROM conn WHERE name = 'pat'), 'a NULL external id is part of the natural key (NULLS NOT DISTINCT)');
SELECT is((SELECT generation FROM wharf.connection WHERE id = (SELECT id FROM conn WHERE name = 'app')), 1::bigint,
          'an upsert with the same route leaves the generation alone');
SELECT isnt(wharf.upsert_connection(20, 'github', 'https://github.com', 'pat', NULL),
            (SELECT id FROM conn WHERE name = 'pat'), 'another workspace gets a connection of its own');
SELECT isnt(wharf.upsert_connection(10, 'github', 'https://github.example.com', 'pat', NULL),
            (SELECT id FROM conn WHERE name = 'pat'), 'another source is another connection');

SELECT is(wharf.upsert_connection(20, 'gitlab', 'https://gitlab.example.com', 'webhook', NULL,
                                  '{"subject_prefixes": ["project:7"]}'),
          (SELECT id FROM conn WHERE name = 'hook'), 'an upsert with a new route keeps the id');
SELECT results_eq(
  $$SELECT generation, route FROM wharf.connection WHERE id = (SELECT id FROM conn WHERE name = 'hook')$$,
  $$VALUES (2::bigint, '{"subject_prefixes": ["project:7"]}'::jsonb)$$,
  'a new route is written and bumps the generation');
SELECT ok(EXISTS (SELECT FROM held_lifecycle_lock
                   WHERE mode = 'ExclusiveLock'
                     AND key = wharf.lifecycle_key('source', wharf.source_lock_id('gitlab', 'https://gitlab.example.com'))),
          'upsert_connection holds the source''s lifecycle lock in exclusive mode');
SELECT ok(EXISTS (SELECT FROM held_lifecycle_lock
                   WHERE mode = 'ShareLock'
                     AND key = wharf.lifecycle_key('workspace', (SELECT workspace_id FROM wharf.connection
                                                                 WHERE id = (SELECT id FROM conn WHERE name = 'hook'))::text)),
          'upsert_connection holds its workspace''s lifecycle lock in shared mode (a change of the workspace waits for it)');

SELECT throws_ok($$SELECT wharf.upsert_connection(20, 'github', 'https://github.com', 'app_installation', '100')$$,
                 '23505', NULL, 'an App installation belongs to one workspace per provider and source');
SELECT lives_ok($$SELECT wharf.upsert_connection(20, 'github', 'https://github.example.com', 'app_installation', '100')$$,
                'the same installation id on another source is another installation');
SELECT throws_ok($$SELECT wharf.upsert_connection(10, 'nosuch', 'https://nosuch.example', 'webhook', NULL)$$,
                 '22023', NULL, 'upsert_connection rejects an unknown provider');
SELECT throws_ok($$SELECT wharf.upsert_connection(10, NULL, 'https://github.com', 'pat', 'x')$$,
                 '22004', NULL, 'upsert_connection rejects a NULL provider');
SELECT throws_ok($$SELECT wharf.upsert_connection(10, 'github', NULL, 'pat', 'x')$$,
                 '22004', NULL, 'upsert_connection rejects a NULL source');
SELECT throws_ok($$SELECT wharf.upsert_connection(10, 'github', 'https://github.com', NULL, 'x')$$,
                 '22004', NULL, 'upsert_connection rejects a NULL kind');
SELECT throws_ok($$SELECT wharf.upsert_connection(NULL, 'github', 'https://github.com', 'pat', 'x')$$,
                 '22004', NULL, 'upsert_connection rejects a NULL workspace');
SELECT throws_ok($$SELECT wharf.upsert_connection(10, 'github', 'https://github.com', 'pat', 'x', '["repo:"]')$$,
                 '22023', NULL, 'upsert_connection rejects a route that is not an object');
SELECT throws_ok($$SELECT wharf.upsert_connection(99, 'github', 'https://github.com', 'pat', 'x')$$,
                 'P0002', NULL, 'upsert_connection rejects an unknown workspace');

-- Connection state ------------------------------------------------------------
SELECT lives_ok(format($$SELECT wharf.set_connection_state(%s, 'SUSPENDED')$$, (SELECT id FROM conn WHERE name = 'app')),
                'a connection can be suspended');
SELECT results_eq(
  $$SELECT state, generation FROM wharf.connection WHERE id = (SELECT id FROM conn WHERE name = 'app')$$,
  $$VALUES ('SUSPENDED', 2::bigint)$$, 'a state change is written and bumps the generation');
SELECT ok(EXISTS (SELECT FROM held_lifecycle_lock
                   WHERE mode = 'ExclusiveLock'
                     AND key = wharf.lifecycle_key('source', (SELECT wharf.source_lock_id(provider, source) FROM wharf.connection
                                                              WHERE id = (SELECT id FROM conn WHERE name = 'app')))),
          'set_connection_state holds its source''s lifecycle lock in exclusive mode');
SELECT wharf.set_connection_state((SELECT id FROM conn WHERE name = 'app'), 'SUSPENDED');
SELECT is((SELECT generation FROM wharf.connection WHERE id = (SELECT id FROM conn WHERE name = 'app')), 2::bigint,
          'setting the state it already has changes nothing');
SELECT wharf.set_connection_state((SELECT id FROM conn WHERE name = 'app'), 'REVOKED');
SELECT results_eq(
  $$SELECT state, generation FROM wharf.connection WHERE id = (SELECT id FROM conn WHERE name = 'app')$$,
  $$VALUES ('REVOKED', 3::bigint)$$, 'REVOKED is a connection state');
SELECT wharf.set_connection_state((SELECT id FROM conn WHERE name = 'app'), 'PAUSED');
SELECT is((SELECT state FROM wharf.connection WHERE id = (SELECT id FROM conn WHERE name = 'app')), 'PAUSED',
          'PAUSED is a connection state');
-- A scope a claim parked for this paused connection's head stays parked when
-- a workspace whose id happens to be the connection's id changes state (only
-- the connection leaving PAUSED, or the scope's own workspace, unparks it).
SELECT wharf.upsert_workspace((SELECT id FROM conn WHERE name = 'app'));
INSERT INTO wharf.provider_event (workspace_id, provider, delivery_key, event_type, scope_key, source, connection_id, payload)
SELECT c.workspace_id, c.provider, 'parked-1', 'push', 'parked:scope', c.source, c.id, '{}'
  FROM wharf.connection c WHERE c.id = (SELECT id FROM conn WHERE name = 'app');
UPDATE wharf.scope SET active = false WHERE scope_key = 'parked:scope';
SELECT wharf.set_workspace_state((SELECT id FROM conn WHERE name = 'app'), 'ACTIVE');
SELECT is((SELECT active FROM wharf.scope WHERE scope_key = 'parked:scope'), false,
          'a workspace''s state change leaves a scope parked for a paused connection of the same id parked');
SELECT throws_ok(format($$SELECT wharf.set_connection_state(%s, 'DELETING')$$, (SELECT id FROM conn WHERE name = 'app')),
                 '22023', NULL, 'set_connection_state rejects a state that is not a connection state');
SELECT throws_ok(format($$SELECT wharf.set_connection_state(%s, NULL)$$, (SELECT id FROM conn WHERE name = 'app')),
                 '22004', NULL, 'set_connection_state rejects a NULL state');
SELECT throws_ok($$SELECT wharf.set_connection_state(NULL, 'ACTIVE')$$, '22004', NULL,
                 'set_connection_state rejects a NULL id');
SELECT throws_ok($$SELECT wharf.set_connection_state(424242, 'ACTIVE')$$, 'P0002', NULL,
                 'set_connection_state rejects an unknown connection');

-- Subscriptions -----------------------------------------------------------------
SELECT is(wharf.subscribe((SELECT id FROM conn WHERE name = 'pat'), 'repo:acme/api'), true,
          'subscribe returns true for a new subscription');
SELECT is((SELECT generation FROM wharf.connection WHERE id = (SELECT id FROM conn WHERE name = 'pat')), 2::bigint,
          'a new subscription bumps the connection''s generation');
SELECT ok(EXISTS (SELECT FROM held_lifecycle_lock
                   WHERE mode = 'ExclusiveLock'
                     AND key = wharf.lifecycle_key('source', (SELECT wharf.source_lock_id(provider, source) FROM wharf.connection
                                                              WHERE id = (SELECT id FROM conn WHERE name = 'pat')))),
          'subscribe holds its source''s lifecycle lock in exclusive mode');
SELECT is(wharf.subscribe((SELECT id FROM conn WHERE name = 'pat'), 'repo:acme/api'), false,
          'subscribe returns false when the subscription exists');
SELECT is((SELECT generation FROM wharf.connection WHERE id = (SELECT id FROM conn WHERE name = 'pat')), 2::bigint,
          'a subscription that changed nothing leaves the generation alone');
SELECT is(wharf.unsubscribe((SELECT id FROM conn WHERE name = 'pat'), 'repo:acme/api'), true,
          'unsubscribe returns true when it ends a subscription');
SELECT results_eq(
  $$SELECT (SELECT generation FROM wharf.connection WHERE id = (SELECT id FROM conn WHERE name = 'pat')),
           (SELECT count(*) FROM wharf.subscription WHERE connection_id = (SELECT id FROM conn WHERE name = 'pat'))$$,
  $$VALUES (3::bigint, 0::bigint)$$, 'unsubscribe deletes the subscription and bumps the generation');
SELECT is(wharf.unsubscribe((SELECT id FROM conn WHERE name = 'pat'), 'repo:acme/api'), false,
          'unsubscribe returns false when there was no subscription');
SELECT throws_ok($$SELECT wharf.subscribe(424242, 'repo:acme/api')$$, 'P0002', NULL,
                 'subscribe rejects an unknown connection');
SELECT throws_ok(format($$SELECT wharf.subscribe(%s, 'group:acme')$$, (SELECT id FROM conn WHERE name = 'hook')),
                 '22023', NULL, 'subscribe rejects a subject outside the connection''s subject_prefixes');
SELECT is(wharf.subscribe((SELECT id FROM conn WHERE name = 'hook'), 'project:7'), true,
          'subscribe accepts a subject within the connection''s subject_prefixes');
SELECT wharf.unsubscribe((SELECT id FROM conn WHERE name = 'hook'), 'project:7');
SELECT throws_ok($$SELECT wharf.unsubscribe(424242, 'repo:acme/api')$$, 'P0002', NULL,
                 'unsubscribe rejects an unknown connection');
SELECT throws_ok(format($$SELECT wharf.subscribe(%s, NULL)$$, (SELECT id FROM conn WHERE name = 'pat')),
                 '22004', NULL, 'subscribe rejects a NULL subject');
SELECT throws_ok($$SELECT wharf.unsubscribe(NULL, 'repo:acme/api')$$, '22004', NULL,
                 'unsubscribe rejects a NULL connection');

-- Deleting a workspace cascades ------------------------------------------------------
SELECT wharf.subscribe((SELECT id FROM conn WHERE name = 'pat'), 'repo:acme/api');
INSERT INTO wharf.provider_event (workspace_id, provider, delivery_key, event_type, subject, scope_key, source, payload)
VALUES (10, 'github', 'd-cascade', 'push', 'repo:acme/api', '10:github:repo:acme/api', 'https://github.com', '{}');
INSERT INTO wharf.provider_event_step (event_id, step_name)
SELECT id, 'commit:1' FROM wharf.provider_event WHERE delivery_key = 'd-cascade';
DELETE FROM wharf.workspace WHERE id = 10;
SELECT results_eq(
  $$SELECT (SELECT count(*) FROM wharf.connection WHERE workspace_id = 10),
           (SELECT count(*) FROM wharf.subscription WHERE connection_id IN (SELECT id FROM conn)),
           (SELECT count(*) FROM wharf.provider_event WHERE workspace_id = 10),
           (SELECT count(*) FROM wharf.provider_event_step),
           (SELECT count(*) FROM wharf.scope WHERE workspace_id = 10)$$,
  $$VALUES (0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint)$$,
  'deleting a workspace deletes its connections, subscriptions, events, steps and scopes');
SELECT ok((SELECT count(*) FROM wharf.connection WHERE workspace_id = 20) = 3,
          'the other workspace keeps its connections');

SELECT * FROM finish();
ROLLBACK;
