-- wharf.connection_endpoint, wharf.set_connection_secret and the signing-key
-- re-encryption functions: a GitLab token is stored and returned only as its
-- SHA-256, other providers' keys only encrypted (aes256gcm:<key id>:<iv>:
-- <ciphertext>, which the database checks the form of but cannot decrypt),
-- GitHub and Slack have no per-connection secret, a new secret bumps the
-- connection's generation under its lifecycle lock and keeps the one it
-- replaces for `secret_overlap`, re-encrypting a key changes neither the key
-- nor the generation, and PUBLIC may call neither connection_endpoint nor
-- set_connection_secret.
BEGIN;
SELECT plan(87);

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

CREATE FUNCTION pg_temp.digest(p_token text) RETURNS text
LANGUAGE sql AS $$ SELECT encode(sha256(convert_to(p_token, 'UTF8')), 'hex') $$;

-- Well-formed ciphertexts, as the edge and the CLI store them (the database
-- only checks the form: any text matching it will do).
CREATE TEMP TABLE sealed (name text PRIMARY KEY, value text);
INSERT INTO sealed VALUES
  ('generic-1', 'aes256gcm:k1:AAAAAAAAAAAAAAAA:c2VjcmV0LWtleS1jaXBoZXJ0ZXh0'),
  ('generic-2', 'aes256gcm:k1:BBBBBBBBBBBBBBBB:Z2VuZXJpYy1rZXktMg=='),
  ('generic-1-k2', 'aes256gcm:k2:CCCCCCCCCCCCCCCC:Z2VuZXJpYy1rZXktMS11bmRlci1rMg=='),
  ('generic-2-k2', 'aes256gcm:k2:DDDDDDDDDDDDDDDD:Z2VuZXJpYy1rZXktMi11bmRlci1rMg=='),
  ('outline-1', 'aes256gcm:ring_2025.11-b:q83vEjRWeJq7zA==:b3V0bGluZS1rZXktMQ='),
  ('outline-2', 'aes256gcm:k1:EEEEEEEEEEEEEEEE:b3V0bGluZS1rZXktMg=='),
  ('forgejo-1', 'aes256gcm:k1:FFFFFFFFFFFFFFFF:Zm9yZ2Vqby1rZXktMQ=='),
  ('forgejo-2', 'aes256gcm:k1:GGGGGGGGGGGGGGGG:Zm9yZ2Vqby1rZXktMg==');

CREATE FUNCTION pg_temp.sealed(p_name text) RETURNS text
LANGUAGE sql AS $$ SELECT value FROM sealed WHERE name = p_name $$;

-- connection_endpoint before any secret -----------------------------------------
SELECT results_eq(
  $$SELECT * FROM wharf.connection_endpoint(pg_temp.conn('gitlab'))$$,
  $$VALUES ('gitlab'::text, 'https://gitlab.example.com'::text, '{"subject_prefixes": ["project:"]}'::jsonb,
            NULL::text, NULL::text, NULL::text, NULL::text)$$,
  'connection_endpoint gives provider, source and route, and no secret (current or previous) before one is set');
SELECT is_empty($$SELECT * FROM wharf.connection_endpoint(424242)$$,
                'connection_endpoint of an unknown connection returns no row');
SELECT is_empty($$SELECT * FROM wharf.connection_endpoint(NULL)$$,
                'connection_endpoint of a NULL id returns no row');

-- GitLab: the token is kept as its SHA-256 only -----------------------------------
SELECT lives_ok(format($$SELECT wharf.set_connection_secret(%s, 'glpat-token-1')$$, pg_temp.conn('gitlab')),
                'set_connection_secret accepts a GitLab token in plaintext');
SELECT results_eq(
  $$SELECT token_sha256, signing_key, previous_token_sha256, previous_signing_key
      FROM wharf.connection_endpoint(pg_temp.conn('gitlab'))$$,
  $$VALUES (pg_temp.digest('glpat-token-1'), NULL::text, NULL::text, NULL::text)$$,
  'connection_endpoint returns the GitLab token''s SHA-256 as hex, no signing key and no previous secret');
