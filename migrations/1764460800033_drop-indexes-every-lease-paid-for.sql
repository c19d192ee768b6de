-- Up Migration

-- Two indexes that every lease wrote an entry to and that no hot path reads
-- (written by hand; the functions that no longer need them come from sql/
-- next). Claim and completion change state, so neither update can be HOT:
-- every index of the table gets an entry for the new row version, and each
-- entry costs the drain time (bench/RESULTS.md counts the instructions).
--
-- ix_provider_event_reap (leased_until WHERE LEASED): an entry per claim, for
-- the reaper, which runs every 30 s. uq_provider_event_leased_scope has the
-- same predicate and holds the same rows, as few as there are leases, and
-- the reaper reads them all from it.
DROP INDEX wharf.ix_provider_event_reap;

-- ix_scope_workspace (workspace_id): an entry per scope row version, that is
-- per claim and per lease ended with work still queued, for pausing or
-- resuming a workspace and for the cascade when one is deleted. Both are
-- operator actions; wharf.scope holds only the scopes in use, and those
-- read it whole.
DROP INDEX wharf.ix_scope_workspace;

-- Down Migration

CREATE INDEX ix_scope_workspace ON wharf.scope (workspace_id);
CREATE INDEX ix_provider_event_reap ON wharf.provider_event (leased_until) WHERE state = 'LEASED';
