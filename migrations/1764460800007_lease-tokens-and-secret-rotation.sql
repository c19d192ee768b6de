-- Up Migration

-- Tables for release 0.2.0's tenant isolation (written by hand; the functions
-- that use them come in the next migration, from sql/).

-- A random token per lease, drawn by claim: the handler's step and fence
-- present it, so that a role that may call them cannot act on a lease it was
-- not given by guessing an event id and a (small, counting) epoch.
ALTER TABLE wharf.provider_event ADD COLUMN lease_token uuid;

-- Rotating a connection's secret keeps the previous one valid until
-- previous_valid_until (the `secret_overlap` setting), so that deliveries
-- signed while the provider's side is being changed are not dropped.
ALTER TABLE wharf.connection_secret
  ADD COLUMN previous_token_sha256 bytea CHECK (octet_length(previous_token_sha256) = 32),
  ADD COLUMN previous_signing_key  text CHECK (previous_signing_key <> ''),
  ADD COLUMN previous_valid_until  timestamptz;

-- Signing keys are stored encrypted (AES-256-GCM under the key ring of
-- WHARF_SECRET_KEYS, by the edge's and the CLI's own code): never plaintext.
-- NOT VALID: keys stored in plaintext before this release stay readable until
-- `wharf secrets reencrypt` encrypts them and validates the constraint.
ALTER TABLE wharf.connection_secret
  ADD CONSTRAINT connection_secret_signing_key_encrypted
  CHECK (signing_key ~ '^aes256gcm:[A-Za-z0-9_.-]{1,32}:[A-Za-z0-9+/]+={0,2}:[A-Za-z0-9+/]+={0,2}$'
         AND previous_signing_key ~ '^aes256gcm:[A-Za-z0-9_.-]{1,32}:[A-Za-z0-9+/]+={0,2}:[A-Za-z0-9+/]+={0,2}$')
  NOT VALID;

INSERT INTO wharf.setting (key, value, type) VALUES ('secret_overlap', '1 day', 'interval');

-- Down Migration

DELETE FROM wharf.setting WHERE key = 'secret_overlap';
ALTER TABLE wharf.connection_secret DROP CONSTRAINT connection_secret_signing_key_encrypted;
ALTER TABLE wharf.connection_secret
  DROP COLUMN previous_token_sha256,
  DROP COLUMN previous_signing_key,
  DROP COLUMN previous_valid_until;
ALTER TABLE wharf.provider_event DROP COLUMN lease_token;
