-- Up Migration

-- An operator may move a stuck scope's head to the dead letters while a
-- handler retries it: the action is recorded with that lease's epoch, and
-- the lease, if it ends in a failure (fail, or the reaper), leaves the event
-- DEAD instead of queued for another retry (sql/98). fail and reap look for
-- such an action on every failed lease: a probe of an index that holds a
-- row only while an operator has asked.
ALTER TABLE wharf.scope_action ADD COLUMN after_lease_epoch bigint;
CREATE INDEX ix_scope_action_after_lease ON wharf.scope_action (event_id, after_lease_epoch)
  WHERE after_lease_epoch IS NOT NULL;

-- Down Migration

DROP INDEX wharf.ix_scope_action_after_lease;
ALTER TABLE wharf.scope_action DROP COLUMN after_lease_epoch;
