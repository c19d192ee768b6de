-- Up Migration

-- Fill factor 30 instead of 50 (0035), measured (written by hand): a HOT
-- update needs room on its row's page, and a version is pruned to make room
-- only once no snapshot in the cluster can still see it. With many claimers
-- running at once some transaction is nearly always older than the claim
-- whose versions a completion would prune, so the completion must find room
-- for its versions beside the claim's. A claim leases neighbours on one page
-- in one statement; at 30 % a page's rows fit there three times over (the
-- row as admitted, as claimed, as completed) without any pruning.
-- 20,000 events over 200 scopes, drained by 8 and 16 claimers taking 50 or
-- 100 at a time: at 50, 86 % of the updates were HOT; at 40, 91-97 %; at 30,
-- 100 % in every run. The cost is the main heap: about 900 bytes per row kept
-- for replay_window instead of 350 (payloads and headers past 128 bytes live
-- in the TOAST table, which the fill factor leaves alone). It applies to
-- pages written from now on; nothing is rewritten here.
ALTER TABLE wharf.provider_event SET (fillfactor = 30);

-- Down Migration

ALTER TABLE wharf.provider_event SET (fillfactor = 50);
