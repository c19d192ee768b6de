-- Up Migration

-- The providers Wharf receives from, in one table (written by hand): a row
-- per provider and where its secret lives (`app`: the edge's environment;
-- `token`: a connection's token, stored as its SHA-256; `signing_key`: a
-- connection's HMAC key, stored encrypted). The list was written four times
-- (a CHECK of wharf.connection, check_provider, admission_rule_broken,
-- set_connection_secret); now a connection's provider is a foreign key here
-- and the functions read this table. Its TypeScript twin is db/providers.ts;
-- test/db/providers.test.ts keeps the two equal. A new provider is a row.
CREATE TABLE wharf.provider (
  name   text PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9_]{0,31}$'),
  secret text NOT NULL CHECK (secret IN ('app', 'token', 'signing_key'))
);

INSERT INTO wharf.provider (name, secret) VALUES
  ('github', 'app'), ('gitlab', 'token'), ('slack', 'app'), ('outline', 'signing_key'),
  ('forgejo', 'signing_key'), ('generic', 'signing_key'),
  ('stripe', 'signing_key'), ('shopify', 'signing_key'), ('linear', 'signing_key'),
  ('paddle', 'signing_key'), ('zoom', 'signing_key'), ('twilio', 'signing_key'),
  ('bitbucket', 'signing_key'), ('jira', 'signing_key'), ('hmac', 'signing_key');

ALTER TABLE wharf.connection DROP CONSTRAINT connection_provider_check;
ALTER TABLE wharf.connection
  ADD CONSTRAINT connection_provider_fkey FOREIGN KEY (provider) REFERENCES wharf.provider (name);

-- Down Migration

ALTER TABLE wharf.connection DROP CONSTRAINT connection_provider_fkey;
ALTER TABLE wharf.connection ADD CONSTRAINT connection_provider_check
  CHECK (provider = ANY (ARRAY['github', 'gitlab', 'slack', 'outline', 'forgejo', 'generic'])) NOT VALID;
DROP TABLE wharf.provider;
