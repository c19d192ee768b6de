-- The redelivery sweeper's state: begin_sweep's lease and window, the fence
-- every later call goes through, the cursor that moves only page by page,
-- sweep_page's decision per GUID over every page, missing_deliveries, and
-- request_redelivery's one-ask-per-attempt rule.
BEGIN;
SELECT plan(101);

CREATE FUNCTION pg_temp.begin(p_holder text, p_lease interval DEFAULT '1 minute', p_since timestamptz DEFAULT NULL)
RETURNS jsonb LANGUAGE sql AS $$ SELECT wharf.begin_sweep(1001, 'https://github.com', p_holder, p_lease, p_since) $$;

CREATE FUNCTION pg_temp.sweep() RETURNS wharf.redelivery_sweep
LANGUAGE sql AS $$ SELECT * FROM wharf.redelivery_sweep WHERE app_id = 1001 AND source = 'https://github.com' $$;

CREATE FUNCTION pg_temp.ask(p_token uuid, p_guid text, p_delivery bigint, p_stale interval DEFAULT '2 minutes')
RETURNS text LANGUAGE sql AS $$
  SELECT wharf.request_redelivery(1001, 'https://github.com', p_token, p_guid, p_delivery, p_stale, 3)
$$;

CREATE FUNCTION pg_temp.settle(p_token uuid, p_guid text, p_delivery bigint, p_outcome text)
RETURNS boolean LANGUAGE sql AS $$
  SELECT wharf.settle_redelivery(1001, 'https://github.com', p_token, p_guid, p_delivery, p_outcome)
$$;

CREATE TEMP TABLE t (name text PRIMARY KEY, token uuid, taken jsonb);

-- The first sweep -------------------------------------------------------------
INSERT INTO t SELECT 'a', (b ->> 'token')::uuid, b FROM pg_temp.begin('host-a') b;
SELECT isnt((SELECT token FROM t WHERE name = 'a'), NULL, 'the first begin_sweep takes the lease');
SELECT is((SELECT taken -> 'cursor' FROM t WHERE name = 'a'), 'null'::jsonb, 'a new sweep starts at the first page');
SELECT is((SELECT (taken ->> 'resumed')::boolean FROM t WHERE name = 'a'), false, 'a new sweep is not resumed');
SELECT ok((SELECT (taken ->> 'since')::timestamptz BETWEEN clock_timestamp() - interval '61 minutes'
                                                    AND clock_timestamp() - interval '59 minutes' FROM t WHERE name = 'a'),
          'the first sweep looks back p_first_lookback (1 hour by default)');
SELECT ok((SELECT (taken ->> 'until')::timestamptz <= clock_timestamp() FROM t WHERE name = 'a'),
          'the window ends now');
SELECT results_eq($$SELECT leased_by, lease_token FROM pg_temp.sweep()$$,
                  $$SELECT 'host-a', token FROM t WHERE name = 'a'$$, 'the row names the holder and its token');

SELECT is(pg_temp.begin('host-b') -> 'token', 'null'::jsonb, 'another host gets no token while the lease runs');
SELECT is(pg_temp.begin('host-b') ->> 'holder', 'host-a', '... and learns who holds it');
SELECT is((SELECT lease_token FROM pg_temp.sweep()), (SELECT token FROM t WHERE name = 'a'),
          'a refused begin changes nothing');

-- Pages ---------------------------------------------------------------------
SELECT lives_ok($$SELECT wharf.advance_sweep(1001, 'https://github.com', (SELECT token FROM t WHERE name = 'a'),
                                             'v1_900', '1 minute')$$, 'the holder advances the cursor');
SELECT results_eq($$SELECT page_cursor, pages_done FROM pg_temp.sweep()$$, $$VALUES ('v1_900', 1)$$,
                  'the cursor is GitHub''s next page and one page is done');
