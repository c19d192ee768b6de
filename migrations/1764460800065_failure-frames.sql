-- Up Migration

-- Where a failure was thrown, to group issues by it (written by hand; fail,
-- the issue trigger and the listings that use them come from sql/ next).
--
-- An issue said only "TypeError": every TypeError of one event type was one
-- issue. The worker now passes the top stack frames of the application's own
-- code to fail (relative path:line:column and function name, never a message
-- or an argument), the attempt history keeps them, and an issue is keyed by
-- its error class and a fingerprint of those frames as well. Rows written
-- before, and failures of workers that pass no frames, have no frames and the
-- fingerprint '' (the grouping of before). Adds columns with constant
-- defaults: rewrites nothing. The unique index is rebuilt over the issue
-- table only, bounded by issue_limit per workspace.
ALTER TABLE wharf.event_attempt ADD COLUMN frames text[];
ALTER TABLE wharf.issue ADD COLUMN fingerprint text NOT NULL DEFAULT '', ADD COLUMN frames text[];
DROP INDEX wharf.uq_issue_key;
CREATE UNIQUE INDEX uq_issue_key ON wharf.issue (workspace_id, provider, event_type, error_class, fingerprint) NULLS NOT DISTINCT;

-- Down Migration

-- The issues of one class split by their frames go back into one: the first
-- of each group keeps the sums, the others go.
WITH merged AS (
  SELECT min(id) AS id, sum(failures) AS failures, sum(dead) AS dead, min(first_seen_at) AS first_seen_at,
         max(last_seen_at) AS last_seen_at, max(sample_event_id) AS sample_event_id
    FROM wharf.issue
   GROUP BY workspace_id, provider, event_type, error_class
  HAVING count(*) > 1
), gone AS (
  DELETE FROM wharf.issue i
   USING merged m
   JOIN wharf.issue k ON k.id = m.id
   WHERE i.id <> m.id AND i.workspace_id IS NOT DISTINCT FROM k.workspace_id AND i.provider = k.provider
     AND i.event_type = k.event_type AND i.error_class = k.error_class
)
UPDATE wharf.issue i
   SET failures = m.failures, dead = m.dead, first_seen_at = m.first_seen_at, last_seen_at = m.last_seen_at,
       sample_event_id = m.sample_event_id
  FROM merged m
 WHERE i.id = m.id;
DROP INDEX wharf.uq_issue_key;
CREATE UNIQUE INDEX uq_issue_key ON wharf.issue (workspace_id, provider, event_type, error_class) NULLS NOT DISTINCT;
ALTER TABLE wharf.issue DROP COLUMN frames, DROP COLUMN fingerprint;
ALTER TABLE wharf.event_attempt DROP COLUMN frames;
