-- Up Migration

-- GitHub and Forgejo/Gitea sign the body alone, not the delivery id or event
-- type headers: the edge passes the raw body's SHA-256 to admit, which treats
-- a body already stored from the same source within replay_window as a
-- duplicate, whatever headers come with it (written by hand; admit itself
-- comes in the next migration, from sql/).
ALTER TABLE wharf.provider_event ADD COLUMN body_sha256 bytea CHECK (octet_length(body_sha256) = 32);

-- admit: a body-signed delivery's earlier rows from the same source.
CREATE INDEX ix_provider_event_body_dedupe ON wharf.provider_event (source, body_sha256)
  WHERE body_sha256 IS NOT NULL;

-- Down Migration

DROP INDEX wharf.ix_provider_event_body_dedupe;
ALTER TABLE wharf.provider_event DROP COLUMN body_sha256;
