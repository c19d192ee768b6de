-- Up Migration

-- Workspace API tokens for the operator API. Only a SHA-256 hash of a token
-- is stored: the token itself is shown once, when it is created, and never
-- reaches the database, so neither a dump nor a statement log can leak it.
CREATE TABLE wharf.api_token (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  workspace_id bigint NOT NULL REFERENCES wharf.workspace (id) ON DELETE CASCADE,
  name         text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}$'),
  token_hash   bytea NOT NULL CHECK (length(token_hash) = 32),
  created_at   timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  revoked_at   timestamptz
);

-- verify_token looks a presented token up by its hash.
CREATE UNIQUE INDEX uq_api_token_hash ON wharf.api_token (token_hash);

-- A name says which token acted (replayed_by): one live token per name and workspace.
CREATE UNIQUE INDEX uq_api_token_live_name ON wharf.api_token (workspace_id, name)
  WHERE revoked_at IS NULL;

-- Down Migration

DROP TABLE wharf.api_token;
