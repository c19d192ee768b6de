-- Up Migration

-- Release 0.1.0, frozen. Claims take scopes in the order they became ready
-- (wharf.scope.ready_at) rather than by their head's due time.
--
-- It also repairs the tables of a database created before 0.1.0 from an
-- earlier text of 1764460800000 (which was edited before the release):
-- every statement below is a no-op on a database that already has the change.

-- Both tables up front, before changing what admission and completion touch:
-- in flight, they hold locks on both in opposite orders, so under load this
-- waits for them, and where it closes a cycle the deadlock detector cancels
-- one side (an admission then answers 503 and the provider retries).
LOCK TABLE wharf.provider_event, wharf.scope IN ACCESS EXCLUSIVE MODE;

-- Repairs: what 1764460800000 gained after some databases had applied it.
ALTER TABLE wharf.provider_event SET (toast_tuple_target = 128);
ALTER TABLE wharf.idle_listener SET UNLOGGED;
ALTER TABLE wharf.idle_listener SET (vacuum_truncate = false);
ALTER TABLE wharf.scope SET (vacuum_truncate = false);
DROP INDEX IF EXISTS wharf.ix_provider_event_source;

ALTER TABLE wharf.scope ADD COLUMN IF NOT EXISTS ready_at timestamptz;
UPDATE wharf.scope SET ready_at = head_due_at WHERE head_id IS NOT NULL AND ready_at IS NULL;
DROP INDEX wharf.ix_scope_claim;
-- claim: scopes with a head and no lease, longest ready first.
CREATE INDEX ix_scope_claim ON wharf.scope (ready_at, head_id)
  WHERE head_id IS NOT NULL AND leased_id IS NULL AND active;

-- Down Migration

-- The functions that read ready_at are gone by now (1764460800005's down).
-- The repairs stay: they are part of 1764460800000 as released.
LOCK TABLE wharf.provider_event, wharf.scope IN ACCESS EXCLUSIVE MODE;
DROP INDEX wharf.ix_scope_claim;
CREATE INDEX ix_scope_claim ON wharf.scope (head_due_at, head_id)
  WHERE head_id IS NOT NULL AND leased_id IS NULL AND active;
ALTER TABLE wharf.scope DROP COLUMN ready_at;
