-- Up Migration

-- Month two in production (issue 40), written by hand; the functions come
-- from sql/ next.
--
-- A transient failure has a ceiling: a row whose transient failures have
-- lasted longer than transient_max_age goes DEAD with its error class
-- (wharf.fail), so an upstream failing forever for one payload cannot hold
-- its scope forever. transient_since is when the first of them happened;
-- a replay forgets it. Only fail and replay write it: the lease path stays
-- heap-only (no index names it).
ALTER TABLE wharf.provider_event ADD COLUMN transient_since timestamptz;

-- A scope is stuck when its head has been failing, or due and unclaimed,
-- for longer than stuck_after (wharf.queue_stats, the worker's gauges).
-- failing_since is when its head's current run of failures began (the scope
-- trigger sets it when a lease of the head fails or expires, and clears it
-- when the head is handled or dead). Its index holds failing scopes only,
-- so counting them reads those and no other.
ALTER TABLE wharf.scope ADD COLUMN failing_since timestamptz;
CREATE INDEX ix_scope_failing ON wharf.scope (failing_since) WHERE failing_since IS NOT NULL;

-- A claim reads only the heads it can take. head_kind is the head's
-- `provider:event_type`; ix_scope_claim now leads with it, so a claim walks
-- the kinds it handles (one descent each, found by a skip scan) instead of
-- every due head in ready order: heads of a type no host of this deployment
-- handles (a rolling deploy, a type nobody handles yet) cost it nothing.
-- Scope rows are updated with every claim and completion and were never
-- heap-only; the index keeps its count and width (one text column more).
ALTER TABLE wharf.scope ADD COLUMN head_kind text;
UPDATE wharf.scope s SET head_kind = e.provider || ':' || e.event_type
  FROM wharf.provider_event e WHERE e.id = s.head_id;
DROP INDEX wharf.ix_scope_claim;
CREATE INDEX ix_scope_claim ON wharf.scope (head_kind, ready_at, head_id)
  WHERE head_id IS NOT NULL AND leased_id IS NULL AND active;

-- Retention of what grows with traffic besides the inbox (wharf.purge_logs),
-- read oldest first through these indexes (admission_log has ix_admission_log_at).
CREATE INDEX ix_replay_audit_at ON wharf.replay_audit (at);
CREATE INDEX ix_bulk_replay_finished ON wharf.bulk_replay (finished_at) WHERE finished_at IS NOT NULL;

INSERT INTO wharf.setting (key, value, type) VALUES
  ('transient_max_age', '24 hours', 'interval'),
  ('stuck_after', '15 minutes', 'interval'),
  ('log_retention', '30 days', 'interval'),
  ('audit_retention', '365 days', 'interval'),
  -- Rows of each kind one retention transaction deletes at most: about a
  -- quarter of a second of work on a small machine.
  ('purge_batch', '5000', 'integer')
ON CONFLICT (key) DO NOTHING;

-- Down Migration

DROP INDEX wharf.ix_scope_claim;
CREATE INDEX ix_scope_claim ON wharf.scope (ready_at, head_id) WHERE head_id IS NOT NULL AND leased_id IS NULL AND active;
ALTER TABLE wharf.scope DROP COLUMN head_kind;

DELETE FROM wharf.setting WHERE key IN ('transient_max_age', 'stuck_after', 'log_retention', 'audit_retention', 'purge_batch');
DROP INDEX wharf.ix_bulk_replay_finished;
DROP INDEX wharf.ix_replay_audit_at;
DROP INDEX wharf.ix_scope_failing;
ALTER TABLE wharf.scope DROP COLUMN failing_since;
ALTER TABLE wharf.provider_event DROP COLUMN transient_since;
