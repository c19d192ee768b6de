-- Up Migration

-- Release 0.1.0, frozen. Before 0.1.0 this step applied sql/ as it was in the
-- checkout that ran it, so what it created depended on the commit. Databases
-- that recorded it keep what they got; 1764460800005 brings every one of them,
-- and every new database, to the functions of release 0.1.0 in full. Nothing
-- to do here.
SELECT 1;

-- Down Migration

SELECT 1;
