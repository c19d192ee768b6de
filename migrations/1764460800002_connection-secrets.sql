-- Up Migration

-- Per-connection webhook secrets, apart from wharf.connection so that no
-- listing of connections can carry them. A GitLab token is kept only as its
-- SHA-256 (the edge hashes the presented token and compares digests); an HMAC
-- key (Outline, Forgejo/Gitea, Standard Webhooks `whsec_…`) is kept as given,
-- because verifying an HMAC needs the key itself. The functions that read and
-- write this table are in sql/75-connection-secrets.sql.
CREATE TABLE wharf.connection_secret (
  connection_id bigint PRIMARY KEY REFERENCES wharf.connection (id) ON DELETE CASCADE,
  token_sha256  bytea CHECK (octet_length(token_sha256) = 32),
  signing_key   text CHECK (signing_key <> ''),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  CHECK (num_nonnulls(token_sha256, signing_key) = 1)
);

-- Down Migration

DROP TABLE wharf.connection_secret;
