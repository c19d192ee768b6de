-- Up Migration

-- The connections that are PAUSED (written by hand; the claim that reads it
-- comes from sql/30-claim-lease.sql next).
--
-- A claim parks the candidates whose head's connection is PAUSED, which
-- looks every candidate up a second time (scope, head, connection, by key):
-- about 8 % of a drained event's instructions on an inbox where no
-- connection is paused, which is nearly always (bench/RESULTS.md §3b). A
-- claim now asks this index first whether any connection is PAUSED, one
-- descent into an index that is almost always empty, and parks only when
-- one is. wharf.scopes_stuck_since asks the same question.
CREATE INDEX ix_connection_paused ON wharf.connection (id) WHERE state = 'PAUSED';

-- Down Migration

DROP INDEX wharf.ix_connection_paused;
