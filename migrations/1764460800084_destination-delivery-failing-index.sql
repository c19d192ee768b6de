-- Up Migration

-- The events of a destination's issue (wharf.issue_events, sql/97): the
-- deliveries to it that failed and have not succeeded since, newest event
-- first, read in index order a page at a time instead of sorting every
-- undelivered row of the destination. A delivery enters it at its first
-- failure and leaves it when done; both updates change indexed columns
-- already (state, next_attempt_at), so no heap-only update is lost.
CREATE INDEX ix_destination_delivery_failing ON wharf.destination_delivery (destination_id, event_id DESC)
  WHERE state <> 'DONE' AND error_class IS NOT NULL;

-- Down Migration

DROP INDEX wharf.ix_destination_delivery_failing;
