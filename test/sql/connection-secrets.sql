-- wharf.connection_endpoint and wharf.set_connection_secret: a GitLab token is
-- stored and returned only as its SHA-256, other providers' keys as given (a
-- generic key only in Standard Webhooks form), GitHub and Slack have no
-- per-connection secret, a new secret bumps the connection's generation under
-- its lifecycle lock, and PUBLIC may call neither function.
BEGIN;
SELECT plan(39);

-- The lifecycle locks this transaction holds, as (mode, key) pairs (see
-- test/sql/connections.sql).
CREATE TEMP VIEW held_lifecycle_lock AS
  SELECT mode, ((classid::bigint << 32) | objid::bigint) AS key
    FROM pg_locks
   WHERE locktype = 'advisory' AND objsubid = 1 AND pid = pg_backend_pid();

-- Fixture: workspace 1 with one connection per provider.
SELECT wharf.upsert_workspace(1);
CREATE TEMP TABLE conn (name text PRIMARY KEY, id bigint);
INSERT INTO conn VALUES
  ('gitlab', wharf.upsert_connection(1, 'gitlab', 'https://gitlab.example.com', 'webhook', NULL,
                                     '{"subject_prefixes": ["project:"]}')),
  ('generic', wharf.upsert_connection(1, 'generic', 'https://hooks.example/1', 'webhook', 'one')),
  ('outline', wharf.upsert_connection(1, 'outline', 'https://outline.example.com', 'webhook', NULL)),
  ('forgejo', wharf.upsert_connection(1, 'forgejo', 'https://code.example.com', 'webhook', NULL)),
  ('github', wharf.upsert_connection(1, 'github', 'https://github.com', 'app_installation', '100')),
  ('slack', wharf.upsert_connection(1, 'slack', 'https://slack.com', 'slack_team', 'T1'));

CREATE FUNCTION pg_temp.conn(p_name text) RETURNS bigint
LANGUAGE sql AS $$ SELECT id FROM conn WHERE name = p_name $$;

CREATE FUNCTION pg_temp.generation(p_name text) RETURNS bigint
LANGUAGE sql AS $$ SELECT generation FROM wharf.connection WHERE id = pg_temp.conn(p_name) $$;

-- connection_endpoint before any secret -----------------------------------------
SELECT results_eq(
  $$SELECT * FROM wharf.connection_endpoint(pg_temp.conn('gitlab'))$$,
  $$VALUES ('gitlab'::text, 'https://gitlab.example.com'::text, '{"subject_prefixes": ["project:"]}'::jsonb,
            NULL::text, NULL::text)$$,
  'connection_endpoint gives provider, source and route, and no secret before one is set');
SELECT is_empty($$SELECT * FROM wharf.connection_endpoint(424242)$$,
                'connection_endpoint of an unknown connection returns no row');
SELECT is_empty($$SELECT * FROM wharf.connection_endpoint(NULL)$$,
                'connection_endpoint of a NULL id returns no row');

-- GitLab: the token is kept as its SHA-256 only -----------------------------------
SELECT lives_ok(format($$SELECT wharf.set_connection_secret(%s, 'glpat-token-1')$$, pg_temp.conn('gitlab')),
                'set_connection_secret accepts a GitLab token');
SELECT results_eq(
  $$SELECT token_sha256, signing_key FROM wharf.connection_endpoint(pg_temp.conn('gitlab'))$$,
  $$VALUES (encode(sha256(convert_to('glpat-token-1', 'UTF8')), 'hex'), NULL::text)$$,
  'connection_endpoint returns the GitLab token''s SHA-256 as hex and no signing key');
SELECT matches((SELECT token_sha256 FROM wharf.connection_endpoint(pg_temp.conn('gitlab'))), '^[0-9a-f]{64}$',
               'the digest is 64 lower-case hex digits');
SELECT ok(NOT EXISTS (SELECT FROM wharf.connection_secret s
                       WHERE s::text LIKE '%glpat-token-1%'
                          OR position(convert_to('glpat-token-1', 'UTF8') IN s.token_sha256) > 0),
          'the GitLab token itself is stored nowhere in connection_secret');
