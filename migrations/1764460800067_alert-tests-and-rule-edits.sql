-- Up Migration

-- Alerts sent on request to try a rule's channel are recorded as tests, so
-- that the sent-alerts list, the body and the Slack text mark them; a rule
-- edited in place keeps its id, and so its alerts, and says who edited it
-- last and when. Adding a column with a constant default rewrites no row.
ALTER TABLE wharf.alert ADD COLUMN test boolean NOT NULL DEFAULT false;
ALTER TABLE wharf.alert_rule ADD COLUMN updated_by text, ADD COLUMN updated_at timestamptz;

-- Down Migration

ALTER TABLE wharf.alert_rule DROP COLUMN updated_at, DROP COLUMN updated_by;
ALTER TABLE wharf.alert DROP COLUMN test;