SELECT throws_ok($$SELECT wharf.advance_sweep(1001, 'https://github.com', gen_random_uuid(), 'v1_1', '1 minute')$$,
                 'WH412', NULL, 'another token cannot advance it');
SELECT throws_ok($$SELECT wharf.advance_sweep(1001, 'https://github.com', (SELECT token FROM t WHERE name = 'a'),
                                              NULL, '1 minute')$$, '22004', NULL, 'a NULL cursor is refused');
SELECT throws_ok($$SELECT wharf.advance_sweep(1001, 'https://github.com', (SELECT token FROM t WHERE name = 'a'),
                                              'v1_1', '0 seconds')$$, '22023', NULL, 'a lease must be positive');
SELECT is((SELECT page_cursor FROM pg_temp.sweep()), 'v1_900', 'a refused advance changes nothing');
SELECT ok(wharf.renew_sweep(1001, 'https://github.com', (SELECT token FROM t WHERE name = 'a'), '5 minutes'),
          'the holder renews its lease');
SELECT ok((SELECT leased_until > clock_timestamp() + interval '4 minutes' FROM pg_temp.sweep()), 'by the lease given');
SELECT ok(NOT wharf.renew_sweep(1001, 'https://github.com', gen_random_uuid(), '5 minutes'),
          'another token renews nothing');

-- Giving up and resuming ------------------------------------------------------
SELECT ok(wharf.abandon_sweep(1001, 'https://github.com', (SELECT token FROM t WHERE name = 'a'), 'GitHubUnavailable'),
          'the holder gives the lease back');
SELECT results_eq($$SELECT leased_by, lease_token, page_cursor, last_error FROM pg_temp.sweep()$$,
                  $$VALUES (NULL::text, NULL::uuid, 'v1_900', 'GitHubUnavailable')$$,
                  'the lease is free, the cursor kept, the error class recorded');
SELECT ok(NOT wharf.abandon_sweep(1001, 'https://github.com', (SELECT token FROM t WHERE name = 'a'), NULL),
          'a token that no longer holds the sweep abandons nothing');
INSERT INTO t SELECT 'b', (b ->> 'token')::uuid, b FROM pg_temp.begin('host-b') b;
SELECT is((SELECT taken ->> 'cursor' FROM t WHERE name = 'b'), 'v1_900', 'the next host resumes at the cursor');
SELECT is((SELECT (taken ->> 'resumed')::boolean FROM t WHERE name = 'b'), true, '... as a resumed sweep');
SELECT is((SELECT taken -> 'since' FROM t WHERE name = 'b'), (SELECT taken -> 'since' FROM t WHERE name = 'a'),
          '... of the same window');
SELECT isnt((SELECT token FROM t WHERE name = 'b'), (SELECT token FROM t WHERE name = 'a'), '... with a token of its own');
SELECT throws_ok($$SELECT wharf.advance_sweep(1001, 'https://github.com', (SELECT token FROM t WHERE name = 'a'),
                                              'v1_1', '1 minute')$$, 'WH412', NULL,
                 'the old token is fenced out');

-- An expired lease is taken over ---------------------------------------------
SELECT ok(wharf.renew_sweep(1001, 'https://github.com', (SELECT token FROM t WHERE name = 'b'), '1 millisecond'),
          'host-b''s lease is shortened to expire');
SELECT pg_sleep(0.01);
SELECT ok(wharf.renew_sweep(1001, 'https://github.com', (SELECT token FROM t WHERE name = 'b'), '1 millisecond'),
          'an expired lease that nobody took over can still be renewed');
SELECT pg_sleep(0.01);
INSERT INTO t SELECT 'c', (b ->> 'token')::uuid, b FROM pg_temp.begin('host-c') b;
SELECT isnt((SELECT token FROM t WHERE name = 'c'), NULL, 'an expired lease is taken over');
SELECT is((SELECT taken ->> 'cursor' FROM t WHERE name = 'c'), 'v1_900', '... at the cursor');
SELECT ok(NOT wharf.renew_sweep(1001, 'https://github.com', (SELECT token FROM t WHERE name = 'b'), '1 minute'),
          'the host that was taken over renews nothing');