SELECT matches((SELECT token_sha256 FROM wharf.connection_endpoint(pg_temp.conn('gitlab'))), '^[0-9a-f]{64}$',
               'the digest is 64 lower-case hex digits');
SELECT is((SELECT previous_valid_until FROM wharf.connection_secret WHERE connection_id = pg_temp.conn('gitlab')),
          NULL::timestamptz, 'a first secret has no overlap to keep');
SELECT is(pg_temp.generation('gitlab'), 2::bigint, 'setting a secret bumps the connection''s generation');
SELECT ok(EXISTS (SELECT FROM held_lifecycle_lock
                   WHERE mode = 'ExclusiveLock'
                     AND key = wharf.lifecycle_key('source', (SELECT wharf.source_lock_id(provider, source) FROM wharf.connection
                                                              WHERE id = pg_temp.conn('gitlab')))),
          'set_connection_secret holds its source''s lifecycle lock in exclusive mode');

-- GitLab rotation: the previous digest stays valid for secret_overlap ---------------
SELECT wharf.set_connection_secret(pg_temp.conn('gitlab'), 'glpat-token-2');
SELECT results_eq(
  $$SELECT token_sha256, previous_token_sha256, signing_key, previous_signing_key
      FROM wharf.connection_endpoint(pg_temp.conn('gitlab'))$$,
  $$VALUES (pg_temp.digest('glpat-token-2'), pg_temp.digest('glpat-token-1'), NULL::text, NULL::text)$$,
  'a second token replaces the first; during the overlap the endpoint also returns the previous digest');
SELECT results_eq(
  $$SELECT count(*), (SELECT generation FROM wharf.connection WHERE id = pg_temp.conn('gitlab'))
      FROM wharf.connection_secret WHERE connection_id = pg_temp.conn('gitlab')$$,
  $$VALUES (1::bigint, 3::bigint)$$,
  'a rotation keeps one secret row per connection and bumps the generation again');
SELECT is((SELECT previous_valid_until FROM wharf.connection_secret WHERE connection_id = pg_temp.conn('gitlab')),
          now() + interval '1 day',
          'the previous token stays valid for secret_overlap (1 day by default) from the rotation');
SELECT ok(NOT EXISTS (SELECT FROM wharf.connection_secret s
                       WHERE s::text LIKE '%glpat-token-%'
                          OR position(convert_to('glpat-token-1', 'UTF8') IN s.token_sha256) > 0
                          OR position(convert_to('glpat-token-1', 'UTF8') IN s.previous_token_sha256) > 0
                          OR position(convert_to('glpat-token-2', 'UTF8') IN s.token_sha256) > 0
                          OR position(convert_to('glpat-token-2', 'UTF8') IN s.previous_token_sha256) > 0),
          'neither GitLab token itself is stored anywhere in connection_secret, current or previous');
SELECT ok(NOT EXISTS (SELECT FROM wharf.connection_endpoint(pg_temp.conn('gitlab')) e
                       WHERE e::text LIKE '%glpat-token-%'),
          'connection_endpoint never returns a GitLab token itself');

UPDATE wharf.connection_secret SET previous_valid_until = now() - interval '1 second'
 WHERE connection_id = pg_temp.conn('gitlab');
SELECT results_eq(
  $$SELECT token_sha256, previous_token_sha256 FROM wharf.connection_endpoint(pg_temp.conn('gitlab'))$$,
  $$VALUES (pg_temp.digest('glpat-token-2'), NULL::text)$$,
  'once the overlap has passed, the endpoint returns no previous digest, only the current one');

-- Signing keys: refused unless encrypted ----------------------------------------------
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, 'outline signing secret')$$, pg_temp.conn('outline')),
                 '22023', NULL, 'a plaintext Outline key is refused');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, 'whsec_c2VjcmV0LWtleQ==')$$, pg_temp.conn('outline')),
                 '22023', NULL, 'a whsec_ key for an Outline connection is refused');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, 'forgejo-secret')$$, pg_temp.conn('forgejo')),
                 '22023', NULL, 'a plaintext Forgejo key is refused');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, 'whsec_c2VjcmV0LWtleQ==')$$, pg_temp.conn('forgejo')),
                 '22023', NULL, 'a whsec_ key for a Forgejo connection is refused');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, 'MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')$$,
                        pg_temp.conn('generic')),
                 '22023', NULL, 'a plaintext generic key is refused');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')$$,
                        pg_temp.conn('generic')),
                 '22023', NULL, 'a whsec_ key in plaintext for a generic connection is refused (whsec_ is checked before encryption)');

