-- Up Migration

-- Vacuum the inbox after 2 % of its rows were inserted, not autovacuum's 20 %
-- (issue 40, item 8). Its claims and completions are heap-only and pruned on
-- the page, so the dead versions never reach the update trigger's count: the
-- insert trigger is the one that fires. Between two vacuums, a page that took
-- new rows while their claims' and completions' versions were still on it
-- closes for inserts with fewer rows than fill factor 30 allows, and only a
-- vacuum tells the free space map that pruning gave the room back. At 20 %
-- the heap grew to 1.13x its bytes per row under admissions and claims side
-- by side; at 2 %, 1.05x, for about 3 µs more of VACUUM's CPU per event
-- (`npm run bench:layouts -- --claimers 8 --vacuum-inserts 0.2` and `0.02`,
-- bench/RESULTS.md §7). Applies from the next vacuum; nothing is rewritten.
ALTER TABLE wharf.provider_event SET (autovacuum_vacuum_insert_scale_factor = 0.02);

-- Down Migration

ALTER TABLE wharf.provider_event RESET (autovacuum_vacuum_insert_scale_factor);
