-- Up Migration

-- Contract v4: the lease path writes no indexed column of the event row
-- (written by hand; the functions that keep the scopes and the rule of one
-- lease per scope come from sql/ next). An UPDATE that changes no column any
-- index of the table names, and finds room on its page, is heap-only (HOT):
-- no index gets an entry for the new row version. Claim and complete change
-- state, handled_at and the lease columns, so every index below names only
-- columns that are written once, at admission (dead_at aside, which only a
-- failure and a replay write).
--
-- uq_provider_event_leased_scope (scope_key WHERE LEASED) kept the rule of
-- one lease per scope. The rule now lives on the scope row, which holds one
-- leased_id; the scope trigger refuses (23505) any write that would lease a
-- second row of a scope, a DBA's UPDATE included (sql/20-scope-heads.sql).
DROP INDEX wharf.uq_provider_event_leased_scope;

-- ix_provider_event_scope_queue (scope_key, id WHERE QUEUED) found a scope's
-- next head. Its replacement names no state: the rows of a scope after its
-- head are its queue, so the next head is the first QUEUED row read from the
-- head on (wharf.next_in_scope).
DROP INDEX wharf.ix_provider_event_scope_queue;
CREATE INDEX ix_provider_event_scope_order ON wharf.provider_event (scope_key, id);

-- ix_provider_event_workspace_list (workspace_id, state, id DESC) served the
-- console's listings; the workspace's rows newest first serve them without
-- state, and its dead letters have an index of their own below.
DROP INDEX wharf.ix_provider_event_workspace_list;
CREATE INDEX ix_provider_event_workspace_recent ON wharf.provider_event (workspace_id, id);

-- The purge indexes (handled_at WHERE DONE, dead_at WHERE DEAD) are replaced
-- by arrival time, which never changes: a row handled or dead before a time
-- arrived before it (wharf.purge).
DROP INDEX wharf.ix_provider_event_purge_done;
DROP INDEX wharf.ix_provider_event_purge_dead;
CREATE INDEX ix_provider_event_received ON wharf.provider_event (received_at);

-- Dead letters by workspace, newest first (listings, bulk replay). Only a
-- failure that ends DEAD and a replay write dead_at; the CHECK makes the
-- predicate mean exactly "DEAD". Rows written before it by hand are put
-- right first.
UPDATE wharf.provider_event SET dead_at = coalesce(handled_at, leased_at, received_at)
 WHERE state = 'DEAD' AND dead_at IS NULL;
UPDATE wharf.provider_event SET dead_at = NULL
 WHERE state <> 'DEAD' AND dead_at IS NOT NULL;
ALTER TABLE wharf.provider_event
  ADD CONSTRAINT provider_event_dead_at_check CHECK ((state = 'DEAD') = (dead_at IS NOT NULL));
CREATE INDEX ix_provider_event_dead ON wharf.provider_event (workspace_id, id) WHERE dead_at IS NOT NULL;

-- Room on each page for the versions a claim and a completion write: a HOT
-- update needs free space on the row's own page, and a claim leases heads
-- admitted one after another, neighbours on one page, in one statement,
-- which can prune none of the versions it writes itself. Half the page:
-- a claim that leases every row of a page finds room for all of them, and
-- the versions the previous statement left are pruned as the page is read.
-- (3,000 events drained by 4 claimers, 10 per claim: 73 % of the updates
-- were HOT at fill factor 75, 79 % at 60, 93 % at 50.) The cost is the main
-- heap of the rows kept for replay_window at twice their size; payloads
-- and headers past 128 bytes live in the TOAST table, which is unaffected.
-- Autovacuum at 5 % rather than 20 %: with few index entries per version it
-- is mostly the heap's and the visibility map's work, which goes faster in
-- small steps. (Both apply to pages written from now on and to the next
-- vacuum; nothing is rewritten here.)
ALTER TABLE wharf.provider_event SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.05);

-- wharf.scope is updated twice per event, never HOT (claim and completion
-- change ix_scope_claim's columns): vacuum it after a fixed number of dead
-- versions rather than a share of a table that stays small, so that claims
-- do not walk them.
ALTER TABLE wharf.scope SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);

-- Down Migration

ALTER TABLE wharf.scope RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold);
ALTER TABLE wharf.provider_event RESET (fillfactor, autovacuum_vacuum_scale_factor);
DROP INDEX wharf.ix_provider_event_dead;
ALTER TABLE wharf.provider_event DROP CONSTRAINT provider_event_dead_at_check;
DROP INDEX wharf.ix_provider_event_received;
CREATE INDEX ix_provider_event_purge_dead ON wharf.provider_event (dead_at) WHERE state = 'DEAD';
CREATE INDEX ix_provider_event_purge_done ON wharf.provider_event (handled_at) WHERE state = 'DONE';
DROP INDEX wharf.ix_provider_event_workspace_recent;
CREATE INDEX ix_provider_event_workspace_list ON wharf.provider_event (workspace_id, state, id DESC);
DROP INDEX wharf.ix_provider_event_scope_order;
CREATE INDEX ix_provider_event_scope_queue ON wharf.provider_event (scope_key, id) WHERE state = 'QUEUED';
CREATE UNIQUE INDEX uq_provider_event_leased_scope ON wharf.provider_event (scope_key) WHERE state = 'LEASED';
