-- The GitHub redelivery sweeper's state (recovery/). GitHub never redelivers
-- a failed delivery by itself; the sweeper lists a GitHub App's webhook
-- deliveries, newest first, page by page, and asks GitHub to redeliver every
-- failed one that the inbox has not stored.
--
-- One host at a time sweeps an App: begin_sweep gives a lease with a random
-- token, every later call names the token, and a host whose lease was taken
-- over is fenced out (WH412). A lease rather than a lock held for the whole
-- sweep, because a sweep spans minutes of HTTP calls that no transaction or
-- pooled session should stay open for. The cursor moves only when a page is
-- done (advance_sweep), so a sweep that dies resumes at the page it was on.
-- One delivery GUID's attempts can sit on several pages, in either order:
-- sweep_page decides a GUID over every attempt of it in the window, keeping
-- what it saw of undecided GUIDs with the cursor (wharf.redelivery_seen), so
-- a resumed or taken-over sweep decides as the first one would have.
-- request_redelivery records each ask before it is sent, so that two
-- sweepers never ask for the same failed attempt twice.
--
-- The functions a sweeping host calls are SECURITY DEFINER with a fixed
-- search_path and not executable by PUBLIC (sql/README.md, "Roles and
-- GRANTs"). A worker host that sweeps needs this GRANT besides its own (the
-- README shows it; test/recovery/roles.test.ts runs a sweep under it):
--
-- redelivery-grants:begin
-- GRANT EXECUTE ON FUNCTION wharf.begin_sweep(bigint, text, text, interval, timestamptz, interval, interval),
--   wharf.renew_sweep(bigint, text, uuid, interval), wharf.advance_sweep(bigint, text, uuid, text, interval),
--   wharf.finish_sweep(bigint, text, uuid), wharf.abandon_sweep(bigint, text, uuid, text),
--   wharf.sweep_page(bigint, text, uuid, jsonb, boolean),
--   wharf.missing_deliveries(text, text, text[]),
--   wharf.request_redelivery(bigint, text, uuid, text, bigint, interval, integer),
--   wharf.settle_redelivery(bigint, text, uuid, text, bigint, text),
--   wharf.sweep_status(bigint, text) TO wharf_worker;
-- redelivery-grants:end

-- The sweep row of App p_app_id on p_source, locked, when p_token holds its
-- lease (an expired lease that nobody took over still holds). Raises WH412
-- when it does not, 22004 when an argument is NULL.
CREATE OR REPLACE FUNCTION wharf.held_sweep(p_app_id bigint, p_source text, p_token uuid)
RETURNS wharf.redelivery_sweep
LANGUAGE plpgsql AS $$
DECLARE
  v_sweep wharf.redelivery_sweep;
BEGIN
  IF p_app_id IS NULL OR p_source IS NULL OR p_token IS NULL THEN
    RAISE EXCEPTION 'wharf: a sweep needs an app id, a source and a token' USING ERRCODE = '22004';
  END IF;
  SELECT * INTO v_sweep
    FROM wharf.redelivery_sweep
   WHERE app_id = p_app_id AND source = p_source AND lease_token = p_token
     FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: the sweep of app % on % is no longer held by this token', p_app_id, p_source
      USING ERRCODE = 'WH412';
  END IF;
  RETURN v_sweep;
END $$;