SELECT throws_ok($$SELECT wharf.finish_sweep(1001, 'https://github.com', (SELECT token FROM t WHERE name = 'b'))$$,
                 'WH412', NULL, '... and cannot finish the sweep');

-- Asking for redeliveries ----------------------------------------------------
SELECT is(pg_temp.ask((SELECT token FROM t WHERE name = 'c'), 'guid-1', 10), 'ask', 'a new GUID is to be asked for');
SELECT results_eq($$SELECT delivery_id, asks, outcome, asked_by FROM wharf.redelivery_request WHERE guid = 'guid-1'$$,
                  $$SELECT 10::bigint, 1, 'asking', token FROM t WHERE name = 'c'$$, 'the ask is recorded before it is sent');
SELECT is(pg_temp.ask((SELECT token FROM t WHERE name = 'c'), 'guid-1', 10), 'asked',
          'the same attempt is not asked for twice by the same sweep');
SELECT throws_ok($$SELECT pg_temp.ask((SELECT token FROM t WHERE name = 'b'), 'guid-2', 20)$$, 'WH412', NULL,
                 'a host that lost its lease asks nothing');
SELECT is((SELECT count(*) FROM wharf.redelivery_request WHERE guid = 'guid-2'), 0::bigint, '... and records nothing');
SELECT ok(pg_temp.settle((SELECT token FROM t WHERE name = 'c'), 'guid-1', 10, 'accepted'), 'GitHub accepted the ask');
SELECT ok(NOT pg_temp.settle((SELECT token FROM t WHERE name = 'c'), 'guid-1', 10, 'accepted'),
          'an ask is settled once');
SELECT is(pg_temp.ask((SELECT token FROM t WHERE name = 'c'), 'guid-1', 10), 'asked', 'an accepted attempt is not asked again');
SELECT is(pg_temp.ask((SELECT token FROM t WHERE name = 'c'), 'guid-1', 9), 'asked', 'nor an older attempt of it');
SELECT is(pg_temp.ask((SELECT token FROM t WHERE name = 'c'), 'guid-1', 11), 'ask',
          'a newer failed attempt (the redelivery failed too) is asked for');
SELECT results_eq($$SELECT delivery_id, asks FROM wharf.redelivery_request WHERE guid = 'guid-1'$$,
                  $$VALUES (11::bigint, 2)$$, '... and counted');
SELECT ok(pg_temp.settle((SELECT token FROM t WHERE name = 'c'), 'guid-1', 11, 'failed'), 'that ask did not get through');
SELECT is(pg_temp.ask((SELECT token FROM t WHERE name = 'c'), 'guid-1', 11), 'ask', 'an ask that failed is asked again');
SELECT ok(pg_temp.settle((SELECT token FROM t WHERE name = 'c'), 'guid-1', 11, 'failed'), 'it failed again');
SELECT is(pg_temp.ask((SELECT token FROM t WHERE name = 'c'), 'guid-1', 12), 'exhausted',
          'after p_max_asks asks a GUID is not asked for again');
SELECT is(pg_temp.ask((SELECT token FROM t WHERE name = 'c'), 'guid-3', 30), 'ask', 'another GUID');
SELECT ok(pg_temp.settle((SELECT token FROM t WHERE name = 'c'), 'guid-3', 30, 'rejected'), 'GitHub refused it');
SELECT is(pg_temp.ask((SELECT token FROM t WHERE name = 'c'), 'guid-3', 30), 'refused',
          'a refused attempt is not asked again, and the sweeper learns it gave up on it');