SELECT ok(NOT EXISTS (SELECT FROM wharf.connection_endpoint(pg_temp.conn('gitlab')) e
                       WHERE e::text LIKE '%glpat-token-1%'),
          'connection_endpoint never returns the GitLab token itself');
SELECT is(pg_temp.generation('gitlab'), 2::bigint, 'setting a secret bumps the connection''s generation');
SELECT ok(EXISTS (SELECT FROM held_lifecycle_lock
                   WHERE mode = 'ExclusiveLock'
                     AND key = wharf.lifecycle_key('connection', pg_temp.conn('gitlab')::text)),
          'set_connection_secret holds the connection''s lifecycle lock in exclusive mode');

SELECT wharf.set_connection_secret(pg_temp.conn('gitlab'), 'glpat-token-2');
SELECT is((SELECT token_sha256 FROM wharf.connection_endpoint(pg_temp.conn('gitlab'))),
          encode(sha256(convert_to('glpat-token-2', 'UTF8')), 'hex'),
          'a second token replaces the first: the endpoint returns the new digest');
SELECT results_eq(
  $$SELECT count(*), (SELECT generation FROM wharf.connection WHERE id = pg_temp.conn('gitlab'))
      FROM wharf.connection_secret WHERE connection_id = pg_temp.conn('gitlab')$$,
  $$VALUES (1::bigint, 3::bigint)$$,
  'a rotation keeps one secret row per connection and bumps the generation again');

-- generic: a Standard Webhooks key, kept as given ----------------------------------
SELECT lives_ok(format($$SELECT wharf.set_connection_secret(%s, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')$$,
                       pg_temp.conn('generic')),
                'set_connection_secret accepts a whsec_<base64> key for a generic connection');
SELECT results_eq(
  $$SELECT provider, token_sha256, signing_key FROM wharf.connection_endpoint(pg_temp.conn('generic'))$$,
  $$VALUES ('generic'::text, NULL::text, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'::text)$$,
  'connection_endpoint returns a generic connection''s signing key as given, with no digest');
SELECT lives_ok(format($$SELECT wharf.set_connection_secret(%s, 'whsec_c2VjcmV0LWtleQ==')$$, pg_temp.conn('generic')),
                'a whsec_ key with base64 padding is accepted');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, 'MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')$$,
                        pg_temp.conn('generic')),
                 '22023', NULL, 'a generic key without the whsec_ prefix is refused');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, 'whsec_')$$, pg_temp.conn('generic')),
                 '22023', NULL, 'a whsec_ prefix with no key after it is refused');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, 'whsec_not base64!')$$, pg_temp.conn('generic')),
                 '22023', NULL, 'a whsec_ key with characters outside base64 is refused');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, 'whsec_c2VjcmV0===')$$, pg_temp.conn('generic')),
                 '22023', NULL, 'a whsec_ key with more than two padding characters is refused');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, %L)$$, pg_temp.conn('generic'),
                        E'whsec_c2VjcmV0LWtleQ==\n'),
                 '22023', NULL, 'a whsec_ key followed by a newline is refused');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, 'WHSEC_c2VjcmV0LWtleQ==')$$, pg_temp.conn('generic')),
                 '22023', NULL, 'the whsec_ prefix is case-sensitive');
SELECT results_eq(
  $$SELECT (SELECT signing_key FROM wharf.connection_endpoint(pg_temp.conn('generic'))),
           (SELECT generation FROM wharf.connection WHERE id = pg_temp.conn('generic'))$$,
  $$VALUES ('whsec_c2VjcmV0LWtleQ=='::text, 3::bigint)$$,
  'the refused keys left the last accepted key and the generation as they were');

-- Outline and Forgejo: HMAC keys, kept as given -----------------------------------
SELECT wharf.set_connection_secret(pg_temp.conn('outline'), 'outline signing secret');
SELECT wharf.set_connection_secret(pg_temp.conn('forgejo'), 'forgejo-secret');
SELECT results_eq(
  $$SELECT e.provider, e.token_sha256, e.signing_key
      FROM conn, wharf.connection_endpoint(conn.id) e
     WHERE conn.name IN ('outline', 'forgejo') ORDER BY conn.id$$,
  $$VALUES ('outline'::text, NULL::text, 'outline signing secret'::text),
           ('forgejo', NULL, 'forgejo-secret')$$,
  'an Outline or Forgejo key is kept and returned as given (its HMAC needs the key itself)');

