-- Up Migration

-- Release 0.3.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   changed  function wharf.admission_rule_broken(text,text,text,text,jsonb,jsonb,text)
--   changed  function wharf.check_provider(text)
--   changed  function wharf.safe_headers(jsonb)
--   changed  function wharf.set_connection_secret(bigint,text,boolean)

-- ======== sql/70-connections.sql ========

-- Raises 22023 unless p_provider is one Wharf knows: a row of the registry
-- wharf.provider (its TypeScript twin is db/providers.ts).
CREATE OR REPLACE FUNCTION wharf.check_provider(p_provider text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF p_provider IS NULL OR NOT EXISTS (SELECT FROM wharf.provider WHERE name = p_provider) THEN
    RAISE EXCEPTION 'wharf: unknown provider %', coalesce(quote_literal(p_provider), 'NULL')
      USING ERRCODE = '22023';
  END IF;
END $$;

-- ======== sql/75-connection-secrets.sql ========

-- Sets or rotates the webhook secret of connection p_connection_id: a GitLab
-- token (a provider whose secret is a `token` in wharf.provider) is stored
-- as its SHA-256 only, and may arrive as that digest
-- already (`sha256:<64 hex>`), so that the token itself never reaches the
-- server (nor a statement log); other providers' keys arrive
-- encrypted (aes256gcm:…) and are stored as given. The secret it replaces
-- stays valid for `secret_overlap` unless p_keep_previous is false (a leaked
-- secret: cut it off at once); a key stored in plaintext before 0.2.0 is not
-- kept. 22004 NULL/empty, P0002 unknown connection, 22023 a provider with
-- app-level secrets or a key not encrypted.
CREATE OR REPLACE FUNCTION wharf.set_connection_secret(
  p_connection_id bigint, p_secret text, p_keep_previous boolean DEFAULT true)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_provider text;
  v_place    text;
BEGIN
  IF p_connection_id IS NULL OR p_secret IS NULL OR p_secret = '' OR p_keep_previous IS NULL THEN
    RAISE EXCEPTION 'wharf.set_connection_secret: connection and secret are required'
      USING ERRCODE = '22004';
  END IF;
  SELECT c.provider, p.secret INTO v_provider, v_place
    FROM wharf.connection c JOIN wharf.provider p ON p.name = c.provider
   WHERE c.id = p_connection_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: unknown connection %', p_connection_id USING ERRCODE = 'P0002';
  END IF;
  IF v_place = 'app' THEN
    RAISE EXCEPTION 'wharf.set_connection_secret: % secrets belong to the app, not the connection',
      v_provider USING ERRCODE = '22023';
  END IF;
  IF v_place = 'signing_key'
     AND p_secret !~ '^aes256gcm:[A-Za-z0-9_.-]{1,32}:[A-Za-z0-9+/]+={0,2}:[A-Za-z0-9+/]+={0,2}$' THEN
    RAISE EXCEPTION 'wharf.set_connection_secret: a signing key is stored encrypted with the key ring (WHARF_SECRET_KEYS)'
      USING ERRCODE = '22023';
  END IF;

  -- A secret is part of the connection's configuration: same lock, same
  -- generation bump as every other change (sql/70-connections.sql).
  PERFORM wharf.lock_lifecycle('connection', p_connection_id::text);
  INSERT INTO wharf.connection_secret (connection_id, token_sha256, signing_key)
  SELECT p_connection_id,
         CASE WHEN v_place <> 'token' THEN NULL
              WHEN p_secret ~ '^sha256:[0-9a-f]{64}$' THEN decode(substr(p_secret, 8), 'hex')
              ELSE sha256(convert_to(p_secret, 'UTF8')) END,
         CASE WHEN v_place <> 'token' THEN p_secret END
  ON CONFLICT (connection_id) DO UPDATE
     SET previous_token_sha256 = CASE WHEN p_keep_previous THEN connection_secret.token_sha256 END,
         previous_signing_key  = CASE WHEN p_keep_previous AND connection_secret.signing_key LIKE 'aes256gcm:%'
                                      THEN connection_secret.signing_key END,
         previous_valid_until  = CASE WHEN p_keep_previous THEN now() + wharf.setting_interval('secret_overlap') END,
         token_sha256 = EXCLUDED.token_sha256, signing_key = EXCLUDED.signing_key, updated_at = now();
  UPDATE wharf.connection SET generation = generation + 1, updated_at = now() WHERE id = p_connection_id;
END $$;

REVOKE ALL ON FUNCTION wharf.set_connection_secret(bigint, text, boolean) FROM PUBLIC;

-- ======== sql/80-admission.sql ========

-- The headers kept with an event: lower-cased names, without credentials or
-- signatures whatever the edge sent. Every provider's signature header has
-- `signature` or `hmac` in its name (x-hub-signature-256, stripe-signature,
-- x-shopify-hmac-sha256, x-twilio-signature, x-zm-signature…);
-- test/edge/provider-registry.test.ts checks each adapter's against this.
CREATE OR REPLACE FUNCTION wharf.safe_headers(p_headers jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  c_credentials CONSTANT text[] := ARRAY['authorization', 'proxy-authorization', 'cookie', 'set-cookie',
                                         'x-gitlab-token'];
BEGIN
  -- Names already lower-case and none a signature (what the edge sends: Web
  -- Headers lower-case them, and it keeps no signature): drop the credentials
  -- by name in one expression. The query below costs three times as much,
  -- on every admission.
  IF jsonb_typeof(p_headers) = 'object'
     AND NOT jsonb_path_exists(p_headers, '$.keyvalue() ? (@.key like_regex "[^a-z0-9_-]|signature|hmac")') THEN
    RETURN p_headers - c_credentials;
  END IF;
  RETURN (
    SELECT coalesce(jsonb_object_agg(lower(h.key), h.value), '{}')
      FROM jsonb_each(CASE WHEN jsonb_typeof(p_headers) = 'object' THEN p_headers ELSE '{}' END) h
     WHERE lower(h.key) <> ALL (c_credentials)
       AND lower(h.key) NOT LIKE '%signature%' AND lower(h.key) NOT LIKE '%hmac%');
END $$;

-- Which rule of admit's arguments a delivery breaks, if any: 1, a missing
-- argument; 2, an unknown provider; 3, a route that is not an object; 4, a
-- body digest that is not lower-case hex; 5, a delivery key or event type
-- longer than 255 characters (the edge's bound, and an index entry's).
-- Expressions without FROM, so that the planner inlines them; the provider
-- is looked up in the registry (wharf.provider) by a sub-select, which keeps
-- that so, and only when the other arguments are present.
CREATE OR REPLACE FUNCTION wharf.admission_rule_broken(
  p_provider text, p_source text, p_delivery_key text, p_event_type text,
  p_route jsonb, p_payload jsonb, p_body_sha256 text)
RETURNS integer
LANGUAGE sql STABLE AS $$
  SELECT CASE
    WHEN p_provider IS NULL OR p_source IS NULL OR p_source = '' OR p_delivery_key IS NULL
         OR p_delivery_key = '' OR p_event_type IS NULL OR p_event_type = '' OR p_payload IS NULL THEN 1
    WHEN NOT EXISTS (SELECT FROM wharf.provider WHERE name = p_provider) THEN 2
    WHEN jsonb_typeof(coalesce(p_route, '{}')) <> 'object' THEN 3
    WHEN p_body_sha256 !~ '^[0-9a-f]{64}$' THEN 4
    WHEN length(p_delivery_key) > 255 OR length(p_event_type) > 255 THEN 5
  END
$$;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

CREATE OR REPLACE FUNCTION wharf.admission_rule_broken(p_provider text, p_source text, p_delivery_key text, p_event_type text, p_route jsonb, p_payload jsonb, p_body_sha256 text)
 RETURNS integer
 LANGUAGE sql
 IMMUTABLE
AS $function$
  SELECT CASE
    WHEN p_provider IS NULL OR p_source IS NULL OR p_source = '' OR p_delivery_key IS NULL
         OR p_delivery_key = '' OR p_event_type IS NULL OR p_event_type = '' OR p_payload IS NULL THEN 1
    WHEN p_provider NOT IN ('github', 'gitlab', 'slack', 'outline', 'forgejo', 'generic') THEN 2
    WHEN jsonb_typeof(coalesce(p_route, '{}')) <> 'object' THEN 3
    WHEN p_body_sha256 !~ '^[0-9a-f]{64}$' THEN 4
    WHEN length(p_delivery_key) > 255 OR length(p_event_type) > 255 THEN 5
  END
$function$;
GRANT EXECUTE ON FUNCTION wharf.admission_rule_broken(text,text,text,text,jsonb,jsonb,text) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.check_provider(p_provider text)
 RETURNS void
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
BEGIN
  IF p_provider IS NULL OR p_provider NOT IN ('github', 'gitlab', 'slack', 'outline', 'forgejo', 'generic') THEN
    RAISE EXCEPTION 'wharf: unknown provider %', coalesce(quote_literal(p_provider), 'NULL')
      USING ERRCODE = '22023';
  END IF;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.check_provider(text) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.safe_headers(p_headers jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
DECLARE
  c_credentials CONSTANT text[] := ARRAY['authorization', 'proxy-authorization', 'cookie', 'set-cookie',
                                         'x-gitlab-token'];
BEGIN
  -- Names already lower-case and none a signature (what the edge sends: Web
  -- Headers lower-case them, and it keeps no signature): drop the credentials
  -- by name in one expression. The query below costs three times as much,
  -- on every admission.
  IF jsonb_typeof(p_headers) = 'object'
     AND NOT jsonb_path_exists(p_headers, '$.keyvalue() ? (@.key like_regex "[^a-z0-9_-]|signature")') THEN
    RETURN p_headers - c_credentials;
  END IF;
  RETURN (
    SELECT coalesce(jsonb_object_agg(lower(h.key), h.value), '{}')
      FROM jsonb_each(CASE WHEN jsonb_typeof(p_headers) = 'object' THEN p_headers ELSE '{}' END) h
     WHERE lower(h.key) <> ALL (c_credentials)
       AND lower(h.key) NOT LIKE '%signature%');
END $function$;
GRANT EXECUTE ON FUNCTION wharf.safe_headers(jsonb) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.set_connection_secret(p_connection_id bigint, p_secret text, p_keep_previous boolean DEFAULT true)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_provider text;
BEGIN
  IF p_connection_id IS NULL OR p_secret IS NULL OR p_secret = '' OR p_keep_previous IS NULL THEN
    RAISE EXCEPTION 'wharf.set_connection_secret: connection and secret are required'
      USING ERRCODE = '22004';
  END IF;
  SELECT provider INTO v_provider FROM wharf.connection WHERE id = p_connection_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: unknown connection %', p_connection_id USING ERRCODE = 'P0002';
  END IF;
  IF v_provider IN ('github', 'slack') THEN
    RAISE EXCEPTION 'wharf.set_connection_secret: % secrets belong to the app, not the connection',
      v_provider USING ERRCODE = '22023';
  END IF;
  IF v_provider <> 'gitlab'
     AND p_secret !~ '^aes256gcm:[A-Za-z0-9_.-]{1,32}:[A-Za-z0-9+/]+={0,2}:[A-Za-z0-9+/]+={0,2}$' THEN
    RAISE EXCEPTION 'wharf.set_connection_secret: a signing key is stored encrypted with the key ring (WHARF_SECRET_KEYS)'
      USING ERRCODE = '22023';
  END IF;

  -- A secret is part of the connection's configuration: same lock, same
  -- generation bump as every other change (sql/70-connections.sql).
  PERFORM wharf.lock_lifecycle('connection', p_connection_id::text);
  INSERT INTO wharf.connection_secret (connection_id, token_sha256, signing_key)
  SELECT p_connection_id,
         CASE WHEN v_provider <> 'gitlab' THEN NULL
              WHEN p_secret ~ '^sha256:[0-9a-f]{64}$' THEN decode(substr(p_secret, 8), 'hex')
              ELSE sha256(convert_to(p_secret, 'UTF8')) END,
         CASE WHEN v_provider <> 'gitlab' THEN p_secret END
  ON CONFLICT (connection_id) DO UPDATE
     SET previous_token_sha256 = CASE WHEN p_keep_previous THEN connection_secret.token_sha256 END,
         previous_signing_key  = CASE WHEN p_keep_previous AND connection_secret.signing_key LIKE 'aes256gcm:%'
                                      THEN connection_secret.signing_key END,
         previous_valid_until  = CASE WHEN p_keep_previous THEN now() + wharf.setting_interval('secret_overlap') END,
         token_sha256 = EXCLUDED.token_sha256, signing_key = EXCLUDED.signing_key, updated_at = now();
  UPDATE wharf.connection SET generation = generation + 1, updated_at = now() WHERE id = p_connection_id;
END $function$;
REVOKE ALL ON FUNCTION wharf.set_connection_secret(bigint,text,boolean) FROM PUBLIC;