SELECT is(pg_temp.ask((SELECT token FROM t WHERE name = 'c'), 'guid-3', 29), 'refused', '... nor an older attempt of it');
SELECT throws_ok($$SELECT pg_temp.settle((SELECT token FROM t WHERE name = 'c'), 'guid-3', 30, 'maybe')$$, '22023', NULL,
                 'settle_redelivery rejects an unknown outcome');
SELECT throws_ok($$SELECT pg_temp.ask((SELECT token FROM t WHERE name = 'c'), 'guid-4', 0)$$, '22023', NULL,
                 'request_redelivery rejects a delivery id that is not positive');
SELECT throws_ok($$SELECT pg_temp.ask((SELECT token FROM t WHERE name = 'c'), NULL, 1)$$, '22004', NULL,
                 'request_redelivery rejects a NULL guid');

-- An ask whose sweep died before it knew how the ask ended: the next holder
-- waits p_stale for it, then asks again.
SELECT is(pg_temp.ask((SELECT token FROM t WHERE name = 'c'), 'guid-5', 50), 'ask', 'host-c records an ask and dies');
SELECT ok(wharf.renew_sweep(1001, 'https://github.com', (SELECT token FROM t WHERE name = 'c'), '1 millisecond'),
          'host-c''s lease runs out');
SELECT pg_sleep(0.01);
INSERT INTO t SELECT 'd', (b ->> 'token')::uuid, b FROM pg_temp.begin('host-d') b;
SELECT is(pg_temp.ask((SELECT token FROM t WHERE name = 'd'), 'guid-5', 50, '1 hour'), 'wait',
          'a dead sweep''s recent ask may still be in flight: wait');
SELECT is(pg_temp.ask((SELECT token FROM t WHERE name = 'd'), 'guid-5', 50, '1 millisecond'), 'ask',
          'past p_stale it is asked again');
SELECT is((SELECT asked_by FROM wharf.redelivery_request WHERE guid = 'guid-5'), (SELECT token FROM t WHERE name = 'd'),
          '... by the new holder');

-- An operator's window ---------------------------------------------------------
SELECT ok(wharf.abandon_sweep(1001, 'https://github.com', (SELECT token FROM t WHERE name = 'd'), NULL),
          'a deliberate stop gives the lease back');
SELECT is((SELECT last_error FROM pg_temp.sweep()), 'GitHubUnavailable', '... and leaves the last error as it was');
INSERT INTO t SELECT 'e', (b ->> 'token')::uuid, b
  FROM pg_temp.begin('operator', '1 minute', clock_timestamp() - interval '3 hours') b;
SELECT is((SELECT taken -> 'cursor' FROM t WHERE name = 'e'), 'null'::jsonb,
          'an operator''s --since starts again from the first page');
SELECT ok((SELECT (taken ->> 'since')::timestamptz < clock_timestamp() - interval '179 minutes' FROM t WHERE name = 'e'),
          '... back to the time given, further than the sweep under way');
SELECT is((SELECT swept_until FROM pg_temp.sweep()), NULL, 'nothing was swept to the end yet');
SELECT is(wharf.finish_sweep(1001, 'https://github.com', (SELECT token FROM t WHERE name = 'e')),
          (SELECT (taken ->> 'until')::timestamptz FROM t WHERE name = 'e'), 'finish_sweep moves swept_until to the window''s end');
SELECT results_eq($$SELECT window_since, page_cursor, leased_by, last_success_at IS NOT NULL FROM pg_temp.sweep()$$,
                  $$VALUES (NULL::timestamptz, NULL::text, NULL::text, true)$$,
                  'the window is closed, the lease free, the success recorded');

-- The next scheduled sweep starts where that one ended, less the overlap.
INSERT INTO t SELECT 'f', (b ->> 'token')::uuid, b FROM pg_temp.begin('host-a') b;
SELECT is((SELECT (taken ->> 'since')::timestamptz FROM t WHERE name = 'f'),
          (SELECT (taken ->> 'until')::timestamptz - interval '10 minutes' FROM t WHERE name = 'e'),
          'the next sweep covers what came since the last one, less the overlap');