-- Malformed ciphertexts.
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, 'AES256GCM:k1:AAAAAAAAAAAAAAAA:c2VjcmV0')$$,
                        pg_temp.conn('generic')),
                 '22023', NULL, 'the aes256gcm: prefix is case-sensitive');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, 'aes256gcm:k1:AAAAAAAAAAAAAAAA')$$,
                        pg_temp.conn('generic')),
                 '22023', NULL, 'a ciphertext without its ciphertext part is refused');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, 'aes256gcm:k1:AAAAAAAAAAAAAAAA:')$$,
                        pg_temp.conn('generic')),
                 '22023', NULL, 'an empty ciphertext part is refused');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, 'aes256gcm::AAAAAAAAAAAAAAAA:c2VjcmV0')$$,
                        pg_temp.conn('generic')),
                 '22023', NULL, 'an empty key id is refused');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, %L)$$, pg_temp.conn('generic'),
                        'aes256gcm:' || repeat('k', 33) || ':AAAAAAAAAAAAAAAA:c2VjcmV0'),
                 '22023', NULL, 'a key id longer than 32 characters is refused');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, 'aes256gcm:k/1:AAAAAAAAAAAAAAAA:c2VjcmV0')$$,
                        pg_temp.conn('generic')),
                 '22023', NULL, 'a key id with a character outside [A-Za-z0-9_.-] is refused');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, 'aes256gcm:k1:AAAA AAAA:c2VjcmV0')$$,
                        pg_temp.conn('generic')),
                 '22023', NULL, 'an iv with characters outside base64 is refused');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, 'aes256gcm:k1:AAAAAAAAAAAAAAAA:c2VjcmV0===')$$,
                        pg_temp.conn('generic')),
                 '22023', NULL, 'a ciphertext with more than two padding characters is refused');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, %L)$$, pg_temp.conn('generic'),
                        pg_temp.sealed('generic-1') || E'\n'),
                 '22023', NULL, 'a ciphertext followed by a newline is refused');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, %L)$$, pg_temp.conn('generic'),
                        pg_temp.sealed('generic-1') || ':extra'),
                 '22023', NULL, 'a ciphertext with a fifth part is refused');
SELECT results_eq(
  $$SELECT (SELECT count(*) FROM wharf.connection_secret
             WHERE connection_id IN (pg_temp.conn('generic'), pg_temp.conn('outline'), pg_temp.conn('forgejo'))),
           pg_temp.generation('generic'), pg_temp.generation('outline'), pg_temp.generation('forgejo')$$,
  $$VALUES (0::bigint, 1::bigint, 1::bigint, 1::bigint)$$,
  'the refused keys wrote no secret row and left the generations alone');

-- Signing keys: an encrypted key is kept and returned as given ------------------------
SELECT lives_ok(format($$SELECT wharf.set_connection_secret(%s, %L)$$, pg_temp.conn('generic'),
                       pg_temp.sealed('generic-1')),
                'set_connection_secret accepts an encrypted key for a generic connection');
SELECT results_eq(
  $$SELECT provider, token_sha256, signing_key, previous_token_sha256, previous_signing_key
      FROM wharf.connection_endpoint(pg_temp.conn('generic'))$$,
  $$VALUES ('generic'::text, NULL::text, pg_temp.sealed('generic-1'), NULL::text, NULL::text)$$,
  'connection_endpoint returns a generic connection''s encrypted key as given, with no digest and no previous key');
