-- wharf.search_events: a workspace's events whose payload or headers contain
-- a JSON value, combined with the listing filters, newest first and paged;
-- never another workspace's; bad input refused.
BEGIN;
SELECT plan(12);

SELECT wharf.upsert_workspace(1), wharf.upsert_workspace(2);
SELECT wharf.upsert_connection(1, 'generic', 'https://hooks.example/1', 'webhook', 'one');
SELECT wharf.upsert_connection(2, 'generic', 'https://hooks.example/2', 'webhook', 'two');

CREATE FUNCTION pg_temp.admit_payload(p_ws bigint, p_key text, p_type text, p_payload jsonb, p_headers jsonb) RETURNS bigint
LANGUAGE sql AS $$
  SELECT wharf.subscribe((SELECT id FROM wharf.connection WHERE workspace_id = p_ws), 'repo:x');
  SELECT (wharf.admit('generic', 'https://hooks.example/' || p_ws, p_key, p_type,
                      jsonb_build_object('connection_id', (SELECT id FROM wharf.connection WHERE workspace_id = p_ws)),
                      ARRAY['repo:x'], p_payload, p_headers) -> 'events' -> 0 ->> 'event_id')::bigint
$$;

SELECT pg_temp.admit_payload(1, 'k1', 'push', '{"repository": {"full_name": "acme/api", "private": false}, "ref": "main"}', '{"x-github-event": "push"}');
SELECT pg_temp.admit_payload(1, 'k2', 'push', '{"repository": {"full_name": "acme/web"}, "ref": "main"}', '{"x-github-event": "push"}');
SELECT pg_temp.admit_payload(1, 'k3', 'issues', '{"repository": {"full_name": "acme/api"}, "labels": ["bug", "p1"]}', '{"x-github-event": "issues"}');
SELECT pg_temp.admit_payload(2, 'k4', 'push', '{"repository": {"full_name": "acme/api"}}', '{"x-github-event": "push"}');

CREATE FUNCTION pg_temp.keys(p_page jsonb) RETURNS text[]
LANGUAGE sql AS $$
  SELECT coalesce(array_agg(e.delivery_key ORDER BY e.id DESC), '{}')
    FROM jsonb_array_elements(p_page -> 'events') x JOIN wharf.provider_event e ON e.id = (x ->> 'id')::bigint
$$;

SELECT is(pg_temp.keys(wharf.search_events(1, '{"repository": {"full_name": "acme/api"}}')), ARRAY['k3', 'k1'],
          'a nested payload value: exactly the workspace''s matching events, newest first');
SELECT is(pg_temp.keys(wharf.search_events(2, '{"repository": {"full_name": "acme/api"}}')), ARRAY['k4'],
          'workspace 2 finds only its own');
SELECT is(pg_temp.keys(wharf.search_events(1, '{"labels": ["p1"]}')), ARRAY['k3'], 'an array element');
SELECT is(pg_temp.keys(wharf.search_events(1, NULL, '{"x-github-event": "push"}')), ARRAY['k2', 'k1'], 'a header');
SELECT is(pg_temp.keys(wharf.search_events(1, '{"ref": "main"}', '{"x-github-event": "push"}')), ARRAY['k2', 'k1'], 'both');
SELECT is(pg_temp.keys(wharf.search_events(1, '{"repository": {"full_name": "acme/api"}}', p_event_type => 'push')), ARRAY['k1'],
          'combined with the event type filter');
SELECT is(pg_temp.keys(wharf.search_events(1, '{"repository": {"full_name": "acme/api"}}', p_state => 'DONE')), '{}'::text[],
          'and the state filter');
SELECT is(wharf.search_events(1, '{"ref": "main"}', p_limit => 1) ->> 'next_cursor', pg_temp.id('k2')::text, 'paged');
SELECT throws_ok($$SELECT wharf.search_events(1, NULL, NULL)$$, '22004', NULL, 'nothing to look for is 22004');
SELECT throws_ok($$SELECT wharf.search_events(1, '"acme"')$$, '22023', NULL, 'a value that is not an object is 22023');
SELECT throws_ok($$SELECT wharf.search_events(404, '{}')$$, 'P0002', NULL, 'an unknown workspace is P0002');
SELECT throws_ok($$SELECT wharf.search_events(1, '{}', p_limit => 0)$$, '22023', NULL, 'a limit of 0 is 22023');

SELECT * FROM finish();
ROLLBACK;
