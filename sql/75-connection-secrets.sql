-- Connection secrets: what the edge needs to authenticate a delivery posted to
-- a per-connection endpoint (GitLab, Outline, Forgejo/Gitea, generic), and how
-- an operator sets it. App-level secrets (GitHub App, Slack app) are not here:
-- the edge reads them from its own environment.
--
-- PL/pgSQL on purpose: sql/ is applied before the migration that creates
-- wharf.connection_secret, and only PL/pgSQL bodies are resolved at first call.

-- The endpoint of connection p_connection_id in one round trip: its provider,
-- source and route, and its secret (token_sha256 as hex, or signing_key). No
-- row: no such connection. SECURITY DEFINER: the edge needs EXECUTE only.
CREATE OR REPLACE FUNCTION wharf.connection_endpoint(p_connection_id bigint)
RETURNS TABLE (provider text, source text, route jsonb, token_sha256 text, signing_key text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN QUERY
  SELECT c.provider, c.source, c.route, encode(s.token_sha256, 'hex'), s.signing_key
    FROM wharf.connection c
    LEFT JOIN wharf.connection_secret s ON s.connection_id = c.id
   WHERE c.id = p_connection_id;
END $$;

-- Sets or rotates the webhook secret of connection p_connection_id: a GitLab
-- token is stored as its SHA-256 only; other providers' keys as given (generic:
-- a Standard Webhooks `whsec_<base64>` key). 22004 NULL/empty, P0002 unknown
-- connection, 22023 a provider with app-level secrets or a malformed key.
CREATE OR REPLACE FUNCTION wharf.set_connection_secret(p_connection_id bigint, p_secret text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_provider text;
BEGIN
  IF p_connection_id IS NULL OR p_secret IS NULL OR p_secret = '' THEN
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
  IF v_provider = 'generic' AND p_secret !~ '^whsec_[A-Za-z0-9+/]+={0,2}$' THEN
    RAISE EXCEPTION 'wharf.set_connection_secret: a Standard Webhooks key is whsec_<base64>'
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
     SET token_sha256 = EXCLUDED.token_sha256, signing_key = EXCLUDED.signing_key, updated_at = now();
  UPDATE wharf.connection SET generation = generation + 1, updated_at = now() WHERE id = p_connection_id;
END $$;

REVOKE ALL ON FUNCTION wharf.connection_endpoint(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION wharf.set_connection_secret(bigint, text) FROM PUBLIC;