SELECT is(pg_temp.generation('generic'), 2::bigint, 'an encrypted key bumps the generation');
SELECT lives_ok(format($$SELECT wharf.set_connection_secret(%s, %L)$$, pg_temp.conn('outline'),
                       pg_temp.sealed('outline-1')),
                'a key id with _ . - and padded iv and ciphertext is accepted (Outline)');
SELECT lives_ok(format($$SELECT wharf.set_connection_secret(%s, %L)$$, pg_temp.conn('forgejo'),
                       pg_temp.sealed('forgejo-1')),
                'an encrypted key is accepted for a Forgejo connection');
SELECT results_eq(
  $$SELECT e.provider, e.token_sha256, e.signing_key
      FROM conn, wharf.connection_endpoint(conn.id) e
     WHERE conn.name IN ('outline', 'forgejo') ORDER BY conn.id$$,
  $$VALUES ('outline'::text, NULL::text, pg_temp.sealed('outline-1')),
           ('forgejo', NULL, pg_temp.sealed('forgejo-1'))$$,
  'an Outline or Forgejo key is kept and returned as given (encrypted)');

-- Signing-key rotation: the previous key stays valid for secret_overlap -----------------
SELECT wharf.set_connection_secret(pg_temp.conn('generic'), pg_temp.sealed('generic-2'));
SELECT results_eq(
  $$SELECT signing_key, previous_signing_key, token_sha256, previous_token_sha256
      FROM wharf.connection_endpoint(pg_temp.conn('generic'))$$,
  $$VALUES (pg_temp.sealed('generic-2'), pg_temp.sealed('generic-1'), NULL::text, NULL::text)$$,
  'after a rotation the endpoint returns the new key and, during the overlap, the previous one');
SELECT results_eq(
  $$SELECT previous_valid_until, (SELECT generation FROM wharf.connection WHERE id = pg_temp.conn('generic'))
      FROM wharf.connection_secret WHERE connection_id = pg_temp.conn('generic')$$,
  $$VALUES (now() + interval '1 day', 3::bigint)$$,
  'the previous key is valid for secret_overlap, and the rotation bumps the generation');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, 'plaintext-again')$$, pg_temp.conn('generic')),
                 '22023', NULL, 'a plaintext key is refused after a rotation too');
SELECT results_eq(
  $$SELECT e.signing_key, e.previous_signing_key, pg_temp.generation('generic')
      FROM wharf.connection_endpoint(pg_temp.conn('generic')) e$$,
  $$VALUES (pg_temp.sealed('generic-2'), pg_temp.sealed('generic-1'), 3::bigint)$$,
  'the refused key left the current key, the previous key and the generation as they were');

SELECT wharf.set_connection_secret(pg_temp.conn('outline'), pg_temp.sealed('outline-2'));
SELECT is((SELECT previous_signing_key FROM wharf.connection_endpoint(pg_temp.conn('outline'))),
          pg_temp.sealed('outline-1'), 'an Outline rotation keeps the previous key during the overlap');
UPDATE wharf.connection_secret SET previous_valid_until = now() WHERE connection_id = pg_temp.conn('outline');
SELECT results_eq(
  $$SELECT signing_key, previous_signing_key FROM wharf.connection_endpoint(pg_temp.conn('outline'))$$,
  $$VALUES (pg_temp.sealed('outline-2'), NULL::text)$$,
  'at the end of the overlap (previous_valid_until = now()) the endpoint no longer returns the previous key');
UPDATE wharf.connection_secret SET previous_valid_until = now() - interval '1 hour'
 WHERE connection_id = pg_temp.conn('outline');
SELECT is((SELECT previous_signing_key FROM wharf.connection_endpoint(pg_temp.conn('outline'))),
          NULL::text, 'after the overlap the endpoint returns no previous key');

-- The overlap is read from the secret_overlap setting at each rotation.
SELECT wharf.set_setting('secret_overlap', '2 hours');
SELECT wharf.set_connection_secret(pg_temp.conn('forgejo'), pg_temp.sealed('forgejo-2'));
SELECT results_eq(
  $$SELECT s.previous_valid_until, e.signing_key, e.previous_signing_key
      FROM wharf.connection_secret s, wharf.connection_endpoint(s.connection_id) e
     WHERE s.connection_id = pg_temp.conn('forgejo')$$,
  $$VALUES (now() + interval '2 hours', pg_temp.sealed('forgejo-2'), pg_temp.sealed('forgejo-1'))$$,
  'a rotation keeps the previous key for the current value of secret_overlap');

