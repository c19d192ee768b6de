-- Up Migration

-- Admission reads the recipients of a delivery twice (before and under its
-- lifecycle locks): the connections of one provider and source, then their
-- subscriptions. Without an index that leads with provider and source that
-- read walked every connection of every workspace (uq_connection_natural_key
-- leads with the workspace), twice per delivery. Written by hand; the
-- functions that use it come from sql/ next.
CREATE INDEX ix_connection_recipients ON wharf.connection (provider, source);

-- Down Migration

DROP INDEX wharf.ix_connection_recipients;
