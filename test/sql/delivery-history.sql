-- wharf.delivery_history: per minute and connection of one workspace, the
-- deliveries accepted and those refused or dropped by reason; nothing of
-- another workspace; bad input refused.
BEGIN;
SELECT plan(6);

SELECT wharf.upsert_workspace(1), wharf.upsert_workspace(2);
SELECT wharf.upsert_connection(1, 'generic', 'https://hooks.example/1', 'webhook', 'one');
SELECT wharf.upsert_connection(2, 'generic', 'https://hooks.example/2', 'webhook', 'two');

SELECT pg_temp.admit_event(1, 'repo:a', 'a1'), pg_temp.admit_event(1, 'repo:a', 'a2'), pg_temp.admit_event(2, 'repo:b', 'b1');
-- A delivery about a subject nobody subscribes to: dropped, naming workspace 1's connection.
SELECT wharf.admit('generic', 'https://hooks.example/1', 'x1', 'ping',
                   jsonb_build_object('connection_id', (SELECT id FROM wharf.connection WHERE workspace_id = 1)),
                   ARRAY['repo:nobody'], '{}', '{}');

CREATE TEMP TABLE h AS SELECT wharf.delivery_history(1, 1) AS history;
SELECT is(jsonb_array_length((SELECT history FROM h)), 1, 'one minute and connection with deliveries');
SELECT is(((SELECT history FROM h) -> 0 ->> 'accepted')::int, 2, 'two accepted');
SELECT is((SELECT history FROM h) -> 0 -> 'refused', '{"no-subscriber": 1}'::jsonb, 'one dropped, by reason');
SELECT is(((SELECT history FROM h) -> 0 ->> 'connection_id')::bigint, (SELECT id FROM wharf.connection WHERE workspace_id = 1),
          'of its connection');
SELECT is((wharf.delivery_history(2, 1) -> 0 ->> 'accepted')::int, 1, 'workspace 2 sees its own only');
SELECT throws_ok($$SELECT wharf.delivery_history(1, 0)$$, '22023', NULL, 'hours outside 1..24 is 22023');

SELECT * FROM finish();
ROLLBACK;
