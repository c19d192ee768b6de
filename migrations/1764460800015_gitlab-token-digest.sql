-- Up Migration

-- Release 0.2.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   changed  function wharf.set_connection_secret(bigint,text,boolean)

-- ======== sql/75-connection-secrets.sql ========

-- Sets or rotates the webhook secret of connection p_connection_id: a GitLab
-- token is stored as its SHA-256 only, and may arrive as that digest
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
END $$;

REVOKE ALL ON FUNCTION wharf.set_connection_secret(bigint, text, boolean) FROM PUBLIC;

-- Down Migration

-- The released text of everything the up changed.

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
         CASE WHEN v_provider = 'gitlab' THEN sha256(convert_to(p_secret, 'UTF8')) END,
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