SELECT ok(wharf.sweep_status(1001, 'https://github.com') -> 'sweeping' ->> 'holder' = 'host-a',
          'sweep_status shows the sweep under way and its holder');
SELECT ok(NOT wharf.sweep_status(1001, 'https://github.com')::text LIKE '%' || (SELECT token FROM t WHERE name = 'f') || '%',
          'sweep_status never shows the lease token');
SELECT is(wharf.sweep_status(1001, 'https://gitlab.example.com'), NULL, 'an App never swept has no status');
SELECT throws_ok($$SELECT wharf.begin_sweep(0, 'https://github.com', 'h', '1 minute')$$, '22023', NULL,
                 'begin_sweep rejects an app id that is not positive');
SELECT throws_ok($$SELECT wharf.begin_sweep(1, 'https://github.com', NULL, '1 minute')$$, '22004', NULL,
                 'begin_sweep rejects a NULL holder');

-- missing_deliveries ----------------------------------------------------------
-- A GitHub App installation in workspace 501, a PAT in workspace 502 that
-- receives what an installation of workspace 503 delivers, and an
-- installation (control) row.
SELECT wharf.upsert_workspace(501), wharf.upsert_workspace(502), wharf.upsert_workspace(503);
SELECT wharf.subscribe(wharf.upsert_connection(501, 'github', 'https://github.com', 'app_installation', '77'), 'repo:acme/api');
SELECT wharf.subscribe(wharf.upsert_connection(502, 'github', 'https://github.com', 'pat', 'pat-502'), 'repo:acme/web');
SELECT wharf.subscribe(wharf.upsert_connection(503, 'github', 'https://github.com', 'app_installation', '78'), 'repo:acme/other');
SELECT wharf.admit('github', 'https://github.com', 'stored-app', 'push', '{"installation_id": "77"}', ARRAY['repo:acme/api'],
                   '{"n": 1}', '{}');
SELECT wharf.admit('github', 'https://github.com', 'stored-pat', 'push', '{"installation_id": "78"}', ARRAY['repo:acme/web'],
                   '{"n": 2}', '{}');
SELECT wharf.admit('github', 'https://github.com', 'stored-control', 'installation',
                   '{"control": true, "installation_id": "77"}', NULL, '{"action": "created", "installation": {"id": 77}}', '{}');
SELECT is((SELECT count(*) FROM wharf.provider_event WHERE provider = 'github'), 3::bigint, 'three GitHub deliveries are stored');
SELECT results_eq(
  $$SELECT * FROM wharf.missing_deliveries('github', 'https://github.com',
      ARRAY['lost-2', 'stored-app', 'lost-1', 'stored-pat', 'lost-2', 'stored-control', NULL])$$,
  $$VALUES ('lost-2'), ('lost-1')$$,
  'missing_deliveries returns the keys stored nowhere (workspace, PAT recipient or installation row), once each, in order');
SELECT results_eq(
  $$SELECT * FROM wharf.missing_deliveries('github', 'https://github.example.com', ARRAY['stored-app'])$$,
  $$VALUES ('stored-app')$$, 'a delivery stored from another source does not count');
SELECT is_empty($$SELECT * FROM wharf.missing_deliveries('github', 'https://github.com', '{}')$$, 'no keys, nothing missing');
SELECT throws_ok($$SELECT * FROM wharf.missing_deliveries('github', NULL, ARRAY['x'])$$, '22004', NULL,
                 'missing_deliveries rejects a NULL source');

-- sweep_page: one GUID's attempts on several pages -----------------------------
-- Sweep 'f' (host-a) is under way. Its pages, newest first, as GitHub lists them.
CREATE FUNCTION pg_temp.page(p_token uuid, p_deliveries jsonb, p_last boolean DEFAULT false)
RETURNS SETOF text LANGUAGE sql AS $$
  SELECT p.guid || ':' || p.delivery_id || ':' || coalesce(p.event, '-')
    FROM wharf.sweep_page(1001, 'https://github.com', p_token, p_deliveries, p_last) p
