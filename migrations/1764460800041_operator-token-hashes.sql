-- Up Migration

-- Release 0.3.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.live_token_hashes()

-- ======== sql/95-operator.sql ========

-- The SHA-256 hashes, in hex, of every live (not revoked) token, as a jsonb
-- array. The operator surface keeps them in memory and refuses a token that
-- is none of them without a query, so that a flood of wrong tokens costs the
-- database a reload now and then instead of a lookup each; a token among
-- them is still checked by verify_token. A hash gives no way in: the tokens
-- are 256 random bits, and never reach the database themselves.
CREATE OR REPLACE FUNCTION wharf.live_token_hashes() RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT coalesce(jsonb_agg(encode(t.token_hash, 'hex')), '[]') FROM wharf.api_token t WHERE t.revoked_at IS NULL
$$;

REVOKE ALL ON FUNCTION wharf.list_events(bigint, text, text, integer, bigint, text, text, timestamptz, timestamptz),
  wharf.list_dead(bigint, text, integer, bigint),
  wharf.list_installation_events(text, text, integer, bigint, text, text, timestamptz, timestamptz),
  wharf.list_installation_dead(text, integer, bigint),
  wharf.show_event(bigint, bigint),
  wharf.show_installation_event(bigint),
  wharf.show_workspace(bigint),
  wharf.list_workspaces(),
  wharf.show_connection(bigint),
  wharf.list_connections(bigint),
  wharf.create_token(bigint, text, bytea),
  wharf.verify_token(bytea),
  wharf.live_token_hashes(),
  wharf.list_tokens(bigint),
  wharf.revoke_token(bigint, bigint) FROM PUBLIC;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

DROP FUNCTION wharf.live_token_hashes();