-- stored_signing_keys: every encrypted key, current and previous ----------------------
SELECT results_eq(
  $$SELECT * FROM wharf.stored_signing_keys()$$,
  $$VALUES (pg_temp.conn('generic'), pg_temp.sealed('generic-2'), pg_temp.sealed('generic-1')),
           (pg_temp.conn('outline'), pg_temp.sealed('outline-2'), pg_temp.sealed('outline-1')),
           (pg_temp.conn('forgejo'), pg_temp.sealed('forgejo-2'), pg_temp.sealed('forgejo-1'))$$,
  'stored_signing_keys lists every stored signing key, current and previous (an expired previous one too), by connection, and no GitLab digest');

-- replace_signing_key_ciphertext: same key, other ciphertext, no generation bump --------
SELECT is(wharf.replace_signing_key_ciphertext(pg_temp.conn('generic'), pg_temp.sealed('generic-2'),
                                               pg_temp.sealed('generic-2-k2')),
          true, 'replace_signing_key_ciphertext replaces the current key''s ciphertext and returns true');
SELECT results_eq(
  $$SELECT signing_key, previous_signing_key FROM wharf.connection_endpoint(pg_temp.conn('generic'))$$,
  $$VALUES (pg_temp.sealed('generic-2-k2'), pg_temp.sealed('generic-1'))$$,
  'only the current key changed');
SELECT is(wharf.replace_signing_key_ciphertext(pg_temp.conn('generic'), pg_temp.sealed('generic-1'),
                                               pg_temp.sealed('generic-1-k2')),
          true, 'replace_signing_key_ciphertext replaces the previous key''s ciphertext and returns true');
SELECT results_eq(
  $$SELECT signing_key, previous_signing_key FROM wharf.connection_endpoint(pg_temp.conn('generic'))$$,
  $$VALUES (pg_temp.sealed('generic-2-k2'), pg_temp.sealed('generic-1-k2'))$$,
  'only the previous key changed');
SELECT results_eq(
  $$SELECT s.previous_valid_until, c.generation
      FROM wharf.connection_secret s JOIN wharf.connection c ON c.id = s.connection_id
     WHERE s.connection_id = pg_temp.conn('generic')$$,
  $$VALUES (now() + interval '1 day', 3::bigint)$$,
  're-encrypting changes neither the generation nor the end of the overlap');
SELECT is(wharf.replace_signing_key_ciphertext(pg_temp.conn('generic'), pg_temp.sealed('generic-2'),
                                               pg_temp.sealed('forgejo-1')),
          false, 'a from that is no longer stored (re-encrypted or rotated meanwhile) returns false');
SELECT is(wharf.replace_signing_key_ciphertext(pg_temp.conn('forgejo'), pg_temp.sealed('generic-2-k2'),
                                               pg_temp.sealed('forgejo-1')),
          false, 'a from stored for another connection returns false');
SELECT is(wharf.replace_signing_key_ciphertext(424242, pg_temp.sealed('generic-2-k2'), pg_temp.sealed('forgejo-1')),
          false, 'an unknown connection returns false');
SELECT results_eq(
  $$SELECT * FROM wharf.stored_signing_keys()$$,
  $$VALUES (pg_temp.conn('generic'), pg_temp.sealed('generic-2-k2'), pg_temp.sealed('generic-1-k2')),
           (pg_temp.conn('outline'), pg_temp.sealed('outline-2'), pg_temp.sealed('outline-1')),
           (pg_temp.conn('forgejo'), pg_temp.sealed('forgejo-2'), pg_temp.sealed('forgejo-1'))$$,
  'the calls that returned false changed nothing, and stored_signing_keys shows the re-encrypted keys');