-- Leases the sweep of GitHub App p_app_id on p_source (its server, e.g.
-- https://github.com) to p_holder for p_lease. Returns {"token", "since",
-- "until", "cursor", "pages_done", "resumed"}: the deliveries to sweep are
-- those after `since` (up to about `until`), starting at GitHub's page
-- `cursor` (null: the first page). A sweep under way (one that died or gave
-- up) is resumed where it stopped; otherwise a new one covers what came
-- since the last sweep, less p_overlap (late records, clock skew), or
-- p_first_lookback for the first sweep. p_since (an operator's `recover
-- --since`) starts a new sweep from the first page back to p_since, or
-- further back when a sweep under way reached less far. A new sweep forgets
-- what the one before it saw (it reads those pages again). When another host
-- holds the lease, or is taking it right now, returns {"token": null,
-- "holder", "leased_until"} and changes nothing. 22004 for a NULL argument,
-- 22023 for an app id or interval out of range.
CREATE OR REPLACE FUNCTION wharf.begin_sweep(
  p_app_id bigint, p_source text, p_holder text, p_lease interval, p_since timestamptz DEFAULT NULL,
  p_overlap interval DEFAULT '10 minutes', p_first_lookback interval DEFAULT '1 hour')
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_sweep   wharf.redelivery_sweep;
  v_resumed boolean := false;
BEGIN
  IF p_app_id IS NULL OR p_source IS NULL OR p_holder IS NULL OR p_lease IS NULL
     OR p_overlap IS NULL OR p_first_lookback IS NULL THEN
    RAISE EXCEPTION 'wharf: begin_sweep needs an app id, a source, a holder, a lease, an overlap and a first lookback'
      USING ERRCODE = '22004';
  END IF;
  IF p_app_id < 1 OR p_source = '' OR p_holder = '' THEN
    RAISE EXCEPTION 'wharf: a sweep needs a positive app id, a source and a holder' USING ERRCODE = '22023';
  END IF;
  IF p_lease <= interval '0' OR p_overlap < interval '0' OR p_first_lookback <= interval '0' THEN
    RAISE EXCEPTION 'wharf: the lease and first lookback must be positive, the overlap not negative'
      USING ERRCODE = '22023';
  END IF;

  INSERT INTO wharf.redelivery_sweep (app_id, source) VALUES (p_app_id, p_source) ON CONFLICT DO NOTHING;
  -- A host taking or advancing the lease right now has the row locked: the
  -- other passes instead of queuing behind it.
  SELECT * INTO v_sweep
    FROM wharf.redelivery_sweep
   WHERE app_id = p_app_id AND source = p_source
     FOR UPDATE SKIP LOCKED;
  IF NOT FOUND THEN
    RETURN jsonb_build_object('token', NULL, 'holder', NULL, 'leased_until', NULL);
  END IF;
  IF v_sweep.leased_until > clock_timestamp() THEN
    RETURN jsonb_build_object('token', NULL, 'holder', v_sweep.leased_by, 'leased_until', v_sweep.leased_until);
  END IF;

  IF v_sweep.window_since IS NOT NULL AND p_since IS NULL THEN
    v_resumed := true;
  ELSE
    v_sweep.window_since := CASE
      WHEN p_since IS NULL THEN coalesce(v_sweep.swept_until - p_overlap, clock_timestamp() - p_first_lookback)
      ELSE least(p_since, v_sweep.window_since)
    END;
    v_sweep.window_until := clock_timestamp();
    v_sweep.page_cursor := NULL;
    v_sweep.pages_done := 0;
    DELETE FROM wharf.redelivery_seen WHERE app_id = p_app_id AND source = p_source;
  END IF;

  UPDATE wharf.redelivery_sweep
     SET window_since = v_sweep.window_since, window_until = v_sweep.window_until,
         page_cursor = v_sweep.page_cursor, pages_done = v_sweep.pages_done,
         leased_by = p_holder, lease_token = gen_random_uuid(), leased_until = clock_timestamp() + p_lease
   WHERE app_id = p_app_id AND source = p_source
  RETURNING * INTO v_sweep;
  RETURN jsonb_build_object(
    'token', v_sweep.lease_token, 'since', v_sweep.window_since, 'until', v_sweep.window_until,
    'cursor', v_sweep.page_cursor, 'pages_done', v_sweep.pages_done, 'resumed', v_resumed);
END $$;

-- Extends the lease of token p_token by p_lease from now, also when it
-- expired but nobody took it over. False when the token no longer holds it.
-- 22004 for a NULL argument, 22023 for a lease that is not positive.
CREATE OR REPLACE FUNCTION wharf.renew_sweep(p_app_id bigint, p_source text, p_token uuid, p_lease interval)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_app_id IS NULL OR p_source IS NULL OR p_token IS NULL OR p_lease IS NULL THEN
    RAISE EXCEPTION 'wharf: renew_sweep needs an app id, a source, a token and a lease' USING ERRCODE = '22004';
  END IF;
  IF p_lease <= interval '0' THEN
    RAISE EXCEPTION 'wharf: the lease must be positive' USING ERRCODE = '22023';
  END IF;
  UPDATE wharf.redelivery_sweep
     SET leased_until = clock_timestamp() + p_lease
   WHERE app_id = p_app_id AND source = p_source AND lease_token = p_token;
  RETURN FOUND;
END $$;

-- A page is done: the sweep goes on from GitHub's cursor p_cursor, forgets
-- the GUIDs that sweep_page decided on that page, and the lease is extended
-- by p_lease. WH412 when p_token no longer holds the sweep, 22004 for a NULL
-- argument, 22023 for a lease that is not positive.
CREATE OR REPLACE FUNCTION wharf.advance_sweep(
  p_app_id bigint, p_source text, p_token uuid, p_cursor text, p_lease interval)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_cursor IS NULL OR p_lease IS NULL THEN
    RAISE EXCEPTION 'wharf: advance_sweep needs a cursor and a lease' USING ERRCODE = '22004';
  END IF;
  IF p_lease <= interval '0' THEN
    RAISE EXCEPTION 'wharf: the lease must be positive' USING ERRCODE = '22023';
  END IF;
  PERFORM wharf.held_sweep(p_app_id, p_source, p_token);
  UPDATE wharf.redelivery_sweep
     SET page_cursor = p_cursor, pages_done = pages_done + 1, leased_until = clock_timestamp() + p_lease
   WHERE app_id = p_app_id AND source = p_source;
  DELETE FROM wharf.redelivery_seen WHERE app_id = p_app_id AND source = p_source AND decided;
END $$;

-- The sweep reached the end of its window: it is recorded as the last
-- success, `swept_until` moves to the window's end when the window joins
-- what was swept before (an operator's window that starts later leaves the
-- gap to the next scheduled sweep), the lease is given back, and what the
-- sweep saw is forgotten. Asks older than 7 days are forgotten (GitHub
-- redelivers only recent deliveries).
-- Returns the new swept_until. WH412 when p_token no longer holds the sweep,
-- 22004 for a NULL argument.
CREATE OR REPLACE FUNCTION wharf.finish_sweep(p_app_id bigint, p_source text, p_token uuid)
RETURNS timestamptz
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_sweep wharf.redelivery_sweep := wharf.held_sweep(p_app_id, p_source, p_token);
BEGIN
  UPDATE wharf.redelivery_sweep
     SET swept_until = CASE
           WHEN v_sweep.swept_until IS NULL OR v_sweep.window_since <= v_sweep.swept_until
             THEN greatest(v_sweep.swept_until, v_sweep.window_until)
           ELSE v_sweep.swept_until
         END,
         window_since = NULL, window_until = NULL, page_cursor = NULL, pages_done = 0,
         leased_by = NULL, lease_token = NULL, leased_until = NULL,
         last_success_at = clock_timestamp()
   WHERE app_id = p_app_id AND source = p_source
  RETURNING swept_until INTO v_sweep.swept_until;
  DELETE FROM wharf.redelivery_seen WHERE app_id = p_app_id AND source = p_source;
  DELETE FROM wharf.redelivery_request
   WHERE app_id = p_app_id AND source = p_source AND requested_at < clock_timestamp() - interval '7 days';
  RETURN v_sweep.swept_until;
END $$;

-- Gives the lease of p_token back before the sweep's end, keeping its window
-- and cursor for the next sweep to resume. p_error is the class of the error
-- that stopped it (recorded with its time), or NULL for a deliberate stop.
-- False when p_token no longer holds the sweep. 22004 for a NULL key or token.
CREATE OR REPLACE FUNCTION wharf.abandon_sweep(p_app_id bigint, p_source text, p_token uuid, p_error text)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_app_id IS NULL OR p_source IS NULL OR p_token IS NULL THEN
    RAISE EXCEPTION 'wharf: abandon_sweep needs an app id, a source and a token' USING ERRCODE = '22004';
  END IF;
  UPDATE wharf.redelivery_sweep
     SET leased_by = NULL, lease_token = NULL, leased_until = NULL,
         last_error = coalesce(p_error, last_error),
         last_error_at = CASE WHEN p_error IS NULL THEN last_error_at ELSE clock_timestamp() END
   WHERE app_id = p_app_id AND source = p_source AND lease_token = p_token;
  RETURN FOUND;
END $$;

-- One page of GitHub's list of the App's delivery attempts, as sweep p_token
-- read it: p_deliveries is a JSON array of {"id", "guid", "delivered_at",
-- "redelivery", "status_code", "event"}, GitHub's fields. Returns the
-- delivery GUIDs the sweep now finds failed, each with its newest failed
-- attempt in the window (after the window's `since`) and its event type,
-- newest first: every attempt of the GUID has been read, none was answered
-- 2xx (Wharf took it: stored, or refused on purpose) and one in the window
-- failed. Every attempt has been read once the GUID's original is (the
-- oldest attempt: GitHub lists newest first), or on p_last, the window's last
-- page. What the page says of GUIDs not decided yet is kept with the sweep
-- for the pages after it; advance_sweep forgets the GUIDs decided here. A
-- page read again (the sweep stopped before advance_sweep) returns the same
-- GUIDs. WH412 when p_token no longer holds the sweep, 22004 for a NULL
-- argument, 22023 for an attempt without its id, GUID, time, flag or status.
CREATE OR REPLACE FUNCTION wharf.sweep_page(
  p_app_id bigint, p_source text, p_token uuid, p_deliveries jsonb, p_last boolean)
RETURNS TABLE (guid text, delivery_id bigint, event text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
  v_sweep wharf.redelivery_sweep;
BEGIN
  IF p_deliveries IS NULL OR p_last IS NULL THEN
    RAISE EXCEPTION 'wharf: sweep_page needs the page''s deliveries and whether it is the last' USING ERRCODE = '22004';
  END IF;
  IF jsonb_typeof(p_deliveries) <> 'array' THEN
    RAISE EXCEPTION 'wharf: sweep_page needs a JSON array of deliveries' USING ERRCODE = '22023';
  END IF;
  v_sweep := wharf.held_sweep(p_app_id, p_source, p_token);
  IF EXISTS (SELECT FROM jsonb_to_recordset(p_deliveries)
                      AS a(id bigint, guid text, delivered_at timestamptz, redelivery boolean, status_code integer)
              WHERE a.id IS NULL OR a.guid IS NULL OR a.guid = '' OR a.delivered_at IS NULL OR a.redelivery IS NULL
                 OR a.status_code IS NULL) THEN
    RAISE EXCEPTION 'wharf: every delivery needs an id, a guid, delivered_at, redelivery and status_code'
      USING ERRCODE = '22023';
  END IF;

  RETURN QUERY
    WITH page AS MATERIALIZED (
      SELECT a.guid,
             max(a.id) FILTER (WHERE a.status_code NOT BETWEEN 200 AND 299
                                 AND a.delivered_at > v_sweep.window_since) AS failed_id,
             max(a.event) AS event,
             bool_or(a.status_code BETWEEN 200 AND 299) AS answered,
             -- Its original is here: nothing of it is older.
             bool_or(NOT a.redelivery) OR p_last AS decided
        FROM jsonb_to_recordset(p_deliveries)
          AS a(id bigint, guid text, delivered_at timestamptz, redelivery boolean, status_code integer, event text)
       GROUP BY a.guid
    ), seen AS (
      -- A GUID still undecided, or one that earlier pages said something
      -- of: merged into what the sweep remembers. A GUID decided on its
      -- first page needs no row: read again, the page decides it again.
      INSERT INTO wharf.redelivery_seen AS s (app_id, source, guid, failed_id, event, answered, decided)
      SELECT p_app_id, p_source, pg.guid, pg.failed_id, pg.event, pg.answered, pg.decided
        FROM page pg
       WHERE NOT pg.decided
          OR EXISTS (SELECT FROM wharf.redelivery_seen e
                      WHERE e.app_id = p_app_id AND e.source = p_source AND e.guid = pg.guid)
      ON CONFLICT (app_id, source, guid) DO UPDATE
         SET failed_id = greatest(s.failed_id, excluded.failed_id),
             event = coalesce(s.event, excluded.event),
             answered = s.answered OR excluded.answered,
             decided = s.decided OR excluded.decided
      RETURNING s.guid, s.failed_id, s.event, s.answered, s.decided
    ), decided AS (
      SELECT m.guid, m.failed_id, m.event, m.answered FROM seen m WHERE m.decided
      UNION ALL
      SELECT pg.guid, pg.failed_id, pg.event, pg.answered
        FROM page pg
       WHERE pg.decided AND NOT EXISTS (SELECT FROM seen m WHERE m.guid = pg.guid)
      UNION ALL
      -- The window's end: what earlier pages left undecided is decided now.
      SELECT e.guid, e.failed_id, e.event, e.answered
        FROM wharf.redelivery_seen e
       WHERE p_last AND e.app_id = p_app_id AND e.source = p_source
         AND NOT EXISTS (SELECT FROM page pg WHERE pg.guid = e.guid)
    )
    SELECT d.guid, d.failed_id, d.event
      FROM decided d
     WHERE d.failed_id IS NOT NULL AND NOT d.answered
     ORDER BY d.failed_id DESC;
END $$;

-- Of the delivery keys p_delivery_keys (for GitHub: X-GitHub-Delivery GUIDs,
-- which a redelivery keeps), those that provider p_provider's source
-- p_source has stored in no workspace and no installation row, in the order
-- given, each once. A delivery is stored only in the workspaces of that
-- provider and source's connections or with no workspace, so the lookups go
-- through uq_provider_event_delivery: no index on the inbox is added for
-- this. 22004 for a NULL argument.
CREATE OR REPLACE FUNCTION wharf.missing_deliveries(p_provider text, p_source text, p_delivery_keys text[])
RETURNS SETOF text
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_provider IS NULL OR p_source IS NULL OR p_delivery_keys IS NULL THEN
    RAISE EXCEPTION 'wharf: missing_deliveries needs a provider, a source and delivery keys' USING ERRCODE = '22004';
  END IF;
  RETURN QUERY
    WITH recipient AS MATERIALIZED (
      SELECT DISTINCT c.workspace_id
        FROM wharf.connection c
       WHERE c.provider = p_provider AND c.source = p_source
    ), asked AS (
      SELECT k.delivery_key, min(k.n) AS n
        FROM unnest(p_delivery_keys) WITH ORDINALITY AS k(delivery_key, n)
       WHERE k.delivery_key IS NOT NULL
       GROUP BY k.delivery_key
    )
    SELECT a.delivery_key
      FROM asked a
     WHERE NOT EXISTS (SELECT FROM wharf.provider_event e
                        WHERE e.workspace_id IS NULL AND e.provider = p_provider
                          AND e.delivery_key = a.delivery_key AND e.source = p_source)
       AND NOT EXISTS (SELECT FROM recipient r
                         JOIN wharf.provider_event e
                           ON e.workspace_id = r.workspace_id AND e.provider = p_provider
                          AND e.delivery_key = a.delivery_key
                        WHERE e.source = p_source)
     ORDER BY a.n;
END $$;

-- Before a sweep holding p_token asks GitHub to redeliver the failed attempt
-- p_delivery_id of delivery p_guid, it records the ask here and learns
-- whether to send it:
--   'ask'       send it (then settle_redelivery): nothing was asked for this
--               GUID yet, or this attempt is newer than the one last asked
--               about (that redelivery failed too), or the last ask did not
--               get through, or a sweep that lost its lease recorded it more
--               than p_stale ago and never said how it ended;
--   'asked'     an ask for this attempt or a newer one was sent;
--   'refused'   GitHub refused to redeliver this attempt (or a newer one) when
--               it was asked: the sweeper gives up on it, and says so;
--   'wait'      a sweep that lost its lease recorded an ask less than p_stale
--               ago and may be sending it still: ask again later;
--   'exhausted' it was asked p_max_asks times already.
-- WH412 when p_token no longer holds the sweep (so a host that lost its lease
-- asks nothing), 22004 for a NULL argument, 22023 for a bad id or bound.
CREATE OR REPLACE FUNCTION wharf.request_redelivery(
  p_app_id bigint, p_source text, p_token uuid, p_guid text, p_delivery_id bigint,
  p_stale interval DEFAULT '2 minutes', p_max_asks integer DEFAULT 10)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_request wharf.redelivery_request;
BEGIN
  IF p_guid IS NULL OR p_delivery_id IS NULL OR p_stale IS NULL OR p_max_asks IS NULL THEN
    RAISE EXCEPTION 'wharf: request_redelivery needs a guid, a delivery id, a stale bound and a maximum'
      USING ERRCODE = '22004';
  END IF;
  IF p_guid = '' OR p_delivery_id < 1 OR p_stale < interval '0' OR p_max_asks < 1 THEN
    RAISE EXCEPTION 'wharf: request_redelivery needs a guid, a positive delivery id and bounds'
      USING ERRCODE = '22023';
  END IF;
  -- The sweep row stays locked until commit: the asks of one App are taken
  -- one at a time, whoever calls.
  PERFORM wharf.held_sweep(p_app_id, p_source, p_token);

  INSERT INTO wharf.redelivery_request (app_id, source, guid, delivery_id, asked_by)
  VALUES (p_app_id, p_source, p_guid, p_delivery_id, p_token)
  ON CONFLICT DO NOTHING;
  IF FOUND THEN
    RETURN 'ask';
  END IF;

  SELECT * INTO v_request
    FROM wharf.redelivery_request
   WHERE app_id = p_app_id AND source = p_source AND guid = p_guid
     FOR UPDATE;
  IF p_delivery_id > v_request.delivery_id
     OR v_request.outcome = 'failed'
     OR (v_request.outcome = 'asking' AND v_request.asked_by <> p_token
         AND v_request.requested_at < clock_timestamp() - p_stale) THEN
    IF v_request.asks >= p_max_asks THEN
      RETURN 'exhausted';
    END IF;
    UPDATE wharf.redelivery_request
       SET delivery_id = greatest(delivery_id, p_delivery_id), asks = asks + 1, outcome = 'asking',
           asked_by = p_token, requested_at = clock_timestamp()
     WHERE app_id = p_app_id AND source = p_source AND guid = p_guid;
    RETURN 'ask';
  END IF;
  IF v_request.outcome = 'asking' AND v_request.asked_by <> p_token THEN
    RETURN 'wait';
  END IF;
  IF v_request.outcome = 'rejected' THEN
    RETURN 'refused';
  END IF;
  RETURN 'asked';
END $$;

-- How the ask that sweep p_token recorded for attempt p_delivery_id of
-- p_guid ended: 'accepted' (GitHub will redeliver), 'failed' (it did not get
-- through: a later sweep asks again) or 'rejected' (GitHub refused it, e.g.
-- too old: not asked again for this attempt). False when no such ask is
-- waiting for its answer. 22004 for a NULL argument, 22023 for another
-- outcome.
CREATE OR REPLACE FUNCTION wharf.settle_redelivery(
  p_app_id bigint, p_source text, p_token uuid, p_guid text, p_delivery_id bigint, p_outcome text)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_app_id IS NULL OR p_source IS NULL OR p_token IS NULL OR p_guid IS NULL OR p_delivery_id IS NULL
     OR p_outcome IS NULL THEN
    RAISE EXCEPTION 'wharf: settle_redelivery needs every argument' USING ERRCODE = '22004';
  END IF;
  IF p_outcome NOT IN ('accepted', 'failed', 'rejected') THEN
    RAISE EXCEPTION 'wharf: unknown redelivery outcome %', quote_literal(p_outcome) USING ERRCODE = '22023';
  END IF;
  UPDATE wharf.redelivery_request
     SET outcome = p_outcome
   WHERE app_id = p_app_id AND source = p_source AND guid = p_guid
     AND delivery_id = p_delivery_id AND asked_by = p_token AND outcome = 'asking';
  RETURN FOUND;
END $$;

-- Where the sweeps of App p_app_id on p_source stand, for metrics and the
-- operator: {"app_id", "source", "swept_until", "last_success_at",
-- "last_error", "last_error_at", "sweeping" (a sweep under way: {"since",
-- "until", "pages_done", "holder", "leased_until"}, or null)}; NULL when it
-- was never swept. The lease token is never shown. 22004 for a NULL argument.
CREATE OR REPLACE FUNCTION wharf.sweep_status(p_app_id bigint, p_source text)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_sweep wharf.redelivery_sweep;
BEGIN
  IF p_app_id IS NULL OR p_source IS NULL THEN
    RAISE EXCEPTION 'wharf: sweep_status needs an app id and a source' USING ERRCODE = '22004';
  END IF;
  SELECT * INTO v_sweep FROM wharf.redelivery_sweep WHERE app_id = p_app_id AND source = p_source;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  RETURN jsonb_build_object(
    'app_id', v_sweep.app_id, 'source', v_sweep.source, 'swept_until', v_sweep.swept_until,
    'last_success_at', v_sweep.last_success_at, 'last_error', v_sweep.last_error,
    'last_error_at', v_sweep.last_error_at,
    'sweeping', CASE WHEN v_sweep.window_since IS NULL THEN NULL ELSE jsonb_build_object(
      'since', v_sweep.window_since, 'until', v_sweep.window_until, 'pages_done', v_sweep.pages_done,
      'holder', v_sweep.leased_by, 'leased_until', v_sweep.leased_until) END);
END $$;

REVOKE ALL ON FUNCTION wharf.held_sweep(bigint, text, uuid),
  wharf.begin_sweep(bigint, text, text, interval, timestamptz, interval, interval),
  wharf.renew_sweep(bigint, text, uuid, interval),
  wharf.advance_sweep(bigint, text, uuid, text, interval),
  wharf.finish_sweep(bigint, text, uuid),
  wharf.abandon_sweep(bigint, text, uuid, text),
  wharf.sweep_page(bigint, text, uuid, jsonb, boolean),
  wharf.missing_deliveries(text, text, text[]),
  wharf.request_redelivery(bigint, text, uuid, text, bigint, interval, integer),
  wharf.settle_redelivery(bigint, text, uuid, text, bigint, text),
  wharf.sweep_status(bigint, text) FROM PUBLIC;
