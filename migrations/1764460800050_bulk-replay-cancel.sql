-- Up Migration

-- A running bulk replay can be cancelled (issue 42), written by hand; the
-- functions come from sql/ next. A cancelled replay is finished (finished_at:
-- no runner takes another batch of it, retention forgets it like any
-- finished one) and says who stopped it and when; the events it replayed
-- before stay replayed.
ALTER TABLE wharf.bulk_replay ADD COLUMN cancelled_by text, ADD COLUMN cancelled_at timestamptz;

-- Down Migration

ALTER TABLE wharf.bulk_replay DROP COLUMN cancelled_by, DROP COLUMN cancelled_at;