-- GitHub and Slack secrets belong to the app ---------------------------------------
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, 'github-secret')$$, pg_temp.conn('github')),
                 '22023', NULL, 'a GitHub connection has no secret of its own');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, 'slack-secret')$$, pg_temp.conn('slack')),
                 '22023', NULL, 'a Slack connection has no secret of its own');
SELECT results_eq(
  $$SELECT (SELECT count(*) FROM wharf.connection_secret WHERE connection_id IN (pg_temp.conn('github'), pg_temp.conn('slack'))),
           pg_temp.generation('github'), pg_temp.generation('slack')$$,
  $$VALUES (0::bigint, 1::bigint, 1::bigint)$$,
  'a refused GitHub or Slack secret writes no secret row and leaves the generation alone');
SELECT results_eq(
  $$SELECT token_sha256, signing_key FROM wharf.connection_endpoint(pg_temp.conn('github'))$$,
  $$VALUES (NULL::text, NULL::text)$$,
  'connection_endpoint of a GitHub connection returns no secret');

-- Bad input --------------------------------------------------------------------------
SELECT throws_ok($$SELECT wharf.set_connection_secret(NULL, 'glpat-token')$$, '22004', NULL,
                 'set_connection_secret rejects a NULL connection');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, NULL)$$, pg_temp.conn('gitlab')), '22004', NULL,
                 'set_connection_secret rejects a NULL secret');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, '')$$, pg_temp.conn('gitlab')), '22004', NULL,
                 'set_connection_secret rejects an empty secret');
SELECT throws_ok($$SELECT wharf.set_connection_secret(424242, 'glpat-token')$$, 'P0002', NULL,
                 'set_connection_secret rejects an unknown connection');
SELECT is((SELECT token_sha256 FROM wharf.connection_endpoint(pg_temp.conn('gitlab'))),
          encode(sha256(convert_to('glpat-token-2', 'UTF8')), 'hex'),
          'a rejected call leaves the stored digest as it was');

-- Privileges ------------------------------------------------------------------------
SELECT function_privs_are('wharf', 'connection_endpoint', ARRAY['bigint'], 'public', ARRAY[]::text[],
                          'PUBLIC has no EXECUTE on connection_endpoint');
SELECT function_privs_are('wharf', 'set_connection_secret', ARRAY['bigint', 'text'], 'public', ARRAY[]::text[],
                          'PUBLIC has no EXECUTE on set_connection_secret');
SELECT ok(has_function_privilege('public', 'wharf.show_connection(bigint)', 'EXECUTE'),
          'the privilege check can tell: PUBLIC may execute an ordinary function such as show_connection');
SELECT is_definer('wharf', 'connection_endpoint', ARRAY['bigint'],
                  'connection_endpoint is SECURITY DEFINER (the edge needs EXECUTE only)');
SELECT is_definer('wharf', 'set_connection_secret', ARRAY['bigint', 'text'],
                  'set_connection_secret is SECURITY DEFINER');
SELECT set_eq(
  $$SELECT p.oid::regprocedure::text, p.proconfig
      FROM pg_proc p
     WHERE p.oid IN ('wharf.connection_endpoint(bigint)'::regprocedure,
                     'wharf.set_connection_secret(bigint, text)'::regprocedure)$$,
  $$VALUES ('wharf.connection_endpoint(bigint)', ARRAY['search_path=pg_catalog, pg_temp']),
           ('wharf.set_connection_secret(bigint,text)', ARRAY['search_path=pg_catalog, pg_temp'])$$,
  'both SECURITY DEFINER functions pin search_path to pg_catalog, pg_temp');

-- The secret goes with its connection ---------------------------------------------------
DELETE FROM wharf.workspace WHERE id = 1;
SELECT is_empty($$SELECT 1 FROM wharf.connection_secret$$,
                'deleting a workspace deletes its connections'' secrets');

SELECT * FROM finish();
ROLLBACK;