$$;
CREATE FUNCTION pg_temp.attempt(p_id bigint, p_guid text, p_status integer, p_redelivery boolean,
                                p_at timestamptz DEFAULT clock_timestamp())
RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('id', p_id, 'guid', p_guid, 'delivered_at', p_at, 'redelivery', p_redelivery,
                            'status_code', p_status, 'event', 'push')
$$;
CREATE FUNCTION pg_temp.seen() RETURNS SETOF text LANGUAGE sql AS $$
  SELECT guid || ':' || coalesce(failed_id::text, '-') || ':' || answered || ':' || decided
    FROM wharf.redelivery_seen WHERE app_id = 1001 AND source = 'https://github.com' ORDER BY guid
$$;
CREATE TEMP TABLE page1 AS SELECT jsonb_build_array(
  pg_temp.attempt(105, 'g-a', 503, true),   -- a failed redelivery by hand of an answered delivery
  pg_temp.attempt(104, 'g-b', 202, true),   -- the OK redelivery of a failed one
  pg_temp.attempt(103, 'g-c', 503, false),  -- failed, never redelivered: its only attempt
  pg_temp.attempt(102, 'g-d', 202, false),  -- answered at once
  pg_temp.attempt(101, 'g-e', 0, true)      -- a failed redelivery of something older than the window
) AS d;
CREATE TEMP TABLE page2 AS SELECT jsonb_build_array(
  pg_temp.attempt(95, 'g-a', 202, false),
  pg_temp.attempt(94, 'g-b', 503, false),
  pg_temp.attempt(93, 'g-f', 502, false)
) AS d;
CREATE TEMP TABLE page3 AS SELECT jsonb_build_array(
  pg_temp.attempt(81, 'g-g', 503, true),
  pg_temp.attempt(80, 'g-h', 503, false, clock_timestamp() - interval '1 day')
) AS d;

SELECT results_eq($$SELECT pg_temp.page((SELECT token FROM t WHERE name = 'f'), (SELECT d FROM page1))$$,
                  $$VALUES ('g-c:103:push')$$,
                  'a GUID whose original is on the page is decided there; the others wait for their older attempts');
SELECT results_eq($$SELECT pg_temp.seen()$$,
                  $$VALUES ('g-a:105:false:false'), ('g-b:-:true:false'), ('g-e:101:false:false')$$,
                  'what the page said of the GUIDs still open is kept with the sweep, and nothing of those decided');
SELECT results_eq($$SELECT pg_temp.page((SELECT token FROM t WHERE name = 'f'), (SELECT d FROM page1))$$,
                  $$VALUES ('g-c:103:push')$$, 'a page read again (a sweep that died before advancing) decides the same');
SELECT results_eq($$SELECT pg_temp.seen()$$,
                  $$VALUES ('g-a:105:false:false'), ('g-b:-:true:false'), ('g-e:101:false:false')$$, '... and remembers the same');
SELECT lives_ok($$SELECT wharf.advance_sweep(1001, 'https://github.com', (SELECT token FROM t WHERE name = 'f'),
                                             'v1_101', '1 minute')$$, 'the page is done');

SELECT results_eq($$SELECT pg_temp.page((SELECT token FROM t WHERE name = 'f'), (SELECT d FROM page2))$$,
                  $$VALUES ('g-f:93:push')$$,
                  'an OK original a page after a failed redelivery, or a failed original after an OK redelivery: not failed');
SELECT results_eq($$SELECT pg_temp.seen()$$,
                  $$VALUES ('g-a:105:true:true'), ('g-b:94:true:true'), ('g-e:101:false:false')$$,
                  'the GUIDs decided on this page are marked so');
