-- wharf.delivery_history: per minute and connection of one workspace, the
-- deliveries accepted and those refused or dropped by reason; nothing of
-- another workspace; bad input refused. wharf.delivery_gauges: the same
-- counts of one minute for the instance, with the connections past the top
-- N counted as 'other'.
BEGIN;
SELECT plan(13);

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
SELECT is((SELECT history FROM h) -> 0 -> 'dropped', '{"no-subscriber": 1}'::jsonb, 'one dropped, by reason');
SELECT is((SELECT history FROM h) -> 0 -> 'refused', '{}'::jsonb, 'none refused');
SELECT is(((SELECT history FROM h) -> 0 ->> 'connection_id')::bigint, (SELECT id FROM wharf.connection WHERE workspace_id = 1),
          'of its connection');
SELECT is((wharf.delivery_history(2, 1) -> 0 ->> 'accepted')::int, 1, 'workspace 2 sees its own only');
SELECT throws_ok($$SELECT wharf.delivery_history(1, 0)$$, '22023', NULL, 'hours outside 1..24 is 22023');

-- Workspace 3 is suspended: a delivery for it is refused; a work event that
-- names no source connection is dropped, naming none.
SELECT wharf.upsert_workspace(3);
SELECT wharf.upsert_connection(3, 'generic', 'https://hooks.example/3', 'webhook', 'three');
SELECT wharf.subscribe((SELECT id FROM wharf.connection WHERE workspace_id = 3), 'repo:c');
SELECT wharf.set_workspace_state(3, 'SUSPENDED');
SELECT wharf.admit('generic', 'https://hooks.example/3', 'c1', 'ping',
                   jsonb_build_object('connection_id', (SELECT id FROM wharf.connection WHERE workspace_id = 3)),
                   ARRAY['repo:c'], '{}', '{}');
SELECT wharf.admit('generic', 'https://nobody.example/', 'n1', 'ping', '{}', ARRAY['repo:n'], '{}', '{}');

-- Every delivery so far pinned to one minute, five minutes ago (a minute
-- boundary may pass while the suite runs).
UPDATE wharf.provider_event SET received_at = date_trunc('minute', now()) - interval '5 minutes';
UPDATE wharf.admission_log SET at = date_trunc('minute', now()) - interval '5 minutes' + interval '30 seconds';
CREATE FUNCTION pg_temp.gauges(p_top integer) RETURNS TABLE (connection text, outcome text, reason text, n integer)
LANGUAGE sql AS $$
  SELECT d ->> 'connection', d ->> 'outcome', d ->> 'reason', (d ->> 'count')::int
    FROM jsonb_array_elements(wharf.delivery_gauges(now() - interval '5 minutes', p_top) -> 'deliveries') d
$$;
CREATE FUNCTION pg_temp.conn(p_workspace bigint) RETURNS text
LANGUAGE sql AS $$ SELECT id::text FROM wharf.connection WHERE workspace_id = p_workspace $$;

SELECT is(wharf.delivery_history(3, 1) -> 0 -> 'refused', '{"workspace-inactive": 1}'::jsonb,
          'a delivery for a suspended workspace is refused, by reason');
SELECT set_eq($$SELECT connection, outcome, reason, n FROM pg_temp.gauges(10)$$,
              format($$VALUES (%L, 'accepted', '', 2), (%L, 'dropped', 'no-subscriber', 1), (%L, 'accepted', '', 1),
                              (%L, 'refused', 'workspace-inactive', 1), ('none', 'dropped', 'work-event-without-source', 1)$$,
                     pg_temp.conn(1), pg_temp.conn(1), pg_temp.conn(2), pg_temp.conn(3)),
              'the instance minute: accepted by connection, refused and dropped by reason');
SELECT set_eq($$SELECT connection, outcome, reason, n FROM pg_temp.gauges(1)$$,
              format($$VALUES (%L, 'accepted', '', 2), (%L, 'dropped', 'no-subscriber', 1), ('other', 'accepted', '', 1),
                              ('other', 'refused', 'workspace-inactive', 1), ('none', 'dropped', 'work-event-without-source', 1)$$,
                     pg_temp.conn(1), pg_temp.conn(1)),
              'past the top connection, the rest counted together as other');
SELECT is(wharf.delivery_gauges(now() - interval '7 minutes', 10) -> 'deliveries', '[]'::jsonb,
          'an earlier minute saw none');
SELECT is((wharf.delivery_gauges(NULL, 10) ->> 'minute')::timestamptz, date_trunc('minute', now() - interval '1 minute'),
          'by default the last complete minute');
SELECT throws_ok($$SELECT wharf.delivery_gauges(NULL, 0)$$, '22023', NULL, 'a top outside 1..100 is 22023');

SELECT * FROM finish();
ROLLBACK;
