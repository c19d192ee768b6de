-- Connection secrets: what the edge needs to authenticate a delivery posted to
-- a per-connection endpoint (GitLab, Outline, Forgejo/Gitea, generic), and how
-- an operator sets it. App-level secrets (GitHub App, Slack app) are not here:
-- the edge reads them from its own environment.
--
-- A GitLab token is kept as its SHA-256 only. An HMAC key is kept encrypted
-- (AES-256-GCM, `aes256gcm:<key id>:<iv>:<ciphertext>`): the edge and the CLI
-- encrypt and decrypt with the key ring of WHARF_SECRET_KEYS, which the
-- database never sees. A rotated secret stays valid for `secret_overlap`.

-- The endpoint of connection p_connection_id in one round trip: its provider,
-- source and route, its secret (token_sha256 as hex, or the encrypted
-- signing_key), and the previous secret while its overlap lasts. No row: no
-- such connection. SECURITY DEFINER: the edge needs EXECUTE only.
CREATE OR REPLACE FUNCTION wharf.connection_endpoint(p_connection_id bigint)
RETURNS TABLE (provider text, source text, route jsonb, token_sha256 text, signing_key text,
               previous_token_sha256 text, previous_signing_key text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN QUERY
  SELECT c.provider, c.source, c.route, encode(s.token_sha256, 'hex'), s.signing_key,
         CASE WHEN s.previous_valid_until > now() THEN encode(s.previous_token_sha256, 'hex') END,
         CASE WHEN s.previous_valid_until > now() THEN s.previous_signing_key END
    FROM wharf.connection c
    LEFT JOIN wharf.connection_secret s ON s.connection_id = c.id
   WHERE c.id = p_connection_id;
END $$;

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
  PERFORM wharf.lock_connection_for_change(p_connection_id);
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

-- Every encrypted signing key, current and previous, for `wharf secrets
-- reencrypt` (keys stored in plaintext before release 0.2.0 included).
CREATE OR REPLACE FUNCTION wharf.stored_signing_keys()
RETURNS TABLE (connection_id bigint, signing_key text, previous_signing_key text)
LANGUAGE sql STABLE AS $$
  SELECT s.connection_id, s.signing_key, s.previous_signing_key
    FROM wharf.connection_secret s
   WHERE s.signing_key IS NOT NULL OR s.previous_signing_key IS NOT NULL
   ORDER BY s.connection_id
$$;

-- Replaces the stored text p_from of connection p_connection_id's signing key
-- (current or previous) by p_to, the same key encrypted under another key of
-- the ring. The key itself does not change: no generation bump. False when
-- p_from is no longer stored (rotated meanwhile).
CREATE OR REPLACE FUNCTION wharf.replace_signing_key_ciphertext(p_connection_id bigint, p_from text, p_to text)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  IF p_connection_id IS NULL OR p_from IS NULL OR p_to IS NULL THEN
    RAISE EXCEPTION 'wharf.replace_signing_key_ciphertext: connection, from and to are required'
      USING ERRCODE = '22004';
  END IF;
  UPDATE wharf.connection_secret
     SET signing_key          = CASE WHEN signing_key = p_from THEN p_to ELSE signing_key END,
         previous_signing_key = CASE WHEN previous_signing_key = p_from THEN p_to ELSE previous_signing_key END,
         updated_at           = now()
   WHERE connection_id = p_connection_id AND p_from IN (signing_key, previous_signing_key);
  RETURN FOUND;
END $$;

-- Once every signing key is encrypted: the constraint that keeps them so
-- covers the rows stored before release 0.2.0 too.
CREATE OR REPLACE FUNCTION wharf.validate_encrypted_secrets() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  ALTER TABLE wharf.connection_secret VALIDATE CONSTRAINT connection_secret_signing_key_encrypted;
END $$;

REVOKE ALL ON FUNCTION wharf.connection_endpoint(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION wharf.set_connection_secret(bigint, text, boolean) FROM PUBLIC;
-- The owner's alone, like migrations.
REVOKE ALL ON FUNCTION wharf.stored_signing_keys(), wharf.replace_signing_key_ciphertext(bigint, text, text),
  wharf.validate_encrypted_secrets() FROM PUBLIC;