SELECT throws_ok(format($$SELECT wharf.replace_signing_key_ciphertext(%s, %L, 'plaintext-key')$$,
                        pg_temp.conn('forgejo'), pg_temp.sealed('forgejo-2')),
                 '23514', NULL, 'replace_signing_key_ciphertext cannot store plaintext (the check constraint refuses it)');
SELECT throws_ok(format($$SELECT wharf.replace_signing_key_ciphertext(%s, NULL, %L)$$,
                        pg_temp.conn('forgejo'), pg_temp.sealed('forgejo-1')),
                 '22004', NULL, 'replace_signing_key_ciphertext rejects a NULL from');
SELECT throws_ok(format($$SELECT wharf.replace_signing_key_ciphertext(NULL, %L, %L)$$,
                        pg_temp.sealed('forgejo-2'), pg_temp.sealed('forgejo-1')),
                 '22004', NULL, 'replace_signing_key_ciphertext rejects a NULL connection');
SELECT is(pg_temp.generation('forgejo'), 3::bigint,
          'no replace_signing_key_ciphertext call bumped the Forgejo generation');

-- The check constraint: never plaintext, whoever writes ----------------------------------
SELECT throws_ok(format($$UPDATE wharf.connection_secret SET signing_key = 'plaintext-key' WHERE connection_id = %s$$,
                        pg_temp.conn('forgejo')),
                 '23514', NULL, 'a direct UPDATE of a signing key to plaintext is refused');
SELECT throws_ok(format($$UPDATE wharf.connection_secret SET previous_signing_key = 'whsec_c2VjcmV0LWtleQ=='
                            WHERE connection_id = %s$$, pg_temp.conn('forgejo')),
                 '23514', NULL, 'a direct UPDATE of a previous signing key to a whsec_ key is refused');
SELECT results_eq(
  $$SELECT convalidated FROM pg_constraint
     WHERE conrelid = 'wharf.connection_secret'::regclass AND conname = 'connection_secret_signing_key_encrypted'$$,
  $$VALUES (false)$$,
  'the constraint is NOT VALID as migrated (keys stored in plaintext before 0.2.0 stay readable)');
SELECT lives_ok($$SELECT wharf.validate_encrypted_secrets()$$,
                'validate_encrypted_secrets succeeds when every stored key is encrypted');
SELECT results_eq(
  $$SELECT convalidated FROM pg_constraint
     WHERE conrelid = 'wharf.connection_secret'::regclass AND conname = 'connection_secret_signing_key_encrypted'$$,
  $$VALUES (true)$$,
  'validate_encrypted_secrets validates the constraint');

-- GitHub and Slack secrets belong to the app ---------------------------------------
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, 'github-secret')$$, pg_temp.conn('github')),
                 '22023', NULL, 'a GitHub connection has no secret of its own');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, %L)$$, pg_temp.conn('github'),
                        pg_temp.sealed('generic-1')),
                 '22023', NULL, 'a GitHub connection has no secret of its own, even encrypted');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, 'slack-secret')$$, pg_temp.conn('slack')),
                 '22023', NULL, 'a Slack connection has no secret of its own');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, %L)$$, pg_temp.conn('slack'),
                        pg_temp.sealed('generic-1')),
                 '22023', NULL, 'a Slack connection has no secret of its own, even encrypted');
SELECT results_eq(
  $$SELECT (SELECT count(*) FROM wharf.connection_secret WHERE connection_id IN (pg_temp.conn('github'), pg_temp.conn('slack'))),
           pg_temp.generation('github'), pg_temp.generation('slack')$$,
  $$VALUES (0::bigint, 1::bigint, 1::bigint)$$,
  'a refused GitHub or Slack secret writes no secret row and leaves the generation alone');
