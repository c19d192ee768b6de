-- Up Migration

-- The state each lease's end left its row in (written by hand; fail,
-- release and reap, which write it, come from sql/ next).
--
-- A fail or a release repeated after its first try committed (its reply lost
-- in a failover) answers as the first try did (contract v6): fail with the
-- state it left, QUEUED or DEAD. The attempt history row of that epoch says
-- how the lease ended (its kind), but not whether the row went back to the
-- queue or died: a transient or unknown failure can do either, and the row
-- itself may have been claimed again or replayed since. So the history keeps
-- it. NULL for a lease that ended before this column: a repeat of its fail
-- answers NULL, as before. Adds no index and rewrites nothing.
ALTER TABLE wharf.event_attempt ADD COLUMN left_state text CHECK (left_state IN ('QUEUED', 'DEAD'));

-- Down Migration

ALTER TABLE wharf.event_attempt DROP COLUMN left_state;