SELECT results_eq($$SELECT pg_temp.page((SELECT token FROM t WHERE name = 'f'), (SELECT d FROM page2))$$,
                  $$VALUES ('g-f:93:push')$$, 'read again, the page decides the same');
SELECT lives_ok($$SELECT wharf.advance_sweep(1001, 'https://github.com', (SELECT token FROM t WHERE name = 'f'),
                                             'v1_93', '1 minute')$$, 'the second page is done');
SELECT results_eq($$SELECT pg_temp.seen()$$, $$VALUES ('g-e:101:false:false')$$,
                  'advance_sweep forgets the GUIDs that page decided');

SELECT throws_ok($$SELECT pg_temp.page(gen_random_uuid(), (SELECT d FROM page3), true)$$, 'WH412', NULL,
                 'another token records nothing');
SELECT throws_ok($$SELECT pg_temp.page((SELECT token FROM t WHERE name = 'f'), NULL, true)$$, '22004', NULL,
                 'sweep_page rejects NULL deliveries');
SELECT throws_ok($$SELECT pg_temp.page((SELECT token FROM t WHERE name = 'f'), '{"id": 1}', true)$$, '22023', NULL,
                 'sweep_page rejects deliveries that are not an array');
SELECT throws_ok($$SELECT pg_temp.page((SELECT token FROM t WHERE name = 'f'),
                                       jsonb_build_array(pg_temp.attempt(70, NULL, 503, false)), true)$$, '22023', NULL,
                 'sweep_page rejects an attempt without its GUID');
SELECT results_eq($$SELECT pg_temp.page((SELECT token FROM t WHERE name = 'f'), (SELECT d FROM page3), true)$$,
                  $$VALUES ('g-e:101:push'), ('g-g:81:push')$$,
                  'the window''s last page decides every GUID still open, newest first; an attempt before the window is no failure');
SELECT ok(wharf.finish_sweep(1001, 'https://github.com', (SELECT token FROM t WHERE name = 'f')) IS NOT NULL,
          'the sweep finishes');
SELECT is_empty($$SELECT pg_temp.seen()$$, 'a finished sweep remembers nothing');

-- A new sweep (an operator's --since) forgets what a stopped one had seen.
INSERT INTO t SELECT 'g', (b ->> 'token')::uuid, b FROM pg_temp.begin('host-a') b;
SELECT is_empty($$SELECT pg_temp.page((SELECT token FROM t WHERE name = 'g'),
                                      jsonb_build_array(pg_temp.attempt(200, 'g-i', 202, true)))$$,
                'an OK redelivery alone decides nothing');
SELECT ok(wharf.abandon_sweep(1001, 'https://github.com', (SELECT token FROM t WHERE name = 'g'), NULL), 'that sweep stops');
SELECT results_eq($$SELECT pg_temp.seen()$$, $$VALUES ('g-i:-:true:false')$$, '... remembering what it saw for the next one');
INSERT INTO t SELECT 'h', (b ->> 'token')::uuid, b FROM pg_temp.begin('host-b') b;
SELECT is((SELECT (taken ->> 'resumed')::boolean FROM t WHERE name = 'h'), true, 'a resumed sweep');
SELECT results_eq($$SELECT pg_temp.seen()$$, $$VALUES ('g-i:-:true:false')$$, '... knows what the stopped one saw');
SELECT ok(wharf.abandon_sweep(1001, 'https://github.com', (SELECT token FROM t WHERE name = 'h'), NULL), 'it stops too');
INSERT INTO t SELECT 'i', (b ->> 'token')::uuid, b
  FROM pg_temp.begin('operator', '1 minute', clock_timestamp() - interval '2 hours') b;
SELECT is_empty($$SELECT pg_temp.seen()$$, 'a new sweep from the first page starts with nothing remembered');

SELECT * FROM finish();
ROLLBACK;