SELECT results_eq(
  $$SELECT token_sha256, signing_key, previous_token_sha256, previous_signing_key
      FROM wharf.connection_endpoint(pg_temp.conn('github'))$$,
  $$VALUES (NULL::text, NULL::text, NULL::text, NULL::text)$$,
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
SELECT results_eq(
  $$SELECT e.token_sha256, e.previous_token_sha256, pg_temp.generation('gitlab')
      FROM wharf.connection_endpoint(pg_temp.conn('gitlab')) e$$,
  $$VALUES (pg_temp.digest('glpat-token-2'), NULL::text, 3::bigint)$$,
  'a rejected call leaves the stored digest, the (expired) previous one and the generation as they were');

-- Privileges ------------------------------------------------------------------------
SELECT function_privs_are('wharf', 'connection_endpoint', ARRAY['bigint'], 'public', ARRAY[]::text[],
                          'PUBLIC has no EXECUTE on connection_endpoint');
SELECT function_privs_are('wharf', 'set_connection_secret', ARRAY['bigint', 'text', 'boolean'], 'public', ARRAY[]::text[],
                          'PUBLIC has no EXECUTE on set_connection_secret');
SELECT ok(has_function_privilege('public', 'wharf.lifecycle_key(text, text)', 'EXECUTE'),
          'the privilege check can tell: PUBLIC may execute an ordinary helper such as lifecycle_key');
SELECT is_definer('wharf', 'connection_endpoint', ARRAY['bigint'],
                  'connection_endpoint is SECURITY DEFINER (the edge needs EXECUTE only)');
SELECT is_definer('wharf', 'set_connection_secret', ARRAY['bigint', 'text', 'boolean'],
                  'set_connection_secret is SECURITY DEFINER');
SELECT set_eq(
  $$SELECT p.oid::regprocedure::text, p.proconfig
      FROM pg_proc p
     WHERE p.oid IN ('wharf.connection_endpoint(bigint)'::regprocedure,
                     'wharf.set_connection_secret(bigint, text, boolean)'::regprocedure)$$,
  $$VALUES ('wharf.connection_endpoint(bigint)', ARRAY['search_path=pg_catalog, pg_temp']),
           ('wharf.set_connection_secret(bigint,text,boolean)', ARRAY['search_path=pg_catalog, pg_temp'])$$,
  'both SECURITY DEFINER functions pin search_path to pg_catalog, pg_temp');

-- A leaked secret is cut off at once: p_keep_previous = false keeps nothing.
INSERT INTO conn VALUES ('gitlab-leaked', wharf.upsert_connection(1, 'gitlab', 'https://gitlab.example.com', 'webhook', 'leaked'));
SELECT wharf.set_connection_secret(pg_temp.conn('gitlab-leaked'), 'glpat-cut-off-1');
SELECT wharf.set_connection_secret(pg_temp.conn('gitlab-leaked'), 'glpat-cut-off-2', false);
SELECT is((SELECT previous_token_sha256 FROM wharf.connection_endpoint(pg_temp.conn('gitlab-leaked'))), NULL,
          'rotating without keeping the previous secret leaves no previous token');
SELECT is((SELECT previous_valid_until FROM wharf.connection_secret WHERE connection_id = pg_temp.conn('gitlab-leaked')), NULL,
          '... and no overlap');
SELECT throws_ok(format($$SELECT wharf.set_connection_secret(%s, 'glpat-x', NULL)$$, pg_temp.conn('gitlab-leaked')), '22004', NULL,
                 'a NULL p_keep_previous is refused');

-- A GitLab token may arrive as its digest already: the token never reaches the server.
INSERT INTO conn VALUES ('gitlab-digest', wharf.upsert_connection(1, 'gitlab', 'https://gitlab.example.com', 'webhook', 'digest'));
SELECT wharf.set_connection_secret(pg_temp.conn('gitlab-digest'), 'sha256:' || encode(sha256('glpat-digest-only'::bytea), 'hex'));
SELECT is((SELECT token_sha256 FROM wharf.connection_endpoint(pg_temp.conn('gitlab-digest'))), encode(sha256('glpat-digest-only'::bytea), 'hex'),
          'a digest given as sha256:<hex> is stored as the digest, not hashed again');

-- The secret goes with its connection ---------------------------------------------------
DELETE FROM wharf.workspace WHERE id = 1;
SELECT is_empty($$SELECT 1 FROM wharf.connection_secret$$,
                'deleting a workspace deletes its connections'' secrets');


SELECT * FROM finish();
ROLLBACK;
