--
-- PostgreSQL database dump
--

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: wharf; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA wharf;

--
-- Name: admission_item; Type: TYPE; Schema: wharf; Owner: -
--

CREATE TYPE wharf.admission_item AS (
	provider text,
	source text,
	delivery_key text,
	event_type text,
	route jsonb,
	subjects text[],
	payload jsonb,
	headers jsonb,
	body_sha256 bytea,
	error_code text,
	error_message text
);

--
-- Name: admission_recipient; Type: TYPE; Schema: wharf; Owner: -
--

CREATE TYPE wharf.admission_recipient AS (
	n integer,
	is_source boolean,
	connection_id bigint,
	generation bigint,
	state text,
	workspace_id bigint,
	workspace_state text
);

--
-- Name: admission_route; Type: TYPE; Schema: wharf; Owner: -
--

CREATE TYPE wharf.admission_route AS (
	n integer,
	provider text,
	source text,
	subjects text[],
	connection_signed boolean,
	body_events jsonb,
	control boolean,
	drop_reason text,
	source_id bigint
);

--
-- Name: admission_row; Type: TYPE; Schema: wharf; Owner: -
--

CREATE TYPE wharf.admission_row AS (
	n integer,
	workspace_id bigint,
	connection_id bigint,
	scope_key text,
	scope_active boolean
);

--
-- Name: abandon_sweep(bigint, text, uuid, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.abandon_sweep(p_app_id bigint, p_source text, p_token uuid, p_error text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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

--
-- Name: add_alert_rule(bigint, text, text, integer, integer, text, text, text, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.add_alert_rule(p_workspace_id bigint, p_name text, p_kind text, p_threshold integer, p_window_seconds integer, p_destination text, p_url text, p_secret text, p_account text) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_rule wharf.alert_rule;
BEGIN
  PERFORM wharf.check_alert_rule(p_name, p_kind, p_threshold, p_window_seconds, p_destination, p_url, p_secret, p_account);
  INSERT INTO wharf.alert_rule (workspace_id, name, kind, threshold, window_seconds, destination, url, secret, created_by)
  VALUES (p_workspace_id, p_name, p_kind, p_threshold, p_window_seconds, p_destination, p_url, p_secret, p_account)
  RETURNING * INTO v_rule;
  RETURN wharf.alert_rule_summary(v_rule);
END $$;

--
-- Name: admission_item(text, text, text, text, jsonb, text[], jsonb, jsonb, text, boolean); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.admission_item(p_provider text, p_source text, p_delivery_key text, p_event_type text, p_route jsonb, p_subjects text[], p_payload jsonb, p_headers jsonb, p_body_sha256 text, p_provider_known boolean) RETURNS wharf.admission_item
    LANGUAGE sql STABLE
    AS $_$
  SELECT ROW(p_provider, p_source, p_delivery_key, p_event_type, coalesce(p_route, '{}'),
             coalesce(array_remove(array_remove(p_subjects, NULL), ''), '{}'), p_payload,
             wharf.safe_headers(p_headers),
             CASE WHEN p_body_sha256 ~ '^[0-9a-f]{64}$' THEN decode(p_body_sha256, 'hex') END,
             (ARRAY['22004', '22023', '22023', '22023', '22023'])
               [wharf.admission_rule_broken(p_provider, p_source, p_delivery_key, p_event_type, p_route, p_payload, p_body_sha256,
                                            p_provider_known)],
             (ARRAY['wharf.admit: provider, source, delivery_key, event_type and payload are required',
                    format('wharf: unknown provider %s', quote_literal(p_provider)),
                    'wharf.admit: route must be a JSON object',
                    'wharf.admit: body_sha256 is a SHA-256 in lower-case hex',
                    'wharf.admit: delivery_key and event_type are at most 255 characters'])
               [wharf.admission_rule_broken(p_provider, p_source, p_delivery_key, p_event_type, p_route, p_payload, p_body_sha256,
                                            p_provider_known)]
             )::wharf.admission_item
$_$;

--
-- Name: admission_items(jsonb); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.admission_items(p_deliveries jsonb) RETURNS wharf.admission_item[]
    LANGUAGE plpgsql STABLE
    AS $_$
BEGIN
  IF p_deliveries IS NULL OR jsonb_typeof(p_deliveries) <> 'array' THEN
    RAISE EXCEPTION 'wharf.admit_many: deliveries must be a JSON array' USING ERRCODE = '22023';
  END IF;
  RETURN (
    SELECT coalesce(array_agg(
             CASE WHEN jsonb_typeof(d) <> 'object'
                    THEN ROW(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '22023',
                             'wharf.admit_many: each delivery is a JSON object')::wharf.admission_item
                  WHEN jsonb_typeof(coalesce(d->'subjects', '[]')) NOT IN ('array', 'null')
                       OR jsonb_path_exists(d, '$.subjects[*] ? (@.type() != "string" && @.type() != "null")')
                    THEN ROW(d->>'provider', d->>'source', d->>'delivery_key', d->>'event_type', NULL, NULL, NULL,
                             NULL, NULL, '22023', 'wharf.admit_many: subjects must be an array of strings')::wharf.admission_item
                  ELSE wharf.admission_item(
                         d->>'provider', d->>'source', d->>'delivery_key', d->>'event_type',
                         CASE WHEN d ? 'route' AND d->'route' <> 'null' THEN d->'route' END,
                         ARRAY(SELECT jsonb_array_elements_text(CASE jsonb_typeof(d->'subjects') WHEN 'array'
                                                                     THEN d->'subjects' ELSE '[]' END)),
                         CASE WHEN d->'payload' <> 'null' THEN d->'payload' END,
                         d->'headers', d->>'body_sha256', known.name IS NOT NULL)
             END ORDER BY n), '{}')
      FROM jsonb_array_elements(p_deliveries) WITH ORDINALITY AS a(d, n)
      LEFT JOIN wharf.provider known ON known.name = d->>'provider');
END $_$;

--
-- Name: admission_outcome(text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.admission_outcome(p_reason text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN p_reason IN ('connection-inactive', 'workspace-inactive') THEN 'refused' ELSE 'dropped' END
$$;

--
-- Name: admission_page(bigint, boolean, integer, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.admission_page(p_workspace_id bigint, p_all boolean, p_limit integer, p_before_id bigint) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
  v_entries jsonb;
  v_count   bigint;
BEGIN
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 500' USING ERRCODE = '22023';
  END IF;
  SELECT coalesce(jsonb_agg(to_jsonb(l) ORDER BY l.id DESC), '[]'), count(*) INTO v_entries, v_count
    FROM (SELECT a.id, a.at, a.provider, a.source, a.delivery_key, a.connection_id, a.workspace_id, a.reason
            FROM wharf.admission_log a
           WHERE (p_before_id IS NULL OR a.id < p_before_id)
             AND (p_all
                  OR a.workspace_id = p_workspace_id
                  -- A drop names the source connection, not a workspace.
                  OR (a.workspace_id IS NULL
                      AND a.connection_id IN (SELECT c.id FROM wharf.connection c WHERE c.workspace_id = p_workspace_id)))
           ORDER BY a.id DESC
           LIMIT p_limit + 1) l;
  IF v_count <= p_limit THEN
    RETURN jsonb_build_object('entries', v_entries, 'next_cursor', NULL);
  END IF;
  v_entries := v_entries - p_limit;
  RETURN jsonb_build_object('entries', v_entries, 'next_cursor', v_entries -> (p_limit - 1) -> 'id');
END $$;

--
-- Name: admission_recipients(wharf.admission_route[]); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.admission_recipients(p_routes wharf.admission_route[]) RETURNS wharf.admission_recipient[]
    LANGUAGE plpgsql STABLE
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET join_collapse_limit TO '1'
    SET plan_cache_mode TO 'force_generic_plan'
    SET jit TO 'off'
    AS $$
BEGIN
  RETURN ARRAY(
    SELECT ROW(r.n, true, s.id, s.generation, s.state, s.workspace_id, NULL)::wharf.admission_recipient
      FROM unnest(p_routes) r
      JOIN wharf.connection s ON s.id = r.source_id
     WHERE r.source_id IS NOT NULL AND r.drop_reason IS NULL AND NOT r.control AND r.body_events IS NULL
    UNION ALL
    SELECT ROW(r.n, false, c.id, c.generation, c.state, c.workspace_id, w.state)::wharf.admission_recipient
      FROM unnest(p_routes) r
      CROSS JOIN LATERAL (SELECT DISTINCT sub.connection_id FROM wharf.subscription sub
                           WHERE sub.subject = ANY (r.subjects)) subscribed
      -- LIMIT: a subquery of its own, which only the primary key can serve;
      -- joined plainly, the conditions below let the planner walk every
      -- connection of the source for each subscriber.
      CROSS JOIN LATERAL (SELECT c.id, c.provider, c.source, c.state, c.generation, c.workspace_id
                            FROM wharf.connection c WHERE c.id = subscribed.connection_id LIMIT 1) c
      JOIN wharf.workspace w ON w.id = c.workspace_id
     WHERE r.source_id IS NOT NULL AND r.drop_reason IS NULL AND NOT r.control AND r.body_events IS NULL
       AND c.provider = r.provider AND c.source = r.source
       AND (c.id = r.source_id OR NOT r.connection_signed));
END $$;

--
-- Name: admission_rule_broken(text, text, text, text, jsonb, jsonb, text, boolean); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.admission_rule_broken(p_provider text, p_source text, p_delivery_key text, p_event_type text, p_route jsonb, p_payload jsonb, p_body_sha256 text, p_provider_known boolean) RETURNS integer
    LANGUAGE sql STABLE
    AS $_$
  SELECT CASE
    WHEN p_provider IS NULL OR p_source IS NULL OR p_source = '' OR p_delivery_key IS NULL
         OR p_delivery_key = '' OR p_event_type IS NULL OR p_event_type = '' OR p_payload IS NULL THEN 1
    WHEN NOT p_provider_known THEN 2
    WHEN jsonb_typeof(coalesce(p_route, '{}')) <> 'object' THEN 3
    WHEN p_body_sha256 !~ '^[0-9a-f]{64}$' THEN 4
    WHEN length(p_delivery_key) > 255 OR length(p_event_type) > 255 THEN 5
  END
$_$;

--
-- Name: admit(text, text, text, text, jsonb, text[], jsonb, jsonb, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.admit(p_provider text, p_source text, p_delivery_key text, p_event_type text, p_route jsonb, p_subjects text[], p_payload jsonb, p_headers jsonb, p_body_sha256 text DEFAULT NULL::text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  -- A variable, not an argument expression: admission_item is inlined only
  -- while its arguments are cheap, and a call to provider_known is not.
  v_known    boolean := wharf.provider_known(p_provider);
  v_item     wharf.admission_item := wharf.admission_item(p_provider, p_source, p_delivery_key, p_event_type,
                                                           p_route, p_subjects, p_payload, p_headers, p_body_sha256,
                                                           v_known);
BEGIN
  IF v_item.error_code IS NOT NULL THEN
    RAISE EXCEPTION '%', v_item.error_message USING ERRCODE = v_item.error_code;
  END IF;
  RETURN wharf.admit_item(v_item);
END $$;

--
-- Name: admit_item(wharf.admission_item); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.admit_item(p_item wharf.admission_item) RETURNS jsonb
    LANGUAGE plpgsql
    AS $_$
DECLARE
  v_route    jsonb := p_item.route;
  v_subject  text := p_item.subjects[1];
  v_source   wharf.connection;
  v_read     wharf.admission_recipient[];  -- under the source's lifecycle lock
  v_events   jsonb := '[]'::jsonb;
  v_refused  jsonb := '[]'::jsonb;
  v_drop     text;
  v_ws       record;
  v_stored   boolean := false;
  -- Signed with a secret one workspace shares with the provider (GitLab,
  -- Outline, Forgejo, Standard Webhooks): the body is only as trusted as that
  -- workspace, so it reaches that connection alone, whatever it names.
  v_connection_signed boolean := v_route ? 'connection_id';
BEGIN
  -- Held to commit: a claimer going idle (mark_idle) waits for this
  -- admission, so that the claim it makes next sees the row (rule 6).
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;

  -- 0. A body signed alone, stored before from this source: the rows already
  -- stored answer (body_stored). Its lock makes concurrent admissions of one
  -- body take turns (class 2 of the one lock order, sql/70).
  IF p_item.body_sha256 IS NOT NULL THEN
    PERFORM pg_advisory_xact_lock(wharf.lifecycle_key('body',
      p_item.source || ' ' || coalesce(v_route->>'connection_id', '') || ' ' || encode(p_item.body_sha256, 'hex')));
    v_events := wharf.body_stored(p_item);
    IF v_events IS NOT NULL THEN
      RETURN jsonb_build_object('delivery_key', p_item.delivery_key, 'events', v_events,
                                'refused', '[]'::jsonb, 'dropped', NULL);
    END IF;
    v_events := '[]'::jsonb;
  END IF;

  -- 1. Control events: one installation row in the provider's system scope.
  IF v_route->'control' = 'true' THEN
    IF wharf.is_control_event(p_item.provider, p_item.event_type, v_route, p_item.payload) THEN
      v_events := jsonb_build_array(wharf.store_event(p_item, NULL, NULL, 'system:' || p_item.provider || ':' || p_item.source));
      v_stored := v_events->0->>'outcome' = 'stored';
    ELSE
      v_drop := 'invalid-event-route';
    END IF;
  ELSE
    -- 3. Lifecycle lock, taken before rule 2 reads the source: the source's,
    -- shared, before anything about it is read (class 3 of the one lock
    -- order, sql/70). Every change of
    -- its connections, their subscriptions or their workspaces holds it
    -- exclusive: it committed before the reads below, or waits until this
    -- admission commits. Queued fairly, so no stream of admissions starves a
    -- change.
    PERFORM pg_advisory_xact_lock_shared(wharf.lifecycle_key('source', wharf.source_lock_id(p_item.provider, p_item.source)));

    -- 2. Source: the connection named by a verified route fact.
    IF v_route ? 'connection_id' THEN
      SELECT * INTO v_source FROM wharf.connection
       WHERE id = CASE WHEN v_route->>'connection_id' ~ '^[0-9]{1,18}$'
                       THEN (v_route->>'connection_id')::bigint END
         AND provider = p_item.provider AND source = p_item.source;
    ELSIF v_route ? 'installation_id' THEN
      SELECT * INTO v_source FROM wharf.connection
       WHERE provider = p_item.provider AND source = p_item.source AND kind = 'app_installation'
         AND external_id = v_route->>'installation_id';
    ELSIF v_route ? 'team_id' THEN
      SELECT * INTO v_source FROM wharf.connection
       WHERE provider = p_item.provider AND source = p_item.source AND kind = 'slack_team'
         AND external_id = v_route->>'team_id';
    ELSE
      v_drop := 'work-event-without-source';
    END IF;

    IF v_drop IS NULL AND v_source.id IS NULL THEN
      v_drop := 'unknown-source';
    ELSIF v_drop IS NULL AND v_subject IS NULL THEN
      v_drop := 'work-event-without-subject';
    ELSIF v_drop IS NULL AND jsonb_typeof(v_source.route->'subject_prefixes') = 'array' THEN
      -- (A test of its own: a connection without prefixes runs no query here.)
      IF NOT EXISTS (SELECT FROM jsonb_array_elements_text(v_source.route->'subject_prefixes') p
                      WHERE starts_with(v_subject, p)) THEN
        v_drop := 'route-mismatch';
      END IF;
    END IF;
  END IF;

  IF v_drop IS NULL AND v_source.id IS NOT NULL THEN
    -- 3. The source and recipients, read once under the source's lock.
    v_read := wharf.admission_recipients(ARRAY[ROW(1, p_item.provider, p_item.source, p_item.subjects, v_connection_signed,
                                                   NULL, false, NULL, v_source.id)::wharf.admission_route]);

    -- 4. Activity: the source itself must be ACTIVE (or PAUSED: a paused
    -- workspace or connection stores and holds); then per workspace.
    IF NOT EXISTS (SELECT FROM unnest(v_read) f WHERE f.is_source AND f.state IN ('ACTIVE', 'PAUSED')) THEN
      v_drop := 'source-inactive';
    ELSIF NOT EXISTS (SELECT FROM unnest(v_read) f WHERE NOT f.is_source) THEN
      v_drop := 'no-subscriber';
    ELSE
      FOR v_ws IN
        SELECT f.workspace_id,
               bool_or(f.workspace_state IN ('ACTIVE', 'PAUSED')) AS workspace_active,
               min(f.connection_id) FILTER (WHERE f.state IN ('ACTIVE', 'PAUSED')) AS active_connection_id,
               jsonb_agg(f.connection_id ORDER BY f.connection_id) AS connection_ids
          FROM unnest(v_read) f WHERE NOT f.is_source
         GROUP BY 1 ORDER BY 1
      LOOP
        IF v_ws.workspace_active AND v_ws.active_connection_id IS NOT NULL THEN
          -- 5. Insert: one row per admitted workspace, due at once.
          v_events := v_events || wharf.store_event(p_item, v_ws.workspace_id, v_ws.active_connection_id,
                                                    v_ws.workspace_id || ':' || p_item.provider || ':' || v_subject);
          v_stored := v_stored OR v_events->-1->>'outcome' = 'stored';
        ELSE
          v_refused := v_refused || (
            SELECT jsonb_agg(jsonb_build_object('connection_id', c::bigint, 'workspace_id', v_ws.workspace_id,
                                                'reason', CASE WHEN v_ws.workspace_active THEN 'connection-inactive'
                                                               ELSE 'workspace-inactive' END))
              FROM jsonb_array_elements(v_ws.connection_ids) c);
        END IF;
      END LOOP;
    END IF;
  END IF;

  -- Every refusal and drop, in order: no payload, no header.
  IF v_drop IS NOT NULL OR jsonb_array_length(v_refused) > 0 THEN
    INSERT INTO wharf.admission_log (provider, source, delivery_key, connection_id, workspace_id, reason)
    SELECT p_item.provider, p_item.source, p_item.delivery_key, (r->>'connection_id')::bigint, (r->>'workspace_id')::bigint, r->>'reason'
      FROM jsonb_array_elements(v_refused) WITH ORDINALITY AS x(r, o)
    UNION ALL
    SELECT p_item.provider, p_item.source, p_item.delivery_key, v_source.id, NULL, v_drop WHERE v_drop IS NOT NULL;
  END IF;

  -- 6. Wake-up, delivered at commit, only while some claimer is idle.
  IF v_stored THEN
    PERFORM wharf.notify_idle_claimers();
  END IF;

  RETURN jsonb_build_object('delivery_key', p_item.delivery_key, 'events', v_events,
                            'refused', v_refused, 'dropped', v_drop);
END $_$;

--
-- Name: admit_items(wharf.admission_item[]); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.admit_items(p_items wharf.admission_item[]) RETURNS jsonb[]
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    SET jit TO 'off'
    AS $_$
DECLARE
  v_routes    wharf.admission_route[];  -- per item: v_routes[n] is item n's
  v_read      wharf.admission_recipient[];  -- read once, under the source locks
  v_segments  integer[];  -- per item: the segment it is stored in, from 1
  v_source_active boolean[];  -- per item: its source ACTIVE or PAUSED
  v_subscribed    boolean[];  -- per item: some recipient read
  v_rows      wharf.admission_row[];
  v_events    jsonb[];   -- per item, the receipt's events
  v_refused   jsonb[];   -- per item, the receipt's refusals
  v_drops     text[];    -- per item, the drop reason
  v_stored    boolean := false;
  v_ids       bigint[] := ARRAY[]::bigint[];  -- the rows this call stored ...
  v_keys      text[] := ARRAY[]::text[];    -- ... and their dedupe keys
  v_first     integer;   -- the item that starts a segment
  v_answer    jsonb;     -- ... and the rows its body already has
  v_answered  integer[] := ARRAY[]::integer[];  -- the items a segment answered so
  v_existing  text[];    -- the scopes of those items that existed before
BEGIN
  IF cardinality(p_items) = 0 THEN
    RETURN ARRAY[]::jsonb[];
  END IF;
  -- Held to commit: a claimer going idle (mark_idle) waits for this
  -- admission, so that the claim it makes next sees its rows (rule 6).
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;

  -- 0. and 3. The locks before anything is read (classes 2 and 3 of the one
  -- lock order, sql/70), each class in key order, in one statement:
  --  - every body signed alone, exclusive: concurrent admissions of one body
  --    take turns, so that the second is the first's duplicate (rule 0);
  --  - every source of a work event, shared: a change of the source's
  --    connections, their subscriptions or their workspaces (which takes it
  --    exclusive) commits before the reads below, or waits until this
  --    transaction commits. Queued fairly, so no stream of admissions starves
  --    a change.
  PERFORM CASE WHEN l.shared THEN pg_advisory_xact_lock_shared(l.key) ELSE pg_advisory_xact_lock(l.key) END
     FROM (SELECT false AS shared, wharf.lifecycle_key('body',
                    i.source || ' ' || coalesce(i.route->>'connection_id', '') || ' ' || encode(i.body_sha256, 'hex')) AS key
             FROM unnest(p_items) i
            WHERE i.error_code IS NULL AND i.body_sha256 IS NOT NULL
           UNION
           SELECT true, wharf.lifecycle_key('source', wharf.source_lock_id(i.provider, i.source))
             FROM unnest(p_items) i
            WHERE i.error_code IS NULL AND NOT coalesce(i.route->'control' = 'true', false)
           ORDER BY 1, 2) l;

  -- 0.-2. A body signed alone, stored before from this source (a redelivery
  -- under another delivery id, or a captured body relabelled by its unsigned
  -- headers): the rows already stored answer. A connection-signed body
  -- (Forgejo) only ever answers with its own connection's rows: two
  -- workspaces' webhooks on one repository receive identical bodies, and
  -- neither may see, or pre-empt, the other's. Then control events, and the
  -- source of every other item, with the drops these rules decide; an item
  -- refused by its arguments gets a route without source, drop or control,
  -- which nothing below admits.
  SELECT array_agg(ROW(r.n, i.provider, i.source, i.subjects, i.route ? 'connection_id', r.body_events,
                       r.control, r.drop_reason, r.source_id)::wharf.admission_route ORDER BY r.n)
    INTO v_routes
    FROM unnest(p_items) WITH ORDINALITY AS i(provider, source, delivery_key, event_type, route, subjects,
                                              payload, headers, body_sha256, error_code, error_message, n)
    CROSS JOIN LATERAL (
      SELECT i.n::integer AS n,
             CASE WHEN i.body_sha256 IS NOT NULL THEN wharf.body_stored(p_items[i.n]) END AS body_events,
             i.error_code IS NULL AND coalesce(i.route->'control' = 'true', false) AS control,
             CASE
               WHEN i.error_code IS NOT NULL THEN NULL
               WHEN i.route->'control' = 'true' THEN
                 CASE WHEN wharf.is_control_event(i.provider, i.event_type, i.route, i.payload)
                      THEN NULL ELSE 'invalid-event-route' END
               WHEN NOT (i.route ? 'connection_id' OR i.route ? 'installation_id' OR i.route ? 'team_id')
                 THEN 'work-event-without-source'
               WHEN src.id IS NULL THEN 'unknown-source'
               WHEN cardinality(i.subjects) = 0 THEN 'work-event-without-subject'
               WHEN jsonb_typeof(src.route->'subject_prefixes') = 'array'
                    AND NOT EXISTS (SELECT FROM jsonb_array_elements_text(src.route->'subject_prefixes') p
                                     WHERE starts_with(i.subjects[1], p))
                 THEN 'route-mismatch'
             END AS drop_reason,
             CASE WHEN i.error_code IS NULL AND NOT coalesce(i.route->'control' = 'true', false) THEN src.id END AS source_id
        FROM (SELECT 1) one
        LEFT JOIN LATERAL (
          SELECT c.id, c.route FROM wharf.connection c
           WHERE i.route ? 'connection_id'
             AND c.id = CASE WHEN i.route->>'connection_id' ~ '^[0-9]{1,18}$' THEN (i.route->>'connection_id')::bigint END
             AND c.provider = i.provider AND c.source = i.source
          UNION ALL
          SELECT c.id, c.route FROM wharf.connection c
           WHERE NOT i.route ? 'connection_id' AND i.route ? 'installation_id'
             AND c.provider = i.provider AND c.source = i.source AND c.kind = 'app_installation'
             AND c.external_id = i.route->>'installation_id'
          UNION ALL
          SELECT c.id, c.route FROM wharf.connection c
           WHERE NOT i.route ? 'connection_id' AND NOT i.route ? 'installation_id' AND i.route ? 'team_id'
             AND c.provider = i.provider AND c.source = i.source AND c.kind = 'slack_team'
             AND c.external_id = i.route->>'team_id'
          LIMIT 1
        ) src ON i.error_code IS NULL
    ) r;
  -- A body stored before answers alone: nothing else is decided for it.
  v_routes := ARRAY(SELECT ROW(r.n, r.provider, r.source, r.subjects, r.connection_signed,
                               r.body_events, r.control AND r.body_events IS NULL,
                               CASE WHEN r.body_events IS NULL THEN r.drop_reason END,
                               CASE WHEN r.body_events IS NULL THEN r.source_id END)::wharf.admission_route
                      FROM unnest(v_routes) r ORDER BY r.n);

  -- The segments: each item whose body an earlier valid item carries starts
  -- one (a source and digest, whatever the connection: more segments than
  -- needed never change what is stored, fewer would).
  IF cardinality(p_items) = 1 THEN
    v_segments := '{1}';
  ELSE
    v_segments := ARRAY(
      SELECT 1 + count(*) FILTER (WHERE x.repeats) OVER (ORDER BY x.n)
        FROM (SELECT i.n, i.error_code IS NULL AND i.body_sha256 IS NOT NULL
                          AND row_number() OVER (PARTITION BY i.error_code IS NULL AND i.body_sha256 IS NOT NULL,
                                                              i.source, i.body_sha256 ORDER BY i.n) > 1 AS repeats
                FROM unnest(p_items) WITH ORDINALITY AS i(provider, source, delivery_key, event_type, route, subjects,
                                                          payload, headers, body_sha256, error_code, error_message, n)) x
       ORDER BY x.n);
  END IF;

  -- 3. The recipients, read once under the source locks (nearly every
  -- array has an item to route: no statement first to find out).
  v_read := wharf.admission_recipients(v_routes);

  -- 4. Activity, per item: whether its source is ACTIVE (or PAUSED, which
  -- stores and holds) and whether anyone subscribes; one filler row per item,
  -- so that every item has its slot.
  SELECT array_agg(x.source_active ORDER BY x.n), array_agg(x.subscribed ORDER BY x.n)
    INTO v_source_active, v_subscribed
    FROM (SELECT f.n, bool_or(f.is_source AND f.state IN ('ACTIVE', 'PAUSED')) AS source_active,
                 coalesce(bool_or(NOT f.is_source), false) AS subscribed
            FROM (SELECT k AS n, NULL::boolean AS is_source, NULL::text AS state
                    FROM generate_series(1, cardinality(p_items)) k
                  UNION ALL
                  SELECT l.n, l.is_source, l.state FROM unnest(v_read) l) f
           GROUP BY f.n) x;

  -- ... then per workspace of each item with an active source (it admits
  -- when ACTIVE or PAUSED, through a connection ACTIVE or PAUSED), and 5.
  -- the rows to store: one per admitted workspace, or the control row in the
  -- provider's system scope.
  WITH recipients AS (
    SELECT l.n, l.connection_id, l.workspace_id,
           bool_or(l.workspace_state IN ('ACTIVE', 'PAUSED')) OVER ws AS workspace_active,
           bool_or(l.workspace_state = 'ACTIVE') OVER ws AS claimable,
           min(l.connection_id) FILTER (WHERE l.state IN ('ACTIVE', 'PAUSED')) OVER ws AS active_connection_id
      FROM unnest(v_read) l
     WHERE NOT l.is_source AND v_source_active[l.n]
    WINDOW ws AS (PARTITION BY l.n, l.workspace_id)
  )
  SELECT
    -- Rows to store, in array order, each item's workspaces in id order.
    ARRAY(SELECT DISTINCT ROW(x.n, x.workspace_id, x.active_connection_id,
                              x.workspace_id || ':' || (v_routes[x.n]).provider || ':' || ((p_items[x.n]).subjects)[1],
                              x.claimable)::wharf.admission_row
            FROM recipients x
           WHERE x.workspace_active AND x.active_connection_id IS NOT NULL
          UNION ALL
          SELECT ROW(r.n, NULL, NULL, 'system:' || r.provider || ':' || r.source, true)::wharf.admission_row
            FROM unnest(v_routes) r
           WHERE r.control AND r.body_events IS NULL AND r.drop_reason IS NULL
          ORDER BY 1),
    -- Refusals: every recipient of a workspace that admits nothing.
    ARRAY(SELECT coalesce(jsonb_agg(jsonb_build_object(
                                      'connection_id', f.connection_id, 'workspace_id', f.workspace_id,
                                      'reason', CASE WHEN f.workspace_active THEN 'connection-inactive'
                                                     ELSE 'workspace-inactive' END)
                                    ORDER BY f.workspace_id, f.connection_id)
                            FILTER (WHERE f.connection_id IS NOT NULL), '[]')
            FROM (SELECT k AS n, NULL::bigint AS connection_id, NULL::bigint AS workspace_id,
                         NULL::boolean AS workspace_active
                    FROM generate_series(1, cardinality(p_items)) k
                  UNION ALL
                  SELECT x.n, x.connection_id, x.workspace_id, x.workspace_active FROM recipients x
                   WHERE NOT (x.workspace_active AND x.active_connection_id IS NOT NULL)) f
           GROUP BY f.n ORDER BY f.n),
    -- Drops decided after the reads.
    ARRAY(SELECT CASE WHEN (p_items[k]).error_code IS NOT NULL OR (v_routes[k]).body_events IS NOT NULL THEN NULL
                      WHEN (v_routes[k]).drop_reason IS NOT NULL THEN (v_routes[k]).drop_reason
                      WHEN (v_routes[k]).control THEN NULL
                      WHEN NOT v_source_active[k] THEN 'source-inactive'
                      WHEN NOT v_subscribed[k] THEN 'no-subscriber'
                 END
            FROM generate_series(1, cardinality(p_items)) k ORDER BY k)
    INTO v_rows, v_refused, v_drops;

  -- The scope of every row to store, made when missing and locked, in the
  -- one lock order (lock_scopes, sql/20): the last class of locks, taken for
  -- every segment at once, so that no segment waits for a scope lock while
  -- holding those of the segments before it. Locked before the rows are
  -- inserted, so that within a scope ids are assigned and committed in the
  -- same order and a claim never passes over a row still being inserted. An
  -- item that starts a segment may yet be answered by its body's rows: the
  -- scopes it would make are noted, to be removed again if it is.
  IF v_segments[cardinality(v_segments)] > 1 THEN
    v_existing := ARRAY(SELECT s.scope_key FROM wharf.scope s
                         WHERE s.scope_key = ANY (ARRAY(SELECT r.scope_key FROM unnest(v_rows) r
                                                         WHERE v_segments[r.n] > 1
                                                           AND r.n = array_position(v_segments, v_segments[r.n]))));
  END IF;
  PERFORM wharf.lock_scopes(ARRAY(SELECT r.scope_key FROM unnest(v_rows) r),
                            ARRAY(SELECT r.workspace_id FROM unnest(v_rows) r),
                            ARRAY(SELECT r.scope_active FROM unnest(v_rows) r));

  -- 5. Insert, segment by segment, in array order, each workspace's row due
  -- at once; a delivery stored before (or earlier in the array) is a
  -- duplicate. The new rows are the youngest of their scopes: each heads its
  -- scope when it has no head. The scope trigger is told that this statement
  -- keeps the scopes (sql/20).
  PERFORM set_config('wharf.keeping_scopes', 'on', true);
  FOR v_segment IN 1 .. v_segments[cardinality(v_segments)] LOOP
    IF v_segment > 1 THEN
      -- Its first item repeats a body of the segments before: what they
      -- stored answers it now, and nothing else is decided for it.
      v_first := array_position(v_segments, v_segment);
      v_answer := wharf.body_stored(p_items[v_first]);
      IF v_answer IS NOT NULL THEN
        v_routes := ARRAY(SELECT CASE WHEN r.n = v_first
                                      THEN ROW(r.n, r.provider, r.source, r.subjects, r.connection_signed, v_answer,
                                               false, NULL, NULL)::wharf.admission_route
                                      ELSE r END
                            FROM unnest(v_routes) r ORDER BY r.n);
        v_refused[v_first] := '[]';
        v_drops[v_first] := NULL;
        v_answered := v_answered || v_first;
      END IF;
    END IF;
    WITH stored AS (
      INSERT INTO wharf.provider_event
        (workspace_id, provider, delivery_key, event_type, subject, scope_key, source, connection_id,
         payload, headers, body_sha256)
      SELECT r.workspace_id, i.provider, i.delivery_key, i.event_type, i.subjects[1], r.scope_key, i.source,
             r.connection_id, i.payload, i.headers, i.body_sha256
        FROM unnest(v_rows) WITH ORDINALITY AS r(n, workspace_id, connection_id, scope_key, scope_active, k)
        CROSS JOIN LATERAL (SELECT (p_items[r.n]).*) i
       WHERE v_segments[r.n] = v_segment AND (v_routes[r.n]).body_events IS NULL
       ORDER BY r.k
      ON CONFLICT (workspace_id, provider, delivery_key) DO NOTHING
      RETURNING id, scope_key, next_attempt_at, provider || ':' || event_type AS kind,
                coalesce(workspace_id::text, '') || ' ' || provider || ' ' || delivery_key AS dedupe_key
    ), heads AS (
      UPDATE wharf.scope s
         SET head_id = h.id, head_due_at = h.due_at, head_kind = h.kind, ready_at = greatest(h.due_at, clock_timestamp())
        FROM (SELECT DISTINCT ON (x.scope_key) x.scope_key, x.id, x.next_attempt_at AS due_at, x.kind
                FROM stored x ORDER BY x.scope_key, x.id) h
       WHERE s.scope_key = h.scope_key AND s.head_id IS NULL
    )
    SELECT v_stored OR count(*) > 0, v_ids || coalesce(array_agg(id), '{}'), v_keys || coalesce(array_agg(dedupe_key), '{}')
      INTO v_stored, v_ids, v_keys FROM stored;
  END LOOP;
  PERFORM set_config('wharf.keeping_scopes', 'off', true);
  -- The stored rows' destinations' deliveries commit with them (sql/88).
  IF cardinality(v_ids) > 0
     AND wharf.workspaces_route(ARRAY(SELECT DISTINCT r.workspace_id FROM unnest(v_rows) r WHERE r.workspace_id IS NOT NULL)) THEN
    PERFORM wharf.route_events(v_ids);
  END IF;
  -- The scopes made in vain for answered items, as if never made: one after
  -- another, an answered item locks no scope.
  IF cardinality(v_answered) > 0 THEN
    DELETE FROM wharf.scope s
     WHERE s.scope_key = ANY (ARRAY(SELECT r.scope_key FROM unnest(v_rows) r WHERE r.n = ANY (v_answered)
                                    EXCEPT
                                    SELECT r.scope_key FROM unnest(v_rows) r WHERE r.n <> ALL (v_answered)))
       AND s.scope_key <> ALL (v_existing) AND s.head_id IS NULL AND s.leased_id IS NULL;
  END IF;

  -- The receipts' events: each row's id, stored by this call (the first row
  -- of its dedupe key, matched to what the INSERT returned by grouping both
  -- by that key) or found stored before. The rows of an item a segment
  -- answered with its body's rows were never offered.
  v_events := ARRAY(
    SELECT coalesce(jsonb_agg(jsonb_build_object('workspace_id', e.workspace_id, 'event_id', e.event_id,
                                                 'outcome', e.outcome)
                              ORDER BY e.workspace_id NULLS FIRST) FILTER (WHERE e.is_row), '[]')
      FROM (SELECT k AS n, false AS is_row, NULL::bigint AS workspace_id, NULL::bigint AS event_id, NULL::text AS outcome
              FROM generate_series(1, cardinality(p_items)) k
            UNION ALL
            SELECT x.n, true, x.workspace_id, coalesce(x.stored_id, d.id),
                   CASE WHEN x.stored_id IS NOT NULL THEN 'stored' ELSE 'duplicate' END
              FROM (SELECT y.n, y.k, y.workspace_id, y.provider, y.delivery_key,
                           CASE WHEN y.k = min(y.k) OVER same_key THEN max(y.stored_id) OVER same_key END AS stored_id
                      FROM (SELECT r.n, r.k, r.workspace_id, i.provider, i.delivery_key,
                                   coalesce(r.workspace_id::text, '') || ' ' || i.provider || ' ' || i.delivery_key AS dedupe_key,
                                   NULL::bigint AS stored_id
                              FROM unnest(v_rows) WITH ORDINALITY AS r(n, workspace_id, connection_id, scope_key, scope_active, k)
                              CROSS JOIN LATERAL (SELECT (p_items[r.n]).provider, (p_items[r.n]).delivery_key) i
                             WHERE (v_routes[r.n]).body_events IS NULL
                            UNION ALL
                            SELECT NULL, NULL, NULL, NULL, NULL, s.dedupe_key, s.id
                              FROM unnest(v_ids, v_keys) AS s(id, dedupe_key)) y
                    WINDOW same_key AS (PARTITION BY y.dedupe_key)) x
              LEFT JOIN LATERAL (
                SELECT e.id FROM wharf.provider_event e
                 WHERE x.stored_id IS NULL AND x.workspace_id IS NOT NULL
                   AND e.workspace_id = x.workspace_id AND e.provider = x.provider AND e.delivery_key = x.delivery_key
                UNION ALL
                SELECT e.id FROM wharf.provider_event e
                 WHERE x.stored_id IS NULL AND x.workspace_id IS NULL AND e.workspace_id IS NULL
                   AND e.provider = x.provider AND e.delivery_key = x.delivery_key
              ) d ON true
             WHERE x.k IS NOT NULL) e
     GROUP BY e.n
     ORDER BY e.n);

  -- Every refusal and drop, in array order: no payload, no header. (Tested
  -- as expressions, not a query: most arrays have none.)
  IF cardinality(array_remove(v_drops, NULL)) > 0
     OR v_refused <> array_fill('[]'::jsonb, ARRAY[cardinality(p_items)]) THEN
    INSERT INTO wharf.admission_log (provider, source, delivery_key, connection_id, workspace_id, reason)
    SELECT i.provider, i.source, i.delivery_key, x.connection_id, x.workspace_id, x.reason
      FROM generate_series(1, cardinality(p_items)) k(n)
      CROSS JOIN LATERAL (SELECT (p_items[k.n]).*) i
      CROSS JOIN LATERAL (
        SELECT (f->>'connection_id')::bigint AS connection_id, (f->>'workspace_id')::bigint AS workspace_id,
               f->>'reason' AS reason, o AS rank
          FROM jsonb_array_elements(v_refused[k.n]) WITH ORDINALITY AS f(f, o)
        UNION ALL
        SELECT (v_routes[k.n]).source_id, NULL, v_drops[k.n], 0
         WHERE v_drops[k.n] IS NOT NULL
      ) x
     ORDER BY k.n, x.rank;
  END IF;

  -- 6. Wake-up, delivered at commit, only while some claimer is idle.
  IF v_stored THEN
    PERFORM wharf.notify_idle_claimers();
  END IF;

  RETURN ARRAY(
    SELECT CASE
             WHEN i.error_code IS NOT NULL
               THEN jsonb_build_object('error', jsonb_build_object('code', i.error_code, 'message', i.error_message))
             ELSE jsonb_build_object('delivery_key', i.delivery_key,
                                     'events', coalesce(r.body_events, v_events[k.n]),
                                     'refused', CASE WHEN r.body_events IS NULL THEN v_refused[k.n] ELSE '[]' END,
                                     'dropped', v_drops[k.n])
           END
      FROM generate_series(1, cardinality(p_items)) k(n)
      CROSS JOIN LATERAL (SELECT (p_items[k.n]).*) i
      CROSS JOIN LATERAL (SELECT (v_routes[k.n]).body_events) r
     ORDER BY k.n);
END $_$;

--
-- Name: admit_many(jsonb); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.admit_many(p_deliveries jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_items wharf.admission_item[] := wharf.admission_items(p_deliveries);
BEGIN
  -- One delivery (a receiver's lone request, the common case at low load):
  -- admit's own path, whose fixed cost is a third of admit_items' plans over
  -- arrays (bench/RESULTS.md §1).
  IF cardinality(v_items) = 1 AND v_items[1].error_code IS NULL THEN
    RETURN jsonb_build_array(wharf.admit_item(v_items[1]));
  END IF;
  RETURN to_jsonb(wharf.admit_items(v_items));
END $$;

--
-- Name: advance_sweep(bigint, text, uuid, text, interval); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.advance_sweep(p_app_id bigint, p_source text, p_token uuid, p_cursor text, p_lease interval) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: alert; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.alert (
    id bigint NOT NULL,
    rule_id bigint NOT NULL,
    workspace_id bigint,
    dedupe_key text NOT NULL,
    kind text NOT NULL,
    facts jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    last_attempt_at timestamp with time zone,
    last_status integer,
    last_error text,
    delivered_at timestamp with time zone,
    test boolean DEFAULT false NOT NULL,
    CONSTRAINT alert_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'delivered'::text, 'failed'::text])))
);

--
-- Name: alert_about(wharf.alert); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.alert_about(a wharf.alert) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE
    WHEN a.test THEN 'test alert'
    WHEN a.facts ? 'issue' THEN format('issue %s: %s %s %s', a.facts -> 'issue' ->> 'id', a.facts -> 'issue' ->> 'provider',
                                       a.facts -> 'issue' ->> 'event_type', a.facts -> 'issue' ->> 'error_class')
    WHEN a.facts ? 'scope_key' THEN format('scope %s (head event %s)', a.facts ->> 'scope_key', a.facts -> 'head' ->> 'id')
    WHEN a.kind = 'dead_letter_rate' THEN format('%s dead letters in %ss', a.facts ->> 'dead', a.facts ->> 'window_seconds')
    WHEN a.kind = 'oldest_due_age' THEN format('an event due for %ss', a.facts ->> 'age_seconds')
    ELSE a.kind
  END
$$;

--
-- Name: alert_rule; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.alert_rule (
    id bigint NOT NULL,
    workspace_id bigint,
    name text NOT NULL,
    kind text NOT NULL,
    threshold integer,
    window_seconds integer,
    destination text NOT NULL,
    url text NOT NULL,
    secret text,
    created_by text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_by text,
    updated_at timestamp with time zone,
    CONSTRAINT alert_rule_check CHECK (((destination = 'webhook'::text) = (secret IS NOT NULL))),
    CONSTRAINT alert_rule_check1 CHECK (((kind = 'dead_letter_rate'::text) = (threshold IS NOT NULL))),
    CONSTRAINT alert_rule_check2 CHECK (((kind = ANY (ARRAY['dead_letter_rate'::text, 'oldest_due_age'::text, 'stuck_scope'::text])) = (window_seconds IS NOT NULL))),
    CONSTRAINT alert_rule_destination_check CHECK ((destination = ANY (ARRAY['webhook'::text, 'slack'::text]))),
    CONSTRAINT alert_rule_kind_check CHECK ((kind = ANY (ARRAY['issue_opened'::text, 'issue_reopened'::text, 'dead_letter_rate'::text, 'oldest_due_age'::text, 'stuck_scope'::text]))),
    CONSTRAINT alert_rule_name_check CHECK ((name ~ '^[A-Za-z0-9][A-Za-z0-9 _.:@-]{0,63}$'::text)),
    CONSTRAINT alert_rule_secret_check CHECK ((secret ~ '^whsec_[A-Za-z0-9+/]+=*$'::text)),
    CONSTRAINT alert_rule_threshold_check CHECK ((threshold > 0)),
    CONSTRAINT alert_rule_url_check CHECK (((url ~ '^https://[^/?#@\s]+'::text) OR (url ~ '^http://(127\.0\.0\.1|localhost|\[::1\])(:[0-9]+)?(/|$)'::text))),
    CONSTRAINT alert_rule_window_seconds_check CHECK ((window_seconds > 0))
);

--
-- Name: alert_rule_summary(wharf.alert_rule); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.alert_rule_summary(r wharf.alert_rule) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  SELECT jsonb_build_object(
    'id', r.id, 'workspace_id', r.workspace_id, 'name', r.name, 'kind', r.kind, 'threshold', r.threshold,
    'window_seconds', r.window_seconds, 'destination', r.destination,
    'destination_host', substring(r.url FROM '^https?://([^/?#]+)'),
    'created_by', r.created_by, 'created_at', r.created_at, 'updated_by', r.updated_by, 'updated_at', r.updated_at)
$$;

--
-- Name: alert_summary(wharf.alert, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.alert_summary(a wharf.alert, p_rule_name text) RETURNS jsonb
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT jsonb_build_object(
    'id', a.id, 'rule_id', a.rule_id, 'rule_name', p_rule_name, 'workspace_id', a.workspace_id,
    'kind', a.kind, 'test', a.test, 'about', wharf.alert_about(a),
    'issue_id', (a.facts -> 'issue' ->> 'id')::bigint, 'scope_key', a.facts ->> 'scope_key',
    'facts', a.facts, 'created_at', a.created_at, 'state', a.state,
    'attempts', a.attempts, 'last_attempt_at', a.last_attempt_at, 'last_status', a.last_status,
    'last_error', a.last_error, 'delivered_at', a.delivered_at)
$$;

--
-- Name: begin_sweep(bigint, text, text, interval, timestamp with time zone, interval, interval); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.begin_sweep(p_app_id bigint, p_source text, p_holder text, p_lease interval, p_since timestamp with time zone DEFAULT NULL::timestamp with time zone, p_overlap interval DEFAULT '00:10:00'::interval, p_first_lookback interval DEFAULT '01:00:00'::interval) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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

--
-- Name: body_stored(wharf.admission_item); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.body_stored(p_item wharf.admission_item) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
  IF p_item.error_code IS NOT NULL OR p_item.body_sha256 IS NULL THEN
    RETURN NULL;
  END IF;
  RETURN (
    SELECT jsonb_agg(jsonb_build_object('workspace_id', e.workspace_id, 'event_id', e.id, 'outcome', 'duplicate')
                     ORDER BY e.workspace_id NULLS FIRST)
      FROM wharf.provider_event e
     WHERE e.source = p_item.source AND e.body_sha256 = p_item.body_sha256
       AND (NOT p_item.route ? 'connection_id' OR e.connection_id::text = p_item.route->>'connection_id')
       AND e.received_at > now() - wharf.setting_interval('replay_window'));
END $$;

--
-- Name: provider_event; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.provider_event (
    id bigint NOT NULL,
    workspace_id bigint,
    provider text NOT NULL,
    delivery_key text NOT NULL,
    event_type text NOT NULL,
    subject text,
    scope_key text NOT NULL,
    source text NOT NULL,
    connection_id bigint,
    payload jsonb NOT NULL,
    headers jsonb DEFAULT '{}'::jsonb NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    state text DEFAULT 'QUEUED'::text NOT NULL,
    attempt integer DEFAULT 0 NOT NULL,
    failures integer DEFAULT 0 NOT NULL,
    lease_epoch bigint DEFAULT 0 NOT NULL,
    leased_until timestamp with time zone,
    leased_by text,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    error_class text,
    outcome text,
    handled_at timestamp with time zone,
    dead_at timestamp with time zone,
    replayed_by text,
    replayed_at timestamp with time zone,
    lease_token uuid,
    body_sha256 bytea,
    leased_at timestamp with time zone,
    transient_since timestamp with time zone,
    CONSTRAINT provider_event_body_sha256_check CHECK ((octet_length(body_sha256) = 32)),
    CONSTRAINT provider_event_dead_at_check CHECK (((state = 'DEAD'::text) = (dead_at IS NOT NULL))),
    CONSTRAINT provider_event_state_check CHECK ((state = ANY (ARRAY['QUEUED'::text, 'LEASED'::text, 'DONE'::text, 'DEAD'::text])))
)
WITH (toast_tuple_target='128', autovacuum_vacuum_scale_factor='0.05', fillfactor='30', autovacuum_vacuum_insert_scale_factor='0.02');

--
-- Name: bulk_replay_candidates(bigint, jsonb, boolean, timestamp with time zone, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.bulk_replay_candidates(p_workspace_id bigint, p_filter jsonb, p_force boolean, p_dead_by timestamp with time zone, p_after_id bigint) RETURNS SETOF wharf.provider_event
    LANGUAGE sql STABLE
    AS $$
  SELECT *
    FROM wharf.provider_event e
   WHERE e.workspace_id = p_workspace_id AND e.state = 'DEAD' AND e.id > p_after_id
     AND e.dead_at IS NOT NULL  -- ix_provider_event_dead's predicate: DEAD is exactly that
     AND e.dead_at <= p_dead_by
     AND (p_force OR e.outcome IS DISTINCT FROM 'uncertain')
     AND (NOT p_filter ? 'provider' OR e.provider = p_filter ->> 'provider')
     AND (NOT p_filter ? 'event_type' OR e.event_type = p_filter ->> 'event_type')
     AND (NOT p_filter ? 'subject' OR e.subject = p_filter ->> 'subject')
     AND (NOT p_filter ? 'error_class' OR e.error_class = p_filter ->> 'error_class')
     AND (NOT p_filter ? 'dead_after' OR e.dead_at >= (p_filter ->> 'dead_after')::timestamptz)
     AND (NOT p_filter ? 'dead_before' OR e.dead_at < (p_filter ->> 'dead_before')::timestamptz)
     AND (NOT p_filter ? 'received_after' OR e.received_at >= (p_filter ->> 'received_after')::timestamptz)
     AND (NOT p_filter ? 'received_before' OR e.received_at < (p_filter ->> 'received_before')::timestamptz)
     AND (NOT p_filter ? 'payload' OR e.payload @> (p_filter -> 'payload'))
     AND (NOT p_filter ? 'headers' OR e.headers @> (p_filter -> 'headers'))
   ORDER BY e.id
$$;

--
-- Name: bulk_replay_filter(jsonb); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.bulk_replay_filter(p_filter jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
  v_key text;
BEGIN
  IF jsonb_typeof(p_filter) <> 'object' THEN
    RAISE EXCEPTION 'wharf.start_bulk_replay: the filter must be a JSON object' USING ERRCODE = '22023';
  END IF;
  FOR v_key IN SELECT jsonb_object_keys(p_filter) LOOP
    IF v_key NOT IN ('provider', 'event_type', 'subject', 'error_class', 'dead_after', 'dead_before',
                     'received_after', 'received_before', 'payload', 'headers') THEN
      RAISE EXCEPTION 'wharf.start_bulk_replay: unknown filter %', quote_literal(v_key) USING ERRCODE = '22023';
    END IF;
    IF v_key IN ('payload', 'headers') AND jsonb_typeof(p_filter -> v_key) <> 'object' THEN
      RAISE EXCEPTION 'wharf.start_bulk_replay: filter % must be a JSON object', v_key USING ERRCODE = '22023';
    END IF;
    IF v_key NOT IN ('payload', 'headers') AND jsonb_typeof(p_filter -> v_key) <> 'string' THEN
      RAISE EXCEPTION 'wharf.start_bulk_replay: filter % must be text', v_key USING ERRCODE = '22023';
    END IF;
  END LOOP;
  FOREACH v_key IN ARRAY ARRAY['dead_after', 'dead_before', 'received_after', 'received_before'] LOOP
    IF p_filter ? v_key THEN
      p_filter := jsonb_set(p_filter, ARRAY[v_key], to_jsonb(
        to_char((p_filter ->> v_key)::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')));
    END IF;
  END LOOP;
  RETURN p_filter;
END $$;

--
-- Name: bulk_replay; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.bulk_replay (
    id bigint NOT NULL,
    workspace_id bigint NOT NULL,
    filter jsonb NOT NULL,
    force boolean NOT NULL,
    requested_by text NOT NULL,
    matched bigint NOT NULL,
    replayed bigint DEFAULT 0 NOT NULL,
    after_id bigint DEFAULT 0 NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    cancelled_by text,
    cancelled_at timestamp with time zone
);

--
-- Name: bulk_replay_summary(wharf.bulk_replay); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.bulk_replay_summary(r wharf.bulk_replay) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  SELECT jsonb_build_object(
    'id', r.id, 'workspace_id', r.workspace_id, 'filter', r.filter, 'force', r.force,
    'requested_by', r.requested_by,
    'state', CASE WHEN r.cancelled_at IS NOT NULL THEN 'cancelled'
                  WHEN r.finished_at IS NULL THEN 'running' ELSE 'finished' END,
    'matched', r.matched, 'replayed', r.replayed,
    'skipped', CASE WHEN r.finished_at IS NULL OR r.cancelled_at IS NOT NULL THEN 0
                    ELSE greatest(r.matched - r.replayed, 0) END,
    'started_at', r.started_at, 'updated_at', r.updated_at, 'finished_at', r.finished_at,
    'cancelled_by', r.cancelled_by, 'cancelled_at', r.cancelled_at)
$$;

--
-- Name: cancel_bulk_replay(bigint, bigint, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.cancel_bulk_replay(p_workspace_id bigint, p_id bigint, p_account text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_replay  wharf.bulk_replay;
  v_running boolean;
  v_now     timestamptz;
BEGIN
  IF p_workspace_id IS NULL OR p_id IS NULL OR p_account IS NULL OR p_account = '' THEN
    RAISE EXCEPTION 'wharf.cancel_bulk_replay: workspace, id and account are required' USING ERRCODE = '22004';
  END IF;
  -- As it is when asked, before the wait: the batch in flight may finish it.
  SELECT finished_at IS NULL INTO v_running FROM wharf.bulk_replay WHERE id = p_id AND workspace_id = p_workspace_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: workspace % has no bulk replay %', p_workspace_id, p_id USING ERRCODE = 'P0002';
  END IF;
  -- Exclusive: from here no batch starts (see the top of this file); the one
  -- in flight holds it shared, and this waits for it to commit.
  PERFORM pg_advisory_xact_lock(wharf.lifecycle_key('bulk_replay', p_id::text));
  SELECT * INTO v_replay FROM wharf.bulk_replay WHERE id = p_id AND workspace_id = p_workspace_id FOR UPDATE;
  IF NOT FOUND THEN  -- finished and purged meanwhile
    RAISE EXCEPTION 'wharf: workspace % has no bulk replay %', p_workspace_id, p_id USING ERRCODE = 'P0002';
  END IF;
  -- Cancelled by another call that got the lock first: that one says true.
  IF NOT v_running OR v_replay.cancelled_at IS NOT NULL THEN
    RETURN wharf.bulk_replay_summary(v_replay) || '{"cancelled": false}';
  END IF;
  v_now := clock_timestamp();
  UPDATE wharf.bulk_replay
     SET finished_at = coalesce(finished_at, v_now), cancelled_at = v_now, cancelled_by = p_account, updated_at = v_now
   WHERE id = p_id
  RETURNING * INTO v_replay;
  RETURN wharf.bulk_replay_summary(v_replay) || '{"cancelled": true}';
END $$;

--
-- Name: change_issue_status(bigint, bigint, text, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.change_issue_status(p_workspace_id bigint, p_id bigint, p_status text, p_account text) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_issue wharf.issue;
BEGIN
  IF p_id IS NULL OR p_status IS NULL OR p_account IS NULL OR p_account = '' THEN
    RAISE EXCEPTION 'wharf: an issue status change needs an issue, a status and an account' USING ERRCODE = '22004';
  END IF;
  IF p_status NOT IN ('open', 'acknowledged', 'resolved', 'ignored') THEN
    RAISE EXCEPTION 'wharf: unknown issue status %', quote_literal(p_status) USING ERRCODE = '22023';
  END IF;
  UPDATE wharf.issue i
     SET status = p_status, status_by = p_account, status_at = now()
   WHERE i.id = p_id AND (i.workspace_id = p_workspace_id OR (p_workspace_id IS NULL AND i.workspace_id IS NULL))
  RETURNING * INTO v_issue;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  RETURN wharf.issue_summary(v_issue);
END $$;

--
-- Name: chart_issue_failures(); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.chart_issue_failures() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_failures bigint := NEW.failures - CASE WHEN TG_OP = 'UPDATE' THEN OLD.failures ELSE 0 END;
  v_dead     bigint := NEW.dead - CASE WHEN TG_OP = 'UPDATE' THEN OLD.dead ELSE 0 END;
BEGIN
  INSERT INTO wharf.issue_failure_hour AS h (issue_id, hour, failures, dead)
  VALUES (NEW.id, date_trunc('hour', NEW.last_seen_at, 'UTC'), v_failures, v_dead)
  ON CONFLICT (issue_id, hour) DO UPDATE
     SET failures = h.failures + excluded.failures, dead = h.dead + excluded.dead;
  RETURN NULL;
END $$;

--
-- Name: check_alert_rule(text, text, integer, integer, text, text, text, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.check_alert_rule(p_name text, p_kind text, p_threshold integer, p_window_seconds integer, p_destination text, p_url text, p_secret text, p_account text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    AS $_$
BEGIN
  IF p_name IS NULL OR p_kind IS NULL OR p_destination IS NULL OR p_url IS NULL OR p_account IS NULL OR p_account = '' THEN
    RAISE EXCEPTION 'wharf: an alert rule needs a name, a kind, a destination, a URL and an account' USING ERRCODE = '22004';
  END IF;
  IF p_name !~ '^[A-Za-z0-9][A-Za-z0-9 _.:@-]{0,63}$' THEN
    RAISE EXCEPTION 'wharf: a rule name is 1 to 64 letters, digits, spaces or _.:@-' USING ERRCODE = '22023';
  END IF;
  IF p_kind NOT IN ('issue_opened', 'issue_reopened', 'dead_letter_rate', 'oldest_due_age', 'stuck_scope') THEN
    RAISE EXCEPTION 'wharf: unknown alert kind %', quote_literal(p_kind) USING ERRCODE = '22023';
  END IF;
  IF (p_kind = 'dead_letter_rate') <> (p_threshold IS NOT NULL) OR p_threshold <= 0 THEN
    RAISE EXCEPTION 'wharf: a positive threshold is required for dead_letter_rate, and taken by no other kind'
      USING ERRCODE = '22023';
  END IF;
  IF (p_kind IN ('dead_letter_rate', 'oldest_due_age', 'stuck_scope')) <> (p_window_seconds IS NOT NULL)
     OR p_window_seconds <= 0 THEN
    RAISE EXCEPTION 'wharf: a positive window_seconds is required for dead_letter_rate, oldest_due_age and stuck_scope, and taken by no other kind'
      USING ERRCODE = '22023';
  END IF;
  IF p_destination NOT IN ('webhook', 'slack') THEN
    RAISE EXCEPTION 'wharf: unknown alert destination %', quote_literal(p_destination) USING ERRCODE = '22023';
  END IF;
  IF length(p_url) > 2000
     OR NOT (p_url ~ '^https://[^/?#@\s]+' OR p_url ~ '^http://(127\.0\.0\.1|localhost|\[::1\])(:[0-9]+)?(/|$)') THEN
    RAISE EXCEPTION 'wharf: an alert URL is https:// (or http:// to a loopback address)' USING ERRCODE = '22023';
  END IF;
  IF p_destination = 'webhook' AND (p_secret IS NULL OR p_secret !~ '^whsec_[A-Za-z0-9+/]+=*$') THEN
    RAISE EXCEPTION 'wharf: a webhook destination needs a Standard Webhooks secret (whsec_ and base64)' USING ERRCODE = '22023';
  END IF;
  IF p_destination = 'slack' AND p_secret IS NOT NULL THEN
    RAISE EXCEPTION 'wharf: a Slack destination takes no secret (its URL is one)' USING ERRCODE = '22023';
  END IF;
END $_$;

--
-- Name: check_destination_spec(jsonb); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.check_destination_spec(p_spec jsonb) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    AS $_$
DECLARE
  v_problem text;
  v_key     text;
BEGIN
  IF jsonb_typeof(p_spec) IS DISTINCT FROM 'object' THEN
    RAISE EXCEPTION 'wharf: destination: must be an object' USING ERRCODE = '22023';
  END IF;
  SELECT min(k) INTO v_key FROM jsonb_object_keys(p_spec) k
   WHERE k NOT IN ('name', 'url', 'timeout_ms', 'rate_limit', 'rate_period', 'max_in_flight', 'ordered',
                   'headers', 'breaker_failures', 'breaker_minutes');
  v_problem := CASE
    WHEN v_key IS NOT NULL THEN v_key || ': unknown setting'
    WHEN p_spec ? 'name' AND (jsonb_typeof(p_spec->'name') <> 'string'
                              OR p_spec->>'name' !~ '^[^[:cntrl:]]{1,100}$' OR btrim(p_spec->>'name') = '')
      THEN 'name: 1 to 100 characters'
    WHEN p_spec ? 'url' AND (jsonb_typeof(p_spec->'url') <> 'string' OR length(p_spec->>'url') > 2048
                             OR p_spec->>'url' !~ '^https?://[A-Za-z0-9._~-]+(:[0-9]{1,5})?(/[^[:space:][:cntrl:]#]*)?$'
                             AND p_spec->>'url' !~ '^https?://\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?(/[^[:space:][:cntrl:]#]*)?$')
      THEN 'url: must be an https:// (or http://) URL with a host, no credentials and no fragment'
    WHEN p_spec ? 'timeout_ms' AND NOT wharf.json_integer_between(p_spec->'timeout_ms', 100, 60000)
      THEN 'timeout_ms: an integer from 100 to 60000'
    WHEN p_spec ? 'rate_limit' AND p_spec->'rate_limit' <> 'null'
         AND NOT wharf.json_integer_between(p_spec->'rate_limit', 1, 1000000)
      THEN 'rate_limit: null or an integer from 1 to 1000000'
    WHEN p_spec ? 'rate_period' AND p_spec->>'rate_period' IS DISTINCT FROM 'second'
         AND p_spec->>'rate_period' IS DISTINCT FROM 'minute'
      THEN 'rate_period: second or minute'
    WHEN p_spec ? 'max_in_flight' AND NOT wharf.json_integer_between(p_spec->'max_in_flight', 1, 1000)
      THEN 'max_in_flight: an integer from 1 to 1000'
    WHEN p_spec ? 'ordered' AND jsonb_typeof(p_spec->'ordered') <> 'boolean'
      THEN 'ordered: true or false'
    WHEN p_spec ? 'breaker_failures' AND NOT wharf.json_integer_between(p_spec->'breaker_failures', 1, 100000)
      THEN 'breaker_failures: an integer from 1 to 100000'
    WHEN p_spec ? 'breaker_minutes' AND NOT wharf.json_integer_between(p_spec->'breaker_minutes', 1, 10080)
      THEN 'breaker_minutes: an integer from 1 to 10080'
    WHEN p_spec ? 'headers' AND jsonb_typeof(p_spec->'headers') <> 'object'
      THEN 'headers: an object of header names and string values'
    WHEN p_spec ? 'headers' AND (SELECT count(*) FROM jsonb_object_keys(p_spec->'headers')) > 32
      THEN 'headers: at most 32'
    ELSE (SELECT 'headers.' || h.key || ': ' || p.problem
            FROM jsonb_each(p_spec->'headers') h
            CROSS JOIN LATERAL (SELECT wharf.destination_header_problem(h.key, h.value) AS problem) p
           WHERE p.problem IS NOT NULL
           ORDER BY h.key LIMIT 1)
  END;
  IF v_problem IS NOT NULL THEN
    RAISE EXCEPTION 'wharf: destination %', v_problem USING ERRCODE = '22023';
  END IF;
END $_$;

--
-- Name: check_lease(bigint, bigint, uuid, boolean); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.check_lease(p_id bigint, p_epoch bigint, p_token uuid, p_token_given boolean) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_state text;
  v_epoch bigint;
  v_token uuid;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL THEN
    RAISE EXCEPTION 'wharf: a lease is named by its event id and epoch' USING ERRCODE = '22004';
  END IF;
  IF p_token_given AND p_token IS NULL THEN
    RAISE EXCEPTION 'wharf: the lease token is required' USING ERRCODE = '22004';
  END IF;
  SELECT state, lease_epoch, lease_token INTO v_state, v_epoch, v_token
    FROM wharf.provider_event WHERE id = p_id
     FOR KEY SHARE NOWAIT;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: event % is gone', p_id USING ERRCODE = 'WH410';
  END IF;
  IF v_state <> 'LEASED' OR v_epoch <> p_epoch OR (p_token_given AND v_token IS DISTINCT FROM p_token) THEN
    RAISE EXCEPTION 'wharf: lease % of event % is no longer held', p_epoch, p_id USING ERRCODE = 'WH412';
  END IF;
END $$;

--
-- Name: check_provider(text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.check_provider(p_provider text) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
  IF NOT wharf.provider_known(p_provider) THEN
    RAISE EXCEPTION 'wharf: unknown provider %', coalesce(quote_literal(p_provider), 'NULL')
      USING ERRCODE = '22023';
  END IF;
END $$;

--
-- Name: check_rule_spec(bigint, jsonb); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.check_rule_spec(p_workspace_id bigint, p_spec jsonb) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $_$
DECLARE
  v_problem text;
  v_key     text;
BEGIN
  IF jsonb_typeof(p_spec) IS DISTINCT FROM 'object' THEN
    RAISE EXCEPTION 'wharf: rule: must be an object' USING ERRCODE = '22023';
  END IF;
  SELECT min(k) INTO v_key FROM jsonb_object_keys(p_spec) k
   WHERE k NOT IN ('destination_id', 'connection_id', 'provider', 'event_types', 'subject_prefix', 'filter',
                   'forward_only');
  v_problem := CASE
    WHEN v_key IS NOT NULL THEN v_key || ': unknown setting'
    WHEN p_spec ? 'destination_id' AND NOT EXISTS (
           SELECT FROM wharf.destination d
            WHERE d.id = CASE WHEN wharf.json_integer_between(p_spec->'destination_id', 1, 9223372036854775807)
                              THEN (p_spec->>'destination_id')::bigint END
              AND d.workspace_id = p_workspace_id)
      THEN 'destination_id: no such destination in this workspace'
    WHEN p_spec ? 'connection_id' AND p_spec->'connection_id' <> 'null' AND NOT EXISTS (
           SELECT FROM wharf.connection c
            WHERE c.id = CASE WHEN wharf.json_integer_between(p_spec->'connection_id', 1, 9223372036854775807)
                              THEN (p_spec->>'connection_id')::bigint END
              AND c.workspace_id = p_workspace_id)
      THEN 'connection_id: no such connection in this workspace'
    WHEN p_spec ? 'provider' AND p_spec->'provider' <> 'null'
         AND NOT wharf.provider_known(p_spec->>'provider')
      THEN 'provider: unknown provider'
    WHEN p_spec ? 'event_types' AND p_spec->'event_types' <> 'null'
         AND (jsonb_typeof(p_spec->'event_types') <> 'array' OR jsonb_array_length(p_spec->'event_types') NOT BETWEEN 1 AND 100
              OR EXISTS (SELECT FROM jsonb_array_elements(p_spec->'event_types') t
                          WHERE jsonb_typeof(t) <> 'string' OR t #>> '{}' !~ '^[^[:cntrl:]]{1,255}$'))
      THEN 'event_types: null or 1 to 100 patterns of 1 to 255 characters (* stands for any run)'
    WHEN p_spec ? 'subject_prefix' AND p_spec->'subject_prefix' <> 'null'
         AND (jsonb_typeof(p_spec->'subject_prefix') <> 'string' OR p_spec->>'subject_prefix' !~ '^[^[:cntrl:]]{1,255}$')
      THEN 'subject_prefix: null or 1 to 255 characters'
    WHEN p_spec ? 'forward_only' AND jsonb_typeof(p_spec->'forward_only') <> 'boolean'
      THEN 'forward_only: true or false'
    WHEN p_spec ? 'filter' AND p_spec->'filter' <> 'null'
      THEN wharf.filter_problem(p_spec->'filter')
  END;
  IF v_problem IS NOT NULL THEN
    RAISE EXCEPTION 'wharf: rule %', v_problem USING ERRCODE = '22023';
  END IF;
END $_$;

--
-- Name: claim(text, integer, text[]); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.claim(p_worker text, p_max integer DEFAULT 1, p_handles text[] DEFAULT NULL::text[]) RETURNS SETOF wharf.provider_event
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_mergejoin TO 'off'
    SET enable_hashjoin TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    SET jit TO 'off'
    SET enable_indexscan TO 'on'
    AS $$
DECLARE
  v_now        timestamptz := clock_timestamp();
  v_lease      interval := wharf.setting_interval('lease');
  v_window     integer;
  v_candidates text[];
  v_candidate_rows tid[];
  v_parked     integer;
  v_ids        bigint[];
  v_scopes     text[];
  v_rows       tid[];
  v_all_ids    bigint[] := ARRAY[]::bigint[];
  v_all_scopes text[] := ARRAY[]::text[];
  v_all_rows   tid[] := ARRAY[]::tid[];
  v_marked     bigint;
  v_handles    text := md5(coalesce(p_handles::text, '*'));
  v_line       text[] := string_to_array(current_setting('wharf.claim_line', true), '/');
  v_floor      timestamptz := '-infinity'::timestamptz;
  v_generation bigint := (SELECT r.generation FROM wharf.claim_line_reset r WHERE r.only_row = true);  -- by primary key
  v_rescan     boolean;
  v_oldest     timestamptz;
  -- Whether there is anything to park (ix_connection_paused, nearly always empty).
  v_any_paused boolean := EXISTS (SELECT FROM wharf.connection x WHERE x.state = 'PAUSED');
BEGIN
  IF p_worker IS NULL OR p_worker = '' THEN
    RAISE EXCEPTION 'wharf.claim: worker must be named' USING ERRCODE = '22004';
  END IF;
  IF p_max IS NULL THEN
    RAISE EXCEPTION 'wharf.claim: max is required' USING ERRCODE = '22004';
  END IF;
  IF p_max < 0 THEN
    RAISE EXCEPTION 'wharf.claim: max must be zero or more, not %', p_max USING ERRCODE = '22023';
  END IF;
  -- A claim is a write even when nothing is due: on a standby (or in a
  -- read-only transaction) it says so at once, as its locks would, so the
  -- worker waits for a primary instead of idling on a server it cannot use.
  IF current_setting('transaction_read_only') = 'on' THEN
    RAISE EXCEPTION 'wharf.claim: the database is read-only (a standby?)' USING ERRCODE = '25006';
  END IF;
  PERFORM set_config('synchronous_commit', 'off', true);
  -- Room for claimers on other hosts that lock some of the same candidates.
  v_window := p_max + 16;
  -- Where this session's last claim with the same handles left its line
  -- (see "The claim line's floor" above): its floor, unless ten seconds
  -- have passed since the line was last read from its start, or the lines
  -- were reset since.
  v_rescan := cardinality(v_line) IS DISTINCT FROM 4 OR v_line[1] IS DISTINCT FROM v_handles
              OR v_line[4]::bigint IS DISTINCT FROM v_generation
              OR v_now - to_timestamp(v_line[3]::float8) >= interval '10 seconds';
  IF NOT v_rescan THEN
    v_floor := to_timestamp(v_line[2]::float8);
  END IF;

  FOR v_round IN 1..4 LOOP
    SELECT array_agg(c.scope_key ORDER BY c.ready_at, c.head_id), array_agg(c.row_id ORDER BY c.ready_at, c.head_id),
           min(c.ready_at)
      INTO v_candidates, v_candidate_rows, v_oldest
      FROM (SELECT c.scope_key, c.ready_at, c.head_id, c.row_id
              FROM wharf.claimable_kinds_since(v_floor) k(kind)
              CROSS JOIN LATERAL (
                SELECT s.scope_key, s.ready_at, s.head_id, s.ctid AS row_id FROM wharf.scope s
                 WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
                   AND s.head_kind = k.kind
                   AND s.ready_at >= v_floor
                   AND s.ready_at <= v_now  -- never earlier than head_due_at: the head is due
                 ORDER BY s.ready_at, s.head_id
                 LIMIT v_window) c
             WHERE p_handles IS NULL OR k.kind = ANY (p_handles) OR split_part(k.kind, ':', 1) || ':*' = ANY (p_handles)
             ORDER BY c.ready_at, c.head_id
             LIMIT v_window) c;
    IF v_round = 1 THEN
      -- The next claim starts at the oldest due head seen, less a second
      -- for heads that commit late; the floor only rises between rescans.
      PERFORM set_config('wharf.claim_line', concat_ws('/', v_handles,
                extract(epoch FROM greatest(v_floor, coalesce(v_oldest, v_now) - interval '1 second')),
                CASE WHEN v_rescan THEN extract(epoch FROM v_now) ELSE v_line[3]::numeric END, v_generation), false);
    END IF;
    EXIT WHEN v_candidates IS NULL;

    -- Each candidate is fetched at the row version the line showed (its
    -- ctid), in a subquery of its own (LIMIT 1 keeps the planner from
    -- flattening it), not looked up by its key: under a snapshot held open,
    -- the key's index entries lead to every version of the row the snapshot
    -- keeps, two per event served (bench/RESULTS.md §7b). A row another
    -- session changed since the line was read is passed over, as a locked
    -- one is (its old version is not this statement's to see, or, changed
    -- after this statement began, it fails the recheck of its ctid): the
    -- claim may come back short, and the next claim reads the line again.
    -- What it returns is the version it locked. The nested loop
    -- runs the candidates in their order and the LIMIT stops it after p_max
    -- locked heads, so no more rows are locked than are leased.
    SELECT array_agg(h.id ORDER BY h.n), array_agg(h.scope_key ORDER BY h.n), array_agg(h.row_id ORDER BY h.n)
      INTO v_ids, v_scopes, v_rows
      FROM (SELECT l.id, l.scope_key, l.row_id, c.n
              FROM unnest(v_candidates, v_candidate_rows) WITH ORDINALITY AS c(scope_key, row_id, n)
              CROSS JOIN LATERAL (
                SELECT e.id, s.scope_key, s.ctid AS row_id
                  FROM wharf.scope s
                  JOIN wharf.provider_event e ON e.id = s.head_id
                 WHERE s.ctid = c.row_id AND s.scope_key = c.scope_key
                   -- `IS NOT FALSE`: as in the parking below.
                   AND s.leased_id IS NULL AND s.active IS NOT FALSE AND s.ready_at <= v_now
                   AND NOT s.scope_key = ANY (v_all_scopes)  -- locked by an earlier round
                   AND e.state COLLATE "C" = 'QUEUED'  -- by primary key
                   -- The head may have changed since the candidates were read.
                   AND (p_handles IS NULL
                        OR e.provider || ':' || e.event_type = ANY (p_handles)
                        OR e.provider || ':*' = ANY (p_handles))
                   -- A paused connection's rows wait, holding their scopes, until it resumes.
                   AND (e.connection_id IS NULL
                        OR NOT EXISTS (SELECT FROM wharf.connection x WHERE x.id = e.connection_id AND x.state = 'PAUSED'))
                 LIMIT 1
                 -- NO KEY UPDATE: a claimer that locks a head another claimer has just
                 -- leased (its snapshot was older) must not make the winner's fence
                 -- (FOR KEY SHARE NOWAIT) fail as busy; the reaper, lock_scopes, purge and
                 -- erasure take FOR UPDATE and still conflict.
                   FOR NO KEY UPDATE OF s, e SKIP LOCKED) l
             LIMIT p_max - cardinality(v_all_ids)) h;

    -- Park the candidates held by a PAUSED connection (sql/20: sync_scope_activity).
    -- Only when some connection is PAUSED: the statement looks every
    -- candidate up again, which is about 8 % of a drained event's cost when
    -- none is (bench/RESULTS.md §3b). A connection paused after v_any_paused
    -- was read is still refused by the lookup above, and parked by the
    -- next claim.
    v_parked := 0;
    IF v_any_paused THEN
      UPDATE wharf.scope s SET active = false
       WHERE s.scope_key = ANY (ARRAY(  -- found and locked once, before the update
               SELECT p.scope_key
                 FROM unnest(v_candidates) AS c(scope_key)
                 CROSS JOIN LATERAL (  -- by key, as above
                   SELECT p.scope_key
                     FROM wharf.scope p
                     JOIN wharf.provider_event e ON e.id = p.head_id
                     JOIN wharf.connection x ON x.id = e.connection_id
                    -- Not a scope this round locked to lease: its row must stay where statement three finds it.
                    WHERE p.scope_key = c.scope_key AND NOT p.scope_key = ANY (v_all_scopes || coalesce(v_scopes, '{}'))
                      -- `IS NOT FALSE` (active is NOT NULL): ix_scope_claim's whole predicate
                      -- would offer the planner that index, which has no scope_key.
                      AND p.active IS NOT FALSE AND p.leased_id IS NULL AND x.state = 'PAUSED'
                    LIMIT 1
                      FOR UPDATE OF p SKIP LOCKED
                      -- SHARE conflicts with the connection's state change: a resume
                      -- either commits first (then this reads ACTIVE) or waits, and
                      -- unparks after this commits.
                      FOR SHARE OF x SKIP LOCKED) p));
      GET DIAGNOSTICS v_parked = ROW_COUNT;
    END IF;
    v_all_ids := v_all_ids || coalesce(v_ids, '{}');
    v_all_scopes := v_all_scopes || coalesce(v_scopes, '{}');
    v_all_rows := v_all_rows || coalesce(v_rows, '{}');
    -- Short because of what it parked: look again (what it locked stays locked).
    EXIT WHEN v_parked = 0 OR cardinality(v_all_ids) >= p_max;
  END LOOP;
  IF cardinality(v_all_ids) = 0 THEN
    RETURN;
  END IF;
  v_ids := v_all_ids;
  v_scopes := v_all_scopes;

  -- The scope rows locked above, at the versions locked: no other session
  -- can move them, and nothing of this claim's does (parking leaves them
  -- alone), so each is found, or the claim fails rather than lease an event
  -- without its scope's mark. Index scans are off for this statement alone
  -- (the function's SET puts them back on its way out): over statistics of
  -- an empty scope table (analyzed while empty) the planner prices a walk of
  -- the whole primary key below the TID scan of the rows it is given (the
  -- plan is cached with it; next_in_scope's index has no alternative, so it
  -- keeps its index).
  PERFORM set_config('enable_indexscan', 'off', true);
  WITH marked AS (
    UPDATE wharf.scope s
       SET leased_id = h.id, head_id = n.id, head_due_at = n.due_at, head_kind = n.kind
      FROM unnest(v_ids, v_scopes, v_all_rows) AS h(id, scope_key, row_id)
      LEFT JOIN LATERAL wharf.next_in_scope(h.scope_key, h.id) n ON true
     WHERE s.ctid = h.row_id AND s.scope_key = h.scope_key
    RETURNING s.scope_key)
  SELECT count(*) INTO v_marked FROM marked;
  PERFORM set_config('enable_indexscan', 'on', true);
  IF v_marked <> cardinality(v_scopes) THEN
    RAISE EXCEPTION 'wharf.claim: % of % locked scope rows moved before they were marked', cardinality(v_scopes) - v_marked, cardinality(v_scopes)
      USING ERRCODE = 'XX000';
  END IF;

  PERFORM set_config('wharf.keeping_scopes', 'on', true);
  RETURN QUERY
  UPDATE wharf.provider_event e
     SET state        = 'LEASED',
         attempt      = e.attempt + 1,
         lease_epoch  = e.lease_epoch + 1,
         leased_until = v_now + v_lease,
         leased_by    = p_worker,
         leased_at    = v_now,
         lease_token  = gen_random_uuid()
    FROM unnest(v_ids) AS h(id)
   WHERE e.id = h.id
  RETURNING e.*;
  PERFORM set_config('wharf.keeping_scopes', 'off', true);
END $$;

--
-- Name: claim_deliveries(text, integer, integer); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.claim_deliveries(p_worker text, p_max integer DEFAULT 1, p_ahead integer DEFAULT 0) RETURNS TABLE(delivery_id bigint, epoch bigint, attempt integer, event_id bigint, destination_id bigint, url text, timeout_ms integer, signing_secret text, previous_signing_secret text, credentials text, extra_headers jsonb, provider text, event_type text, subject text, delivery_key text, event_headers jsonb, payload text, received_at timestamp with time zone, probe boolean, send_now boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_now      timestamptz := clock_timestamp();
  v_lease    interval := wharf.setting_interval('lease');
  v_left     integer := least(greatest(coalesce(p_max, 1), 0), 1000);
  v_ahead    integer := least(greatest(coalesce(p_ahead, 0), 0), 1000);
  v_dest     record;
  v_take     integer;
  v_tokens   double precision;
  v_taken    integer;
  v_until    timestamptz;
  v_any_paused boolean := EXISTS (SELECT FROM wharf.connection c WHERE c.state = 'PAUSED');
BEGIN
  IF p_worker IS NULL OR p_worker = '' THEN
    RAISE EXCEPTION 'wharf.claim_deliveries: worker is required' USING ERRCODE = '22004';
  END IF;
  IF v_left + v_ahead = 0 THEN
    v_left := 1;
  END IF;
  FOR v_dest IN
    SELECT d.id, d.state, d.max_in_flight, d.rate_limit, d.rate_period, d.tokens, d.tokens_at,
           d.signing_secret, d.previous_valid_until, d.previous_signing_secret, d.credentials,
           d.url, d.timeout_ms, d.headers
      FROM wharf.destination d
      JOIN wharf.workspace w ON w.id = d.workspace_id
     WHERE d.signing_secret IS NOT NULL AND w.state = 'ACTIVE'
       AND (d.state = 'ACTIVE' OR (d.state = 'BREAKER_OPEN' AND d.probe_at <= v_now))
       AND EXISTS (SELECT FROM wharf.destination_delivery q
                    WHERE q.destination_id = d.id AND q.state = 'QUEUED' AND q.next_attempt_at <= v_now)
     ORDER BY d.claimed_at NULLS FIRST, d.id
       FOR NO KEY UPDATE OF d SKIP LOCKED
  LOOP
    v_take := v_left + v_ahead;
    IF v_dest.state = 'BREAKER_OPEN' THEN
      v_take := least(v_left, 1);  -- the probe
    END IF;
    v_take := least(v_take, v_dest.max_in_flight - (
      SELECT count(*)::integer FROM wharf.destination_delivery q WHERE q.destination_id = v_dest.id AND q.state = 'LEASED'));
    IF v_dest.rate_limit IS NOT NULL THEN
      -- A bucket of rate_limit tokens, refilled at rate_limit per period.
      v_tokens := least(v_dest.rate_limit::double precision,
                        coalesce(v_dest.tokens, v_dest.rate_limit)
                        + extract(epoch FROM v_now - coalesce(v_dest.tokens_at, v_now))
                          * v_dest.rate_limit / CASE v_dest.rate_period WHEN 'minute' THEN 60 ELSE 1 END);
      v_take := least(v_take, v_left, floor(v_tokens)::integer);
    END IF;
    CONTINUE WHEN v_take <= 0;
    v_until := v_now + greatest(v_lease, v_dest.timeout_ms * interval '1 millisecond' + interval '5 seconds');

    RETURN QUERY
    WITH picked AS (
      -- The due deliveries, longest due first (ix_destination_delivery_due):
      -- of an ordered destination only its heads are ever due.
      SELECT q.id FROM wharf.destination_delivery q
       WHERE q.destination_id = v_dest.id AND q.state = 'QUEUED' AND q.next_attempt_at <= v_now
         AND NOT (q.ordered AND EXISTS (
               SELECT FROM wharf.destination_delivery o
                WHERE o.destination_id = v_dest.id AND o.scope_key = q.scope_key AND o.ordered
                  AND o.state IN ('QUEUED', 'LEASED') AND o.event_id < q.event_id))
         -- Read only while some connection is paused (ix_connection_paused):
         -- as an OR it stays a filter on the rows read, never an anti-join
         -- that reads every due delivery to find the few it removes.
         AND (NOT v_any_paused
              OR NOT EXISTS (SELECT FROM wharf.provider_event e JOIN wharf.connection c ON c.id = e.connection_id
                              WHERE e.id = q.event_id AND c.state = 'PAUSED'))
       -- Index order alone, so that LIMIT stops the read: within a scope at
       -- most its head is due, and across scopes there is no order to keep.
       ORDER BY q.next_attempt_at
       LIMIT v_take
         FOR UPDATE OF q SKIP LOCKED
    ), leased AS (
      UPDATE wharf.destination_delivery q
         SET state = 'LEASED', attempt = q.attempt + 1, lease_epoch = q.lease_epoch + 1,
             leased_until = v_until, leased_by = p_worker, leased_at = v_now
        FROM picked
       WHERE q.id = picked.id
      RETURNING q.id, q.lease_epoch, q.attempt, q.event_id
    )
    SELECT l.id, l.lease_epoch, l.attempt, l.event_id, v_dest.id, v_dest.url, v_dest.timeout_ms,
           v_dest.signing_secret,
           CASE WHEN v_dest.previous_valid_until > v_now THEN v_dest.previous_signing_secret END,
           v_dest.credentials, v_dest.headers, e.provider, e.event_type, e.subject, e.delivery_key,
           e.headers, e.payload::text, e.received_at, v_dest.state = 'BREAKER_OPEN',
           -- Within p_max: to be sent at once (all of a rate-limited destination's, and a probe).
           row_number() OVER (ORDER BY l.event_id) <= v_left
      FROM leased l
      JOIN wharf.provider_event e ON e.id = l.event_id
     ORDER BY l.event_id;
    GET DIAGNOSTICS v_taken = ROW_COUNT;

    UPDATE wharf.destination d
       SET claimed_at = v_now,
           tokens     = CASE WHEN d.rate_limit IS NOT NULL THEN v_tokens - v_taken END,
           tokens_at  = CASE WHEN d.rate_limit IS NOT NULL THEN v_now END,
           -- One probe at a time: the next waits until this one's lease could have ended.
           probe_at   = CASE WHEN d.state = 'BREAKER_OPEN' AND v_taken > 0 THEN v_until ELSE d.probe_at END
     WHERE d.id = v_dest.id;
    -- What is sent at once first, then what is kept ahead.
    v_ahead := v_ahead - greatest(v_taken - v_left, 0);
    v_left := greatest(v_left - v_taken, 0);
    EXIT WHEN v_left + v_ahead <= 0;
  END LOOP;
END $$;

--
-- Name: claimable_kinds(); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.claimable_kinds() RETURNS SETOF text
    LANGUAGE sql STABLE
    AS $$
  SELECT kind FROM wharf.claimable_kinds_since('-infinity') k(kind)
$$;

--
-- Name: claimable_kinds_since(timestamp with time zone); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.claimable_kinds_since(p_floor timestamp with time zone) RETURNS SETOF text
    LANGUAGE sql STABLE
    AS $$
  WITH RECURSIVE k(kind) AS (
    (SELECT s.head_kind FROM wharf.scope s
      WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active AND s.ready_at >= p_floor
      ORDER BY s.head_kind LIMIT 1)
    UNION ALL
    SELECT (SELECT s.head_kind FROM wharf.scope s
             WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active AND s.head_kind > k.kind AND s.ready_at >= p_floor
             ORDER BY s.head_kind LIMIT 1)
      FROM k WHERE k.kind IS NOT NULL
  )
  SELECT kind FROM k WHERE kind IS NOT NULL
$$;

--
-- Name: complete(bigint, bigint, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.complete(p_id bigint, p_epoch bigint, p_outcome text DEFAULT 'handled'::text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '5s'
    AS $$
DECLARE
  v_scope_key text;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL OR p_outcome IS NULL OR p_outcome = '' THEN
    RAISE EXCEPTION 'wharf.complete: id, epoch and outcome are required' USING ERRCODE = '22004';
  END IF;
  PERFORM FROM wharf.provider_event WHERE id = p_id FOR UPDATE;  -- after its fenced writes (top of sql/30)
  PERFORM set_config('wharf.keeping_scopes', 'on', true);
  UPDATE wharf.provider_event
     SET state = 'DONE', outcome = p_outcome, handled_at = clock_timestamp(), leased_until = NULL
   WHERE id = p_id AND lease_epoch = p_epoch AND state COLLATE "C" = 'LEASED'  -- by primary key (top of sql/30)
  RETURNING scope_key INTO v_scope_key;
  PERFORM set_config('wharf.keeping_scopes', 'off', true);
  IF v_scope_key IS NULL THEN
    -- Read after the row lock: a first try still in flight has committed or rolled back.
    RETURN EXISTS (SELECT FROM wharf.provider_event
                    WHERE id = p_id AND lease_epoch = p_epoch AND state COLLATE "C" = 'DONE' AND outcome = p_outcome);
  END IF;
  PERFORM wharf.free_scopes(ARRAY[p_id], ARRAY[v_scope_key]);
  RETURN true;
END $$;

--
-- Name: complete_deliveries(bigint[], bigint[], integer[], integer[], text[]); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.complete_deliveries(p_ids bigint[], p_epochs bigint[], p_statuses integer[], p_durations_ms integer[], p_responses text[]) RETURNS boolean[]
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_now                  timestamptz := clock_timestamp();
  v_dests                bigint[];
  v_ordered_destinations bigint[];
  v_ordered_scope_keys   text[];
BEGIN
  IF cardinality(p_ids) IS DISTINCT FROM cardinality(p_epochs) OR cardinality(p_ids) IS DISTINCT FROM cardinality(p_statuses)
     OR cardinality(p_ids) IS DISTINCT FROM cardinality(p_durations_ms) OR cardinality(p_ids) IS DISTINCT FROM cardinality(p_responses) THEN
    RAISE EXCEPTION 'wharf.complete_deliveries: the arrays must be of one length' USING ERRCODE = '22004';
  END IF;
  WITH answered AS (
    SELECT u.id, u.epoch, u.status, u.duration_ms, u.response
      FROM unnest(p_ids, p_epochs, p_statuses, p_durations_ms, p_responses) AS u(id, epoch, status, duration_ms, response)
  ), locked AS (
    -- In id order: two forwarders completing overlapping sets never deadlock.
    SELECT q.id FROM wharf.destination_delivery q JOIN answered a ON a.id = q.id AND a.epoch = q.lease_epoch
     WHERE q.state = 'LEASED'
     ORDER BY q.id
       FOR UPDATE OF q
  ), done AS (
    UPDATE wharf.destination_delivery q
       SET state = 'DONE', outcome = 'delivered', handled_at = v_now, last_status = a.status,
           leased_until = NULL, transient_since = NULL
      FROM locked l, answered a
     WHERE q.id = l.id AND a.id = l.id AND a.epoch = q.lease_epoch
    RETURNING q.id, q.lease_epoch, q.destination_id, q.attempt, q.leased_by, q.leased_at, q.ordered, q.scope_key,
              a.status, a.duration_ms, a.response
  ), recorded AS (
    INSERT INTO wharf.delivery_attempt (delivery_id, lease_epoch, destination_id, attempt, worker, started_at,
                                        ended_at, ended, left_state, status, duration_ms, response)
    SELECT d.id, d.lease_epoch, d.destination_id, d.attempt, d.leased_by, d.leased_at,
           v_now, 'handled', 'DONE', d.status, d.duration_ms, left(d.response, 1024)
      FROM done d
  )
  SELECT ARRAY(SELECT DISTINCT d.destination_id FROM done d),
         ARRAY(SELECT d.destination_id FROM done d WHERE d.ordered ORDER BY d.id),
         ARRAY(SELECT d.scope_key FROM done d WHERE d.ordered ORDER BY d.id)
    INTO v_dests, v_ordered_destinations, v_ordered_scope_keys;
  UPDATE wharf.destination d
     SET consecutive_failures = 0, failing_since = NULL,
         state         = CASE WHEN d.state = 'BREAKER_OPEN' THEN 'ACTIVE' ELSE d.state END,
         paused_reason = CASE WHEN d.state = 'BREAKER_OPEN' THEN NULL ELSE d.paused_reason END,
         probe_at      = NULL
   WHERE d.id IN (SELECT x.id FROM wharf.destination x
                   WHERE x.id = ANY (v_dests)
                     AND (x.consecutive_failures <> 0 OR x.failing_since IS NOT NULL OR x.state = 'BREAKER_OPEN')
                   ORDER BY x.id
                     FOR NO KEY UPDATE);
  -- Each ordered delivery's turn ended: the next of its scope is due.
  PERFORM wharf.promote_next_deliveries(v_ordered_destinations, v_ordered_scope_keys);
  -- True where that lease ended handled: now, or by a completion before this one.
  RETURN ARRAY(
    SELECT EXISTS (SELECT FROM wharf.delivery_attempt h
                    WHERE h.delivery_id = u.id AND h.lease_epoch = u.epoch AND h.ended = 'handled')
      FROM unnest(p_ids, p_epochs) WITH ORDINALITY AS u(id, epoch, n)
     ORDER BY u.n);
END $$;

--
-- Name: complete_delivery(bigint, bigint, integer, integer, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.complete_delivery(p_id bigint, p_epoch bigint, p_status integer, p_duration_ms integer, p_response text) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT (wharf.complete_deliveries(ARRAY[p_id], ARRAY[p_epoch], ARRAY[p_status], ARRAY[p_duration_ms], ARRAY[p_response]))[1]
$$;

--
-- Name: complete_many(bigint[], bigint[], text[]); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.complete_many(p_ids bigint[], p_epochs bigint[], p_outcomes text[]) RETURNS SETOF bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET enable_mergejoin TO 'off'
    SET enable_hashjoin TO 'off'
    SET lock_timeout TO '5s'
    AS $$
DECLARE
  v_ids    bigint[];
  v_scopes text[];
BEGIN
  IF p_ids IS NULL OR p_epochs IS NULL OR p_outcomes IS NULL THEN
    RAISE EXCEPTION 'wharf.complete_many: ids, epochs and outcomes are required' USING ERRCODE = '22004';
  END IF;
  IF cardinality(p_epochs) <> cardinality(p_ids) OR cardinality(p_outcomes) <> cardinality(p_ids) THEN
    RAISE EXCEPTION 'wharf.complete_many: % ids, % epochs and % outcomes: one of each per lease',
      cardinality(p_ids), cardinality(p_epochs), cardinality(p_outcomes) USING ERRCODE = '22023';
  END IF;
  IF EXISTS (SELECT FROM unnest(p_ids, p_epochs, p_outcomes) AS c(id, epoch, outcome)
              WHERE c.id IS NULL OR c.epoch IS NULL OR c.outcome IS NULL OR c.outcome = '') THEN
    RAISE EXCEPTION 'wharf.complete_many: every id, epoch and outcome is required' USING ERRCODE = '22004';
  END IF;
  PERFORM FROM wharf.provider_event WHERE id = ANY (p_ids) ORDER BY id FOR UPDATE;  -- top of sql/30
  PERFORM set_config('wharf.keeping_scopes', 'on', true);
  WITH done AS (
    UPDATE wharf.provider_event e
       SET state = 'DONE', outcome = c.outcome, handled_at = clock_timestamp(), leased_until = NULL
      FROM unnest(p_ids, p_epochs, p_outcomes) WITH ORDINALITY AS c(id, epoch, outcome, n)
     WHERE e.id = c.id AND e.lease_epoch = c.epoch AND e.state COLLATE "C" = 'LEASED'  -- by primary key (top of sql/30)
    RETURNING e.id, e.scope_key, c.n
  )
  SELECT array_agg(id ORDER BY n), array_agg(scope_key ORDER BY n) INTO v_ids, v_scopes FROM done;
  PERFORM set_config('wharf.keeping_scopes', 'off', true);
  -- Completed under their epoch by an earlier try of this batch (the row
  -- locks above waited for a try still in flight): DONE with the same epoch
  -- and outcome, and not by the update above. Looked up only when the
  -- update missed some: a lookup per lease that nearly every call would pay
  -- for nothing.
  IF coalesce(cardinality(v_ids), 0) < cardinality(p_ids) THEN
    RETURN QUERY
    SELECT e.id
      FROM unnest(p_ids, p_epochs, p_outcomes) AS c(id, epoch, outcome)
      JOIN wharf.provider_event e ON e.id = c.id
     WHERE e.lease_epoch = c.epoch AND e.state COLLATE "C" = 'DONE' AND e.outcome = c.outcome  -- by primary key
       AND NOT e.id = ANY (coalesce(v_ids, '{}'));
  END IF;
  IF v_ids IS NULL THEN
    RETURN;
  END IF;
  PERFORM wharf.free_scopes(v_ids, v_scopes);
  RETURN QUERY SELECT unnest(v_ids);
END $$;

--
-- Name: connection_endpoint(bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.connection_endpoint(p_connection_id bigint) RETURNS TABLE(provider text, source text, route jsonb, token_sha256 text, signing_key text, previous_token_sha256 text, previous_signing_key text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  RETURN QUERY
  SELECT c.provider, c.source, c.route, encode(s.token_sha256, 'hex'), s.signing_key,
         CASE WHEN s.previous_valid_until > now() THEN encode(s.previous_token_sha256, 'hex') END,
         CASE WHEN s.previous_valid_until > now() THEN s.previous_signing_key END
    FROM wharf.connection c
    LEFT JOIN wharf.connection_secret s ON s.connection_id = c.id
   WHERE c.id = p_connection_id;
END $$;

--
-- Name: continue_bulk_replay(bigint, bigint, integer); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.continue_bulk_replay(p_workspace_id bigint, p_id bigint, p_batch integer) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_replay   wharf.bulk_replay;
  v_ids      bigint[];
  v_id       bigint;
  v_replayed integer := 0;
BEGIN
  IF p_batch IS NULL OR p_batch < 1 OR p_batch > 1000 THEN
    RAISE EXCEPTION 'wharf.continue_bulk_replay: batch must be between 1 and 1000' USING ERRCODE = '22023';
  END IF;
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  SELECT * INTO v_replay FROM wharf.bulk_replay
   WHERE id = p_id AND workspace_id = p_workspace_id
     FOR UPDATE SKIP LOCKED;
  IF NOT FOUND THEN
    IF EXISTS (SELECT FROM wharf.bulk_replay WHERE id = p_id AND workspace_id = p_workspace_id) THEN
      RETURN NULL;
    END IF;
    RAISE EXCEPTION 'wharf: workspace % has no bulk replay %', p_workspace_id, p_id USING ERRCODE = 'P0002';
  END IF;
  IF v_replay.finished_at IS NOT NULL THEN
    RETURN wharf.bulk_replay_summary(v_replay);
  END IF;
  -- A cancel holds the lock exclusive, or waits for it behind the batch in
  -- flight: this batch is after the cancel and leaves the row to it. Held
  -- shared to the end, so that a cancel asked now waits for this batch.
  IF NOT pg_try_advisory_xact_lock_shared(wharf.lifecycle_key('bulk_replay', p_id::text)) THEN
    RETURN NULL;
  END IF;

  -- Lock the events in id order, then their scopes in the lock order
  -- (lock_scopes, sql/20), then
  -- requeue: the order erase_person keeps. Left to the scope-head trigger,
  -- the scopes would be locked in event order, and two batches (or a batch
  -- and an erasure) whose events share scopes in another order would wait
  -- for each other in a cycle.
  SELECT array_agg(c.id ORDER BY c.id) INTO v_ids
    FROM (SELECT e.id
            FROM wharf.bulk_replay_candidates(p_workspace_id, v_replay.filter, v_replay.force,
                                              v_replay.started_at, v_replay.after_id) e
           ORDER BY e.id
           LIMIT p_batch) c;
  PERFORM FROM wharf.provider_event WHERE id = ANY (v_ids) ORDER BY id FOR UPDATE;
  PERFORM wharf.lock_scopes(ARRAY(SELECT e.scope_key FROM wharf.provider_event e WHERE e.id = ANY (v_ids)));

  FOREACH v_id IN ARRAY coalesce(v_ids, '{}') LOOP
    IF wharf.requeue_dead(p_workspace_id, v_id, v_replay.requested_by, v_replay.force) THEN
      v_replayed := v_replayed + 1;
    END IF;
  END LOOP;

  UPDATE wharf.bulk_replay
     SET replayed    = replayed + v_replayed,
         after_id    = coalesce(v_ids[cardinality(v_ids)], after_id),
         updated_at  = clock_timestamp(),
         finished_at = CASE WHEN coalesce(cardinality(v_ids), 0) < p_batch THEN clock_timestamp() END,
         -- An event that died just before the start but committed after the
         -- count is replayed too: the total is never below what was done.
         matched     = greatest(matched, replayed + v_replayed)
   WHERE id = p_id
  RETURNING * INTO v_replay;
  RETURN wharf.bulk_replay_summary(v_replay);
END $$;

--
-- Name: count_bulk_replay(bigint, jsonb, boolean); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.count_bulk_replay(p_workspace_id bigint, p_filter jsonb, p_force boolean DEFAULT false) RETURNS bigint
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF p_filter IS NULL OR p_force IS NULL THEN
    RAISE EXCEPTION 'wharf.count_bulk_replay: filter and force are required' USING ERRCODE = '22004';
  END IF;
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN (SELECT count(*) FROM wharf.bulk_replay_candidates(p_workspace_id, wharf.bulk_replay_filter(p_filter),
                                                            p_force, clock_timestamp(), 0));
END $$;

--
-- Name: count_dead_deliveries(bigint, bigint, jsonb); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.count_dead_deliveries(p_workspace_id bigint, p_destination_id bigint, p_filter jsonb) RETURNS bigint
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT count(*) FROM wharf.dead_deliveries(p_workspace_id, p_destination_id, p_filter)
$$;

--
-- Name: count_delivery_issue(bigint, bigint, text, timestamp with time zone, boolean); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.count_delivery_issue(p_destination_id bigint, p_event_id bigint, p_error_class text, p_at timestamp with time zone, p_dead boolean) RETURNS void
    LANGUAGE sql
    AS $$
  SELECT wharf.count_into_issue(e.workspace_id, e.provider, e.event_type, p_error_class, 'destination:' || p_destination_id,
                                ARRAY['destination ' || p_destination_id || ' ' || d.name], p_at, p_at, 1,
                                CASE WHEN p_dead THEN 1 ELSE 0 END, e.id)
    FROM wharf.provider_event e, wharf.destination d
   WHERE e.id = p_event_id AND d.id = p_destination_id
$$;

--
-- Name: count_failures_into_issues(); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.count_failures_into_issues() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_limit  integer := wharf.setting_integer('issue_limit');
  v_group  record;
  v_minute record;
BEGIN
  FOR v_group IN
  WITH failed AS (
    SELECT e.workspace_id, e.provider, e.event_type, coalesce(a.error_class, a.ended) AS error_class,
           wharf.frames_fingerprint(a.frames) AS fingerprint, nullif(a.frames[1:3], '{}') AS frames,
           a.ended_at, e.id AS event_id, e.state
      FROM attempts_added a
      JOIN wharf.provider_event e ON e.id = a.event_id
     WHERE a.ended <> 'released'
  ), grouped AS (
    SELECT f.workspace_id, f.provider, f.event_type, f.error_class, f.fingerprint, f.frames,
           min(f.ended_at) AS first_seen_at, max(f.ended_at) AS last_seen_at, count(*) AS failures,
           count(*) FILTER (WHERE f.state = 'DEAD') AS dead, max(f.event_id) AS sample_event_id
      FROM failed f
     GROUP BY f.workspace_id, f.provider, f.event_type, f.error_class, f.fingerprint, f.frames
  ), keyed AS (
    -- A group with no issue yet gets its own while the workspace has fewer
    -- than issue_limit; otherwise it counts into '*'. Two new groups at once
    -- may both pass the count: the bound is issue_limit plus the concurrency.
    SELECT g.*,
           CASE WHEN EXISTS (SELECT FROM wharf.issue i
                              WHERE (i.workspace_id = g.workspace_id OR (g.workspace_id IS NULL AND i.workspace_id IS NULL))
                                AND i.provider = g.provider AND i.event_type = g.event_type
                                AND i.error_class = g.error_class AND i.fingerprint = g.fingerprint)
                  OR (SELECT count(*) FROM (SELECT FROM wharf.issue i
                                             WHERE i.workspace_id = g.workspace_id
                                                OR (g.workspace_id IS NULL AND i.workspace_id IS NULL)
                                             LIMIT v_limit) n) < v_limit
                THEN g.event_type ELSE '*' END AS issue_type
      FROM grouped g
  ), placed AS (
    SELECT k.*,
           CASE WHEN k.issue_type = '*' THEN '' ELSE k.fingerprint END AS issue_fingerprint,
           CASE WHEN k.issue_type = '*' THEN NULL ELSE k.frames END AS issue_frames
      FROM keyed k
  )
  SELECT k.workspace_id, k.provider, k.issue_type, k.error_class, k.issue_fingerprint, k.issue_frames,
         min(k.first_seen_at) AS first_seen_at, max(k.last_seen_at) AS last_seen_at,
         sum(k.failures)::bigint AS failures, sum(k.dead)::bigint AS dead, max(k.sample_event_id) AS sample_event_id
    FROM placed k
   GROUP BY k.workspace_id, k.provider, k.issue_type, k.error_class, k.issue_fingerprint, k.issue_frames
   ORDER BY k.workspace_id, k.provider, k.issue_type, k.error_class, k.issue_fingerprint
  LOOP
    PERFORM wharf.count_into_issue(v_group.workspace_id, v_group.provider, v_group.issue_type, v_group.error_class,
                                   v_group.issue_fingerprint, v_group.issue_frames, v_group.first_seen_at,
                                   v_group.last_seen_at, v_group.failures, v_group.dead, v_group.sample_event_id);
  END LOOP;

  -- The same failures per workspace and minute (alert rates, metrics).
  FOR v_minute IN
    SELECT e.workspace_id, date_trunc('minute', a.ended_at) AS minute, count(*) AS failed,
           count(*) FILTER (WHERE e.state = 'DEAD') AS dead
      FROM attempts_added a
      JOIN wharf.provider_event e ON e.id = a.event_id
     WHERE a.ended <> 'released'
     GROUP BY 1, 2
     ORDER BY 1, 2
  LOOP
    PERFORM wharf.count_into_failure_minute(v_minute.workspace_id, v_minute.minute, v_minute.failed, v_minute.dead);
  END LOOP;
  RETURN NULL;
END $$;

--
-- Name: count_into_failure_minute(bigint, timestamp with time zone, bigint, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.count_into_failure_minute(p_workspace_id bigint, p_minute timestamp with time zone, p_failed bigint, p_dead bigint) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
  INSERT INTO wharf.failure_minute AS m (workspace_id, minute, failed, dead)
  VALUES (p_workspace_id, p_minute, p_failed, p_dead)
  ON CONFLICT (workspace_id, minute) DO UPDATE
     SET failed = m.failed + excluded.failed, dead = m.dead + excluded.dead;
END $$;

--
-- Name: count_into_issue(bigint, text, text, text, text, text[], timestamp with time zone, timestamp with time zone, bigint, bigint, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.count_into_issue(p_workspace_id bigint, p_provider text, p_event_type text, p_error_class text, p_fingerprint text, p_frames text[], p_first_seen_at timestamp with time zone, p_last_seen_at timestamp with time zone, p_failures bigint, p_dead bigint, p_sample_event_id bigint) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
  INSERT INTO wharf.issue AS i (workspace_id, provider, event_type, error_class, fingerprint, frames,
                                first_seen_at, last_seen_at, failures, dead, sample_event_id, status_at)
  VALUES (p_workspace_id, p_provider, p_event_type, p_error_class, p_fingerprint, p_frames,
          p_first_seen_at, p_last_seen_at, p_failures, p_dead, p_sample_event_id, p_first_seen_at)
  ON CONFLICT (workspace_id, provider, event_type, error_class, fingerprint) DO UPDATE
     SET last_seen_at    = greatest(i.last_seen_at, excluded.last_seen_at),
         failures        = i.failures + excluded.failures,
         dead            = i.dead + excluded.dead,
         sample_event_id = excluded.sample_event_id,
         status          = CASE WHEN i.status = 'resolved' THEN 'open' ELSE i.status END,
         status_by       = CASE WHEN i.status = 'resolved' THEN NULL ELSE i.status_by END,
         status_at       = CASE WHEN i.status = 'resolved' THEN excluded.last_seen_at ELSE i.status_at END,
         reopened        = i.reopened + CASE WHEN i.status = 'resolved' THEN 1 ELSE 0 END,
         reopened_at     = CASE WHEN i.status = 'resolved' THEN excluded.last_seen_at ELSE i.reopened_at END;
END $$;

--
-- Name: create_alert_rule(bigint, text, text, integer, integer, text, text, text, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.create_alert_rule(p_workspace_id bigint, p_name text, p_kind text, p_threshold integer, p_window_seconds integer, p_destination text, p_url text, p_secret text, p_account text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN wharf.add_alert_rule(p_workspace_id, p_name, p_kind, p_threshold, p_window_seconds,
                              p_destination, p_url, p_secret, p_account);
END $$;

--
-- Name: create_destination(bigint, jsonb); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.create_destination(p_workspace_id bigint, p_spec jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_dest wharf.destination;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  PERFORM wharf.check_destination_spec(p_spec);
  IF NOT (p_spec ? 'name' AND p_spec ? 'url') THEN
    RAISE EXCEPTION 'wharf: destination %: required', CASE WHEN p_spec ? 'name' THEN 'url' ELSE 'name' END
      USING ERRCODE = '22023';
  END IF;
  INSERT INTO wharf.destination (workspace_id, name, url, timeout_ms, rate_limit, rate_period, max_in_flight,
                                 ordered, headers, breaker_failures, breaker_minutes)
  VALUES (p_workspace_id, btrim(p_spec->>'name'), p_spec->>'url', coalesce((p_spec->>'timeout_ms')::integer, 10000),
          (p_spec->>'rate_limit')::integer, coalesce(p_spec->>'rate_period', 'second'),
          coalesce((p_spec->>'max_in_flight')::integer, 10), coalesce((p_spec->>'ordered')::boolean, true),
          coalesce(p_spec->'headers', '{}'), coalesce((p_spec->>'breaker_failures')::integer, 20),
          coalesce((p_spec->>'breaker_minutes')::integer, 10))
  ON CONFLICT ON CONSTRAINT uq_destination_name DO NOTHING
  RETURNING * INTO v_dest;
  IF v_dest.id IS NULL THEN
    RAISE EXCEPTION 'wharf: destination name: % is already used in this workspace', quote_literal(btrim(p_spec->>'name'))
      USING ERRCODE = '22023';
  END IF;
  RETURN wharf.destination_summary(v_dest);
END $$;

--
-- Name: create_destination_rule(bigint, jsonb); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.create_destination_rule(p_workspace_id bigint, p_spec jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_rule wharf.destination_rule;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  PERFORM wharf.check_rule_spec(p_workspace_id, p_spec);
  IF NOT p_spec ? 'destination_id' THEN
    RAISE EXCEPTION 'wharf: rule destination_id: required' USING ERRCODE = '22023';
  END IF;
  INSERT INTO wharf.destination_rule (workspace_id, destination_id, connection_id, provider, event_types,
                                      subject_prefix, filter, forward_only)
  VALUES (p_workspace_id, (p_spec->>'destination_id')::bigint, (p_spec->>'connection_id')::bigint,
          p_spec->>'provider',
          CASE WHEN jsonb_typeof(p_spec->'event_types') = 'array'
               THEN ARRAY(SELECT jsonb_array_elements_text(p_spec->'event_types')) END,
          p_spec->>'subject_prefix', nullif(p_spec->'filter', 'null'),
          coalesce((p_spec->>'forward_only')::boolean, false))
  RETURNING * INTO v_rule;
  RETURN wharf.rule_summary(v_rule);
END $$;

--
-- Name: create_instance_alert_rule(text, text, integer, integer, text, text, text, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.create_instance_alert_rule(p_name text, p_kind text, p_threshold integer, p_window_seconds integer, p_destination text, p_url text, p_secret text, p_account text) RETURNS jsonb
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT wharf.add_alert_rule(NULL, p_name, p_kind, p_threshold, p_window_seconds,
                              p_destination, p_url, p_secret, p_account)
$$;

--
-- Name: create_token(bigint, text, bytea); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.create_token(p_workspace_id bigint, p_name text, p_token_hash bytea) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  v_token record;
BEGIN
  IF p_name IS NULL OR p_token_hash IS NULL THEN
    RAISE EXCEPTION 'wharf.create_token: name and token hash are required' USING ERRCODE = '22004';
  END IF;
  IF p_name !~ '^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}$' THEN
    RAISE EXCEPTION 'wharf: a token name is 1 to 64 letters, digits or _.:@- ' USING ERRCODE = '22023';
  END IF;
  IF length(p_token_hash) <> 32 THEN
    RAISE EXCEPTION 'wharf.create_token: the hash must be a SHA-256 digest' USING ERRCODE = '22023';
  END IF;
  PERFORM wharf.require_workspace(p_workspace_id);
  INSERT INTO wharf.api_token (workspace_id, name, token_hash)
  VALUES (p_workspace_id, p_name, p_token_hash)
  RETURNING * INTO v_token;
  RETURN jsonb_build_object('id', v_token.id, 'workspace_id', v_token.workspace_id,
                            'name', v_token.name, 'created_at', v_token.created_at);
END $_$;

--
-- Name: destination_delivery; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.destination_delivery (
    id bigint NOT NULL,
    event_id bigint NOT NULL,
    destination_id bigint NOT NULL,
    workspace_id bigint NOT NULL,
    scope_key text NOT NULL,
    ordered boolean NOT NULL,
    state text DEFAULT 'QUEUED'::text NOT NULL,
    attempt integer DEFAULT 0 NOT NULL,
    failures integer DEFAULT 0 NOT NULL,
    lease_epoch bigint DEFAULT 0 NOT NULL,
    leased_until timestamp with time zone,
    leased_by text,
    leased_at timestamp with time zone,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    transient_since timestamp with time zone,
    error_class text,
    outcome text,
    last_status integer,
    handled_at timestamp with time zone,
    dead_at timestamp with time zone,
    replayed_by text,
    replayed_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT destination_delivery_state_check CHECK ((state = ANY (ARRAY['QUEUED'::text, 'LEASED'::text, 'DONE'::text, 'DEAD'::text])))
);

--
-- Name: dead_deliveries(bigint, bigint, jsonb); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.dead_deliveries(p_workspace_id bigint, p_destination_id bigint, p_filter jsonb) RETURNS SETOF wharf.destination_delivery
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
  v_key text;
BEGIN
  SELECT min(k) INTO v_key FROM jsonb_object_keys(coalesce(p_filter, '{}')) k
   WHERE k NOT IN ('event_type', 'error_class', 'dead_after', 'dead_before');
  IF v_key IS NOT NULL THEN
    RAISE EXCEPTION 'wharf: replay filter %: unknown (event_type, error_class, dead_after, dead_before)', v_key
      USING ERRCODE = '22023';
  END IF;
  RETURN QUERY
  SELECT q.* FROM wharf.destination_delivery q
   WHERE q.destination_id = p_destination_id AND q.workspace_id = p_workspace_id AND q.state = 'DEAD'
     AND (p_filter->>'error_class' IS NULL OR q.error_class = p_filter->>'error_class')
     AND (p_filter->>'dead_after' IS NULL OR q.dead_at >= (p_filter->>'dead_after')::timestamptz)
     AND (p_filter->>'dead_before' IS NULL OR q.dead_at < (p_filter->>'dead_before')::timestamptz)
     AND (p_filter->>'event_type' IS NULL
          OR EXISTS (SELECT FROM wharf.provider_event e WHERE e.id = q.event_id AND e.event_type = p_filter->>'event_type'));
END $$;

--
-- Name: dead_letter_after_lease(bigint, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.dead_letter_after_lease(p_id bigint, p_epoch bigint) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
  SELECT EXISTS (SELECT FROM wharf.scope_action a WHERE a.event_id = p_id AND a.after_lease_epoch = p_epoch)
$$;

--
-- Name: dead_letter_scope_head(bigint, text, bigint, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.dead_letter_scope_head(p_workspace_id bigint, p_scope_key text, p_event_id bigint, p_account text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_refusal text;
BEGIN
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  v_refusal := wharf.scope_head_refusal(p_workspace_id, p_scope_key, p_event_id, p_account);
  IF v_refusal = 'leased' THEN
    -- The event is locked (scope_head_refusal): its lease cannot end before this commits.
    INSERT INTO wharf.scope_action (workspace_id, scope_key, event_id, connection_id, action, account, after_lease_epoch)
    SELECT p_workspace_id, p_scope_key, p_event_id, e.connection_id, 'dead_letter_head', p_account, e.lease_epoch
      FROM wharf.provider_event e WHERE e.id = p_event_id;
    RETURN wharf.scope_action_result(p_event_id, NULL) || '{"after_lease": true}';
  END IF;
  IF v_refusal IS NULL THEN
    UPDATE wharf.provider_event
       SET state = 'DEAD', dead_at = now(), error_class = coalesce(error_class, 'MovedToDeadLetters')
     WHERE id = p_event_id;
    INSERT INTO wharf.scope_action (workspace_id, scope_key, event_id, connection_id, action, account)
    SELECT p_workspace_id, p_scope_key, p_event_id, e.connection_id, 'dead_letter_head', p_account
      FROM wharf.provider_event e WHERE e.id = p_event_id;
    PERFORM wharf.notify_idle_claimers();
  END IF;
  RETURN wharf.scope_action_result(p_event_id, v_refusal);
END $$;

--
-- Name: delete_alert_rule(bigint, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.delete_alert_rule(p_workspace_id bigint, p_id bigint) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  DELETE FROM wharf.alert_rule
   WHERE id = p_id AND (workspace_id = p_workspace_id OR (p_workspace_id IS NULL AND workspace_id IS NULL));
  RETURN FOUND;
END $$;

--
-- Name: delete_destination(bigint, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.delete_destination(p_workspace_id bigint, p_id bigint) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  DELETE FROM wharf.destination WHERE id = p_id AND workspace_id = p_workspace_id;
  RETURN FOUND;
END $$;

--
-- Name: delete_destination_rule(bigint, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.delete_destination_rule(p_workspace_id bigint, p_id bigint) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  DELETE FROM wharf.destination_rule WHERE id = p_id AND workspace_id = p_workspace_id;
  RETURN FOUND;
END $$;

--
-- Name: deliveries_purgeable(bigint, timestamp with time zone, timestamp with time zone); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.deliveries_purgeable(p_event_id bigint, p_done_before timestamp with time zone, p_dead_before timestamp with time zone) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
  SELECT NOT EXISTS (SELECT FROM wharf.destination_delivery q
                      WHERE q.event_id = p_event_id
                        AND NOT ((q.state = 'DONE' AND q.handled_at < p_done_before)
                                 OR (q.state = 'DEAD' AND q.dead_at < p_dead_before)))
$$;

--
-- Name: delivery_gauges(timestamp with time zone, integer); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.delivery_gauges(p_minute timestamp with time zone, p_top integer) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_at timestamptz := date_trunc('minute', coalesce(p_minute, now() - interval '1 minute'));
BEGIN
  IF p_top IS NULL OR p_top < 1 OR p_top > 100 THEN
    RAISE EXCEPTION 'wharf.delivery_gauges: top must be between 1 and 100' USING ERRCODE = '22023';
  END IF;
  RETURN (
    WITH counted AS (
      SELECT e.connection_id, 'accepted' AS outcome, '' AS reason, count(*) AS n
        FROM wharf.provider_event e
       WHERE e.received_at >= v_at AND e.received_at < v_at + interval '1 minute'
       GROUP BY e.connection_id
      UNION ALL
      SELECT a.connection_id, wharf.admission_outcome(a.reason), a.reason, count(*)
        FROM wharf.admission_log a
       WHERE a.at >= v_at AND a.at < v_at + interval '1 minute'
       GROUP BY a.connection_id, a.reason
    ), top AS (
      SELECT c.connection_id FROM counted c WHERE c.connection_id IS NOT NULL
       GROUP BY c.connection_id ORDER BY sum(c.n) DESC, c.connection_id LIMIT p_top
    )
    SELECT jsonb_build_object('minute', v_at, 'deliveries', coalesce(jsonb_agg(jsonb_build_object(
             'connection', g.connection, 'outcome', g.outcome, 'reason', g.reason, 'count', g.n)
             ORDER BY g.connection, g.outcome, g.reason), '[]'))
      FROM (SELECT CASE WHEN c.connection_id IS NULL THEN 'none'
                        WHEN c.connection_id IN (SELECT t.connection_id FROM top t) THEN c.connection_id::text
                        ELSE 'other' END AS connection,
                   c.outcome, c.reason, sum(c.n) AS n
              FROM counted c GROUP BY 1, 2, 3) g
  );
END $$;

--
-- Name: delivery_history(bigint, integer); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.delivery_history(p_workspace_id bigint, p_hours integer) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_since timestamptz;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF p_hours IS NULL OR p_hours < 1 OR p_hours > 24 THEN
    RAISE EXCEPTION 'wharf.delivery_history: hours must be between 1 and 24' USING ERRCODE = '22023';
  END IF;
  v_since := date_trunc('minute', now()) - make_interval(mins => p_hours * 60 - 1);
  RETURN (
    WITH accepted AS (
      SELECT e.id, e.received_at, e.connection_id
        FROM wharf.provider_event e
       WHERE e.workspace_id = p_workspace_id AND e.received_at >= v_since
    ), connections AS (
      SELECT c.id FROM wharf.connection c WHERE c.workspace_id = p_workspace_id
    ), refused AS (
      SELECT a.at, a.connection_id, a.reason
        FROM wharf.admission_log a
       WHERE a.at >= v_since
         AND (a.workspace_id = p_workspace_id
              OR (a.workspace_id IS NULL AND a.connection_id IN (SELECT id FROM connections)))
    ), per_minute AS (
      SELECT date_trunc('minute', received_at) AS at, connection_id, count(*) AS accepted, NULL::text AS reason, 0::bigint AS refused
        FROM accepted GROUP BY 1, 2
      UNION ALL
      SELECT date_trunc('minute', at), connection_id, 0, reason, count(*)
        FROM refused GROUP BY 1, 2, 4
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object('at', m.at, 'connection_id', m.connection_id, 'accepted', m.accepted,
                                                 'refused', m.refused, 'dropped', m.dropped)
                              ORDER BY m.at, m.connection_id NULLS FIRST), '[]')
      FROM (SELECT p.at, p.connection_id, sum(p.accepted) AS accepted,
                   coalesce(jsonb_object_agg(p.reason, p.refused)
                              FILTER (WHERE p.reason IS NOT NULL AND wharf.admission_outcome(p.reason) = 'refused'), '{}') AS refused,
                   coalesce(jsonb_object_agg(p.reason, p.refused)
                              FILTER (WHERE p.reason IS NOT NULL AND wharf.admission_outcome(p.reason) = 'dropped'), '{}') AS dropped
              FROM per_minute p
             GROUP BY p.at, p.connection_id) m
  );
END $$;

--
-- Name: delivery_scope_key(bigint, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.delivery_scope_key(p_destination_id bigint, p_scope_key text) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
  SELECT wharf.lifecycle_key('delivery-scope', p_destination_id || ' ' || p_scope_key)
$$;

--
-- Name: delivery_summary(wharf.destination_delivery); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.delivery_summary(q wharf.destination_delivery) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  SELECT jsonb_build_object(
    'id', q.id, 'event_id', q.event_id, 'destination_id', q.destination_id, 'state', q.state,
    'attempt', q.attempt, 'failures', q.failures,
    -- Behind its scope's head it has no time of its own: it waits its turn.
    'next_attempt_at', nullif(q.next_attempt_at, 'infinity'), 'waiting_behind_head', q.next_attempt_at = 'infinity',
    'error_class', q.error_class, 'outcome', q.outcome, 'last_status', q.last_status,
    'handled_at', q.handled_at, 'dead_at', q.dead_at, 'replayed_by', q.replayed_by,
    'replayed_at', q.replayed_at, 'provider', e.provider, 'event_type', e.event_type, 'subject', e.subject,
    'received_at', e.received_at)
    FROM wharf.provider_event e WHERE e.id = q.event_id
$$;

--
-- Name: destination; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.destination (
    id bigint NOT NULL,
    workspace_id bigint NOT NULL,
    name text NOT NULL,
    url text NOT NULL,
    signing_secret text,
    previous_signing_secret text,
    previous_valid_until timestamp with time zone,
    credentials text,
    credentials_type text,
    timeout_ms integer DEFAULT 10000 NOT NULL,
    rate_limit integer,
    rate_period text DEFAULT 'second'::text NOT NULL,
    max_in_flight integer DEFAULT 10 NOT NULL,
    ordered boolean DEFAULT true NOT NULL,
    headers jsonb DEFAULT '{}'::jsonb NOT NULL,
    breaker_failures integer DEFAULT 20 NOT NULL,
    breaker_minutes integer DEFAULT 10 NOT NULL,
    state text DEFAULT 'ACTIVE'::text NOT NULL,
    paused_reason text,
    paused_by text,
    consecutive_failures integer DEFAULT 0 NOT NULL,
    failing_since timestamp with time zone,
    probe_at timestamp with time zone,
    tokens double precision,
    tokens_at timestamp with time zone,
    claimed_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT destination_breaker_failures_check CHECK ((breaker_failures > 0)),
    CONSTRAINT destination_breaker_minutes_check CHECK ((breaker_minutes > 0)),
    CONSTRAINT destination_credentials_type_check CHECK ((credentials_type = ANY (ARRAY['bearer'::text, 'basic'::text, 'header'::text]))),
    CONSTRAINT destination_headers_check CHECK ((jsonb_typeof(headers) = 'object'::text)),
    CONSTRAINT destination_max_in_flight_check CHECK (((max_in_flight >= 1) AND (max_in_flight <= 1000))),
    CONSTRAINT destination_paused_reason_check CHECK ((paused_reason = ANY (ARRAY['operator'::text, 'gone'::text, 'breaker'::text]))),
    CONSTRAINT destination_rate_limit_check CHECK ((rate_limit > 0)),
    CONSTRAINT destination_rate_period_check CHECK ((rate_period = ANY (ARRAY['second'::text, 'minute'::text]))),
    CONSTRAINT destination_state_check CHECK ((state = ANY (ARRAY['ACTIVE'::text, 'PAUSED'::text, 'BREAKER_OPEN'::text]))),
    CONSTRAINT destination_timeout_ms_check CHECK (((timeout_ms >= 100) AND (timeout_ms <= 60000)))
);

--
-- Name: destination_for_change(bigint, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.destination_for_change(p_workspace_id bigint, p_id bigint) RETURNS wharf.destination
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_dest wharf.destination;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  SELECT * INTO v_dest FROM wharf.destination WHERE id = p_id AND workspace_id = p_workspace_id FOR NO KEY UPDATE;
  RETURN v_dest;
END $$;

--
-- Name: destination_header_problem(text, jsonb); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.destination_header_problem(p_name text, p_value jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $_$
  SELECT CASE
    WHEN p_name !~ '^[A-Za-z0-9!#$%&''*+.^_`|~-]{1,100}$' THEN 'not a header name'
    WHEN lower(p_name) ~ '^(webhook-|wharf-|content-)'
         OR lower(p_name) IN ('host', 'authorization', 'proxy-authorization', 'cookie', 'connection', 'keep-alive',
                              'transfer-encoding', 'te', 'trailer', 'upgrade', 'expect')
      THEN 'set by Wharf (credentials go in the destination''s credentials)'
    WHEN jsonb_typeof(p_value) <> 'string' OR p_value #>> '{}' ~ '[[:cntrl:]]' OR length(p_value #>> '{}') > 1000
      THEN 'a string of at most 1000 characters without control characters'
  END
$_$;

--
-- Name: destination_summary(wharf.destination); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.destination_summary(d wharf.destination) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  SELECT jsonb_build_object(
    'id', d.id, 'workspace_id', d.workspace_id, 'name', d.name, 'url', d.url, 'timeout_ms', d.timeout_ms,
    'rate_limit', d.rate_limit, 'rate_period', d.rate_period, 'max_in_flight', d.max_in_flight,
    'ordered', d.ordered, 'headers', d.headers, 'breaker_failures', d.breaker_failures,
    'breaker_minutes', d.breaker_minutes, 'state', d.state, 'paused_reason', d.paused_reason,
    'paused_by', d.paused_by, 'consecutive_failures', d.consecutive_failures,
    'failing_since', d.failing_since, 'probe_at', d.probe_at,
    'has_secret', d.signing_secret IS NOT NULL,
    'has_credentials', d.credentials IS NOT NULL, 'credentials_type', d.credentials_type,
    'secret_rotating_until', CASE WHEN d.previous_valid_until > now() THEN d.previous_valid_until END,
    'created_at', d.created_at, 'updated_at', d.updated_at,
    'stats', (
      -- Bounded whatever the traffic: the deliveries waiting and dead are
      -- counted up to 10000 (queued_capped, dead_capped), and the last hour's
      -- figures read its latest 10000 attempts at most (ix_delivery_attempt_destination,
      -- backwards; last_hour_sampled says when the hour held more).
      WITH recent AS (
        SELECT a.ended, a.ended_at, a.duration_ms FROM wharf.delivery_attempt a
         WHERE a.destination_id = d.id AND a.ended_at > now() - interval '1 hour'
         ORDER BY a.ended_at DESC
         LIMIT 10000
      ), waiting AS (
        SELECT (SELECT count(*) FROM (SELECT FROM wharf.destination_delivery q
                                       WHERE q.destination_id = d.id AND q.state = 'QUEUED' LIMIT 10000) x) AS queued,
               (SELECT count(*) FROM (SELECT FROM wharf.destination_delivery q
                                       WHERE q.destination_id = d.id AND q.state = 'DEAD' LIMIT 10000) x) AS dead
      )
      SELECT jsonb_build_object(
        'queued', w.queued, 'queued_capped', w.queued >= 10000,
        'leased', (SELECT count(*) FROM wharf.destination_delivery q WHERE q.destination_id = d.id AND q.state = 'LEASED'),
        'dead', w.dead, 'dead_capped', w.dead >= 10000,
        'delivered_last_hour', count(r.*) FILTER (WHERE r.ended = 'handled'),
        'failed_last_hour', count(r.*) FILTER (WHERE r.ended IN ('transient', 'permanent', 'gone', 'expired')),
        'last_hour_sampled', count(r.*) >= 10000,
        -- The last minute's successes; when the sample spans less than that, its rate scaled to a minute.
        'per_minute', CASE WHEN count(r.*) >= 10000 AND min(r.ended_at) > now() - interval '1 minute'
                           THEN round(count(r.*) FILTER (WHERE r.ended = 'handled') * 60
                                      / greatest(extract(epoch FROM now() - min(r.ended_at)), 0.001))::bigint
                           ELSE count(r.*) FILTER (WHERE r.ended = 'handled' AND r.ended_at > now() - interval '1 minute') END,
        'success_rate', round(count(r.*) FILTER (WHERE r.ended = 'handled')::numeric
                              / nullif(count(r.*) FILTER (WHERE r.ended <> 'released'), 0), 4),
        'latency_p50_ms', percentile_cont(0.5) WITHIN GROUP (ORDER BY r.duration_ms)
                            FILTER (WHERE r.duration_ms IS NOT NULL),
        'latency_p99_ms', percentile_cont(0.99) WITHIN GROUP (ORDER BY r.duration_ms)
                            FILTER (WHERE r.duration_ms IS NOT NULL),
        'filtered_last_hour', (SELECT coalesce(sum(f.filtered), 0) FROM wharf.rule_filtered_minute f
                                 JOIN wharf.destination_rule dr ON dr.id = f.rule_id
                                WHERE dr.destination_id = d.id AND f.minute > now() - interval '1 hour'))
        FROM waiting w LEFT JOIN recent r ON true
       GROUP BY w.queued, w.dead))
$$;

--
-- Name: due_alerts(uuid, integer); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.due_alerts(p_token uuid, p_limit integer) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM wharf.held_alert_sender(p_token);
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 1000' USING ERRCODE = '22023';
  END IF;
  RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', a.id, 'rule_id', r.id, 'rule_name', r.name, 'workspace_id', a.workspace_id, 'kind', a.kind,
                   'test', a.test, 'facts', a.facts, 'created_at', a.created_at, 'attempts', a.attempts,
                   'destination', r.destination, 'url', r.url, 'secret', r.secret) ORDER BY a.next_attempt_at, a.id), '[]')
            FROM (SELECT * FROM wharf.alert x
                   WHERE x.state = 'pending' AND x.next_attempt_at <= clock_timestamp()
                   ORDER BY x.next_attempt_at, x.id
                   LIMIT p_limit) a
            JOIN wharf.alert_rule r ON r.id = a.rule_id);
END $$;

--
-- Name: edit_alert_rule(bigint, bigint, text, text, integer, integer, text, text, text, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.edit_alert_rule(p_workspace_id bigint, p_id bigint, p_name text, p_kind text, p_threshold integer, p_window_seconds integer, p_destination text, p_url text, p_secret text, p_account text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_rule   wharf.alert_rule;
  v_secret text;
BEGIN
  SELECT * INTO v_rule FROM wharf.alert_rule
   WHERE id = p_id AND (workspace_id = p_workspace_id OR (p_workspace_id IS NULL AND workspace_id IS NULL))
     FOR UPDATE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF p_destination IS DISTINCT FROM v_rule.destination AND p_url IS NULL THEN
    RAISE EXCEPTION 'wharf: a new destination needs its URL' USING ERRCODE = '22023';
  END IF;
  v_secret := CASE WHEN p_destination = 'slack' THEN p_secret ELSE coalesce(p_secret, v_rule.secret) END;
  PERFORM wharf.check_alert_rule(p_name, p_kind, p_threshold, p_window_seconds, p_destination,
                                 coalesce(p_url, v_rule.url), v_secret, p_account);
  UPDATE wharf.alert_rule
     SET name = p_name, kind = p_kind, threshold = p_threshold, window_seconds = p_window_seconds,
         destination = p_destination, url = coalesce(p_url, v_rule.url), secret = v_secret,
         updated_by = p_account, updated_at = now()
   WHERE id = p_id
  RETURNING * INTO v_rule;
  RETURN wharf.alert_rule_summary(v_rule);
END $$;

--
-- Name: erase_person(text, jsonb); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.erase_person(p_source text, p_identities jsonb) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_ids     text[];
  v_logins  text[];
  v_events  bigint[];
  v_deleted bigint;
BEGIN
  IF p_source IS NULL OR p_identities IS NULL THEN
    RAISE EXCEPTION 'wharf.erase_person: source and identities are required' USING ERRCODE = '22004';
  END IF;
  IF jsonb_typeof(p_identities) <> 'object'
     OR jsonb_typeof(coalesce(p_identities->'ids', '[]')) <> 'array'
     OR jsonb_typeof(coalesce(p_identities->'logins', '[]')) <> 'array' THEN
    RAISE EXCEPTION 'wharf.erase_person: identities must be {"ids": [...], "logins": [...]}'
      USING ERRCODE = '22023';
  END IF;
  SELECT coalesce(array_agg(v #>> '{}'), '{}') INTO v_ids
    FROM jsonb_array_elements(coalesce(p_identities->'ids', '[]')) v
   WHERE jsonb_typeof(v) IN ('string', 'number');
  SELECT coalesce(array_agg(v #>> '{}'), '{}') INTO v_logins
    FROM jsonb_array_elements(coalesce(p_identities->'logins', '[]')) v
   WHERE jsonb_typeof(v) IN ('string', 'number');
  IF cardinality(v_ids) + cardinality(v_logins) = 0 THEN
    RAISE EXCEPTION 'wharf.erase_person: name at least one id or login' USING ERRCODE = '22023';
  END IF;

  -- Lock the events, then their scopes, then delete: the same order as every
  -- state change (event row, then its scope through the trigger). Deleting at
  -- once would lock the scopes in scan order at the end of the DELETE, while
  -- a redelivery that holds one of them waits for the deleted row (ON
  -- CONFLICT): a deadlock. Locked but not yet deleted, a row is simply a
  -- duplicate to that redelivery.
  SELECT coalesce(array_agg(id), '{}') INTO v_events
    FROM (SELECT e.id FROM wharf.provider_event e
           WHERE e.source = p_source
             AND wharf.payload_names_person(e.provider, e.payload, v_ids, v_logins)
           ORDER BY e.id
             FOR UPDATE) matched;
  PERFORM wharf.lock_scopes(ARRAY(SELECT e.scope_key FROM wharf.provider_event e WHERE e.id = ANY (v_events)));

  DELETE FROM wharf.provider_event WHERE id = ANY (v_events);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  RETURN v_deleted;
END $$;

--
-- Name: evaluate_alert_rules(uuid); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.evaluate_alert_rules(p_token uuid) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET jit TO 'off'
    AS $$
DECLARE
  v_now   timestamptz := now();
  v_count integer;
  v_total integer := 0;
BEGIN
  PERFORM wharf.held_alert_sender(p_token);

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, i.workspace_id, 'issue-opened:' || i.id, r.kind, wharf.issue_alert_facts(i)
    FROM wharf.alert_rule r
    JOIN wharf.issue i ON (r.workspace_id IS NULL OR i.workspace_id = r.workspace_id)
   WHERE r.kind = 'issue_opened' AND i.status <> 'ignored'
     AND i.last_seen_at >= greatest(r.created_at, v_now - interval '1 day')
     AND i.first_seen_at >= greatest(r.created_at, v_now - interval '1 day')
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  v_total := v_total + v_count;

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, i.workspace_id, 'issue-reopened:' || i.id || ':' || i.reopened, r.kind, wharf.issue_alert_facts(i)
    FROM wharf.alert_rule r
    JOIN wharf.issue i ON (r.workspace_id IS NULL OR i.workspace_id = r.workspace_id)
   WHERE r.kind = 'issue_reopened' AND i.status = 'open'
     AND i.last_seen_at >= greatest(r.created_at, v_now - interval '1 day')
     AND i.reopened_at >= greatest(r.created_at, v_now - interval '1 day')
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  v_total := v_total + v_count;

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, r.workspace_id, 'dead-rate:' || floor(extract(epoch FROM v_now) / r.window_seconds)::bigint, r.kind,
         jsonb_build_object('dead', c.dead, 'threshold', r.threshold, 'window_seconds', r.window_seconds)
    FROM wharf.alert_rule r
    CROSS JOIN LATERAL (SELECT coalesce(sum(m.dead), 0) AS dead FROM wharf.failure_minute m
                         WHERE (r.workspace_id IS NULL OR m.workspace_id = r.workspace_id)
                           AND m.minute >= date_trunc('minute', v_now - make_interval(secs => r.window_seconds))) c
   WHERE r.kind = 'dead_letter_rate' AND c.dead >= r.threshold
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  v_total := v_total + v_count;

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, r.workspace_id, 'oldest-due:' || floor(extract(epoch FROM v_now) / r.window_seconds)::bigint, r.kind,
         jsonb_build_object('oldest_due_at', o.due, 'age_seconds', floor(extract(epoch FROM v_now - o.due)),
                            'window_seconds', r.window_seconds)
    FROM wharf.alert_rule r
    CROSS JOIN LATERAL (SELECT min(s.head_due_at) AS due FROM wharf.scope s
                         WHERE (r.workspace_id IS NULL OR s.workspace_id = r.workspace_id)
                           AND s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active) o
   WHERE r.kind = 'oldest_due_age' AND o.due < v_now - make_interval(secs => r.window_seconds)
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  v_total := v_total + v_count;

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, t.workspace_id, 'stuck:' || t.scope_key || ':' || h.id, r.kind,
         jsonb_build_object('scope_key', t.scope_key, 'subject', h.subject, 'waiting_since', t.since,
                            'head', jsonb_build_object('id', h.id, 'provider', h.provider, 'event_type', h.event_type,
                                                       'state', h.state, 'attempt', h.attempt,
                                                       'error_class', h.error_class))
    FROM wharf.alert_rule r
    CROSS JOIN LATERAL wharf.scopes_stuck_since(v_now - make_interval(secs => r.window_seconds), r.workspace_id, 1000) t
    JOIN wharf.provider_event h ON h.id = t.head_id
   WHERE r.kind = 'stuck_scope'
   LIMIT 1000
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  RETURN v_total + v_count;
END $$;

--
-- Name: event_attempts(wharf.provider_event); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.event_attempts(e wharf.provider_event) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  SELECT coalesce(jsonb_agg(a ORDER BY (a ->> 'epoch')::bigint), '[]')
    FROM (SELECT jsonb_build_object('attempt', h.attempt, 'epoch', h.lease_epoch, 'worker', h.worker,
                                    'started_at', h.started_at, 'ended_at', h.ended_at,
                                    'ended', h.ended, 'error_class', h.error_class,
                                    'frames', coalesce(to_jsonb(h.frames), '[]')) AS a
            FROM wharf.event_attempt h
           WHERE h.event_id = e.id
          UNION ALL
          SELECT jsonb_build_object('attempt', e.attempt, 'epoch', e.lease_epoch, 'worker', e.leased_by,
                                    'started_at', e.leased_at,
                                    'ended_at', CASE WHEN e.state = 'DONE' THEN e.handled_at END,
                                    'ended', CASE WHEN e.state = 'DONE' THEN e.outcome ELSE 'running' END,
                                    'error_class', NULL, 'frames', '[]'::jsonb)
           WHERE e.state IN ('LEASED', 'DONE') AND e.leased_by IS NOT NULL) attempts
$$;

--
-- Name: event_deliveries(bigint, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.event_deliveries(p_workspace_id bigint, p_event_id bigint) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT (SELECT coalesce(jsonb_agg(wharf.delivery_summary(q) || jsonb_build_object('destination_name', d.name)
                                    ORDER BY q.destination_id), '[]')
            FROM wharf.destination_delivery q JOIN wharf.destination d ON d.id = q.destination_id
           WHERE q.event_id = e.id)
    FROM wharf.provider_event e WHERE e.id = p_event_id AND e.workspace_id = p_workspace_id
$$;

--
-- Name: event_detail(bigint, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.event_detail(p_workspace_id bigint, p_id bigint) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  SELECT wharf.event_summary(e) || jsonb_build_object(
           'delivery_key', e.delivery_key, 'scope_key', e.scope_key,
           'connection_id', e.connection_id, 'payload', e.payload, 'headers', e.headers,
           'lease_epoch', e.lease_epoch, 'leased_until', e.leased_until, 'leased_by', e.leased_by,
           'replayed_by', e.replayed_by, 'replayed_at', e.replayed_at,
           'attempts', wharf.event_attempts(e),
           'error_frames', coalesce((SELECT to_jsonb(h.frames) FROM wharf.event_attempt h
                                      WHERE h.event_id = e.id AND e.error_class IS NOT NULL  -- by primary key
                                      ORDER BY h.lease_epoch DESC LIMIT 1), '[]'),
           'steps', (SELECT coalesce(jsonb_agg(jsonb_build_object('name', s.step_name,
                                                                  'committed_at', s.committed_at)
                                               ORDER BY s.committed_at, s.step_name), '[]')
                       FROM wharf.provider_event_step s WHERE s.event_id = e.id))
    FROM wharf.provider_event e
   WHERE e.id = p_id AND e.workspace_id IS NOT DISTINCT FROM p_workspace_id
$$;

--
-- Name: event_page(bigint, text, text, integer, bigint, text, text, timestamp with time zone, timestamp with time zone); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.event_page(p_workspace_id bigint, p_state text, p_subject text, p_limit integer, p_before_id bigint, p_provider text, p_event_type text, p_received_after timestamp with time zone, p_received_before timestamp with time zone) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
  v_events jsonb;
  v_count  bigint;
BEGIN
  IF p_state IS NOT NULL AND p_state NOT IN ('QUEUED', 'LEASED', 'DONE', 'DEAD') THEN
    RAISE EXCEPTION 'wharf: unknown event state %', quote_literal(p_state) USING ERRCODE = '22023';
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 500' USING ERRCODE = '22023';
  END IF;
  IF p_before_id IS NOT NULL AND p_before_id < 1 THEN
    RAISE EXCEPTION 'wharf: cursor must be a positive event id' USING ERRCODE = '22023';
  END IF;

  -- One row more than asked says whether another page follows. Dead letters
  -- are read from ix_provider_event_dead (DEAD is exactly dead_at IS NOT
  -- NULL, a CHECK of the table), the rest from the workspace's rows newest
  -- first (ix_provider_event_workspace_recent): neither index names a column
  -- that claim or complete writes.
  IF p_state = 'DEAD' THEN
    SELECT coalesce(jsonb_agg(wharf.event_summary(e) ORDER BY e.id DESC), '[]'), count(*)
      INTO v_events, v_count
      FROM (SELECT *
              FROM wharf.provider_event x
             WHERE x.dead_at IS NOT NULL
               AND wharf.event_page_matches(x, p_workspace_id, p_subject, p_provider, p_event_type,
                                            p_received_after, p_received_before, p_before_id)
             ORDER BY x.id DESC
             LIMIT p_limit + 1) e;
  ELSE
    SELECT coalesce(jsonb_agg(wharf.event_summary(e) ORDER BY e.id DESC), '[]'), count(*)
      INTO v_events, v_count
      FROM (SELECT *
              FROM wharf.provider_event x
             WHERE (p_state IS NULL OR x.state = p_state)
               AND wharf.event_page_matches(x, p_workspace_id, p_subject, p_provider, p_event_type,
                                            p_received_after, p_received_before, p_before_id)
             ORDER BY x.id DESC
             LIMIT p_limit + 1) e;
  END IF;

  IF v_count <= p_limit THEN
    RETURN jsonb_build_object('events', v_events, 'next_cursor', NULL);
  END IF;
  v_events := v_events - p_limit;
  RETURN jsonb_build_object('events', v_events, 'next_cursor', v_events -> (p_limit - 1) -> 'id');
END $$;

--
-- Name: event_page_matches(wharf.provider_event, bigint, text, text, text, timestamp with time zone, timestamp with time zone, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.event_page_matches(e wharf.provider_event, p_workspace_id bigint, p_subject text, p_provider text, p_event_type text, p_received_after timestamp with time zone, p_received_before timestamp with time zone, p_before_id bigint) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
  SELECT (e.workspace_id = p_workspace_id OR (p_workspace_id IS NULL AND e.workspace_id IS NULL))
     AND (p_subject IS NULL OR e.subject = p_subject)
     AND (p_provider IS NULL OR e.provider = p_provider)
     AND (p_event_type IS NULL OR e.event_type = p_event_type)
     AND (p_received_after IS NULL OR e.received_at >= p_received_after)
     AND (p_received_before IS NULL OR e.received_at < p_received_before)
     AND (p_before_id IS NULL OR e.id < p_before_id)
$$;

--
-- Name: event_summary(wharf.provider_event); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.event_summary(e wharf.provider_event) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  SELECT jsonb_build_object(
    'id', e.id, 'workspace_id', e.workspace_id, 'provider', e.provider, 'source', e.source,
    'event_type', e.event_type, 'subject', e.subject, 'state', e.state,
    'attempt', e.attempt, 'failures', e.failures, 'received_at', e.received_at,
    'next_attempt_at', e.next_attempt_at, 'error_class', e.error_class, 'outcome', e.outcome,
    'handled_at', e.handled_at, 'dead_at', e.dead_at)
$$;

--
-- Name: event_type_matches(text[], text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.event_type_matches(p_patterns text[], p_type text) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT p_patterns IS NULL
      OR EXISTS (SELECT FROM unnest(p_patterns) p
                  WHERE p_type LIKE replace(replace(replace(replace(p, '\', '\\'), '%', '\%'), '_', '\_'), '*', '%'))
$$;

--
-- Name: fail(bigint, bigint, text, text, text[]); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.fail(p_id bigint, p_epoch bigint, p_kind text, p_error_class text, p_frames text[] DEFAULT NULL::text[]) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '5s'
    AS $_$
DECLARE
  v_now   timestamptz := clock_timestamp();
  v_row   record;
  v_dead  boolean;
  v_state text;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL OR p_kind IS NULL OR p_error_class IS NULL THEN
    RAISE EXCEPTION 'wharf.fail: id, epoch, kind and error_class are required' USING ERRCODE = '22004';
  END IF;
  IF p_kind NOT IN ('transient', 'unknown', 'permanent', 'uncertain') THEN
    RAISE EXCEPTION 'wharf.fail: unknown failure kind %', quote_literal(p_kind) USING ERRCODE = '22023';
  END IF;
  IF p_error_class !~ '^[A-Za-z_$][A-Za-z0-9_$.:-]{0,127}$' THEN
    RAISE EXCEPTION 'wharf.fail: error_class must be a class name, not free text' USING ERRCODE = '22023';
  END IF;
  IF cardinality(p_frames) > 8 OR array_ndims(p_frames) > 1
     OR EXISTS (SELECT FROM unnest(p_frames) f(frame)
                 WHERE frame IS NULL
                    OR frame !~ '^[A-Za-z0-9_.@-][A-Za-z0-9_./@-]{0,199}:[0-9]{1,7}:[0-9]{1,7}( [A-Za-z_$<][A-Za-z0-9_$.<>]{0,127})?$') THEN
    RAISE EXCEPTION 'wharf.fail: frames must be at most 8 of path:line:column function, not free text' USING ERRCODE = '22023';
  END IF;

  SELECT attempt, failures, leased_by, leased_at, transient_since INTO v_row
    FROM wharf.provider_event
   WHERE id = p_id AND lease_epoch = p_epoch AND state COLLATE "C" = 'LEASED'  -- by primary key (top of sql/30)
   FOR UPDATE;  -- after the lease's fenced writes (top of sql/30)
  IF NOT FOUND THEN
    -- Failed under this epoch by an earlier try whose reply was lost. Read
    -- after the row lock: a try still in flight has committed or rolled back.
    RETURN (SELECT h.left_state FROM wharf.event_attempt h
             WHERE h.event_id = p_id AND h.lease_epoch = p_epoch  -- by primary key
               AND h.ended = p_kind AND h.error_class = p_error_class);
  END IF;

  v_dead := p_kind IN ('permanent', 'uncertain')
            OR (p_kind = 'unknown' AND v_row.failures + 1 >= wharf.setting_integer('max_attempts'))
            -- An operator moved this head to the dead letters while this lease ran (sql/98).
            OR wharf.dead_letter_after_lease(p_id, p_epoch)
            OR (p_kind = 'transient' AND v_row.transient_since IS NOT NULL
                AND v_now - v_row.transient_since > wharf.setting_interval('transient_max_age'));
  v_state := CASE WHEN v_dead THEN 'DEAD' ELSE 'QUEUED' END;

  UPDATE wharf.provider_event
     SET failures        = failures + CASE WHEN p_kind = 'unknown' THEN 1 ELSE 0 END,
         transient_since = CASE WHEN p_kind = 'transient' THEN coalesce(transient_since, v_now) ELSE transient_since END,
         error_class     = p_error_class,
         leased_until    = NULL,
         state           = v_state,
         outcome         = CASE WHEN p_kind = 'uncertain' THEN 'uncertain' END,
         dead_at         = CASE WHEN v_dead THEN v_now END,
         next_attempt_at = CASE WHEN v_dead THEN next_attempt_at
                                ELSE v_now + wharf.retry_delay(v_row.attempt) END
   WHERE id = p_id;
  INSERT INTO wharf.event_attempt (event_id, lease_epoch, attempt, worker, started_at, ended_at, ended, error_class,
                                   left_state, frames)
  VALUES (p_id, p_epoch, v_row.attempt, v_row.leased_by, v_row.leased_at, v_now, p_kind, p_error_class,
          v_state, nullif(p_frames, '{}'));
  RETURN v_state;
END $_$;

--
-- Name: fail_delivery(bigint, bigint, text, text, integer, integer, text, interval); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.fail_delivery(p_id bigint, p_epoch bigint, p_kind text, p_error_class text, p_status integer, p_duration_ms integer, p_response text, p_retry_after interval DEFAULT NULL::interval) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  v_now    timestamptz := clock_timestamp();
  v_row    record;
  v_dest   record;
  v_dead   boolean;
  v_state  text;
  v_opened boolean := false;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL OR p_kind IS NULL OR p_error_class IS NULL THEN
    RAISE EXCEPTION 'wharf.fail_delivery: id, epoch, kind and error_class are required' USING ERRCODE = '22004';
  END IF;
  IF p_kind NOT IN ('transient', 'permanent', 'gone') THEN
    RAISE EXCEPTION 'wharf.fail_delivery: unknown failure kind %', quote_literal(p_kind) USING ERRCODE = '22023';
  END IF;
  IF p_error_class !~ '^[A-Za-z_$][A-Za-z0-9_$.:-]{0,127}$' THEN
    RAISE EXCEPTION 'wharf.fail_delivery: error_class must be a class name, not free text' USING ERRCODE = '22023';
  END IF;

  SELECT q.destination_id, q.event_id, q.workspace_id, q.attempt, q.leased_by, q.leased_at, q.transient_since, q.ordered, q.scope_key
    INTO v_row
    FROM wharf.destination_delivery q
   WHERE q.id = p_id AND q.lease_epoch = p_epoch AND q.state = 'LEASED'
     FOR UPDATE;
  IF NOT FOUND THEN
    RETURN (SELECT h.left_state FROM wharf.delivery_attempt h
             WHERE h.delivery_id = p_id AND h.lease_epoch = p_epoch AND h.ended = p_kind
               AND h.error_class = p_error_class);
  END IF;
  SELECT d.state, d.name, d.consecutive_failures, d.failing_since, d.breaker_failures, d.breaker_minutes INTO v_dest
    FROM wharf.destination d WHERE d.id = v_row.destination_id
     FOR NO KEY UPDATE;

  v_dead := p_kind = 'permanent'
            OR (p_kind = 'transient' AND v_row.transient_since IS NOT NULL
                AND v_now - v_row.transient_since > wharf.setting_interval('transient_max_age')
                AND v_dest.failing_since IS NOT NULL AND v_dest.failing_since > v_row.transient_since);
  v_state := CASE WHEN v_dead THEN 'DEAD' ELSE 'QUEUED' END;

  UPDATE wharf.destination_delivery q
     SET state           = v_state,
         error_class     = p_error_class,
         last_status     = p_status,
         leased_until    = NULL,
         failures        = q.failures + CASE WHEN p_kind = 'transient' THEN 1 ELSE 0 END,
         transient_since = CASE WHEN p_kind = 'transient' THEN coalesce(q.transient_since, v_now) ELSE q.transient_since END,
         dead_at         = CASE WHEN v_dead THEN v_now END,
         -- A 410 gives the delivery back as it was: it waits for the resume.
         attempt         = CASE WHEN p_kind = 'gone' THEN q.attempt - 1 ELSE q.attempt END,
         next_attempt_at = CASE WHEN v_dead OR p_kind = 'gone' THEN v_now
                                ELSE v_now + greatest(wharf.retry_delay(v_row.attempt),
                                                      least(p_retry_after, wharf.setting_interval('max_delay'))) END
   WHERE q.id = p_id;
  INSERT INTO wharf.delivery_attempt (delivery_id, lease_epoch, destination_id, attempt, worker, started_at,
                                      ended_at, ended, left_state, error_class, status, duration_ms, response)
  VALUES (p_id, p_epoch, v_row.destination_id, v_row.attempt, v_row.leased_by, v_row.leased_at,
          v_now, p_kind, v_state, p_error_class, p_status, p_duration_ms, left(p_response, 1024));

  IF p_kind = 'gone' THEN
    UPDATE wharf.destination d
       SET state = 'PAUSED', paused_reason = 'gone', paused_by = NULL, probe_at = NULL, updated_at = v_now
     WHERE d.id = v_row.destination_id;
    PERFORM wharf.count_delivery_issue(v_row.destination_id, v_row.event_id, 'DestinationGone', v_now, false);
  ELSIF p_kind = 'transient' THEN
    v_opened := v_dest.state = 'ACTIVE'
                AND (v_dest.consecutive_failures + 1 >= v_dest.breaker_failures
                     OR v_now - coalesce(v_dest.failing_since, v_now) >= v_dest.breaker_minutes * interval '1 minute');
    UPDATE wharf.destination d
       SET consecutive_failures = d.consecutive_failures + 1,
           failing_since        = coalesce(d.failing_since, v_now),
           state                = CASE WHEN v_opened THEN 'BREAKER_OPEN' ELSE d.state END,
           paused_reason        = CASE WHEN v_opened THEN 'breaker' ELSE d.paused_reason END,
           -- Closed by a probe: the first after the retry delay of the run so far.
           probe_at             = CASE WHEN v_opened OR d.state = 'BREAKER_OPEN'
                                       THEN v_now + wharf.retry_delay(d.consecutive_failures + 1)
                                       ELSE d.probe_at END
     WHERE d.id = v_row.destination_id;
    IF v_opened THEN
      PERFORM wharf.count_delivery_issue(v_row.destination_id, v_row.event_id, 'DestinationBreakerOpen', v_now, false);
    END IF;
  END IF;
  IF p_kind <> 'gone' THEN
    PERFORM wharf.count_delivery_issue(v_row.destination_id, v_row.event_id, p_error_class, v_now, v_dead);
  END IF;
  -- A dead delivery is a dead letter as a handler's is: the dead-letter rate counts it (sql/97).
  PERFORM wharf.count_into_failure_minute(v_row.workspace_id, date_trunc('minute', v_now), 1, CASE WHEN v_dead THEN 1 ELSE 0 END);
  IF v_dead AND v_row.ordered THEN
    PERFORM wharf.promote_next_delivery(v_row.destination_id, v_row.scope_key);
  END IF;
  RETURN v_state;
END $_$;

--
-- Name: failure_history(bigint, integer); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.failure_history(p_workspace_id bigint, p_hours integer) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_since timestamptz;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF p_hours IS NULL OR p_hours < 1 OR p_hours > 24 THEN
    RAISE EXCEPTION 'wharf.failure_history: hours must be between 1 and 24' USING ERRCODE = '22023';
  END IF;
  v_since := date_trunc('minute', now()) - make_interval(mins => p_hours * 60 - 1);
  RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object('at', m.at, 'failed', coalesce(f.failed, 0), 'dead', coalesce(f.dead, 0))
                                    ORDER BY m.at), '[]')
            FROM generate_series(v_since, date_trunc('minute', now()), interval '1 minute') AS m(at)
            LEFT JOIN wharf.failure_minute f ON f.workspace_id = p_workspace_id AND f.minute = m.at);
END $$;

--
-- Name: fence(bigint, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.fence(p_id bigint, p_epoch bigint) RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT wharf.check_lease(p_id, p_epoch, NULL, false)
$$;

--
-- Name: fence(bigint, bigint, uuid); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.fence(p_id bigint, p_epoch bigint, p_lease_token uuid) RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT wharf.check_lease(p_id, p_epoch, p_lease_token, true)
$$;

--
-- Name: filter_condition_matches(jsonb, jsonb); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.filter_condition_matches(p_cond jsonb, p_value jsonb) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE
    AS $_$
DECLARE
  v_part   record;
  v_ok     boolean;
  v_string boolean := jsonb_typeof(p_value) = 'string';
BEGIN
  IF jsonb_typeof(p_cond) <> 'object' THEN
    RETURN coalesce(p_value = p_cond, false);
  END IF;
  FOR v_part IN SELECT key, value FROM jsonb_each(p_cond) LOOP
    v_ok := CASE
      WHEN left(v_part.key, 1) <> '$' THEN
        wharf.filter_condition_matches(v_part.value,
                                       CASE WHEN jsonb_typeof(p_value) = 'object' THEN p_value -> v_part.key END)
      WHEN v_part.key = '$and' THEN
        NOT EXISTS (SELECT FROM jsonb_array_elements(v_part.value) c
                     WHERE NOT wharf.filter_condition_matches(c, p_value))
      WHEN v_part.key = '$or' THEN
        EXISTS (SELECT FROM jsonb_array_elements(v_part.value) c WHERE wharf.filter_condition_matches(c, p_value))
      WHEN v_part.key = '$not' THEN NOT wharf.filter_condition_matches(v_part.value, p_value)
      WHEN v_part.key = '$eq' THEN p_value = v_part.value
      WHEN v_part.key = '$neq' THEN p_value IS DISTINCT FROM v_part.value
      WHEN v_part.key = '$in' THEN EXISTS (SELECT FROM jsonb_array_elements(v_part.value) c WHERE c = p_value)
      WHEN v_part.key = '$nin' THEN NOT EXISTS (SELECT FROM jsonb_array_elements(v_part.value) c WHERE c = p_value)
      WHEN v_part.key = '$startsWith' THEN v_string AND starts_with(p_value #>> '{}', v_part.value #>> '{}')
      WHEN v_part.key = '$endsWith' THEN
        v_string AND right(p_value #>> '{}', length(v_part.value #>> '{}')) = v_part.value #>> '{}'
      WHEN v_part.key = '$contains' THEN
        CASE jsonb_typeof(p_value)
          WHEN 'string' THEN jsonb_typeof(v_part.value) = 'string' AND strpos(p_value #>> '{}', v_part.value #>> '{}') > 0
          WHEN 'array' THEN EXISTS (SELECT FROM jsonb_array_elements(p_value) e WHERE e = v_part.value)
          ELSE false END
      WHEN v_part.key IN ('$gt', '$gte', '$lt', '$lte') THEN
        CASE WHEN jsonb_typeof(p_value) = 'number' AND jsonb_typeof(v_part.value) = 'number' THEN
               CASE v_part.key WHEN '$gt' THEN p_value::numeric > v_part.value::numeric
                               WHEN '$gte' THEN p_value::numeric >= v_part.value::numeric
                               WHEN '$lt' THEN p_value::numeric < v_part.value::numeric
                               ELSE p_value::numeric <= v_part.value::numeric END
             WHEN v_string AND jsonb_typeof(v_part.value) = 'string' THEN
               CASE v_part.key WHEN '$gt' THEN (p_value #>> '{}') COLLATE "C" > (v_part.value #>> '{}')
                               WHEN '$gte' THEN (p_value #>> '{}') COLLATE "C" >= (v_part.value #>> '{}')
                               WHEN '$lt' THEN (p_value #>> '{}') COLLATE "C" < (v_part.value #>> '{}')
                               ELSE (p_value #>> '{}') COLLATE "C" <= (v_part.value #>> '{}') END
             ELSE false END
      WHEN v_part.key = '$exist' THEN (p_value IS NOT NULL) = (v_part.value = 'true')
      ELSE false
    END;
    IF NOT coalesce(v_ok, false) THEN
      RETURN false;
    END IF;
  END LOOP;
  RETURN true;
END $_$;

--
-- Name: filter_condition_problem(jsonb, text, integer, boolean); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.filter_condition_problem(p_cond jsonb, p_path text, p_depth integer, p_top boolean) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $_$
DECLARE
  v_part    record;
  v_problem text;
  v_type    text;
BEGIN
  IF p_depth > 16 THEN
    RETURN p_path || ': nested deeper than 16 levels';
  END IF;
  IF jsonb_typeof(p_cond) <> 'object' THEN
    RETURN CASE WHEN p_top THEN p_path || ': must be an object' END;
  END IF;
  IF p_cond = '{}' THEN
    RETURN p_path || ': is empty';
  END IF;
  IF EXISTS (SELECT FROM jsonb_object_keys(p_cond) k WHERE left(k, 1) = '$')
     AND EXISTS (SELECT FROM jsonb_object_keys(p_cond) k WHERE left(k, 1) <> '$') THEN
    RETURN p_path || ': mixes operators and field names';
  END IF;
  FOR v_part IN SELECT key, value FROM jsonb_each(p_cond) ORDER BY key LOOP
    v_type := jsonb_typeof(v_part.value);
    v_problem := CASE
      WHEN left(v_part.key, 1) <> '$' THEN
        CASE WHEN p_top AND v_part.key NOT IN ('payload', 'headers')
             THEN p_path || '.' || v_part.key || ': unknown field (a filter starts with payload or headers)'
             ELSE wharf.filter_condition_problem(v_part.value, p_path || '.' || v_part.key, p_depth + 1, false) END
      WHEN v_part.key IN ('$and', '$or') THEN
        CASE WHEN v_type <> 'array' OR jsonb_array_length(v_part.value) = 0
             THEN p_path || '.' || v_part.key || ': must be a non-empty array'
             ELSE (SELECT i.problem FROM jsonb_array_elements(v_part.value) WITH ORDINALITY AS a(item, n)
                     CROSS JOIN LATERAL (SELECT wharf.filter_condition_problem(
                                           a.item, p_path || '.' || v_part.key || '[' || (a.n - 1) || ']',
                                           p_depth + 1, p_top) AS problem) i
                    WHERE i.problem IS NOT NULL ORDER BY a.n LIMIT 1) END
      WHEN v_part.key = '$not' THEN
        wharf.filter_condition_problem(v_part.value, p_path || '.$not', p_depth + 1, p_top)
      WHEN p_top THEN
        p_path || ': ' || v_part.key || ' applies to a field, e.g. {"payload": {"action": {"' || v_part.key || '": …}}}'
      WHEN v_part.key IN ('$eq', '$neq') THEN NULL
      WHEN v_part.key IN ('$in', '$nin') THEN
        CASE WHEN v_type <> 'array' THEN p_path || '.' || v_part.key || ': must be an array' END
      WHEN v_part.key IN ('$startsWith', '$endsWith') THEN
        CASE WHEN v_type <> 'string' THEN p_path || '.' || v_part.key || ': must be a string' END
      WHEN v_part.key = '$contains' THEN
        CASE WHEN v_type IN ('object', 'array') THEN p_path || '.$contains: must be a string, number, boolean or null' END
      WHEN v_part.key IN ('$gt', '$gte', '$lt', '$lte') THEN
        CASE WHEN v_type NOT IN ('number', 'string') THEN p_path || '.' || v_part.key || ': must be a number or a string' END
      WHEN v_part.key = '$exist' THEN
        CASE WHEN v_type <> 'boolean' THEN p_path || '.$exist: must be true or false' END
      ELSE p_path || ': unknown operator ' || v_part.key
    END;
    IF v_problem IS NOT NULL THEN
      RETURN v_problem;
    END IF;
  END LOOP;
  RETURN NULL;
END $_$;

--
-- Name: filter_matches(jsonb, jsonb, jsonb); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.filter_matches(p_filter jsonb, p_payload jsonb, p_headers jsonb) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
  v_problem text := wharf.filter_problem(p_filter);
BEGIN
  IF v_problem IS NOT NULL THEN
    RAISE EXCEPTION 'wharf: %', v_problem USING ERRCODE = '22023';
  END IF;
  RETURN p_filter IS NULL
      OR wharf.filter_condition_matches(p_filter, jsonb_build_object('payload', p_payload, 'headers', p_headers));
END $$;

--
-- Name: filter_problem(jsonb); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.filter_problem(p_filter jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN p_filter IS NULL THEN NULL
              WHEN length(p_filter::text) > 16384 THEN 'filter: longer than 16384 characters'
              ELSE wharf.filter_condition_problem(p_filter, 'filter', 1, true) END
$$;

--
-- Name: finish_sweep(bigint, text, uuid); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.finish_sweep(p_app_id bigint, p_source text, p_token uuid) RETURNS timestamp with time zone
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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

--
-- Name: frames_fingerprint(text[]); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.frames_fingerprint(p_frames text[]) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN cardinality(p_frames) > 0 THEN md5(array_to_string(p_frames[1:3], E'\n')) ELSE '' END
$$;

--
-- Name: free_scopes(bigint[], text[]); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.free_scopes(p_ids bigint[], p_scope_keys text[]) RETURNS void
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    AS $$
BEGIN
  PERFORM wharf.lock_scopes(p_scope_keys);
  -- `s.scope_key = ANY (…)` besides the join: a lookup by key whatever the
  -- statistics say (an empty scope table, analyzed, estimates one row, and
  -- a join that scans it all looks as cheap).
  DELETE FROM wharf.scope s
   USING unnest(p_ids, p_scope_keys) AS l(id, scope_key)
   WHERE s.scope_key = l.scope_key AND s.scope_key = ANY (p_scope_keys) AND s.leased_id = l.id AND s.head_id IS NULL;
  UPDATE wharf.scope s
     SET leased_id = NULL, ready_at = greatest(s.head_due_at, clock_timestamp()), failing_since = NULL
    FROM unnest(p_ids, p_scope_keys) AS l(id, scope_key)
   WHERE s.scope_key = l.scope_key AND s.scope_key = ANY (p_scope_keys) AND s.leased_id = l.id;
END $$;

--
-- Name: held_alert_sender(uuid); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.held_alert_sender(p_token uuid) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
  PERFORM FROM wharf.alert_sender WHERE id = 1 AND lease_token = p_token FOR UPDATE;
  IF p_token IS NULL OR NOT FOUND THEN
    RAISE EXCEPTION 'wharf: the alert sender lease is no longer held with this token' USING ERRCODE = 'WH412';
  END IF;
END $$;

--
-- Name: redelivery_sweep; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.redelivery_sweep (
    app_id bigint NOT NULL,
    source text NOT NULL,
    swept_until timestamp with time zone,
    window_since timestamp with time zone,
    window_until timestamp with time zone,
    page_cursor text,
    pages_done integer DEFAULT 0 NOT NULL,
    leased_by text,
    lease_token uuid,
    leased_until timestamp with time zone,
    last_success_at timestamp with time zone,
    last_error_at timestamp with time zone,
    last_error text,
    CONSTRAINT redelivery_sweep_app_id_check CHECK ((app_id > 0)),
    CONSTRAINT redelivery_sweep_check CHECK (((window_since IS NULL) = (window_until IS NULL)))
);

--
-- Name: held_sweep(bigint, text, uuid); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.held_sweep(p_app_id bigint, p_source text, p_token uuid) RETURNS wharf.redelivery_sweep
    LANGUAGE plpgsql
    AS $$
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

--
-- Name: is_control_event(text, text, jsonb, jsonb); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.is_control_event(p_provider text, p_event_type text, p_route jsonb, p_payload jsonb) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT coalesce(p_provider = 'github'
                  AND p_event_type IN ('installation', 'installation_repositories', 'installation_target')
                  AND p_route->>'installation_id' IS NOT NULL
                  AND p_payload->'installation'->>'id' = p_route->>'installation_id'
                  AND coalesce(p_payload->>'action', '') <> '', false)
$$;

--
-- Name: issue; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.issue (
    id bigint NOT NULL,
    workspace_id bigint,
    provider text NOT NULL,
    event_type text NOT NULL,
    error_class text NOT NULL,
    status text DEFAULT 'open'::text NOT NULL,
    status_by text,
    status_at timestamp with time zone DEFAULT now() NOT NULL,
    first_seen_at timestamp with time zone NOT NULL,
    last_seen_at timestamp with time zone NOT NULL,
    failures bigint DEFAULT 0 NOT NULL,
    dead bigint DEFAULT 0 NOT NULL,
    sample_event_id bigint NOT NULL,
    reopened integer DEFAULT 0 NOT NULL,
    reopened_at timestamp with time zone,
    fingerprint text DEFAULT ''::text NOT NULL,
    frames text[],
    CONSTRAINT issue_status_check CHECK ((status = ANY (ARRAY['open'::text, 'acknowledged'::text, 'resolved'::text, 'ignored'::text])))
);

--
-- Name: issue_alert_facts(wharf.issue); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.issue_alert_facts(i wharf.issue) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  SELECT jsonb_build_object('issue', jsonb_build_object(
    'id', i.id, 'workspace_id', i.workspace_id, 'provider', i.provider, 'event_type', i.event_type,
    'error_class', i.error_class, 'status', i.status, 'failures', i.failures, 'dead', i.dead,
    'first_seen_at', i.first_seen_at, 'last_seen_at', i.last_seen_at, 'reopened', i.reopened,
    'reopened_at', i.reopened_at))
$$;

--
-- Name: issue_events(bigint, bigint, integer, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.issue_events(p_workspace_id bigint, p_id bigint, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL::bigint) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_issue  wharf.issue;
  v_events jsonb;
  v_count  bigint;
BEGIN
  IF p_workspace_id IS NULL THEN
    RAISE EXCEPTION 'wharf.issue_events: workspace is required' USING ERRCODE = '22004';
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 500' USING ERRCODE = '22023';
  END IF;
  SELECT * INTO v_issue FROM wharf.issue WHERE id = p_id AND workspace_id = p_workspace_id;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF v_issue.fingerprint LIKE 'destination:%' THEN
    SELECT coalesce(jsonb_agg(wharf.event_summary(e) ORDER BY e.id DESC), '[]'), count(*) INTO v_events, v_count
      FROM (SELECT x.* FROM wharf.destination_delivery q
              JOIN wharf.provider_event x ON x.id = q.event_id  -- by primary key
             WHERE q.destination_id = substr(v_issue.fingerprint, length('destination:') + 1)::bigint
               AND q.state <> 'DONE' AND q.error_class IS NOT NULL  -- ix_destination_delivery_failing
               -- A paused or broken destination's issue: every failure it holds.
               AND (v_issue.error_class IN ('DestinationGone', 'DestinationBreakerOpen') OR q.error_class = v_issue.error_class)
               AND (p_before_id IS NULL OR q.event_id < p_before_id)
               AND x.workspace_id = p_workspace_id
               AND x.provider = v_issue.provider
               AND (v_issue.event_type = '*' OR x.event_type = v_issue.event_type)
             ORDER BY q.event_id DESC
             LIMIT p_limit + 1) e;
  ELSE
    SELECT coalesce(jsonb_agg(wharf.event_summary(e) ORDER BY e.id DESC), '[]'), count(*) INTO v_events, v_count
      FROM (SELECT * FROM wharf.provider_event x
             WHERE x.workspace_id = p_workspace_id
               AND (p_before_id IS NULL OR x.id < p_before_id)
               AND x.provider = v_issue.provider
               AND (v_issue.event_type = '*' OR x.event_type = v_issue.event_type)
               AND x.error_class = v_issue.error_class
               AND (v_issue.event_type = '*'
                    OR wharf.frames_fingerprint((SELECT h.frames FROM wharf.event_attempt h
                                                  WHERE h.event_id = x.id  -- by primary key
                                                  ORDER BY h.lease_epoch DESC LIMIT 1)) = v_issue.fingerprint)
             ORDER BY x.id DESC
             LIMIT p_limit + 1) e;
  END IF;
  IF v_count <= p_limit THEN
    RETURN jsonb_build_object('events', v_events, 'next_cursor', NULL);
  END IF;
  v_events := v_events - p_limit;
  RETURN jsonb_build_object('events', v_events, 'next_cursor', v_events -> (p_limit - 1) -> 'id');
END $$;

--
-- Name: issue_gauges(); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.issue_gauges() RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT jsonb_build_object(
    'issues', (SELECT jsonb_object_agg(s.status, (SELECT count(*) FROM wharf.issue i WHERE i.status = s.status))
                 FROM unnest(ARRAY['open', 'acknowledged', 'resolved', 'ignored']) AS s(status)))
$$;

--
-- Name: issue_history(bigint, bigint, integer); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.issue_history(p_workspace_id bigint, p_id bigint, p_hours integer DEFAULT 48) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_since timestamptz;
BEGIN
  IF p_workspace_id IS NULL THEN
    RAISE EXCEPTION 'wharf.issue_history: workspace is required' USING ERRCODE = '22004';
  END IF;
  IF p_hours IS NULL OR p_hours < 1 OR p_hours > 168 THEN
    RAISE EXCEPTION 'wharf.issue_history: hours must be between 1 and 168' USING ERRCODE = '22023';
  END IF;
  IF NOT EXISTS (SELECT FROM wharf.issue i WHERE i.id = p_id AND i.workspace_id = p_workspace_id) THEN
    RETURN NULL;
  END IF;
  v_since := date_trunc('hour', now(), 'UTC') - make_interval(hours => p_hours - 1);
  RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object('at', t.at, 'failures', coalesce(h.failures, 0), 'dead', coalesce(h.dead, 0))
                                    ORDER BY t.at), '[]')
            FROM generate_series(v_since, date_trunc('hour', now(), 'UTC'), interval '1 hour') AS t(at)
            LEFT JOIN wharf.issue_failure_hour h ON h.issue_id = p_id AND h.hour = t.at);
END $$;

--
-- Name: issue_list(bigint, text, integer); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.issue_list(p_workspace_id bigint, p_status text, p_limit integer) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
  IF p_status IS NOT NULL AND p_status NOT IN ('open', 'acknowledged', 'resolved', 'ignored') THEN
    RAISE EXCEPTION 'wharf: unknown issue status %', quote_literal(p_status) USING ERRCODE = '22023';
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 1000' USING ERRCODE = '22023';
  END IF;
  RETURN (SELECT coalesce(jsonb_agg(wharf.issue_summary(i) ORDER BY i.last_seen_at DESC, i.id DESC), '[]')
            FROM (SELECT * FROM wharf.issue x
                   WHERE (x.workspace_id = p_workspace_id OR (p_workspace_id IS NULL AND x.workspace_id IS NULL))
                     AND (p_status IS NULL OR x.status = p_status)
                   ORDER BY x.last_seen_at DESC, x.id DESC
                   LIMIT p_limit) i);
END $$;

--
-- Name: issue_summary(wharf.issue); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.issue_summary(i wharf.issue) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  SELECT jsonb_build_object(
    'id', i.id, 'workspace_id', i.workspace_id, 'provider', i.provider, 'event_type', i.event_type,
    'error_class', i.error_class, 'frames', coalesce(to_jsonb(i.frames), '[]'), 'status', i.status, 'status_by', i.status_by, 'status_at', i.status_at,
    'first_seen_at', i.first_seen_at, 'last_seen_at', i.last_seen_at, 'failures', i.failures,
    'dead', i.dead, 'sample_event_id', i.sample_event_id, 'reopened', i.reopened,
    'reopened_at', i.reopened_at)
$$;

--
-- Name: json_integer_between(jsonb, bigint, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.json_integer_between(p_value jsonb, p_low bigint, p_high bigint) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT jsonb_typeof(p_value) = 'number' AND p_value::numeric = trunc(p_value::numeric)
     AND p_value::numeric BETWEEN p_low AND p_high
$$;

--
-- Name: keep_scope_heads(); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.keep_scope_heads() RETURNS trigger
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    AS $$
DECLARE
  v_old_scope  text := CASE WHEN TG_OP <> 'INSERT' THEN OLD.scope_key END;
  v_new_scope  text := CASE WHEN TG_OP <> 'DELETE' THEN NEW.scope_key END;
  v_old_state  text := CASE WHEN TG_OP <> 'INSERT' THEN OLD.state END;
  v_new_state  text := CASE WHEN TG_OP <> 'DELETE' THEN NEW.state END;
  v_moved      boolean := v_old_scope IS DISTINCT FROM v_new_scope;
  v_next       record;
BEGIN
  -- Left the queue (claimed by hand, ended, deleted, moved): the next row heads.
  IF v_old_state = 'QUEUED' AND (v_moved OR v_new_state IS DISTINCT FROM 'QUEUED') THEN
    SELECT * INTO v_next FROM wharf.next_in_scope(v_old_scope, OLD.id);
    UPDATE wharf.scope
       SET head_id = v_next.id, head_due_at = v_next.due_at, head_kind = v_next.kind,
           ready_at = greatest(v_next.due_at, clock_timestamp()),
           active = active OR wharf.scope_workspace_active(workspace_id)  -- a new head is not parked
     WHERE scope_key = v_old_scope AND head_id = OLD.id;
  END IF;

  -- A lease ended: its scope is free, ready when its head is due. Handled,
  -- dead or gone, the row no longer fails its scope.
  IF v_old_state = 'LEASED' AND (v_moved OR v_new_state IS DISTINCT FROM 'LEASED') THEN
    UPDATE wharf.scope
       SET leased_id = NULL, ready_at = greatest(head_due_at, clock_timestamp()),
           failing_since = CASE WHEN v_moved OR v_new_state IS DISTINCT FROM 'QUEUED' THEN NULL ELSE failing_since END
     WHERE scope_key = v_old_scope AND leased_id = OLD.id;
  END IF;

  -- A lease taken: the scope's one lease, or an error.
  IF v_new_state = 'LEASED' AND (v_moved OR v_old_state IS DISTINCT FROM 'LEASED') THEN
    INSERT INTO wharf.scope AS s (scope_key, workspace_id, leased_id, active)
    VALUES (NEW.scope_key, NEW.workspace_id, NEW.id, wharf.scope_workspace_active(NEW.workspace_id))
    ON CONFLICT (scope_key) DO UPDATE SET leased_id = excluded.leased_id
     WHERE s.leased_id IS NULL OR s.leased_id = excluded.leased_id;
    IF NOT FOUND THEN
      RAISE EXCEPTION 'wharf: scope % already has a LEASED event; event % cannot be leased too',
        NEW.scope_key, NEW.id
        USING ERRCODE = '23505', TABLE = 'provider_event', CONSTRAINT = 'scope_one_lease';
    END IF;
  END IF;

  -- Entered the queue or rescheduled in it: it heads its scope when older
  -- than the head (equal: the head's due time changed). A lease of it that
  -- failed or expired (back to the queue with its attempt kept; a release
  -- gives its attempt back) marks its scope failing since then, unless it
  -- was failing already (the stuck scopes of queue_stats).
  IF v_new_state = 'QUEUED' THEN
    INSERT INTO wharf.scope AS s (scope_key, workspace_id, head_id, head_due_at, head_kind, ready_at, active, failing_since)
    VALUES (NEW.scope_key, NEW.workspace_id, NEW.id, NEW.next_attempt_at, NEW.provider || ':' || NEW.event_type,
            greatest(NEW.next_attempt_at, clock_timestamp()),
            wharf.scope_workspace_active(NEW.workspace_id),
            CASE WHEN v_old_state = 'LEASED' AND NOT v_moved AND NEW.attempt = OLD.attempt THEN clock_timestamp() END)
    ON CONFLICT (scope_key) DO UPDATE
       SET head_id = excluded.head_id, head_due_at = excluded.head_due_at, head_kind = excluded.head_kind,
           ready_at = excluded.ready_at,
           -- Parked for a paused connection's head (claim): a new head is not.
           active = s.active OR (s.head_id IS DISTINCT FROM excluded.head_id AND excluded.active),
           failing_since = CASE WHEN excluded.failing_since IS NULL THEN s.failing_since
                                ELSE coalesce(s.failing_since, excluded.failing_since) END
     WHERE s.head_id IS NULL OR excluded.head_id <= s.head_id;
  END IF;

  -- A scope left with nothing queued or leased goes (admission makes it again).
  IF v_old_state IN ('QUEUED', 'LEASED') AND (v_moved OR v_new_state NOT IN ('QUEUED', 'LEASED') OR TG_OP = 'DELETE') THEN
    DELETE FROM wharf.scope
     WHERE scope_key = v_old_scope AND head_id IS NULL AND leased_id IS NULL;
  END IF;
  RETURN NULL;
END $$;

--
-- Name: lifecycle_key(text, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.lifecycle_key(p_kind text, p_id text) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
  SELECT hashtextextended('wharf:' || p_kind || ':' || p_id, 0)
$$;

--
-- Name: list_admissions(bigint, integer, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.list_admissions(p_workspace_id bigint, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL::bigint) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN wharf.admission_page(p_workspace_id, false, p_limit, p_before_id);
END $$;

--
-- Name: list_alert_rules(bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.list_alert_rules(p_workspace_id bigint) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN (SELECT coalesce(jsonb_agg(wharf.alert_rule_summary(r) ORDER BY r.id), '[]')
            FROM wharf.alert_rule r WHERE r.workspace_id = p_workspace_id);
END $$;

--
-- Name: list_alerts(bigint, integer); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.list_alerts(p_workspace_id bigint, p_limit integer DEFAULT 50) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF p_workspace_id IS NOT NULL THEN
    PERFORM wharf.require_workspace(p_workspace_id);
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 500' USING ERRCODE = '22023';
  END IF;
  RETURN (SELECT coalesce(jsonb_agg(wharf.alert_summary(a.x, a.rule_name) ORDER BY (a.x).id DESC), '[]')
            FROM (SELECT x, r.name AS rule_name
                    FROM wharf.alert_rule r
                    JOIN wharf.alert x ON x.rule_id = r.id
                   WHERE r.workspace_id = p_workspace_id OR (p_workspace_id IS NULL AND r.workspace_id IS NULL)
                   ORDER BY x.id DESC
                   LIMIT p_limit) a);
END $$;

--
-- Name: list_all_admissions(integer, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.list_all_admissions(p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL::bigint) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT wharf.admission_page(NULL, true, p_limit, p_before_id)
$$;

--
-- Name: list_bulk_replays(bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.list_bulk_replays(p_workspace_id bigint) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN (SELECT coalesce(jsonb_agg(wharf.bulk_replay_summary(r) ORDER BY r.id DESC), '[]')
            FROM (SELECT * FROM wharf.bulk_replay WHERE workspace_id = p_workspace_id
                   ORDER BY id DESC LIMIT 50) r);
END $$;

--
-- Name: list_connections(bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.list_connections(p_workspace_id bigint DEFAULT NULL::bigint) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF p_workspace_id IS NOT NULL THEN
    PERFORM wharf.require_workspace(p_workspace_id);
  END IF;
  RETURN (SELECT coalesce(jsonb_agg(wharf.show_connection(id) ORDER BY id), '[]')
            FROM wharf.connection
           WHERE p_workspace_id IS NULL OR workspace_id = p_workspace_id);
END $$;

--
-- Name: list_dead(bigint, text, integer, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.list_dead(p_workspace_id bigint, p_subject text DEFAULT NULL::text, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL::bigint) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT wharf.list_events(p_workspace_id, 'DEAD', p_subject, p_limit, p_before_id)
$$;

--
-- Name: list_deliveries(bigint, bigint, text, integer, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.list_deliveries(p_workspace_id bigint, p_destination_id bigint, p_state text DEFAULT NULL::text, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL::bigint) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_page jsonb;
BEGIN
  IF p_state IS NOT NULL AND p_state NOT IN ('QUEUED', 'LEASED', 'DONE', 'DEAD') THEN
    RAISE EXCEPTION 'wharf: delivery state: QUEUED, LEASED, DONE or DEAD' USING ERRCODE = '22023';
  END IF;
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 500 THEN
    RAISE EXCEPTION 'wharf: limit: from 1 to 500' USING ERRCODE = '22023';
  END IF;
  IF NOT EXISTS (SELECT FROM wharf.destination WHERE id = p_destination_id AND workspace_id = p_workspace_id) THEN
    RETURN NULL;
  END IF;
  SELECT coalesce(jsonb_agg(wharf.delivery_summary(q) ORDER BY q.id DESC), '[]') INTO v_page
    FROM (SELECT * FROM wharf.destination_delivery q
           WHERE q.destination_id = p_destination_id
             AND (p_state IS NULL OR q.state = p_state)
             AND (p_before_id IS NULL OR q.id < p_before_id)
           ORDER BY q.id DESC LIMIT p_limit) q;
  RETURN jsonb_build_object('deliveries', v_page,
                            'next_cursor', CASE WHEN jsonb_array_length(v_page) = p_limit
                                                THEN v_page -> (p_limit - 1) -> 'id' END);
END $$;

--
-- Name: list_destination_rules(bigint, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.list_destination_rules(p_workspace_id bigint, p_destination_id bigint DEFAULT NULL::bigint) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN (SELECT coalesce(jsonb_agg(wharf.rule_summary(r) ORDER BY r.id), '[]')
            FROM wharf.destination_rule r
           WHERE r.workspace_id = p_workspace_id
             AND (p_destination_id IS NULL OR r.destination_id = p_destination_id));
END $$;

--
-- Name: list_destinations(bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.list_destinations(p_workspace_id bigint) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN (SELECT coalesce(jsonb_agg(wharf.destination_summary(d) ORDER BY d.name, d.id), '[]')
            FROM wharf.destination d WHERE d.workspace_id = p_workspace_id);
END $$;

--
-- Name: list_events(bigint, text, text, integer, bigint, text, text, timestamp with time zone, timestamp with time zone); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.list_events(p_workspace_id bigint, p_state text DEFAULT NULL::text, p_subject text DEFAULT NULL::text, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL::bigint, p_provider text DEFAULT NULL::text, p_event_type text DEFAULT NULL::text, p_received_after timestamp with time zone DEFAULT NULL::timestamp with time zone, p_received_before timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN wharf.event_page(p_workspace_id, p_state, p_subject, p_limit, p_before_id,
                          p_provider, p_event_type, p_received_after, p_received_before);
END $$;

--
-- Name: list_installation_dead(text, integer, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.list_installation_dead(p_subject text DEFAULT NULL::text, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL::bigint) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT wharf.event_page(NULL, 'DEAD', p_subject, p_limit, p_before_id, NULL, NULL, NULL, NULL)
$$;

--
-- Name: list_installation_events(text, text, integer, bigint, text, text, timestamp with time zone, timestamp with time zone); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.list_installation_events(p_state text DEFAULT NULL::text, p_subject text DEFAULT NULL::text, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL::bigint, p_provider text DEFAULT NULL::text, p_event_type text DEFAULT NULL::text, p_received_after timestamp with time zone DEFAULT NULL::timestamp with time zone, p_received_before timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT wharf.event_page(NULL, p_state, p_subject, p_limit, p_before_id,
                          p_provider, p_event_type, p_received_after, p_received_before)
$$;

--
-- Name: list_installation_issues(text, integer); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.list_installation_issues(p_status text DEFAULT NULL::text, p_limit integer DEFAULT 100) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT wharf.issue_list(NULL, p_status, p_limit)
$$;

--
-- Name: list_instance_alert_rules(); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.list_instance_alert_rules() RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT coalesce(jsonb_agg(wharf.alert_rule_summary(r) ORDER BY r.id), '[]')
    FROM wharf.alert_rule r WHERE r.workspace_id IS NULL
$$;

--
-- Name: list_issues(bigint, text, integer); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.list_issues(p_workspace_id bigint, p_status text DEFAULT NULL::text, p_limit integer DEFAULT 100) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN wharf.issue_list(p_workspace_id, p_status, p_limit);
END $$;

--
-- Name: list_scope_actions(bigint, integer); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.list_scope_actions(p_workspace_id bigint, p_limit integer DEFAULT 50) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 500' USING ERRCODE = '22023';
  END IF;
  RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', a.id, 'scope_key', a.scope_key, 'event_id', a.event_id, 'connection_id', a.connection_id,
                   'action', a.action, 'account', a.account, 'at', a.at,
                   'after_lease', a.after_lease_epoch IS NOT NULL) ORDER BY a.id DESC), '[]')
            FROM (SELECT * FROM wharf.scope_action x WHERE x.workspace_id = p_workspace_id
                   ORDER BY x.id DESC LIMIT p_limit) a);
END $$;

--
-- Name: list_stuck_scopes(bigint, interval, integer); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.list_stuck_scopes(p_workspace_id bigint, p_older_than interval DEFAULT NULL::interval, p_limit integer DEFAULT 100) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET jit TO 'off'
    AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF p_older_than < interval '0' THEN
    RAISE EXCEPTION 'wharf: the threshold must not be negative' USING ERRCODE = '22023';
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 500' USING ERRCODE = '22023';
  END IF;
  RETURN wharf.stuck_scope_list(p_workspace_id, coalesce(p_older_than, wharf.setting_interval('stuck_after')), p_limit);
END $$;

--
-- Name: list_tokens(bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.list_tokens(p_workspace_id bigint) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', t.id, 'workspace_id', t.workspace_id, 'name', t.name,
                   'created_at', t.created_at, 'last_used_at', t.last_used_at,
                   'revoked_at', t.revoked_at) ORDER BY t.id), '[]')
            FROM wharf.api_token t WHERE t.workspace_id = p_workspace_id);
END $$;

--
-- Name: list_workspaces(); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.list_workspaces() RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT coalesce(jsonb_agg(wharf.show_workspace(id) ORDER BY id), '[]') FROM wharf.workspace
$$;

--
-- Name: live_token_hashes(); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.live_token_hashes() RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT coalesce(jsonb_agg(encode(t.token_hash, 'hex')), '[]') FROM wharf.api_token t WHERE t.revoked_at IS NULL
$$;

--
-- Name: lock_connection_for_change(bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.lock_connection_for_change(p_connection_id bigint) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_provider text;
  v_source   text;
BEGIN
  SELECT provider, source INTO v_provider, v_source FROM wharf.connection WHERE id = p_connection_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: unknown connection %', p_connection_id USING ERRCODE = 'P0002';
  END IF;
  PERFORM wharf.lock_lifecycle('source', wharf.source_lock_id(v_provider, v_source));
END $$;

--
-- Name: lock_lifecycle(text, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.lock_lifecycle(p_kind text, p_id text) RETURNS void
    LANGUAGE sql
    AS $$
  SELECT pg_advisory_xact_lock(wharf.lifecycle_key(p_kind, p_id))
$$;

--
-- Name: lock_scope(text, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.lock_scope(p_scope_key text, p_workspace_id bigint) RETURNS void
    LANGUAGE sql
    AS $$
  SELECT wharf.lock_scopes(ARRAY[p_scope_key], ARRAY[p_workspace_id])
$$;

--
-- Name: lock_scopes(text[], bigint[], boolean[]); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.lock_scopes(p_scope_keys text[], p_workspace_ids bigint[] DEFAULT NULL::bigint[], p_active boolean[] DEFAULT NULL::boolean[]) RETURNS void
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    AS $$
BEGIN
  IF p_workspace_ids IS NULL THEN
    PERFORM FROM wharf.scope s
     WHERE s.scope_key = ANY (p_scope_keys)
     ORDER BY s.workspace_id NULLS FIRST, s.scope_key
       FOR UPDATE;
    RETURN;
  END IF;
  INSERT INTO wharf.scope AS s (scope_key, workspace_id, active)
  SELECT DISTINCT ON (l.workspace_id, l.scope_key) l.scope_key, l.workspace_id,
         coalesce(l.active, wharf.scope_workspace_active(l.workspace_id))
    FROM unnest(p_scope_keys, p_workspace_ids, coalesce(p_active, '{}')) AS l(scope_key, workspace_id, active)
   WHERE l.scope_key IS NOT NULL
   ORDER BY l.workspace_id NULLS FIRST, l.scope_key
  ON CONFLICT (scope_key) DO UPDATE SET active = s.active WHERE false;
END $$;

--
-- Name: mark_busy(text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.mark_busy(p_listener text) RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  DELETE FROM wharf.idle_listener WHERE listener = p_listener
$$;

--
-- Name: mark_idle(text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.mark_idle(p_listener text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF p_listener IS NULL OR p_listener = '' THEN
    RAISE EXCEPTION 'wharf.mark_idle: listener must be named' USING ERRCODE = '22004';
  END IF;
  BEGIN
    LOCK TABLE wharf.idle_listener IN SHARE ROW EXCLUSIVE MODE NOWAIT;
  EXCEPTION WHEN lock_not_available THEN
    RETURN false;
  END;
  INSERT INTO wharf.idle_listener (listener, backend_pid) VALUES (p_listener, pg_backend_pid())
  ON CONFLICT (listener) DO UPDATE SET backend_pid = excluded.backend_pid, since = now();
  RETURN true;
END $$;

--
-- Name: missing_deliveries(text, text, text[]); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.missing_deliveries(p_provider text, p_source text, p_delivery_keys text[]) RETURNS SETOF text
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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

--
-- Name: next_delivery_at(); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.next_delivery_at() RETURNS timestamp with time zone
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT nullif(min(greatest(
           q.due,
           CASE WHEN d.state = 'BREAKER_OPEN' THEN d.probe_at END,
           CASE WHEN d.rate_limit IS NOT NULL AND d.tokens < 1 THEN
             d.tokens_at + (1 - d.tokens) * CASE d.rate_period WHEN 'minute' THEN 60 ELSE 1 END
                           / d.rate_limit * interval '1 second' END)), 'infinity')
    FROM wharf.destination d
    JOIN wharf.workspace w ON w.id = d.workspace_id AND w.state = 'ACTIVE'
    CROSS JOIN LATERAL (SELECT min(x.next_attempt_at) AS due FROM wharf.destination_delivery x
                         WHERE x.destination_id = d.id AND x.state = 'QUEUED') q
   WHERE d.signing_secret IS NOT NULL AND d.state <> 'PAUSED' AND q.due IS NOT NULL
$$;

--
-- Name: next_due_at(); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.next_due_at() RETURNS timestamp with time zone
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT min(n.ready_at)
    FROM wharf.claimable_kinds() k(kind)
    CROSS JOIN LATERAL (SELECT s.ready_at FROM wharf.scope s
                         WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
                           AND s.head_kind = k.kind AND s.ready_at > clock_timestamp()
                         ORDER BY s.ready_at LIMIT 1) n
$$;

--
-- Name: next_in_scope(text, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.next_in_scope(p_scope_key text, p_after_id bigint) RETURNS TABLE(id bigint, due_at timestamp with time zone, kind text)
    LANGUAGE sql STABLE
    AS $$
  SELECT e.id, e.next_attempt_at, e.provider || ':' || e.event_type FROM wharf.provider_event e
   WHERE e.scope_key = p_scope_key AND e.id > p_after_id AND e.state = 'QUEUED'
   ORDER BY e.id
   LIMIT 1
$$;

--
-- Name: notify_idle_claimers(); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.notify_idle_claimers() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
  DELETE FROM wharf.idle_listener;
  IF FOUND THEN
    PERFORM pg_notify('wharf_event', '');
  END IF;
END $$;

--
-- Name: pause_scope_connection(bigint, text, bigint, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.pause_scope_connection(p_workspace_id bigint, p_scope_key text, p_event_id bigint, p_account text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_connection_id bigint;
BEGIN
  IF p_workspace_id IS NULL OR p_scope_key IS NULL OR p_event_id IS NULL OR p_account IS NULL OR p_account = '' THEN
    RAISE EXCEPTION 'wharf: a scope action needs a workspace, a scope, its head event and an account'
      USING ERRCODE = '22004';
  END IF;
  SELECT connection_id INTO v_connection_id FROM wharf.provider_event
   WHERE id = p_event_id AND workspace_id = p_workspace_id AND scope_key = p_scope_key;
  IF v_connection_id IS NULL THEN
    RAISE EXCEPTION 'wharf: workspace % has no event % with a connection in scope %', p_workspace_id, p_event_id, p_scope_key
      USING ERRCODE = 'P0002';
  END IF;
  PERFORM wharf.set_connection_state(v_connection_id, 'PAUSED');
  INSERT INTO wharf.scope_action (workspace_id, scope_key, event_id, connection_id, action, account)
  VALUES (p_workspace_id, p_scope_key, p_event_id, v_connection_id, 'pause_connection', p_account);
  RETURN wharf.show_connection(v_connection_id);
END $$;

--
-- Name: payload_names_person(text, jsonb, text[], text[]); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.payload_names_person(p_provider text, p_payload jsonb, p_ids text[], p_logins text[]) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT EXISTS (
    SELECT FROM wharf.person_paths(p_provider) pp,
           LATERAL jsonb_path_query(p_payload, pp.path) v
     WHERE jsonb_typeof(v) IN ('string', 'number')
       AND (v #>> '{}') = ANY (CASE pp.holds WHEN 'id' THEN p_ids ELSE p_logins END))
$$;

--
-- Name: person_paths(text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.person_paths(p_provider text) RETURNS TABLE(path jsonpath, holds text)
    LANGUAGE sql IMMUTABLE
    AS $_$
  SELECT ('lax $.**.' || k.key || '.' || f.field)::jsonpath, f.holds
    FROM unnest(ARRAY['sender', 'user', 'author', 'committer', 'assignee', 'member']) AS k(key),
         (VALUES ('id', 'id'), ('login', 'login')) AS f(field, holds)
   WHERE p_provider IN ('github', 'forgejo')
  UNION ALL
  -- Push events: a commit's author and committer carry the login as username.
  -- Anchored at the root, where push payloads hold them: one walk over the
  -- commits, not another over the whole payload.
  SELECT p.path::jsonpath, 'login'
    FROM (VALUES ('lax $.commits[*].author.username'), ('lax $.commits[*].committer.username'),
                 ('lax $.head_commit.author.username'), ('lax $.head_commit.committer.username'))
         AS p(path)
   WHERE p_provider IN ('github', 'forgejo')
  UNION ALL
  SELECT p.path::jsonpath, p.holds
    FROM (VALUES ('gitlab', 'lax $.**.user.id', 'id'), ('gitlab', 'lax $.**.user.username', 'login'),
                 ('gitlab', 'lax $.**.author.id', 'id'), ('gitlab', 'lax $.**.author.username', 'login'),
                 ('gitlab', 'lax $.**.user_id', 'id'), ('gitlab', 'lax $.**.user_username', 'login'),
                 ('slack', 'lax $.**.user', 'id'), ('slack', 'lax $.**.user.id', 'id'),
                 ('outline', 'lax $.**.actorId', 'id'), ('outline', 'lax $.**.user', 'id'),
                 ('outline', 'lax $.**.user.id', 'id'))
         AS p(provider, path, holds)
   WHERE p.provider = p_provider
$_$;

--
-- Name: promote_after_deleted_deliveries(); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.promote_after_deleted_deliveries() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  PERFORM wharf.promote_next_deliveries(array_agg(d.destination_id), array_agg(d.scope_key))
     FROM deliveries_deleted d
    WHERE d.ordered AND d.state IN ('QUEUED', 'LEASED')
      AND EXISTS (SELECT FROM wharf.destination x WHERE x.id = d.destination_id);
  RETURN NULL;
END $$;

--
-- Name: promote_next_deliveries(bigint[], text[]); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.promote_next_deliveries(p_destination_ids bigint[], p_scope_keys text[]) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
  PERFORM wharf.promote_next_delivery(k.destination_id, k.scope_key)
     FROM (SELECT DISTINCT o.destination_id, o.scope_key, wharf.delivery_scope_key(o.destination_id, o.scope_key) AS key
             FROM unnest(p_destination_ids, p_scope_keys) AS o(destination_id, scope_key)
            ORDER BY 3) k;
END $$;

--
-- Name: promote_next_delivery(bigint, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.promote_next_delivery(p_destination_id bigint, p_scope_key text) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(wharf.delivery_scope_key(p_destination_id, p_scope_key));
  UPDATE wharf.destination_delivery q
     SET next_attempt_at = clock_timestamp()
   WHERE q.id = (SELECT o.id FROM wharf.destination_delivery o
                  WHERE o.destination_id = p_destination_id AND o.scope_key = p_scope_key AND o.ordered
                    AND o.state IN ('QUEUED', 'LEASED')
                  ORDER BY o.event_id LIMIT 1)
     AND q.state = 'QUEUED' AND q.next_attempt_at = 'infinity';
END $$;

--
-- Name: provider_known(text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.provider_known(p_provider text) RETURNS boolean
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
  RETURN EXISTS (SELECT FROM wharf.provider WHERE name = p_provider);
END $$;

--
-- Name: purge(); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.purge(OUT done_deleted bigint, OUT dead_deleted bigint) RETURNS record
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_done_before timestamptz := now() - wharf.setting_interval('replay_window');
  v_dead_before timestamptz := now() - wharf.setting_interval('dead_retention');
  v_batch       integer := wharf.setting_integer('purge_batch');
BEGIN
  DELETE FROM wharf.provider_event
   WHERE id IN (SELECT id FROM wharf.provider_event
                 WHERE received_at < v_done_before AND state = 'DONE' AND handled_at < v_done_before
                   AND wharf.deliveries_purgeable(id, v_done_before, v_dead_before)
                 ORDER BY received_at
                 LIMIT v_batch
                   FOR UPDATE SKIP LOCKED);
  GET DIAGNOSTICS done_deleted = ROW_COUNT;

  DELETE FROM wharf.provider_event
   WHERE id IN (SELECT id FROM wharf.provider_event
                 WHERE received_at < v_dead_before AND state = 'DEAD' AND dead_at < v_dead_before
                   AND wharf.deliveries_purgeable(id, v_done_before, v_dead_before)
                 ORDER BY received_at
                 LIMIT v_batch
                   FOR UPDATE SKIP LOCKED);
  GET DIAGNOSTICS dead_deleted = ROW_COUNT;

  -- A scope row being used right now is locked: pass over it.
  DELETE FROM wharf.scope s
   WHERE s.scope_key IN (SELECT scope_key FROM wharf.scope
                          WHERE head_id IS NULL AND leased_id IS NULL
                          FOR UPDATE SKIP LOCKED);
END $$;

--
-- Name: purge_alerts(integer); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.purge_alerts(p_batch integer DEFAULT 1000) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_deleted bigint;
BEGIN
  IF p_batch IS NULL OR p_batch < 1 THEN
    RAISE EXCEPTION 'wharf: purge_alerts needs a positive batch size' USING ERRCODE = '22023';
  END IF;
  DELETE FROM wharf.alert
   WHERE id IN (SELECT id FROM wharf.alert
                 WHERE created_at < now() - wharf.setting_interval('issue_retention') AND state <> 'pending'
                 ORDER BY created_at LIMIT p_batch);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  RETURN v_deleted;
END $$;

--
-- Name: purge_forwarding(integer); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.purge_forwarding(p_batch integer) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_deleted bigint;
BEGIN
  DELETE FROM wharf.rule_filtered_minute f
   WHERE (f.rule_id, f.minute) IN (SELECT x.rule_id, x.minute FROM wharf.rule_filtered_minute x
                                    WHERE x.minute < now() - wharf.setting_interval('log_retention')
                                    LIMIT p_batch);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  RETURN v_deleted;
END $$;

--
-- Name: purge_issues(integer); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.purge_issues(p_batch integer DEFAULT 1000) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_deleted bigint;
  v_count   bigint;
BEGIN
  IF p_batch IS NULL OR p_batch < 1 THEN
    RAISE EXCEPTION 'wharf: purge_issues needs a positive batch size' USING ERRCODE = '22023';
  END IF;
  DELETE FROM wharf.issue
   WHERE id IN (SELECT id FROM wharf.issue
                 WHERE last_seen_at < now() - wharf.setting_interval('issue_retention')
                 ORDER BY last_seen_at
                 LIMIT p_batch
                 FOR UPDATE SKIP LOCKED);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  IF v_deleted < p_batch THEN
    DELETE FROM wharf.failure_minute
     WHERE ctid IN (SELECT ctid FROM wharf.failure_minute
                     WHERE minute < now() - interval '1 day'
                     LIMIT p_batch - v_deleted);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    v_deleted := v_deleted + v_count;
  END IF;
  IF v_deleted < p_batch THEN
    -- issue_history charts a week at most.
    DELETE FROM wharf.issue_failure_hour
     WHERE ctid IN (SELECT ctid FROM wharf.issue_failure_hour
                     WHERE hour < now() - interval '8 days'
                     ORDER BY hour
                     LIMIT p_batch - v_deleted);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    v_deleted := v_deleted + v_count;
  END IF;
  RETURN v_deleted;
END $$;

--
-- Name: purge_logs(); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.purge_logs() RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_log_before   timestamptz := now() - wharf.setting_interval('log_retention');
  v_audit_before timestamptz := now() - wharf.setting_interval('audit_retention');
  v_batch        integer := wharf.setting_integer('purge_batch');
  v_deleted      bigint;
  v_total        bigint := 0::bigint;
BEGIN
  DELETE FROM wharf.admission_log
   WHERE id IN (SELECT id FROM wharf.admission_log WHERE at < v_log_before ORDER BY at LIMIT v_batch);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  v_total := v_total + v_deleted;

  DELETE FROM wharf.replay_audit
   WHERE id IN (SELECT id FROM wharf.replay_audit WHERE at < v_audit_before ORDER BY at LIMIT v_batch);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  v_total := v_total + v_deleted;

  DELETE FROM wharf.bulk_replay
   WHERE id IN (SELECT id FROM wharf.bulk_replay
                 WHERE finished_at < v_audit_before ORDER BY finished_at LIMIT v_batch);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  v_total := v_total + v_deleted;

  -- The on-call surface's own tables (sql/97-99), each with its rule.
  RETURN v_total + wharf.purge_issues(v_batch) + wharf.purge_scope_actions(v_batch) + wharf.purge_alerts(v_batch)
       + wharf.purge_forwarding(v_batch);
END $$;

--
-- Name: purge_scope_actions(integer); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.purge_scope_actions(p_batch integer DEFAULT 1000) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_deleted bigint;
BEGIN
  IF p_batch IS NULL OR p_batch < 1 THEN
    RAISE EXCEPTION 'wharf: purge_scope_actions needs a positive batch size' USING ERRCODE = '22023';
  END IF;
  DELETE FROM wharf.scope_action
   WHERE id IN (SELECT id FROM wharf.scope_action
                 WHERE at < now() - wharf.setting_interval('issue_retention')
                 ORDER BY at LIMIT p_batch);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  RETURN v_deleted;
END $$;

--
-- Name: queue_history(bigint, integer); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.queue_history(p_workspace_id bigint, p_hours integer) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_now   timestamptz := clock_timestamp();
  v_since timestamptz;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF p_hours IS NULL OR p_hours < 1 OR p_hours > 24 THEN
    RAISE EXCEPTION 'wharf.queue_history: hours must be between 1 and 24' USING ERRCODE = '22023';
  END IF;
  v_since := date_trunc('minute', v_now) - make_interval(mins => p_hours * 60 - 1);

  RETURN (
    WITH events AS (
      -- A replayed event waits from its replay, not from its arrival: it was
      -- DEAD in between.
      SELECT e.received_at, e.state, e.attempt, greatest(e.received_at, e.replayed_at) AS waiting_since,
             CASE e.state WHEN 'DONE' THEN e.handled_at WHEN 'DEAD' THEN e.dead_at END AS ended_at
        FROM wharf.provider_event e
       WHERE e.workspace_id = p_workspace_id
         AND (e.state IN ('QUEUED', 'LEASED')
              OR (e.state = 'DONE' AND e.handled_at >= v_since)
              OR (e.state = 'DEAD' AND e.dead_at >= v_since))
    ),
    minutes AS (
      SELECT m AS at, m + interval '1 minute' AS ends
        FROM generate_series(v_since, date_trunc('minute', v_now), interval '1 minute') m
    ),
    arrivals AS (
      SELECT date_trunc('minute', received_at) AS at, count(*) AS admitted
        FROM events WHERE received_at >= v_since GROUP BY 1
    ),
    entries AS (
      SELECT date_trunc('minute', waiting_since) AS at, count(*) AS entered
        FROM events WHERE waiting_since >= v_since GROUP BY 1
    ),
    endings AS (
      SELECT date_trunc('minute', ended_at) AS at,
             count(*) FILTER (WHERE state = 'DONE') AS handled,
             coalesce(sum(attempt) FILTER (WHERE state = 'DONE'), 0) AS attempts,
             count(*) FILTER (WHERE state = 'DEAD') AS dead,
             min(waiting_since) AS earliest_waiting
        FROM events WHERE ended_at IS NOT NULL GROUP BY 1
    ),
    still_waiting AS (
      SELECT min(waiting_since) AS earliest_waiting FROM events WHERE ended_at IS NULL
    ),
    before_window AS (
      SELECT count(*) AS waiting FROM events WHERE waiting_since < v_since
    ),
    per_minute AS (
      SELECT m.at, m.ends,
             coalesce(a.admitted, 0) AS admitted, coalesce(x.handled, 0) AS handled,
             coalesce(x.attempts, 0) AS attempts,
             coalesce(x.dead, 0) AS dead,
             -- Depth at the minute's end: every event waiting since before
             -- it (those before the window too) less every event ended before it.
             b.waiting + sum(coalesce(n.entered, 0)) OVER (ORDER BY m.at)
               - sum(coalesce(x.handled, 0) + coalesce(x.dead, 0)) OVER (ORDER BY m.at) AS depth,
             -- The oldest event waiting at the minute's end is the one
             -- waiting longest of those that end after that minute, or
             -- never: a running minimum over the later minutes. It is
             -- waiting then only when it was waiting before the minute's end.
             least(w.earliest_waiting,
                   min(x.earliest_waiting) OVER (ORDER BY m.at DESC
                                                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)) AS oldest
        FROM minutes m
        LEFT JOIN arrivals a ON a.at = m.at
        LEFT JOIN entries n ON n.at = m.at
        LEFT JOIN endings x ON x.at = m.at
        CROSS JOIN still_waiting w
        CROSS JOIN before_window b
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
             'at', x.at, 'admitted', x.admitted, 'handled', x.handled, 'attempts', x.attempts, 'dead', x.dead,
             'depth', greatest(x.depth, 0),
             'oldest_age_seconds',
               CASE WHEN x.oldest < least(x.ends, v_now)
                    THEN round(extract(epoch FROM least(x.ends, v_now) - x.oldest)::numeric, 3)
                    ELSE 0 END)
             ORDER BY x.at), '[]')
      FROM per_minute x
  );
END $$;

--
-- Name: queue_stats(); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.queue_stats(OUT depth_by_state jsonb, OUT oldest_due_age double precision, OUT depth_estimated boolean, OUT stuck_scopes bigint, OUT oldest_stuck_age double precision) RETURNS record
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET jit TO 'off'
    AS $$
DECLARE
  v_now         timestamptz := clock_timestamp();
  v_stuck_since timestamptz := clock_timestamp() - wharf.setting_interval('stuck_after');
  v_pages       bigint := pg_relation_size('wharf.provider_event') / current_setting('block_size')::bigint;
BEGIN
  depth_estimated := v_pages > 1024;
  IF NOT depth_estimated THEN
    SELECT coalesce(jsonb_object_agg(state, n), '{}') INTO depth_by_state
      FROM (SELECT state, count(*) AS n FROM wharf.provider_event GROUP BY state) s;
  ELSE
    SELECT coalesce(jsonb_object_agg(f.state, round(t.rows * f.freq)::bigint), '{}') INTO depth_by_state
      FROM (SELECT CASE WHEN c.relpages > 0 THEN c.reltuples / c.relpages * v_pages ELSE 0 END AS rows
              FROM pg_class c WHERE c.oid = 'wharf.provider_event'::regclass) t,
           LATERAL (SELECT v.state, v.freq
                      FROM pg_stats st,
                           unnest(st.most_common_vals::text::text[], st.most_common_freqs) AS v(state, freq)
                     WHERE st.schemaname = 'wharf' AND st.tablename = 'provider_event' AND st.attname = 'state') f;
  END IF;

  SELECT coalesce(extract(epoch FROM v_now - min(o.ready_at))::float8, 0) INTO oldest_due_age
    FROM wharf.claimable_kinds() k(kind)
    CROSS JOIN LATERAL (SELECT s.ready_at FROM wharf.scope s
                         WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
                           AND s.head_kind = k.kind AND s.ready_at <= v_now
                         ORDER BY s.ready_at LIMIT 1) o;

  SELECT count(*), coalesce(extract(epoch FROM v_now - min(x.since))::float8, 0)
    INTO stuck_scopes, oldest_stuck_age
    FROM wharf.scopes_stuck_since(v_stuck_since, NULL, 10000) x;
END $$;

--
-- Name: reap(); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.reap() RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    AS $$
DECLARE
  v_now          timestamptz := clock_timestamp();
  v_max_attempts integer := wharf.setting_integer('max_attempts');
  v_reaped       integer;
BEGIN
  -- The scope rows are locked here, skipping busy ones, rather than by the
  -- trigger in update order: an admission fanning out holds one scope and
  -- waits for the next, and must never wait for a reaper waiting for it.
  WITH expired AS (
    SELECT e.id,
           -- An operator moved this head to the dead letters while the lease ran (sql/98).
           e.failures + 1 >= v_max_attempts OR wharf.dead_letter_after_lease(e.id, e.lease_epoch) AS dead
      FROM wharf.scope s
      JOIN wharf.provider_event e ON e.id = s.leased_id
     WHERE s.leased_id IS NOT NULL AND e.state = 'LEASED' AND e.leased_until < v_now
     FOR UPDATE OF e, s SKIP LOCKED
  ), reaped AS (
    UPDATE wharf.provider_event e
       SET failures        = e.failures + 1,
           error_class     = 'LeaseExpired',
           leased_until    = NULL,
           state           = CASE WHEN expired.dead THEN 'DEAD' ELSE 'QUEUED' END,
           dead_at         = CASE WHEN expired.dead THEN v_now END,
           next_attempt_at = CASE WHEN expired.dead THEN e.next_attempt_at
                                  ELSE v_now + wharf.retry_delay(e.attempt) END
      FROM expired
     WHERE e.id = expired.id
    RETURNING e.id, e.lease_epoch, e.attempt, e.leased_by, e.leased_at, e.state
  )
  INSERT INTO wharf.event_attempt (event_id, lease_epoch, attempt, worker, started_at, ended_at, ended, error_class, left_state)
  SELECT id, lease_epoch, attempt, leased_by, leased_at, v_now, 'expired', 'LeaseExpired', state FROM reaped;
  GET DIAGNOSTICS v_reaped = ROW_COUNT;

  DELETE FROM wharf.idle_listener l
   WHERE NOT EXISTS (SELECT FROM pg_stat_activity a WHERE a.pid = l.backend_pid);
  RETURN v_reaped;
END $$;

--
-- Name: reap_deliveries(); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.reap_deliveries() RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_now   timestamptz := clock_timestamp();
  v_max               integer := wharf.setting_integer('max_attempts');
  v_count             integer;
  v_dead_destinations bigint[];
  v_dead_scope_keys   text[];
BEGIN
  WITH expired AS (
    SELECT q.id FROM wharf.destination_delivery q
     WHERE q.state = 'LEASED' AND q.leased_until < v_now
     ORDER BY q.id
       FOR UPDATE SKIP LOCKED
  ), reaped AS (
    UPDATE wharf.destination_delivery q
       SET state = CASE WHEN q.failures + 1 >= v_max THEN 'DEAD' ELSE 'QUEUED' END,
           failures = q.failures + 1, error_class = 'LeaseExpired', leased_until = NULL,
           dead_at = CASE WHEN q.failures + 1 >= v_max THEN v_now END,
           next_attempt_at = CASE WHEN q.failures + 1 >= v_max THEN q.next_attempt_at
                                  ELSE v_now + wharf.retry_delay(q.attempt) END
      FROM expired
     WHERE q.id = expired.id
    RETURNING q.id, q.lease_epoch, q.destination_id, q.attempt, q.leased_by, q.leased_at, q.state, q.ordered,
              q.scope_key
  ), recorded AS (
    INSERT INTO wharf.delivery_attempt (delivery_id, lease_epoch, destination_id, attempt, worker, started_at,
                                        ended_at, ended, left_state, error_class)
    SELECT r.id, r.lease_epoch, r.destination_id, r.attempt, r.leased_by, r.leased_at, v_now, 'expired', r.state,
           'LeaseExpired'
      FROM reaped r
    RETURNING 1
  )
  SELECT (SELECT count(*)::integer FROM recorded),
         ARRAY(SELECT r.destination_id FROM reaped r WHERE r.state = 'DEAD' AND r.ordered ORDER BY r.id),
         ARRAY(SELECT r.scope_key FROM reaped r WHERE r.state = 'DEAD' AND r.ordered ORDER BY r.id)
    INTO v_count, v_dead_destinations, v_dead_scope_keys;
  -- A head reaped into the dead letters ends its turn.
  PERFORM wharf.promote_next_deliveries(v_dead_destinations, v_dead_scope_keys);
  IF v_count > 0 THEN
    PERFORM pg_notify('wharf_delivery', '');
  END IF;
  RETURN v_count;
END $$;

--
-- Name: record_alert_attempt(uuid, bigint, boolean, integer, text, interval); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.record_alert_attempt(p_token uuid, p_id bigint, p_delivered boolean, p_status integer, p_error text, p_base_delay interval) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  v_state text;
BEGIN
  PERFORM wharf.held_alert_sender(p_token);
  IF p_id IS NULL OR p_delivered IS NULL OR p_base_delay IS NULL THEN
    RAISE EXCEPTION 'wharf: record_alert_attempt needs an alert, whether it was delivered, and a base delay'
      USING ERRCODE = '22004';
  END IF;
  IF p_error IS NOT NULL AND p_error !~ '^[A-Za-z_$][A-Za-z0-9_$.:-]{0,127}$' THEN
    RAISE EXCEPTION 'wharf: an alert error is a class name, not free text' USING ERRCODE = '22023';
  END IF;
  UPDATE wharf.alert a
     SET attempts = a.attempts + 1,
         last_attempt_at = clock_timestamp(),
         last_status = p_status,
         last_error = p_error,
         delivered_at = CASE WHEN p_delivered THEN clock_timestamp() END,
         state = CASE WHEN p_delivered THEN 'delivered' WHEN a.attempts + 1 >= 8 THEN 'failed' ELSE 'pending' END,
         next_attempt_at = CASE WHEN p_delivered OR a.attempts + 1 >= 8 THEN a.next_attempt_at
                                ELSE clock_timestamp() + d.delay / 2 + random() * (d.delay / 2) END
    FROM (SELECT least(interval '1 hour', p_base_delay * power(2, least(x.attempts, 20))) AS delay
            FROM wharf.alert x WHERE x.id = p_id) d
   WHERE a.id = p_id AND a.state = 'pending'
  RETURNING a.state INTO v_state;
  RETURN v_state;
END $_$;

--
-- Name: record_step(bigint, bigint, text, uuid, boolean); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.record_step(p_id bigint, p_epoch bigint, p_step_name text, p_token uuid, p_token_given boolean) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
  IF p_step_name IS NULL THEN
    RAISE EXCEPTION 'wharf.step: id, epoch and step name are required' USING ERRCODE = '22004';
  END IF;
  IF p_step_name = '' OR length(p_step_name) > 200 THEN
    RAISE EXCEPTION 'wharf.step: step name must be 1 to 200 characters' USING ERRCODE = '22023';
  END IF;
  PERFORM wharf.check_lease(p_id, p_epoch, p_token, p_token_given);
  INSERT INTO wharf.provider_event_step (event_id, step_name) VALUES (p_id, p_step_name)
  ON CONFLICT DO NOTHING;
  RETURN FOUND;
END $$;

--
-- Name: release(bigint, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.release(p_id bigint, p_epoch bigint) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '5s'
    AS $$
DECLARE
  v_row record;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL THEN
    RAISE EXCEPTION 'wharf.release: id and epoch are required' USING ERRCODE = '22004';
  END IF;
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  PERFORM FROM wharf.provider_event WHERE id = p_id FOR UPDATE;  -- after its fenced writes (top of sql/30)
  UPDATE wharf.provider_event
     SET state = 'QUEUED', attempt = greatest(attempt - 1, 0), next_attempt_at = now(), leased_until = NULL
   WHERE id = p_id AND lease_epoch = p_epoch AND state COLLATE "C" = 'LEASED'  -- by primary key (top of sql/30)
  RETURNING attempt + 1 AS attempt, leased_by, leased_at INTO v_row;  -- the lease's own attempt
  IF NOT FOUND THEN
    -- Read after the row lock: a first try still in flight has committed or rolled back.
    RETURN EXISTS (SELECT FROM wharf.event_attempt h
                    WHERE h.event_id = p_id AND h.lease_epoch = p_epoch AND h.ended = 'released');  -- by primary key
  END IF;
  INSERT INTO wharf.event_attempt (event_id, lease_epoch, attempt, worker, started_at, ended_at, ended, left_state)
  VALUES (p_id, p_epoch, v_row.attempt, v_row.leased_by, v_row.leased_at, clock_timestamp(), 'released', 'QUEUED');
  PERFORM wharf.notify_idle_claimers();
  RETURN true;
END $$;

--
-- Name: release_alert_sender(uuid); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.release_alert_sender(p_token uuid) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  UPDATE wharf.alert_sender SET leased_by = NULL, lease_token = NULL, leased_until = NULL
   WHERE id = 1 AND lease_token = p_token;
  RETURN FOUND;
END $$;

--
-- Name: release_delivery(bigint, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.release_delivery(p_id bigint, p_epoch bigint) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_now timestamptz := clock_timestamp();
  v_row record;
BEGIN
  UPDATE wharf.destination_delivery q
     SET state = 'QUEUED', attempt = q.attempt - 1, leased_until = NULL, next_attempt_at = v_now
   WHERE q.id = p_id AND q.lease_epoch = p_epoch AND q.state = 'LEASED'
  RETURNING q.destination_id, q.attempt + 1 AS attempt, q.leased_by, q.leased_at INTO v_row;
  IF NOT FOUND THEN
    RETURN EXISTS (SELECT FROM wharf.delivery_attempt h
                    WHERE h.delivery_id = p_id AND h.lease_epoch = p_epoch AND h.ended = 'released');
  END IF;
  INSERT INTO wharf.delivery_attempt (delivery_id, lease_epoch, destination_id, attempt, worker, started_at,
                                      ended_at, ended, left_state)
  VALUES (p_id, p_epoch, v_row.destination_id, v_row.attempt, v_row.leased_by, v_row.leased_at,
          v_now, 'released', 'QUEUED');
  PERFORM pg_notify('wharf_delivery', '');
  RETURN true;
END $$;

--
-- Name: renew(bigint, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.renew(p_id bigint, p_epoch bigint) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL THEN
    RAISE EXCEPTION 'wharf.renew: id and epoch are required' USING ERRCODE = '22004';
  END IF;
  UPDATE wharf.provider_event
     SET leased_until = clock_timestamp() + wharf.setting_interval('lease')
   WHERE id = p_id AND lease_epoch = p_epoch AND state COLLATE "C" = 'LEASED';  -- by primary key (top of sql/30)
  RETURN FOUND;
END $$;

--
-- Name: renew_sweep(bigint, text, uuid, interval); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.renew_sweep(p_app_id bigint, p_source text, p_token uuid, p_lease interval) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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

--
-- Name: replace_signing_key_ciphertext(bigint, text, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.replace_signing_key_ciphertext(p_connection_id bigint, p_from text, p_to text) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
  IF p_connection_id IS NULL OR p_from IS NULL OR p_to IS NULL THEN
    RAISE EXCEPTION 'wharf.replace_signing_key_ciphertext: connection, from and to are required'
      USING ERRCODE = '22004';
  END IF;
  UPDATE wharf.connection_secret
     SET signing_key          = CASE WHEN signing_key = p_from THEN p_to ELSE signing_key END,
         previous_signing_key = CASE WHEN previous_signing_key = p_from THEN p_to ELSE previous_signing_key END,
         updated_at           = now()
   WHERE connection_id = p_connection_id AND p_from IN (signing_key, previous_signing_key);
  RETURN FOUND;
END $$;

--
-- Name: replay(bigint, bigint, text, boolean); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.replay(p_workspace_id bigint, p_id bigint, p_account text, p_force boolean DEFAULT false) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF p_workspace_id IS NULL THEN
    RETURN false;
  END IF;
  RETURN wharf.requeue_dead(p_workspace_id, p_id, p_account, p_force);
END $$;

--
-- Name: replay_deliveries(bigint, bigint, jsonb, text, integer); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.replay_deliveries(p_workspace_id bigint, p_destination_id bigint, p_filter jsonb, p_account text, p_batch integer DEFAULT 500) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_count bigint;
BEGIN
  IF p_batch IS NULL OR p_batch NOT BETWEEN 1 AND 5000 THEN
    RAISE EXCEPTION 'wharf: batch: from 1 to 5000' USING ERRCODE = '22023';
  END IF;
  UPDATE wharf.destination_delivery q
     SET state = 'QUEUED', attempt = 0, failures = 0, dead_at = NULL, outcome = NULL, transient_since = NULL,
         next_attempt_at = clock_timestamp(), replayed_by = p_account, replayed_at = clock_timestamp()
   WHERE q.id IN (SELECT d.id FROM wharf.dead_deliveries(p_workspace_id, p_destination_id, p_filter) d
                   ORDER BY d.id LIMIT p_batch)
     AND q.state = 'DEAD';
  GET DIAGNOSTICS v_count = ROW_COUNT;
  IF v_count > 0 THEN
    PERFORM pg_notify('wharf_delivery', '');
  END IF;
  RETURN v_count;
END $$;

--
-- Name: replay_delivery(bigint, bigint, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.replay_delivery(p_workspace_id bigint, p_id bigint, p_account text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  UPDATE wharf.destination_delivery q
     SET state = 'QUEUED', attempt = 0, failures = 0, dead_at = NULL, outcome = NULL, transient_since = NULL,
         next_attempt_at = clock_timestamp(), replayed_by = p_account, replayed_at = clock_timestamp()
   WHERE q.id = p_id AND q.workspace_id = p_workspace_id AND q.state = 'DEAD';
  IF FOUND THEN
    PERFORM pg_notify('wharf_delivery', '');
  END IF;
  RETURN FOUND;
END $$;

--
-- Name: replay_installation(bigint, text, boolean); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.replay_installation(p_id bigint, p_account text, p_force boolean DEFAULT false) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF NOT wharf.requeue_dead(NULL, p_id, p_account, p_force) THEN
    RETURN false;
  END IF;
  INSERT INTO wharf.replay_audit (event_id, account) VALUES (p_id, p_account);
  RETURN true;
END $$;

--
-- Name: request_redelivery(bigint, text, uuid, text, bigint, interval, integer); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.request_redelivery(p_app_id bigint, p_source text, p_token uuid, p_guid text, p_delivery_id bigint, p_stale interval DEFAULT '00:02:00'::interval, p_max_asks integer DEFAULT 10) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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

--
-- Name: requeue_dead(bigint, bigint, text, boolean); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.requeue_dead(p_workspace_id bigint, p_id bigint, p_account text, p_force boolean) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
  IF p_id IS NULL OR p_account IS NULL OR p_account = '' OR p_force IS NULL THEN
    RAISE EXCEPTION 'wharf: replay needs an event id, an account and force' USING ERRCODE = '22004';
  END IF;
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  UPDATE wharf.provider_event
     SET state = 'QUEUED', attempt = 0, failures = 0, outcome = NULL, dead_at = NULL, transient_since = NULL,
         next_attempt_at = now(), leased_until = NULL,
         replayed_by = p_account, replayed_at = now()
   WHERE id = p_id
     AND workspace_id IS NOT DISTINCT FROM p_workspace_id
     AND state = 'DEAD'
     AND (outcome IS DISTINCT FROM 'uncertain' OR p_force);
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM wharf.notify_idle_claimers();
  RETURN true;
END $$;

--
-- Name: require_workspace(bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.require_workspace(p_workspace_id bigint) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
  IF p_workspace_id IS NULL THEN
    RAISE EXCEPTION 'wharf: workspace is required' USING ERRCODE = '22004';
  END IF;
  IF NOT EXISTS (SELECT FROM wharf.workspace WHERE id = p_workspace_id) THEN
    RAISE EXCEPTION 'wharf: unknown workspace %', p_workspace_id USING ERRCODE = 'P0002';
  END IF;
END $$;

--
-- Name: reset_claim_lines(); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.reset_claim_lines() RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  UPDATE wharf.claim_line_reset SET generation = generation + 1
$$;

--
-- Name: retry_delay(integer); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.retry_delay(p_attempt integer) RETURNS interval
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_delay interval := least(
    wharf.setting_interval('max_delay'),
    -- The exponent is capped so that the product cannot overflow an interval.
    wharf.setting_interval('base_delay') * power(2, least(greatest(coalesce(p_attempt, 1), 1) - 1, 30)));
BEGIN
  RETURN v_delay / 2 + random() * (v_delay / 2);
END $$;

--
-- Name: retry_scope_head(bigint, text, bigint, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.retry_scope_head(p_workspace_id bigint, p_scope_key text, p_event_id bigint, p_account text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_refusal text;
BEGIN
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  v_refusal := wharf.scope_head_refusal(p_workspace_id, p_scope_key, p_event_id, p_account);
  IF v_refusal IS NULL THEN
    UPDATE wharf.provider_event SET next_attempt_at = now() WHERE id = p_event_id AND next_attempt_at > now();
    INSERT INTO wharf.scope_action (workspace_id, scope_key, event_id, connection_id, action, account)
    SELECT p_workspace_id, p_scope_key, p_event_id, e.connection_id, 'retry_head', p_account
      FROM wharf.provider_event e WHERE e.id = p_event_id;
    PERFORM wharf.notify_idle_claimers();
  END IF;
  RETURN wharf.scope_action_result(p_event_id, v_refusal);
END $$;

--
-- Name: revoke_token(bigint, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.revoke_token(p_workspace_id bigint, p_id bigint) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  UPDATE wharf.api_token SET revoked_at = now()
   WHERE id = p_id AND workspace_id = p_workspace_id AND revoked_at IS NULL;
  RETURN FOUND;
END $$;

--
-- Name: route_events(bigint[]); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.route_events(p_ids bigint[]) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_events       bigint[];
  v_rules        bigint[];
  v_destinations bigint[];
  v_passed       boolean[];
  v_made         integer;
BEGIN
  SELECT coalesce(array_agg(e.id ORDER BY e.id, r.id), '{}'), array_agg(r.id ORDER BY e.id, r.id),
         array_agg(r.destination_id ORDER BY e.id, r.id),
         array_agg(wharf.filter_matches(r.filter, e.payload, e.headers) ORDER BY e.id, r.id)
    INTO v_events, v_rules, v_destinations, v_passed
    FROM wharf.provider_event e
    JOIN wharf.destination_rule r ON r.workspace_id = e.workspace_id
   WHERE e.id = ANY (p_ids)
     AND (r.connection_id IS NULL OR r.connection_id = e.connection_id)
     AND (r.provider IS NULL OR r.provider = e.provider)
     AND wharf.event_type_matches(r.event_types, e.event_type)
     AND (r.subject_prefix IS NULL OR starts_with(e.subject, r.subject_prefix));
  IF cardinality(v_events) = 0 THEN
    RETURN 0;
  END IF;

  -- Before reading whether a head exists, in key order (top of this file).
  PERFORM pg_advisory_xact_lock_shared(k.key)
     FROM (SELECT DISTINCT wharf.delivery_scope_key(m.destination_id, e.scope_key) AS key
             FROM unnest(v_events, v_destinations, v_passed) AS m(event_id, destination_id, passed)
             JOIN wharf.provider_event e ON e.id = m.event_id
            WHERE m.passed
            ORDER BY 1) k;

  WITH matched AS (
    SELECT DISTINCT ON (m.event_id, m.destination_id) m.event_id, m.destination_id, e.workspace_id, e.scope_key,
           d.ordered
      FROM unnest(v_events, v_destinations, v_passed) AS m(event_id, destination_id, passed)
      JOIN wharf.provider_event e ON e.id = m.event_id
      JOIN wharf.destination d ON d.id = m.destination_id
     WHERE m.passed
     ORDER BY m.event_id, m.destination_id
  )
  INSERT INTO wharf.destination_delivery (event_id, destination_id, workspace_id, scope_key, ordered, next_attempt_at)
  SELECT m.event_id, m.destination_id, m.workspace_id, m.scope_key, m.ordered,
         CASE WHEN m.ordered
                   AND (row_number() OVER (PARTITION BY m.destination_id, m.scope_key ORDER BY m.event_id) > 1
                        OR EXISTS (SELECT FROM wharf.destination_delivery o
                                    WHERE o.destination_id = m.destination_id AND o.scope_key = m.scope_key
                                      AND o.ordered AND o.state IN ('QUEUED', 'LEASED')))
              THEN 'infinity' ELSE clock_timestamp() END
    FROM matched m
   ORDER BY m.event_id, m.destination_id
  ON CONFLICT (event_id, destination_id) DO NOTHING;
  GET DIAGNOSTICS v_made = ROW_COUNT;

  UPDATE wharf.provider_event e
     SET state = 'DONE', outcome = 'forwarded', handled_at = clock_timestamp()
   WHERE e.id IN (SELECT m.event_id
                    FROM unnest(v_events, v_rules, v_passed) AS m(event_id, rule_id, passed)
                    JOIN wharf.destination_rule r ON r.id = m.rule_id
                   WHERE m.passed AND r.forward_only)
     AND e.state = 'QUEUED';

  -- In rule order: two admissions counting into the same rows take their
  -- locks in one order.
  INSERT INTO wharf.rule_filtered_minute AS f (rule_id, minute, filtered)
  SELECT m.rule_id, date_trunc('minute', clock_timestamp()), count(*)
    FROM unnest(v_rules, v_passed) AS m(rule_id, passed) WHERE NOT m.passed
   GROUP BY m.rule_id ORDER BY m.rule_id
  ON CONFLICT (rule_id, minute) DO UPDATE SET filtered = f.filtered + excluded.filtered;

  IF v_made > 0 THEN
    PERFORM pg_notify('wharf_delivery', '');
  END IF;
  RETURN v_made;
END $$;

--
-- Name: destination_rule; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.destination_rule (
    id bigint NOT NULL,
    workspace_id bigint NOT NULL,
    destination_id bigint NOT NULL,
    connection_id bigint,
    provider text,
    event_types text[],
    subject_prefix text,
    filter jsonb,
    forward_only boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: rule_summary(wharf.destination_rule); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.rule_summary(r wharf.destination_rule) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  SELECT jsonb_build_object(
    'id', r.id, 'workspace_id', r.workspace_id, 'destination_id', r.destination_id,
    'connection_id', r.connection_id, 'provider', r.provider, 'event_types', to_jsonb(r.event_types),
    'subject_prefix', r.subject_prefix, 'filter', r.filter, 'forward_only', r.forward_only,
    'filtered_last_hour', (SELECT coalesce(sum(f.filtered), 0) FROM wharf.rule_filtered_minute f
                            WHERE f.rule_id = r.id AND f.minute > now() - interval '1 hour'),
    'created_at', r.created_at, 'updated_at', r.updated_at)
$$;

--
-- Name: safe_headers(jsonb); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.safe_headers(p_headers jsonb) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE
    AS $_$
DECLARE
  c_credentials CONSTANT text[] := ARRAY['authorization', 'proxy-authorization', 'cookie', 'set-cookie',
                                         'x-gitlab-token'];
BEGIN
  -- Names already lower-case and none a signature (what the edge sends: Web
  -- Headers lower-case them, and it keeps no signature): drop the credentials
  -- by name in one expression. The query below costs three times as much,
  -- on every admission.
  IF jsonb_typeof(p_headers) = 'object'
     AND NOT jsonb_path_exists(p_headers, '$.keyvalue() ? (@.key like_regex "[^a-z0-9_-]|signature|hmac")') THEN
    RETURN p_headers - c_credentials;
  END IF;
  RETURN (
    SELECT coalesce(jsonb_object_agg(lower(h.key), h.value), '{}')
      FROM jsonb_each(CASE WHEN jsonb_typeof(p_headers) = 'object' THEN p_headers ELSE '{}' END) h
     WHERE lower(h.key) <> ALL (c_credentials)
       AND lower(h.key) NOT LIKE '%signature%' AND lower(h.key) NOT LIKE '%hmac%');
END $_$;

--
-- Name: scope_action_result(bigint, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.scope_action_result(p_event_id bigint, p_refusal text) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  SELECT jsonb_build_object('done', p_refusal IS NULL, 'reason', p_refusal, 'event', wharf.event_summary(e))
    FROM wharf.provider_event e WHERE e.id = p_event_id
$$;

--
-- Name: scope_head_refusal(bigint, text, bigint, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.scope_head_refusal(p_workspace_id bigint, p_scope_key text, p_event_id bigint, p_account text) RETURNS text
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_state text;
BEGIN
  IF p_workspace_id IS NULL OR p_scope_key IS NULL OR p_event_id IS NULL OR p_account IS NULL OR p_account = '' THEN
    RAISE EXCEPTION 'wharf: a scope action needs a workspace, a scope, its head event and an account'
      USING ERRCODE = '22004';
  END IF;
  -- The event first, then (through the trigger of sql/20) its scope row:
  -- the order fail and reap lock them in.
  SELECT state INTO v_state FROM wharf.provider_event
   WHERE id = p_event_id AND workspace_id = p_workspace_id AND scope_key = p_scope_key
   FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: workspace % has no event % in scope %', p_workspace_id, p_event_id, p_scope_key
      USING ERRCODE = 'P0002';
  END IF;
  IF v_state = 'LEASED' THEN
    RETURN 'leased';
  END IF;
  IF v_state <> 'QUEUED'
     OR NOT EXISTS (SELECT FROM wharf.scope s WHERE s.scope_key = p_scope_key AND s.head_id = p_event_id) THEN
    RETURN 'not_head';
  END IF;
  RETURN NULL;
END $$;

--
-- Name: scope_workspace_active(bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.scope_workspace_active(p_workspace_id bigint) RETURNS boolean
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
  RETURN coalesce((SELECT w.state = 'ACTIVE' FROM wharf.workspace w WHERE w.id = p_workspace_id), true);
END $$;

--
-- Name: scopes_stuck_since(timestamp with time zone, bigint, integer); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.scopes_stuck_since(p_before timestamp with time zone, p_workspace_id bigint, p_limit integer) RETURNS TABLE(scope_key text, workspace_id bigint, head_id bigint, since timestamp with time zone)
    LANGUAGE sql STABLE
    AS $$
  SELECT x.scope_key, x.workspace_id, x.head_id, x.since
    FROM (SELECT DISTINCT ON (y.scope_key) y.scope_key, y.workspace_id, y.head_id, y.since
            FROM ((SELECT s.scope_key, s.workspace_id, coalesce(s.leased_id, s.head_id) AS head_id, s.failing_since AS since
                     FROM wharf.scope s
                    WHERE s.failing_since < p_before
                      AND (p_workspace_id IS NULL OR s.workspace_id = p_workspace_id)
                      AND (NOT EXISTS (SELECT FROM wharf.connection p WHERE p.state = 'PAUSED')
                           OR (SELECT c.state FROM wharf.provider_event h JOIN wharf.connection c ON c.id = h.connection_id
                                WHERE h.id = coalesce(s.leased_id, s.head_id)) IS DISTINCT FROM 'PAUSED')
                    ORDER BY s.failing_since LIMIT p_limit)
                  UNION ALL
                  (SELECT w.scope_key, w.workspace_id, w.head_id, w.ready_at
                     FROM wharf.claimable_kinds() k(kind)
                     CROSS JOIN LATERAL (SELECT s.scope_key, s.workspace_id, s.head_id, s.ready_at FROM wharf.scope s
                                          WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
                                            AND s.head_kind = k.kind AND s.ready_at < p_before
                                            AND (p_workspace_id IS NULL OR s.workspace_id = p_workspace_id)
                                            AND (NOT EXISTS (SELECT FROM wharf.connection p WHERE p.state = 'PAUSED')
                                                 OR (SELECT c.state FROM wharf.provider_event h
                                                       JOIN wharf.connection c ON c.id = h.connection_id
                                                      WHERE h.id = s.head_id) IS DISTINCT FROM 'PAUSED')
                                          ORDER BY s.ready_at LIMIT p_limit) w
                    ORDER BY w.ready_at LIMIT p_limit)) y
           ORDER BY y.scope_key, y.since) x
   ORDER BY x.since, x.scope_key
   LIMIT p_limit
$$;

--
-- Name: search_events(bigint, jsonb, jsonb, text, text, integer, bigint, text, text, timestamp with time zone, timestamp with time zone); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.search_events(p_workspace_id bigint, p_payload jsonb, p_headers jsonb DEFAULT NULL::jsonb, p_state text DEFAULT NULL::text, p_subject text DEFAULT NULL::text, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL::bigint, p_provider text DEFAULT NULL::text, p_event_type text DEFAULT NULL::text, p_received_after timestamp with time zone DEFAULT NULL::timestamp with time zone, p_received_before timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_events jsonb;
  v_count  bigint;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF p_payload IS NULL AND p_headers IS NULL THEN
    RAISE EXCEPTION 'wharf: a search needs a payload or a headers value to look for' USING ERRCODE = '22004';
  END IF;
  IF jsonb_typeof(p_payload) <> 'object' OR jsonb_typeof(p_headers) <> 'object' THEN
    RAISE EXCEPTION 'wharf: a payload or headers search is a JSON object, e.g. {"repository": {"full_name": "acme/api"}}'
      USING ERRCODE = '22023';
  END IF;
  IF p_state IS NOT NULL AND p_state NOT IN ('QUEUED', 'LEASED', 'DONE', 'DEAD') THEN
    RAISE EXCEPTION 'wharf: unknown event state %', quote_literal(p_state) USING ERRCODE = '22023';
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 500' USING ERRCODE = '22023';
  END IF;

  SELECT coalesce(jsonb_agg(wharf.event_summary(e) ORDER BY e.id DESC), '[]'), count(*) INTO v_events, v_count
    FROM (SELECT *
            FROM wharf.provider_event x
           WHERE x.workspace_id = p_workspace_id
             AND (p_payload IS NULL OR x.payload @> p_payload)
             AND (p_headers IS NULL OR x.headers @> p_headers)
             AND (p_state IS NULL OR x.state = p_state)
             AND wharf.event_page_matches(x, p_workspace_id, p_subject, p_provider, p_event_type,
                                          p_received_after, p_received_before, p_before_id)
           ORDER BY x.id DESC
           LIMIT p_limit + 1) e;
  IF v_count <= p_limit THEN
    RETURN jsonb_build_object('events', v_events, 'next_cursor', NULL);
  END IF;
  v_events := v_events - p_limit;
  RETURN jsonb_build_object('events', v_events, 'next_cursor', v_events -> (p_limit - 1) -> 'id');
END $$;

--
-- Name: send_test_alert(bigint, bigint, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.send_test_alert(p_workspace_id bigint, p_id bigint, p_account text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_alert wharf.alert;
  v_rule  wharf.alert_rule;
BEGIN
  IF p_account IS NULL OR p_account = '' THEN
    RAISE EXCEPTION 'wharf: a test alert needs an account' USING ERRCODE = '22004';
  END IF;
  SELECT * INTO v_rule FROM wharf.alert_rule
   WHERE id = p_id AND (workspace_id = p_workspace_id OR (p_workspace_id IS NULL AND workspace_id IS NULL));
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts, test)
  VALUES (v_rule.id, v_rule.workspace_id, 'test:' || gen_random_uuid(), v_rule.kind,
          jsonb_build_object('test', true, 'requested_by', p_account), true)
  RETURNING * INTO v_alert;
  RETURN wharf.alert_summary(v_alert, v_rule.name);
END $$;

--
-- Name: set_connection_secret(bigint, text, boolean); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.set_connection_secret(p_connection_id bigint, p_secret text, p_keep_previous boolean DEFAULT true) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  v_provider text;
  v_place    text;
BEGIN
  IF p_connection_id IS NULL OR p_secret IS NULL OR p_secret = '' OR p_keep_previous IS NULL THEN
    RAISE EXCEPTION 'wharf.set_connection_secret: connection and secret are required'
      USING ERRCODE = '22004';
  END IF;
  SELECT c.provider, p.secret INTO v_provider, v_place
    FROM wharf.connection c JOIN wharf.provider p ON p.name = c.provider
   WHERE c.id = p_connection_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: unknown connection %', p_connection_id USING ERRCODE = 'P0002';
  END IF;
  IF v_place = 'app' THEN
    RAISE EXCEPTION 'wharf.set_connection_secret: % secrets belong to the app, not the connection',
      v_provider USING ERRCODE = '22023';
  END IF;
  IF v_place = 'signing_key'
     AND p_secret !~ '^aes256gcm:[A-Za-z0-9_.-]{1,32}:[A-Za-z0-9+/]+={0,2}:[A-Za-z0-9+/]+={0,2}$' THEN
    RAISE EXCEPTION 'wharf.set_connection_secret: a signing key is stored encrypted with the key ring (WHARF_SECRET_KEYS)'
      USING ERRCODE = '22023';
  END IF;

  -- A secret is part of the connection's configuration: same lock, same
  -- generation bump as every other change (sql/70-connections.sql).
  PERFORM wharf.lock_connection_for_change(p_connection_id);
  INSERT INTO wharf.connection_secret (connection_id, token_sha256, signing_key)
  SELECT p_connection_id,
         CASE WHEN v_place <> 'token' THEN NULL
              WHEN p_secret ~ '^sha256:[0-9a-f]{64}$' THEN decode(substr(p_secret, 8), 'hex')
              ELSE sha256(convert_to(p_secret, 'UTF8')) END,
         CASE WHEN v_place <> 'token' THEN p_secret END
  ON CONFLICT (connection_id) DO UPDATE
     SET previous_token_sha256 = CASE WHEN p_keep_previous THEN connection_secret.token_sha256 END,
         previous_signing_key  = CASE WHEN p_keep_previous AND connection_secret.signing_key LIKE 'aes256gcm:%'
                                      THEN connection_secret.signing_key END,
         previous_valid_until  = CASE WHEN p_keep_previous THEN now() + wharf.setting_interval('secret_overlap') END,
         token_sha256 = EXCLUDED.token_sha256, signing_key = EXCLUDED.signing_key, updated_at = now();
  UPDATE wharf.connection SET generation = generation + 1, updated_at = now() WHERE id = p_connection_id;
END $_$;

--
-- Name: set_connection_state(bigint, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.set_connection_state(p_id bigint, p_state text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF p_id IS NULL OR p_state IS NULL THEN
    RAISE EXCEPTION 'wharf.set_connection_state: id and state are required' USING ERRCODE = '22004';
  END IF;
  IF p_state NOT IN ('ACTIVE', 'PAUSED', 'SUSPENDED', 'REVOKED') THEN
    RAISE EXCEPTION 'wharf: unknown connection state %', quote_literal(p_state) USING ERRCODE = '22023';
  END IF;
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  PERFORM wharf.lock_connection_for_change(p_id);
  UPDATE wharf.connection
     SET state = p_state, generation = generation + 1, updated_at = now()
   WHERE id = p_id AND state IS DISTINCT FROM p_state;
  -- Out of PAUSED: the scopes a claim parked for this connection's heads
  -- (sql/30) are claimable again, in their usual order.
  IF p_state <> 'PAUSED' THEN
    UPDATE wharf.scope s SET active = true
      FROM wharf.provider_event e
     WHERE NOT s.active AND e.id = s.head_id AND e.connection_id = p_id
       AND wharf.scope_workspace_active(s.workspace_id);
    -- With the ready_at they had, below any claim's floor (sql/30).
    IF FOUND THEN
      PERFORM wharf.reset_claim_lines();
    END IF;
  END IF;
  IF p_state = 'ACTIVE' THEN
    PERFORM wharf.notify_idle_claimers();
  END IF;
END $$;

--
-- Name: set_destination_credentials(bigint, bigint, text, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.set_destination_credentials(p_workspace_id bigint, p_id bigint, p_sealed text, p_type text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_dest wharf.destination := wharf.destination_for_change(p_workspace_id, p_id);
BEGIN
  IF p_sealed IS NOT NULL AND p_sealed NOT LIKE 'aes256gcm:%' THEN
    RAISE EXCEPTION 'wharf: destination credentials must arrive sealed (aes256gcm:…)' USING ERRCODE = '22023';
  END IF;
  IF p_sealed IS NOT NULL AND p_type IS DISTINCT FROM 'bearer' AND p_type IS DISTINCT FROM 'basic'
     AND p_type IS DISTINCT FROM 'header' THEN
    RAISE EXCEPTION 'wharf: destination credentials type: bearer, basic or header' USING ERRCODE = '22023';
  END IF;
  IF v_dest.id IS NULL THEN
    RETURN NULL;
  END IF;
  UPDATE wharf.destination d
     SET credentials = p_sealed, credentials_type = CASE WHEN p_sealed IS NOT NULL THEN p_type END, updated_at = now()
   WHERE d.id = p_id
  RETURNING * INTO v_dest;
  RETURN wharf.destination_summary(v_dest);
END $$;

--
-- Name: set_destination_secret(bigint, bigint, text, boolean, interval); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.set_destination_secret(p_workspace_id bigint, p_id bigint, p_sealed text, p_keep_previous boolean DEFAULT true, p_overlap interval DEFAULT '24:00:00'::interval) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_dest wharf.destination := wharf.destination_for_change(p_workspace_id, p_id);
BEGIN
  IF p_sealed IS NULL THEN
    RAISE EXCEPTION 'wharf: destination signing secret is required' USING ERRCODE = '22004';
  END IF;
  IF p_sealed NOT LIKE 'aes256gcm:%' THEN
    RAISE EXCEPTION 'wharf: destination signing secret must arrive sealed (aes256gcm:…)' USING ERRCODE = '22023';
  END IF;
  IF v_dest.id IS NULL THEN
    RETURN NULL;
  END IF;
  UPDATE wharf.destination d
     SET previous_signing_secret = CASE WHEN p_keep_previous AND d.signing_secret IS NOT NULL THEN d.signing_secret END,
         previous_valid_until    = CASE WHEN p_keep_previous AND d.signing_secret IS NOT NULL THEN now() + p_overlap END,
         signing_secret          = p_sealed,
         updated_at              = now()
   WHERE d.id = p_id
  RETURNING * INTO v_dest;
  RETURN wharf.destination_summary(v_dest);
END $$;

--
-- Name: set_destination_state(bigint, bigint, text, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.set_destination_state(p_workspace_id bigint, p_id bigint, p_state text, p_account text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_dest wharf.destination := wharf.destination_for_change(p_workspace_id, p_id);
BEGIN
  IF p_state IS DISTINCT FROM 'ACTIVE' AND p_state IS DISTINCT FROM 'PAUSED' THEN
    RAISE EXCEPTION 'wharf: destination state: ACTIVE or PAUSED' USING ERRCODE = '22023';
  END IF;
  IF v_dest.id IS NULL THEN
    RETURN NULL;
  END IF;
  UPDATE wharf.destination d
     SET state = p_state,
         paused_reason = CASE WHEN p_state = 'PAUSED' THEN 'operator' END,
         paused_by = CASE WHEN p_state = 'PAUSED' THEN p_account END,
         consecutive_failures = CASE WHEN p_state = 'ACTIVE' THEN 0 ELSE d.consecutive_failures END,
         failing_since = CASE WHEN p_state = 'ACTIVE' THEN NULL ELSE d.failing_since END,
         probe_at = NULL, updated_at = now()
   WHERE d.id = p_id
  RETURNING * INTO v_dest;
  IF p_state = 'ACTIVE' THEN
    PERFORM pg_notify('wharf_delivery', '');
  END IF;
  RETURN wharf.destination_summary(v_dest);
END $$;

--
-- Name: set_installation_issue_status(bigint, text, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.set_installation_issue_status(p_id bigint, p_status text, p_account text) RETURNS jsonb
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT wharf.change_issue_status(NULL, p_id, p_status, p_account)
$$;

--
-- Name: set_issue_status(bigint, bigint, text, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.set_issue_status(p_workspace_id bigint, p_id bigint, p_status text, p_account text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF p_workspace_id IS NULL THEN
    RAISE EXCEPTION 'wharf.set_issue_status: workspace is required' USING ERRCODE = '22004';
  END IF;
  RETURN wharf.change_issue_status(p_workspace_id, p_id, p_status, p_account);
END $$;

--
-- Name: set_setting(text, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.set_setting(p_key text, p_value text) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_type text;
BEGIN
  IF p_key IS NULL OR p_value IS NULL THEN
    RAISE EXCEPTION 'wharf: set_setting needs a key and a value' USING ERRCODE = '22004';
  END IF;
  SELECT type INTO v_type FROM wharf.setting WHERE key = p_key FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: unknown setting %', p_key USING ERRCODE = '22023';
  END IF;
  BEGIN
    IF v_type = 'interval' AND p_value::interval <= interval '0' THEN
      RAISE EXCEPTION USING ERRCODE = '22023';
    ELSIF v_type = 'integer' AND p_value::integer <= 0 THEN
      RAISE EXCEPTION USING ERRCODE = '22023';
    END IF;
  EXCEPTION WHEN data_exception THEN
    RAISE EXCEPTION 'wharf: setting % takes a positive %, not %', p_key, v_type, quote_literal(p_value)
      USING ERRCODE = '22023';
  END;
  UPDATE wharf.setting SET value = p_value WHERE key = p_key;
END $$;

--
-- Name: set_workspace_state(bigint, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.set_workspace_state(p_id bigint, p_state text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF p_id IS NULL OR p_state IS NULL THEN
    RAISE EXCEPTION 'wharf.set_workspace_state: id and state are required' USING ERRCODE = '22004';
  END IF;
  IF p_state NOT IN ('ACTIVE', 'PAUSED', 'SUSPENDED', 'DELETING') THEN
    RAISE EXCEPTION 'wharf: unknown workspace state %', quote_literal(p_state) USING ERRCODE = '22023';
  END IF;
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  -- The workspace first: a connection being created in it (upsert_connection
  -- holds this lock shared) commits before the read below, or waits.
  PERFORM wharf.lock_lifecycle('workspace', p_id::text);
  -- Then every source its connections fall under, exclusive, in key order:
  -- admissions of those sources in flight commit first, later ones read the
  -- new state.
  PERFORM pg_advisory_xact_lock(k.key)
     FROM (SELECT DISTINCT wharf.lifecycle_key('source', wharf.source_lock_id(c.provider, c.source)) AS key
             FROM wharf.connection c WHERE c.workspace_id = p_id
            ORDER BY 1) k;
  UPDATE wharf.workspace SET state = p_state WHERE id = p_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: unknown workspace %', p_id USING ERRCODE = 'P0002';
  END IF;
  -- The workspace's scopes follow its state by the workspace trigger (sql/20).
  IF p_state = 'ACTIVE' THEN
    PERFORM wharf.notify_idle_claimers();
  END IF;
END $$;

--
-- Name: setting_integer(text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.setting_integer(p_key text) RETURNS integer
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
  v_value integer;
BEGIN
  SELECT value::integer INTO v_value FROM wharf.setting WHERE key = p_key AND type = 'integer';
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: unknown integer setting %', p_key USING ERRCODE = '22023';
  END IF;
  RETURN v_value;
END $$;

--
-- Name: setting_interval(text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.setting_interval(p_key text) RETURNS interval
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
  v_value interval;
BEGIN
  SELECT value::interval INTO v_value FROM wharf.setting WHERE key = p_key AND type = 'interval';
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: unknown interval setting %', p_key USING ERRCODE = '22023';
  END IF;
  RETURN v_value;
END $$;

--
-- Name: settle_redelivery(bigint, text, uuid, text, bigint, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.settle_redelivery(p_app_id bigint, p_source text, p_token uuid, p_guid text, p_delivery_id bigint, p_outcome text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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

--
-- Name: show_bulk_replay(bigint, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.show_bulk_replay(p_workspace_id bigint, p_id bigint) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT wharf.bulk_replay_summary(r) FROM wharf.bulk_replay r
   WHERE r.id = p_id AND r.workspace_id = p_workspace_id
$$;

--
-- Name: show_connection(bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.show_connection(p_id bigint) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT jsonb_build_object(
           'id', c.id, 'workspace_id', c.workspace_id, 'provider', c.provider,
           'source', c.source, 'kind', c.kind, 'external_id', c.external_id, 'route', c.route,
           'state', c.state, 'generation', c.generation, 'created_at', c.created_at,
           'updated_at', c.updated_at,
           'subscriptions', (SELECT coalesce(jsonb_agg(s.subject ORDER BY s.subject), '[]')
                               FROM wharf.subscription s WHERE s.connection_id = c.id))
    FROM wharf.connection c WHERE c.id = p_id
$$;

--
-- Name: show_delivery(bigint, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.show_delivery(p_workspace_id bigint, p_id bigint) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT wharf.delivery_summary(q) || jsonb_build_object(
           'webhook_id', 'wd_' || q.id,
           'attempts', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                          'attempt', a.attempt, 'epoch', a.lease_epoch, 'worker', a.worker,
                          'started_at', a.started_at, 'ended_at', a.ended_at, 'ended', a.ended,
                          'error_class', a.error_class, 'status', a.status, 'duration_ms', a.duration_ms,
                          'response', a.response) ORDER BY a.lease_epoch), '[]')
                          FROM wharf.delivery_attempt a WHERE a.delivery_id = q.id))
    FROM wharf.destination_delivery q WHERE q.id = p_id AND q.workspace_id = p_workspace_id
$$;

--
-- Name: show_destination(bigint, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.show_destination(p_workspace_id bigint, p_id bigint) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT wharf.destination_summary(d) FROM wharf.destination d WHERE d.id = p_id AND d.workspace_id = p_workspace_id
$$;

--
-- Name: show_event(bigint, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.show_event(p_workspace_id bigint, p_id bigint) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF p_workspace_id IS NULL THEN
    RAISE EXCEPTION 'wharf.show_event: workspace is required (installation rows: show_installation_event)'
      USING ERRCODE = '22004';
  END IF;
  RETURN wharf.event_detail(p_workspace_id, p_id);
END $$;

--
-- Name: show_installation_event(bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.show_installation_event(p_id bigint) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT wharf.event_detail(NULL, p_id)
$$;

--
-- Name: show_issue(bigint, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.show_issue(p_workspace_id bigint, p_id bigint) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF p_workspace_id IS NULL THEN
    RAISE EXCEPTION 'wharf.show_issue: workspace is required' USING ERRCODE = '22004';
  END IF;
  RETURN (SELECT wharf.issue_summary(i) FROM wharf.issue i WHERE i.id = p_id AND i.workspace_id = p_workspace_id);
END $$;

--
-- Name: show_workspace(bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.show_workspace(p_id bigint) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT jsonb_build_object('id', w.id, 'state', w.state, 'created_at', w.created_at,
           'connections', (SELECT count(*) FROM wharf.connection c WHERE c.workspace_id = w.id))
    FROM wharf.workspace w WHERE w.id = p_id
$$;

--
-- Name: source_lock_id(text, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.source_lock_id(p_provider text, p_source text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
  SELECT p_provider || ' ' || p_source
$$;

--
-- Name: start_bulk_replay(bigint, jsonb, text, boolean); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.start_bulk_replay(p_workspace_id bigint, p_filter jsonb, p_account text, p_force boolean DEFAULT false) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_started timestamptz;
  v_replay  wharf.bulk_replay;
BEGIN
  IF p_filter IS NULL OR p_account IS NULL OR p_account = '' OR p_force IS NULL THEN
    RAISE EXCEPTION 'wharf.start_bulk_replay: filter, account and force are required' USING ERRCODE = '22004';
  END IF;
  PERFORM wharf.require_workspace(p_workspace_id);
  p_filter := wharf.bulk_replay_filter(p_filter);

  -- The clock, not the transaction's start: an event that died before this
  -- call, in the same transaction too, is taken.
  v_started := clock_timestamp();
  INSERT INTO wharf.bulk_replay (workspace_id, filter, force, requested_by, matched, started_at, updated_at)
  VALUES (p_workspace_id, p_filter, p_force, p_account,
          (SELECT count(*) FROM wharf.bulk_replay_candidates(p_workspace_id, p_filter, p_force, v_started, 0)),
          v_started, v_started)
  RETURNING * INTO v_replay;
  RETURN wharf.bulk_replay_summary(v_replay);
END $$;

--
-- Name: step(bigint, bigint, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.step(p_id bigint, p_epoch bigint, p_step_name text) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT wharf.record_step(p_id, p_epoch, p_step_name, NULL, false)
$$;

--
-- Name: step(bigint, bigint, text, uuid); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.step(p_id bigint, p_epoch bigint, p_step_name text, p_lease_token uuid) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT wharf.record_step(p_id, p_epoch, p_step_name, p_lease_token, true)
$$;

--
-- Name: store_event(wharf.admission_item, bigint, bigint, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.store_event(p_item wharf.admission_item, p_workspace_id bigint, p_connection_id bigint, p_scope_key text) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_id bigint;
BEGIN
  PERFORM wharf.lock_scope(p_scope_key, p_workspace_id);
  INSERT INTO wharf.provider_event
    (workspace_id, provider, delivery_key, event_type, subject, scope_key, source, connection_id,
     payload, headers, body_sha256)
  VALUES
    (p_workspace_id, p_item.provider, p_item.delivery_key, p_item.event_type, p_item.subjects[1], p_scope_key,
     p_item.source, p_connection_id, p_item.payload, p_item.headers, p_item.body_sha256)
  ON CONFLICT (workspace_id, provider, delivery_key) DO NOTHING
  RETURNING id INTO v_id;
  IF v_id IS NOT NULL THEN
    -- Its destinations' deliveries commit with it (sql/88).
    IF p_workspace_id IS NOT NULL AND wharf.workspaces_route(ARRAY[p_workspace_id]) THEN
      PERFORM wharf.route_events(ARRAY[v_id]);
    END IF;
    RETURN jsonb_build_object('workspace_id', p_workspace_id, 'event_id', v_id, 'outcome', 'stored');
  END IF;
  -- Two lookups, not `IS NOT DISTINCT FROM`, which no btree serves: a
  -- repeated delivery must cost an index probe whatever the inbox holds.
  IF p_workspace_id IS NULL THEN
    SELECT id INTO v_id FROM wharf.provider_event
     WHERE workspace_id IS NULL AND provider = p_item.provider AND delivery_key = p_item.delivery_key;
  ELSE
    SELECT id INTO v_id FROM wharf.provider_event
     WHERE workspace_id = p_workspace_id AND provider = p_item.provider AND delivery_key = p_item.delivery_key;
  END IF;
  RETURN jsonb_build_object('workspace_id', p_workspace_id, 'event_id', v_id, 'outcome', 'duplicate');
END $$;

--
-- Name: stored_signing_keys(); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.stored_signing_keys() RETURNS TABLE(connection_id bigint, signing_key text, previous_signing_key text)
    LANGUAGE sql STABLE
    AS $$
  SELECT s.connection_id, s.signing_key, s.previous_signing_key
    FROM wharf.connection_secret s
   WHERE s.signing_key IS NOT NULL OR s.previous_signing_key IS NOT NULL
   ORDER BY s.connection_id
$$;

--
-- Name: stuck_scope_list(bigint, interval, integer); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.stuck_scope_list(p_workspace_id bigint, p_older_than interval, p_limit integer) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  SELECT coalesce(jsonb_agg(jsonb_build_object(
           'scope_key', t.scope_key, 'subject', h.subject,
           'reason', CASE WHEN h.state = 'LEASED' THEN 'leased'
                          WHEN s.failing_since IS NOT NULL THEN 'failing'
                          ELSE 'waiting' END,
           'waiting_since', t.since,
           'waiting_seconds', floor(extract(epoch FROM now() - t.since)),
           'behind', b.n, 'behind_capped', b.n >= 10000,
           'head', wharf.event_summary(h) || jsonb_build_object('leased_by', h.leased_by,
                                                                'leased_until', h.leased_until,
                                                                'dead_letter_pending', h.state = 'LEASED'
                                                                  AND wharf.dead_letter_after_lease(h.id, h.lease_epoch)),
           'connection', jsonb_build_object('id', c.id, 'state', c.state)) ORDER BY t.since, t.scope_key), '[]')
    FROM wharf.scopes_stuck_since(now() - p_older_than, p_workspace_id, p_limit) t
    JOIN wharf.scope s ON s.scope_key = t.scope_key
    JOIN wharf.provider_event h ON h.id = t.head_id
    LEFT JOIN wharf.connection c ON c.id = h.connection_id
    CROSS JOIN LATERAL (SELECT count(*) AS n
                          FROM (SELECT FROM wharf.provider_event e
                                 WHERE e.scope_key = t.scope_key AND e.id > h.id AND e.state = 'QUEUED'
                                 LIMIT 10000) q) b
$$;

--
-- Name: subscribe(bigint, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.subscribe(p_connection_id bigint, p_subject text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_prefixes jsonb;
BEGIN
  IF p_connection_id IS NULL OR p_subject IS NULL OR p_subject = '' THEN
    RAISE EXCEPTION 'wharf.subscribe: connection and subject are required' USING ERRCODE = '22004';
  END IF;
  PERFORM wharf.lock_connection_for_change(p_connection_id);
  -- Read under the lock: a route change commits before or after, not during.
  SELECT route->'subject_prefixes' INTO v_prefixes FROM wharf.connection WHERE id = p_connection_id;
  IF jsonb_typeof(v_prefixes) = 'array'
     AND NOT EXISTS (SELECT FROM jsonb_array_elements_text(v_prefixes) p WHERE starts_with(p_subject, p)) THEN
    RAISE EXCEPTION 'wharf: subject % is outside connection %''s subject_prefixes %',
      quote_literal(p_subject), p_connection_id, v_prefixes::text USING ERRCODE = '22023';
  END IF;
  INSERT INTO wharf.subscription (connection_id, subject) VALUES (p_connection_id, p_subject)
  ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  UPDATE wharf.connection SET generation = generation + 1, updated_at = now() WHERE id = p_connection_id;
  RETURN true;
END $$;

--
-- Name: sweep_page(bigint, text, uuid, jsonb, boolean); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.sweep_page(p_app_id bigint, p_source text, p_token uuid, p_deliveries jsonb, p_last boolean) RETURNS TABLE(guid text, delivery_id bigint, event text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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

--
-- Name: sweep_status(bigint, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.sweep_status(p_app_id bigint, p_source text) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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

--
-- Name: sync_scope_activity(); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.sync_scope_activity() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  -- A scope parked for a paused connection's head is active again too; the
  -- next claim that meets its head parks it again if it is still held.
  UPDATE wharf.scope SET active = (NEW.state = 'ACTIVE')
   WHERE workspace_id = NEW.id AND active IS DISTINCT FROM (NEW.state = 'ACTIVE');
  -- Claimable again with the ready_at they had, below any claim's floor.
  IF FOUND AND NEW.state = 'ACTIVE' THEN
    PERFORM wharf.reset_claim_lines();
  END IF;
  RETURN NULL;
END $$;

--
-- Name: take_alert_sender(text, interval, uuid); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.take_alert_sender(p_holder text, p_lease interval, p_token uuid DEFAULT NULL::uuid) RETURNS uuid
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_token uuid;
BEGIN
  IF p_holder IS NULL OR p_holder = '' OR p_lease IS NULL THEN
    RAISE EXCEPTION 'wharf: take_alert_sender needs a holder and a lease' USING ERRCODE = '22004';
  END IF;
  IF p_lease <= interval '0' THEN
    RAISE EXCEPTION 'wharf: the lease must be positive' USING ERRCODE = '22023';
  END IF;
  UPDATE wharf.alert_sender
     SET leased_by = p_holder,
         lease_token = CASE WHEN p_token IS NOT NULL AND lease_token = p_token THEN p_token ELSE gen_random_uuid() END,
         leased_until = clock_timestamp() + p_lease
   WHERE id = 1
     AND ((p_token IS NOT NULL AND lease_token = p_token)
          OR lease_token IS NULL OR leased_until < clock_timestamp())
  RETURNING lease_token INTO v_token;
  RETURN v_token;
END $$;

--
-- Name: test_destination_filter(bigint, jsonb, bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.test_destination_filter(p_workspace_id bigint, p_filter jsonb, p_event_id bigint) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_problem text := wharf.filter_problem(p_filter);
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF v_problem IS NOT NULL THEN
    RAISE EXCEPTION 'wharf: %', v_problem USING ERRCODE = '22023';
  END IF;
  RETURN (SELECT jsonb_build_object('matched', wharf.filter_matches(p_filter, e.payload, e.headers))
            FROM wharf.provider_event e WHERE e.id = p_event_id AND e.workspace_id = p_workspace_id);
END $$;

--
-- Name: unsubscribe(bigint, text); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.unsubscribe(p_connection_id bigint, p_subject text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF p_connection_id IS NULL OR p_subject IS NULL THEN
    RAISE EXCEPTION 'wharf.unsubscribe: connection and subject are required' USING ERRCODE = '22004';
  END IF;
  PERFORM wharf.lock_connection_for_change(p_connection_id);
  DELETE FROM wharf.subscription WHERE connection_id = p_connection_id AND subject = p_subject;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  UPDATE wharf.connection SET generation = generation + 1, updated_at = now() WHERE id = p_connection_id;
  RETURN true;
END $$;

--
-- Name: update_destination(bigint, bigint, jsonb); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.update_destination(p_workspace_id bigint, p_id bigint, p_spec jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_dest wharf.destination := wharf.destination_for_change(p_workspace_id, p_id);
BEGIN
  PERFORM wharf.check_destination_spec(p_spec);
  IF v_dest.id IS NULL THEN
    RETURN NULL;
  END IF;
  IF p_spec ? 'name' AND EXISTS (SELECT FROM wharf.destination WHERE workspace_id = p_workspace_id
                                    AND name = btrim(p_spec->>'name') AND id <> p_id) THEN
    RAISE EXCEPTION 'wharf: destination name: % is already used in this workspace', quote_literal(btrim(p_spec->>'name'))
      USING ERRCODE = '22023';
  END IF;
  UPDATE wharf.destination d
     SET name             = coalesce(btrim(p_spec->>'name'), d.name),
         url              = coalesce(p_spec->>'url', d.url),
         timeout_ms       = coalesce((p_spec->>'timeout_ms')::integer, d.timeout_ms),
         rate_limit       = CASE WHEN p_spec ? 'rate_limit' THEN (p_spec->>'rate_limit')::integer ELSE d.rate_limit END,
         rate_period      = coalesce(p_spec->>'rate_period', d.rate_period),
         tokens           = CASE WHEN p_spec ? 'rate_limit' OR p_spec ? 'rate_period' THEN NULL ELSE d.tokens END,
         max_in_flight    = coalesce((p_spec->>'max_in_flight')::integer, d.max_in_flight),
         ordered          = coalesce((p_spec->>'ordered')::boolean, d.ordered),
         headers          = coalesce(p_spec->'headers', d.headers),
         breaker_failures = coalesce((p_spec->>'breaker_failures')::integer, d.breaker_failures),
         breaker_minutes  = coalesce((p_spec->>'breaker_minutes')::integer, d.breaker_minutes),
         updated_at       = now()
   WHERE d.id = p_id
  RETURNING * INTO v_dest;
  -- Unordered, every queued delivery is due; ordered, those behind a head wait.
  UPDATE wharf.destination_delivery q
     SET ordered = v_dest.ordered,
         next_attempt_at = CASE WHEN NOT v_dest.ordered AND q.next_attempt_at = 'infinity' THEN now()
                                WHEN v_dest.ordered AND EXISTS (
                                       SELECT FROM wharf.destination_delivery o
                                        WHERE o.destination_id = p_id AND o.scope_key = q.scope_key
                                          AND o.state IN ('QUEUED', 'LEASED') AND o.event_id < q.event_id)
                                  THEN 'infinity'
                                ELSE q.next_attempt_at END
   WHERE q.destination_id = p_id AND q.state = 'QUEUED' AND q.ordered <> v_dest.ordered;
  RETURN wharf.destination_summary(v_dest);
END $$;

--
-- Name: update_destination_rule(bigint, bigint, jsonb); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.update_destination_rule(p_workspace_id bigint, p_id bigint, p_spec jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_rule wharf.destination_rule;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  PERFORM wharf.check_rule_spec(p_workspace_id, p_spec);
  IF p_spec->'destination_id' = 'null' THEN
    RAISE EXCEPTION 'wharf: rule destination_id: required' USING ERRCODE = '22023';
  END IF;
  UPDATE wharf.destination_rule r
     SET destination_id = coalesce((p_spec->>'destination_id')::bigint, r.destination_id),
         connection_id  = CASE WHEN p_spec ? 'connection_id' THEN (p_spec->>'connection_id')::bigint ELSE r.connection_id END,
         provider       = CASE WHEN p_spec ? 'provider' THEN p_spec->>'provider' ELSE r.provider END,
         event_types    = CASE WHEN p_spec ? 'event_types'
                               THEN CASE WHEN jsonb_typeof(p_spec->'event_types') = 'array'
                                         THEN ARRAY(SELECT jsonb_array_elements_text(p_spec->'event_types')) END
                               ELSE r.event_types END,
         subject_prefix = CASE WHEN p_spec ? 'subject_prefix' THEN p_spec->>'subject_prefix' ELSE r.subject_prefix END,
         filter         = CASE WHEN p_spec ? 'filter' THEN nullif(p_spec->'filter', 'null') ELSE r.filter END,
         forward_only   = coalesce((p_spec->>'forward_only')::boolean, r.forward_only),
         updated_at     = now()
   WHERE r.id = p_id AND r.workspace_id = p_workspace_id
  RETURNING * INTO v_rule;
  RETURN CASE WHEN v_rule.id IS NOT NULL THEN wharf.rule_summary(v_rule) END;
END $$;

--
-- Name: upsert_connection(bigint, text, text, text, text, jsonb); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.upsert_connection(p_workspace_id bigint, p_provider text, p_source text, p_kind text, p_external_id text, p_route jsonb DEFAULT '{}'::jsonb) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_id    bigint;
  v_route jsonb;
BEGIN
  IF p_workspace_id IS NULL OR p_provider IS NULL OR p_source IS NULL OR p_source = ''
     OR p_kind IS NULL OR p_kind = '' OR p_route IS NULL THEN
    RAISE EXCEPTION 'wharf.upsert_connection: workspace, provider, source, kind and route are required'
      USING ERRCODE = '22004';
  END IF;
  PERFORM wharf.check_provider(p_provider);
  IF jsonb_typeof(p_route) <> 'object' THEN
    RAISE EXCEPTION 'wharf.upsert_connection: route must be a JSON object' USING ERRCODE = '22023';
  END IF;
  IF NOT EXISTS (SELECT FROM wharf.workspace WHERE id = p_workspace_id) THEN
    RAISE EXCEPTION 'wharf: unknown workspace %', p_workspace_id USING ERRCODE = 'P0002';
  END IF;

  -- The workspace shared (a change of its state waits for this connection,
  -- and so locks its source too), then the source exclusive.
  PERFORM pg_advisory_xact_lock_shared(wharf.lifecycle_key('workspace', p_workspace_id::text));
  PERFORM wharf.lock_lifecycle('source', wharf.source_lock_id(p_provider, p_source));
  -- Two statements, not `external_id IS NOT DISTINCT FROM p_external_id`,
  -- which no index can serve: that walked every connection of the workspace
  -- with this provider, source and kind (uq_connection_natural_key's prefix),
  -- an entry per repository of a PAT's workspace on every upsert.
  IF p_external_id IS NULL THEN
    SELECT id, route INTO v_id, v_route
      FROM wharf.connection
     WHERE workspace_id = p_workspace_id AND provider = p_provider AND source = p_source
       AND kind = p_kind AND external_id IS NULL;
  ELSE
    SELECT id, route INTO v_id, v_route
      FROM wharf.connection
     WHERE workspace_id = p_workspace_id AND provider = p_provider AND source = p_source
       AND kind = p_kind AND external_id = p_external_id;
  END IF;
  IF NOT FOUND THEN
    INSERT INTO wharf.connection (workspace_id, provider, source, kind, external_id, route)
    VALUES (p_workspace_id, p_provider, p_source, p_kind, p_external_id, p_route)
    RETURNING id INTO v_id;
  ELSIF v_route IS DISTINCT FROM p_route THEN
    UPDATE wharf.connection
       SET route = p_route, generation = generation + 1, updated_at = now()
     WHERE id = v_id;
  END IF;
  RETURN v_id;
END $$;

--
-- Name: upsert_workspace(bigint); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.upsert_workspace(p_id bigint) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF p_id IS NULL THEN
    RAISE EXCEPTION 'wharf.upsert_workspace: id is required' USING ERRCODE = '22004';
  END IF;
  INSERT INTO wharf.workspace (id) VALUES (p_id) ON CONFLICT (id) DO NOTHING;
  RETURN p_id;
END $$;

--
-- Name: validate_encrypted_secrets(); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.validate_encrypted_secrets() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
  ALTER TABLE wharf.connection_secret VALIDATE CONSTRAINT connection_secret_signing_key_encrypted;
END $$;

--
-- Name: verify_token(bytea); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.verify_token(p_token_hash bytea) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_token record;
BEGIN
  SELECT * INTO v_token FROM wharf.api_token WHERE token_hash = p_token_hash AND revoked_at IS NULL;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF v_token.last_used_at IS NULL OR v_token.last_used_at < now() - interval '1 minute' THEN
    UPDATE wharf.api_token SET last_used_at = now() WHERE id = v_token.id;
  END IF;
  RETURN jsonb_build_object('id', v_token.id, 'workspace_id', v_token.workspace_id,
                            'name', v_token.name);
END $$;

--
-- Name: worker_settings(); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.worker_settings(OUT renew_every double precision, OUT handler_timeout double precision, OUT poll_every double precision) RETURNS record
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT extract(epoch FROM wharf.setting_interval('renew_every'))::float8 * 1000,
         extract(epoch FROM wharf.setting_interval('handler_timeout'))::float8 * 1000,
         extract(epoch FROM wharf.setting_interval('poll_every'))::float8 * 1000
$$;

--
-- Name: workspaces_route(bigint[]); Type: FUNCTION; Schema: wharf; Owner: -
--

CREATE FUNCTION wharf.workspaces_route(p_workspace_ids bigint[]) RETURNS boolean
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
  RETURN EXISTS (SELECT FROM wharf.destination_rule r WHERE r.workspace_id = ANY (p_workspace_ids));
END $$;

--
-- Name: admission_log; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.admission_log (
    id bigint NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    provider text,
    source text,
    delivery_key text,
    connection_id bigint,
    workspace_id bigint,
    reason text NOT NULL
);

--
-- Name: admission_log_id_seq; Type: SEQUENCE; Schema: wharf; Owner: -
--

ALTER TABLE wharf.admission_log ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME wharf.admission_log_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: alert_id_seq; Type: SEQUENCE; Schema: wharf; Owner: -
--

ALTER TABLE wharf.alert ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME wharf.alert_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: alert_rule_id_seq; Type: SEQUENCE; Schema: wharf; Owner: -
--

ALTER TABLE wharf.alert_rule ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME wharf.alert_rule_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: alert_sender; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.alert_sender (
    id integer NOT NULL,
    leased_by text,
    lease_token uuid,
    leased_until timestamp with time zone,
    CONSTRAINT alert_sender_id_check CHECK ((id = 1))
);

--
-- Name: api_token; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.api_token (
    id bigint NOT NULL,
    workspace_id bigint NOT NULL,
    name text NOT NULL,
    token_hash bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_used_at timestamp with time zone,
    revoked_at timestamp with time zone,
    CONSTRAINT api_token_name_check CHECK ((name ~ '^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}$'::text)),
    CONSTRAINT api_token_token_hash_check CHECK ((length(token_hash) = 32))
);

--
-- Name: api_token_id_seq; Type: SEQUENCE; Schema: wharf; Owner: -
--

ALTER TABLE wharf.api_token ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME wharf.api_token_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: bulk_replay_id_seq; Type: SEQUENCE; Schema: wharf; Owner: -
--

ALTER TABLE wharf.bulk_replay ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME wharf.bulk_replay_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: claim_line_reset; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.claim_line_reset (
    only_row boolean DEFAULT true NOT NULL,
    generation bigint DEFAULT 0 NOT NULL,
    CONSTRAINT claim_line_reset_only_row_check CHECK (only_row)
);

--
-- Name: connection; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.connection (
    id bigint NOT NULL,
    workspace_id bigint NOT NULL,
    provider text NOT NULL,
    source text NOT NULL,
    kind text NOT NULL,
    external_id text,
    route jsonb DEFAULT '{}'::jsonb NOT NULL,
    state text DEFAULT 'ACTIVE'::text NOT NULL,
    generation bigint DEFAULT 1 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT connection_route_check CHECK ((jsonb_typeof(route) = 'object'::text)),
    CONSTRAINT connection_state_check CHECK ((state = ANY (ARRAY['ACTIVE'::text, 'PAUSED'::text, 'SUSPENDED'::text, 'REVOKED'::text])))
);

--
-- Name: connection_id_seq; Type: SEQUENCE; Schema: wharf; Owner: -
--

ALTER TABLE wharf.connection ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME wharf.connection_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: connection_secret; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.connection_secret (
    connection_id bigint NOT NULL,
    token_sha256 bytea,
    signing_key text,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    previous_token_sha256 bytea,
    previous_signing_key text,
    previous_valid_until timestamp with time zone,
    CONSTRAINT connection_secret_check CHECK ((num_nonnulls(token_sha256, signing_key) = 1)),
    CONSTRAINT connection_secret_previous_signing_key_check CHECK ((previous_signing_key <> ''::text)),
    CONSTRAINT connection_secret_previous_token_sha256_check CHECK ((octet_length(previous_token_sha256) = 32)),
    CONSTRAINT connection_secret_signing_key_check CHECK ((signing_key <> ''::text)),
    CONSTRAINT connection_secret_token_sha256_check CHECK ((octet_length(token_sha256) = 32))
);

--
-- Name: delivery_attempt; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.delivery_attempt (
    delivery_id bigint NOT NULL,
    lease_epoch bigint NOT NULL,
    destination_id bigint NOT NULL,
    attempt integer NOT NULL,
    worker text NOT NULL,
    started_at timestamp with time zone,
    ended_at timestamp with time zone NOT NULL,
    ended text NOT NULL,
    left_state text,
    error_class text,
    status integer,
    duration_ms integer,
    response text,
    CONSTRAINT delivery_attempt_ended_check CHECK ((ended = ANY (ARRAY['handled'::text, 'transient'::text, 'permanent'::text, 'gone'::text, 'released'::text, 'expired'::text]))),
    CONSTRAINT delivery_attempt_left_state_check CHECK ((left_state = ANY (ARRAY['QUEUED'::text, 'DONE'::text, 'DEAD'::text]))),
    CONSTRAINT delivery_attempt_response_check CHECK ((length(response) <= 1024))
);

--
-- Name: destination_delivery_id_seq; Type: SEQUENCE; Schema: wharf; Owner: -
--

ALTER TABLE wharf.destination_delivery ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME wharf.destination_delivery_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: destination_id_seq; Type: SEQUENCE; Schema: wharf; Owner: -
--

ALTER TABLE wharf.destination ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME wharf.destination_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: destination_rule_id_seq; Type: SEQUENCE; Schema: wharf; Owner: -
--

ALTER TABLE wharf.destination_rule ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME wharf.destination_rule_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: event_attempt; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.event_attempt (
    event_id bigint NOT NULL,
    lease_epoch bigint NOT NULL,
    attempt integer NOT NULL,
    worker text NOT NULL,
    started_at timestamp with time zone,
    ended_at timestamp with time zone NOT NULL,
    ended text NOT NULL,
    error_class text,
    left_state text,
    frames text[],
    CONSTRAINT event_attempt_ended_check CHECK ((ended = ANY (ARRAY['transient'::text, 'unknown'::text, 'permanent'::text, 'uncertain'::text, 'released'::text, 'expired'::text]))),
    CONSTRAINT event_attempt_left_state_check CHECK ((left_state = ANY (ARRAY['QUEUED'::text, 'DEAD'::text])))
);

--
-- Name: failure_minute; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.failure_minute (
    workspace_id bigint,
    minute timestamp with time zone NOT NULL,
    failed bigint DEFAULT 0 NOT NULL,
    dead bigint DEFAULT 0 NOT NULL
);

--
-- Name: idle_listener; Type: TABLE; Schema: wharf; Owner: -
--

CREATE UNLOGGED TABLE wharf.idle_listener (
    listener text NOT NULL,
    backend_pid integer NOT NULL,
    since timestamp with time zone DEFAULT now() NOT NULL
)
WITH (vacuum_truncate='false');

--
-- Name: issue_failure_hour; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.issue_failure_hour (
    issue_id bigint NOT NULL,
    hour timestamp with time zone NOT NULL,
    failures bigint DEFAULT 0 NOT NULL,
    dead bigint DEFAULT 0 NOT NULL
);

--
-- Name: issue_id_seq; Type: SEQUENCE; Schema: wharf; Owner: -
--

ALTER TABLE wharf.issue ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME wharf.issue_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: provider; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.provider (
    name text NOT NULL,
    secret text NOT NULL,
    CONSTRAINT provider_name_check CHECK ((name ~ '^[a-z][a-z0-9_]{0,31}$'::text)),
    CONSTRAINT provider_secret_check CHECK ((secret = ANY (ARRAY['app'::text, 'token'::text, 'signing_key'::text])))
);

--
-- Name: provider_event_id_seq; Type: SEQUENCE; Schema: wharf; Owner: -
--

ALTER TABLE wharf.provider_event ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME wharf.provider_event_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: provider_event_step; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.provider_event_step (
    event_id bigint NOT NULL,
    step_name text NOT NULL,
    committed_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT provider_event_step_step_name_check CHECK ((step_name <> ''::text))
);

--
-- Name: redelivery_request; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.redelivery_request (
    app_id bigint NOT NULL,
    source text NOT NULL,
    guid text NOT NULL,
    delivery_id bigint NOT NULL,
    asks integer DEFAULT 1 NOT NULL,
    outcome text DEFAULT 'asking'::text NOT NULL,
    asked_by uuid NOT NULL,
    requested_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT redelivery_request_outcome_check CHECK ((outcome = ANY (ARRAY['asking'::text, 'accepted'::text, 'failed'::text, 'rejected'::text])))
);

--
-- Name: redelivery_seen; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.redelivery_seen (
    app_id bigint NOT NULL,
    source text NOT NULL,
    guid text NOT NULL,
    failed_id bigint,
    event text,
    answered boolean DEFAULT false NOT NULL,
    decided boolean DEFAULT false NOT NULL
);

--
-- Name: replay_audit; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.replay_audit (
    id bigint NOT NULL,
    event_id bigint NOT NULL,
    account text NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: replay_audit_id_seq; Type: SEQUENCE; Schema: wharf; Owner: -
--

ALTER TABLE wharf.replay_audit ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME wharf.replay_audit_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: rule_filtered_minute; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.rule_filtered_minute (
    rule_id bigint NOT NULL,
    minute timestamp with time zone NOT NULL,
    filtered bigint DEFAULT 0 NOT NULL
);

--
-- Name: scope; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.scope (
    scope_key text NOT NULL,
    workspace_id bigint,
    head_id bigint,
    head_due_at timestamp with time zone,
    leased_id bigint,
    active boolean DEFAULT true NOT NULL,
    ready_at timestamp with time zone,
    failing_since timestamp with time zone,
    head_kind text
)
WITH (vacuum_truncate='false', autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='5000');

--
-- Name: scope_action; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.scope_action (
    id bigint NOT NULL,
    workspace_id bigint NOT NULL,
    scope_key text NOT NULL,
    event_id bigint,
    connection_id bigint,
    action text NOT NULL,
    account text NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    after_lease_epoch bigint,
    CONSTRAINT scope_action_action_check CHECK ((action = ANY (ARRAY['retry_head'::text, 'dead_letter_head'::text, 'pause_connection'::text])))
);

--
-- Name: scope_action_id_seq; Type: SEQUENCE; Schema: wharf; Owner: -
--

ALTER TABLE wharf.scope_action ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME wharf.scope_action_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: setting; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.setting (
    key text NOT NULL,
    value text NOT NULL,
    type text NOT NULL,
    CONSTRAINT setting_type_check CHECK ((type = ANY (ARRAY['interval'::text, 'integer'::text])))
);

--
-- Name: subscription; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.subscription (
    connection_id bigint NOT NULL,
    subject text NOT NULL,
    CONSTRAINT subscription_subject_check CHECK ((subject <> ''::text))
);

--
-- Name: workspace; Type: TABLE; Schema: wharf; Owner: -
--

CREATE TABLE wharf.workspace (
    id bigint NOT NULL,
    state text DEFAULT 'ACTIVE'::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT workspace_state_check CHECK ((state = ANY (ARRAY['ACTIVE'::text, 'PAUSED'::text, 'SUSPENDED'::text, 'DELETING'::text])))
);

--
-- Name: admission_log admission_log_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.admission_log
    ADD CONSTRAINT admission_log_pkey PRIMARY KEY (id);

--
-- Name: alert alert_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.alert
    ADD CONSTRAINT alert_pkey PRIMARY KEY (id);

--
-- Name: alert alert_rule_id_dedupe_key_key; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.alert
    ADD CONSTRAINT alert_rule_id_dedupe_key_key UNIQUE (rule_id, dedupe_key);

--
-- Name: alert_rule alert_rule_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.alert_rule
    ADD CONSTRAINT alert_rule_pkey PRIMARY KEY (id);

--
-- Name: alert_sender alert_sender_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.alert_sender
    ADD CONSTRAINT alert_sender_pkey PRIMARY KEY (id);

--
-- Name: api_token api_token_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.api_token
    ADD CONSTRAINT api_token_pkey PRIMARY KEY (id);

--
-- Name: bulk_replay bulk_replay_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.bulk_replay
    ADD CONSTRAINT bulk_replay_pkey PRIMARY KEY (id);

--
-- Name: claim_line_reset claim_line_reset_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.claim_line_reset
    ADD CONSTRAINT claim_line_reset_pkey PRIMARY KEY (only_row);

--
-- Name: connection connection_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.connection
    ADD CONSTRAINT connection_pkey PRIMARY KEY (id);

--
-- Name: connection_secret connection_secret_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.connection_secret
    ADD CONSTRAINT connection_secret_pkey PRIMARY KEY (connection_id);

--
-- Name: connection_secret connection_secret_signing_key_encrypted; Type: CHECK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE wharf.connection_secret
    ADD CONSTRAINT connection_secret_signing_key_encrypted CHECK (((signing_key ~ '^aes256gcm:[A-Za-z0-9_.-]{1,32}:[A-Za-z0-9+/]+={0,2}:[A-Za-z0-9+/]+={0,2}$'::text) AND (previous_signing_key ~ '^aes256gcm:[A-Za-z0-9_.-]{1,32}:[A-Za-z0-9+/]+={0,2}:[A-Za-z0-9+/]+={0,2}$'::text))) NOT VALID;

--
-- Name: delivery_attempt delivery_attempt_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.delivery_attempt
    ADD CONSTRAINT delivery_attempt_pkey PRIMARY KEY (delivery_id, lease_epoch);

--
-- Name: destination_delivery destination_delivery_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.destination_delivery
    ADD CONSTRAINT destination_delivery_pkey PRIMARY KEY (id);

--
-- Name: destination destination_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.destination
    ADD CONSTRAINT destination_pkey PRIMARY KEY (id);

--
-- Name: destination_rule destination_rule_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.destination_rule
    ADD CONSTRAINT destination_rule_pkey PRIMARY KEY (id);

--
-- Name: event_attempt event_attempt_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.event_attempt
    ADD CONSTRAINT event_attempt_pkey PRIMARY KEY (event_id, lease_epoch);

--
-- Name: idle_listener idle_listener_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.idle_listener
    ADD CONSTRAINT idle_listener_pkey PRIMARY KEY (listener);

--
-- Name: issue_failure_hour issue_failure_hour_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.issue_failure_hour
    ADD CONSTRAINT issue_failure_hour_pkey PRIMARY KEY (issue_id, hour);

--
-- Name: issue issue_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.issue
    ADD CONSTRAINT issue_pkey PRIMARY KEY (id);

--
-- Name: provider_event provider_event_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.provider_event
    ADD CONSTRAINT provider_event_pkey PRIMARY KEY (id);

--
-- Name: provider_event_step provider_event_step_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.provider_event_step
    ADD CONSTRAINT provider_event_step_pkey PRIMARY KEY (event_id, step_name);

--
-- Name: provider provider_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.provider
    ADD CONSTRAINT provider_pkey PRIMARY KEY (name);

--
-- Name: redelivery_request redelivery_request_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.redelivery_request
    ADD CONSTRAINT redelivery_request_pkey PRIMARY KEY (app_id, source, guid);

--
-- Name: redelivery_seen redelivery_seen_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.redelivery_seen
    ADD CONSTRAINT redelivery_seen_pkey PRIMARY KEY (app_id, source, guid);

--
-- Name: redelivery_sweep redelivery_sweep_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.redelivery_sweep
    ADD CONSTRAINT redelivery_sweep_pkey PRIMARY KEY (app_id, source);

--
-- Name: replay_audit replay_audit_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.replay_audit
    ADD CONSTRAINT replay_audit_pkey PRIMARY KEY (id);

--
-- Name: rule_filtered_minute rule_filtered_minute_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.rule_filtered_minute
    ADD CONSTRAINT rule_filtered_minute_pkey PRIMARY KEY (rule_id, minute);

--
-- Name: scope_action scope_action_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.scope_action
    ADD CONSTRAINT scope_action_pkey PRIMARY KEY (id);

--
-- Name: scope scope_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.scope
    ADD CONSTRAINT scope_pkey PRIMARY KEY (scope_key);

--
-- Name: setting setting_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.setting
    ADD CONSTRAINT setting_pkey PRIMARY KEY (key);

--
-- Name: subscription subscription_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.subscription
    ADD CONSTRAINT subscription_pkey PRIMARY KEY (connection_id, subject);

--
-- Name: destination_delivery uq_destination_delivery_event; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.destination_delivery
    ADD CONSTRAINT uq_destination_delivery_event UNIQUE (event_id, destination_id);

--
-- Name: destination uq_destination_name; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.destination
    ADD CONSTRAINT uq_destination_name UNIQUE (workspace_id, name);

--
-- Name: workspace workspace_pkey; Type: CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.workspace
    ADD CONSTRAINT workspace_pkey PRIMARY KEY (id);

--
-- Name: ix_admission_log_at; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_admission_log_at ON wharf.admission_log USING btree (at);

--
-- Name: ix_alert_created; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_alert_created ON wharf.alert USING btree (created_at);

--
-- Name: ix_alert_due; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_alert_due ON wharf.alert USING btree (next_attempt_at) WHERE (state = 'pending'::text);

--
-- Name: ix_alert_rule_recent; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_alert_rule_recent ON wharf.alert USING btree (rule_id, id DESC);

--
-- Name: ix_alert_rule_workspace; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_alert_rule_workspace ON wharf.alert_rule USING btree (workspace_id);

--
-- Name: ix_bulk_replay_finished; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_bulk_replay_finished ON wharf.bulk_replay USING btree (finished_at) WHERE (finished_at IS NOT NULL);

--
-- Name: ix_bulk_replay_workspace; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_bulk_replay_workspace ON wharf.bulk_replay USING btree (workspace_id, id DESC);

--
-- Name: ix_connection_paused; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_connection_paused ON wharf.connection USING btree (id) WHERE (state = 'PAUSED'::text);

--
-- Name: ix_connection_recipients; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_connection_recipients ON wharf.connection USING btree (provider, source);

--
-- Name: ix_connection_workspace; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_connection_workspace ON wharf.connection USING btree (workspace_id);

--
-- Name: ix_delivery_attempt_destination; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_delivery_attempt_destination ON wharf.delivery_attempt USING btree (destination_id, ended_at);

--
-- Name: ix_destination_delivery_due; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_destination_delivery_due ON wharf.destination_delivery USING btree (destination_id, next_attempt_at) WHERE (state = 'QUEUED'::text);

--
-- Name: ix_destination_delivery_failing; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_destination_delivery_failing ON wharf.destination_delivery USING btree (destination_id, event_id DESC) WHERE ((state <> 'DONE'::text) AND (error_class IS NOT NULL));

--
-- Name: ix_destination_delivery_leased; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_destination_delivery_leased ON wharf.destination_delivery USING btree (destination_id, leased_until) WHERE (state = 'LEASED'::text);

--
-- Name: ix_destination_delivery_listing; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_destination_delivery_listing ON wharf.destination_delivery USING btree (destination_id, state, id DESC);

--
-- Name: ix_destination_delivery_scope_order; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_destination_delivery_scope_order ON wharf.destination_delivery USING btree (destination_id, scope_key, event_id) WHERE ((state = ANY (ARRAY['QUEUED'::text, 'LEASED'::text])) AND ordered);

--
-- Name: ix_destination_rule_connection; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_destination_rule_connection ON wharf.destination_rule USING btree (connection_id) WHERE (connection_id IS NOT NULL);

--
-- Name: ix_destination_rule_destination; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_destination_rule_destination ON wharf.destination_rule USING btree (destination_id);

--
-- Name: ix_destination_rule_workspace; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_destination_rule_workspace ON wharf.destination_rule USING btree (workspace_id);

--
-- Name: ix_failure_minute_minute; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_failure_minute_minute ON wharf.failure_minute USING btree (minute);

--
-- Name: ix_issue_failure_hour_purge; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_issue_failure_hour_purge ON wharf.issue_failure_hour USING btree (hour);

--
-- Name: ix_issue_seen; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_issue_seen ON wharf.issue USING btree (last_seen_at);

--
-- Name: ix_issue_workspace_seen; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_issue_workspace_seen ON wharf.issue USING btree (workspace_id, last_seen_at DESC);

--
-- Name: ix_provider_event_body_dedupe; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_provider_event_body_dedupe ON wharf.provider_event USING btree (source, body_sha256) WHERE (body_sha256 IS NOT NULL);

--
-- Name: ix_provider_event_dead; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_provider_event_dead ON wharf.provider_event USING btree (workspace_id, id) WHERE (dead_at IS NOT NULL);

--
-- Name: ix_provider_event_received; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_provider_event_received ON wharf.provider_event USING btree (received_at);

--
-- Name: ix_provider_event_scope_order; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_provider_event_scope_order ON wharf.provider_event USING btree (scope_key, id);

--
-- Name: ix_provider_event_workspace_recent; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_provider_event_workspace_recent ON wharf.provider_event USING btree (workspace_id, id);

--
-- Name: ix_replay_audit_at; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_replay_audit_at ON wharf.replay_audit USING btree (at);

--
-- Name: ix_scope_action_after_lease; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_scope_action_after_lease ON wharf.scope_action USING btree (event_id, after_lease_epoch) WHERE (after_lease_epoch IS NOT NULL);

--
-- Name: ix_scope_action_at; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_scope_action_at ON wharf.scope_action USING btree (at);

--
-- Name: ix_scope_action_workspace; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_scope_action_workspace ON wharf.scope_action USING btree (workspace_id, id DESC);

--
-- Name: ix_scope_claim; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_scope_claim ON wharf.scope USING btree (head_kind, ready_at, head_id) WHERE ((head_id IS NOT NULL) AND (leased_id IS NULL) AND active);

--
-- Name: ix_scope_failing; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_scope_failing ON wharf.scope USING btree (failing_since) WHERE (failing_since IS NOT NULL);

--
-- Name: ix_subscription_recipients; Type: INDEX; Schema: wharf; Owner: -
--

CREATE INDEX ix_subscription_recipients ON wharf.subscription USING btree (subject, connection_id);

--
-- Name: uq_api_token_hash; Type: INDEX; Schema: wharf; Owner: -
--

CREATE UNIQUE INDEX uq_api_token_hash ON wharf.api_token USING btree (token_hash);

--
-- Name: uq_api_token_live_name; Type: INDEX; Schema: wharf; Owner: -
--

CREATE UNIQUE INDEX uq_api_token_live_name ON wharf.api_token USING btree (workspace_id, name) WHERE (revoked_at IS NULL);

--
-- Name: uq_connection_installation; Type: INDEX; Schema: wharf; Owner: -
--

CREATE UNIQUE INDEX uq_connection_installation ON wharf.connection USING btree (provider, source, kind, external_id) WHERE (kind = ANY (ARRAY['app_installation'::text, 'slack_team'::text]));

--
-- Name: uq_connection_natural_key; Type: INDEX; Schema: wharf; Owner: -
--

CREATE UNIQUE INDEX uq_connection_natural_key ON wharf.connection USING btree (workspace_id, provider, source, kind, external_id) NULLS NOT DISTINCT;

--
-- Name: uq_destination_delivery_leased_scope; Type: INDEX; Schema: wharf; Owner: -
--

CREATE UNIQUE INDEX uq_destination_delivery_leased_scope ON wharf.destination_delivery USING btree (destination_id, scope_key) WHERE ((state = 'LEASED'::text) AND ordered);

--
-- Name: uq_failure_minute; Type: INDEX; Schema: wharf; Owner: -
--

CREATE UNIQUE INDEX uq_failure_minute ON wharf.failure_minute USING btree (workspace_id, minute) NULLS NOT DISTINCT;

--
-- Name: uq_issue_key; Type: INDEX; Schema: wharf; Owner: -
--

CREATE UNIQUE INDEX uq_issue_key ON wharf.issue USING btree (workspace_id, provider, event_type, error_class, fingerprint) NULLS NOT DISTINCT;

--
-- Name: uq_provider_event_delivery; Type: INDEX; Schema: wharf; Owner: -
--

CREATE UNIQUE INDEX uq_provider_event_delivery ON wharf.provider_event USING btree (workspace_id, provider, delivery_key) NULLS NOT DISTINCT;

--
-- Name: destination_delivery destination_delivery_promote_after_delete; Type: TRIGGER; Schema: wharf; Owner: -
--

CREATE TRIGGER destination_delivery_promote_after_delete AFTER DELETE ON wharf.destination_delivery REFERENCING OLD TABLE AS deliveries_deleted FOR EACH STATEMENT EXECUTE FUNCTION wharf.promote_after_deleted_deliveries();

--
-- Name: event_attempt event_attempt_count_issues; Type: TRIGGER; Schema: wharf; Owner: -
--

CREATE TRIGGER event_attempt_count_issues AFTER INSERT ON wharf.event_attempt REFERENCING NEW TABLE AS attempts_added FOR EACH STATEMENT EXECUTE FUNCTION wharf.count_failures_into_issues();

--
-- Name: issue issue_chart_counted; Type: TRIGGER; Schema: wharf; Owner: -
--

CREATE TRIGGER issue_chart_counted AFTER UPDATE OF failures, dead ON wharf.issue FOR EACH ROW WHEN (((new.failures > old.failures) OR (new.dead > old.dead))) EXECUTE FUNCTION wharf.chart_issue_failures();

--
-- Name: issue issue_chart_new; Type: TRIGGER; Schema: wharf; Owner: -
--

CREATE TRIGGER issue_chart_new AFTER INSERT ON wharf.issue FOR EACH ROW WHEN ((new.failures > 0)) EXECUTE FUNCTION wharf.chart_issue_failures();

--
-- Name: provider_event provider_event_keep_scope_delete; Type: TRIGGER; Schema: wharf; Owner: -
--

CREATE TRIGGER provider_event_keep_scope_delete AFTER DELETE ON wharf.provider_event FOR EACH ROW WHEN ((old.state = ANY (ARRAY['QUEUED'::text, 'LEASED'::text]))) EXECUTE FUNCTION wharf.keep_scope_heads();

--
-- Name: provider_event provider_event_keep_scope_insert; Type: TRIGGER; Schema: wharf; Owner: -
--

CREATE TRIGGER provider_event_keep_scope_insert AFTER INSERT ON wharf.provider_event FOR EACH ROW WHEN (((new.state = ANY (ARRAY['QUEUED'::text, 'LEASED'::text])) AND (current_setting('wharf.keeping_scopes'::text, true) IS DISTINCT FROM 'on'::text))) EXECUTE FUNCTION wharf.keep_scope_heads();

--
-- Name: provider_event provider_event_keep_scope_update; Type: TRIGGER; Schema: wharf; Owner: -
--

CREATE TRIGGER provider_event_keep_scope_update AFTER UPDATE ON wharf.provider_event FOR EACH ROW WHEN ((((old.state IS DISTINCT FROM new.state) OR (old.scope_key IS DISTINCT FROM new.scope_key) OR ((new.state = 'QUEUED'::text) AND (old.next_attempt_at IS DISTINCT FROM new.next_attempt_at))) AND (current_setting('wharf.keeping_scopes'::text, true) IS DISTINCT FROM 'on'::text))) EXECUTE FUNCTION wharf.keep_scope_heads();

--
-- Name: workspace workspace_sync_scope_activity; Type: TRIGGER; Schema: wharf; Owner: -
--

CREATE TRIGGER workspace_sync_scope_activity AFTER UPDATE OF state ON wharf.workspace FOR EACH ROW WHEN ((old.state IS DISTINCT FROM new.state)) EXECUTE FUNCTION wharf.sync_scope_activity();

--
-- Name: alert alert_rule_id_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.alert
    ADD CONSTRAINT alert_rule_id_fkey FOREIGN KEY (rule_id) REFERENCES wharf.alert_rule(id) ON DELETE CASCADE;

--
-- Name: alert_rule alert_rule_workspace_id_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.alert_rule
    ADD CONSTRAINT alert_rule_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES wharf.workspace(id) ON DELETE CASCADE;

--
-- Name: api_token api_token_workspace_id_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.api_token
    ADD CONSTRAINT api_token_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES wharf.workspace(id) ON DELETE CASCADE;

--
-- Name: bulk_replay bulk_replay_workspace_id_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.bulk_replay
    ADD CONSTRAINT bulk_replay_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES wharf.workspace(id) ON DELETE CASCADE;

--
-- Name: connection connection_provider_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.connection
    ADD CONSTRAINT connection_provider_fkey FOREIGN KEY (provider) REFERENCES wharf.provider(name);

--
-- Name: connection_secret connection_secret_connection_id_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.connection_secret
    ADD CONSTRAINT connection_secret_connection_id_fkey FOREIGN KEY (connection_id) REFERENCES wharf.connection(id) ON DELETE CASCADE;

--
-- Name: connection connection_workspace_id_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.connection
    ADD CONSTRAINT connection_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES wharf.workspace(id) ON DELETE CASCADE;

--
-- Name: delivery_attempt delivery_attempt_delivery_id_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.delivery_attempt
    ADD CONSTRAINT delivery_attempt_delivery_id_fkey FOREIGN KEY (delivery_id) REFERENCES wharf.destination_delivery(id) ON DELETE CASCADE;

--
-- Name: destination_delivery destination_delivery_destination_id_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.destination_delivery
    ADD CONSTRAINT destination_delivery_destination_id_fkey FOREIGN KEY (destination_id) REFERENCES wharf.destination(id) ON DELETE CASCADE;

--
-- Name: destination_delivery destination_delivery_event_id_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.destination_delivery
    ADD CONSTRAINT destination_delivery_event_id_fkey FOREIGN KEY (event_id) REFERENCES wharf.provider_event(id) ON DELETE CASCADE;

--
-- Name: destination_rule destination_rule_connection_id_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.destination_rule
    ADD CONSTRAINT destination_rule_connection_id_fkey FOREIGN KEY (connection_id) REFERENCES wharf.connection(id) ON DELETE CASCADE;

--
-- Name: destination_rule destination_rule_destination_id_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.destination_rule
    ADD CONSTRAINT destination_rule_destination_id_fkey FOREIGN KEY (destination_id) REFERENCES wharf.destination(id) ON DELETE CASCADE;

--
-- Name: destination_rule destination_rule_workspace_id_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.destination_rule
    ADD CONSTRAINT destination_rule_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES wharf.workspace(id) ON DELETE CASCADE;

--
-- Name: destination destination_workspace_id_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.destination
    ADD CONSTRAINT destination_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES wharf.workspace(id) ON DELETE CASCADE;

--
-- Name: event_attempt event_attempt_event_id_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.event_attempt
    ADD CONSTRAINT event_attempt_event_id_fkey FOREIGN KEY (event_id) REFERENCES wharf.provider_event(id) ON DELETE CASCADE;

--
-- Name: failure_minute failure_minute_workspace_id_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.failure_minute
    ADD CONSTRAINT failure_minute_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES wharf.workspace(id) ON DELETE CASCADE;

--
-- Name: issue_failure_hour issue_failure_hour_issue_id_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.issue_failure_hour
    ADD CONSTRAINT issue_failure_hour_issue_id_fkey FOREIGN KEY (issue_id) REFERENCES wharf.issue(id) ON DELETE CASCADE;

--
-- Name: issue issue_workspace_id_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.issue
    ADD CONSTRAINT issue_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES wharf.workspace(id) ON DELETE CASCADE;

--
-- Name: provider_event_step provider_event_step_event_id_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.provider_event_step
    ADD CONSTRAINT provider_event_step_event_id_fkey FOREIGN KEY (event_id) REFERENCES wharf.provider_event(id) ON DELETE CASCADE;

--
-- Name: provider_event provider_event_workspace_id_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.provider_event
    ADD CONSTRAINT provider_event_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES wharf.workspace(id) ON DELETE CASCADE;

--
-- Name: redelivery_request redelivery_request_app_id_source_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.redelivery_request
    ADD CONSTRAINT redelivery_request_app_id_source_fkey FOREIGN KEY (app_id, source) REFERENCES wharf.redelivery_sweep(app_id, source) ON DELETE CASCADE;

--
-- Name: redelivery_seen redelivery_seen_app_id_source_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.redelivery_seen
    ADD CONSTRAINT redelivery_seen_app_id_source_fkey FOREIGN KEY (app_id, source) REFERENCES wharf.redelivery_sweep(app_id, source) ON DELETE CASCADE;

--
-- Name: rule_filtered_minute rule_filtered_minute_rule_id_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.rule_filtered_minute
    ADD CONSTRAINT rule_filtered_minute_rule_id_fkey FOREIGN KEY (rule_id) REFERENCES wharf.destination_rule(id) ON DELETE CASCADE;

--
-- Name: scope_action scope_action_workspace_id_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.scope_action
    ADD CONSTRAINT scope_action_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES wharf.workspace(id) ON DELETE CASCADE;

--
-- Name: scope scope_workspace_id_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.scope
    ADD CONSTRAINT scope_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES wharf.workspace(id) ON DELETE CASCADE;

--
-- Name: subscription subscription_connection_id_fkey; Type: FK CONSTRAINT; Schema: wharf; Owner: -
--

ALTER TABLE ONLY wharf.subscription
    ADD CONSTRAINT subscription_connection_id_fkey FOREIGN KEY (connection_id) REFERENCES wharf.connection(id) ON DELETE CASCADE;

--
-- Name: FUNCTION abandon_sweep(p_app_id bigint, p_source text, p_token uuid, p_error text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.abandon_sweep(p_app_id bigint, p_source text, p_token uuid, p_error text) FROM PUBLIC;

--
-- Name: FUNCTION admit(p_provider text, p_source text, p_delivery_key text, p_event_type text, p_route jsonb, p_subjects text[], p_payload jsonb, p_headers jsonb, p_body_sha256 text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.admit(p_provider text, p_source text, p_delivery_key text, p_event_type text, p_route jsonb, p_subjects text[], p_payload jsonb, p_headers jsonb, p_body_sha256 text) FROM PUBLIC;

--
-- Name: FUNCTION admit_many(p_deliveries jsonb); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.admit_many(p_deliveries jsonb) FROM PUBLIC;

--
-- Name: FUNCTION advance_sweep(p_app_id bigint, p_source text, p_token uuid, p_cursor text, p_lease interval); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.advance_sweep(p_app_id bigint, p_source text, p_token uuid, p_cursor text, p_lease interval) FROM PUBLIC;

--
-- Name: FUNCTION begin_sweep(p_app_id bigint, p_source text, p_holder text, p_lease interval, p_since timestamp with time zone, p_overlap interval, p_first_lookback interval); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.begin_sweep(p_app_id bigint, p_source text, p_holder text, p_lease interval, p_since timestamp with time zone, p_overlap interval, p_first_lookback interval) FROM PUBLIC;

--
-- Name: FUNCTION cancel_bulk_replay(p_workspace_id bigint, p_id bigint, p_account text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.cancel_bulk_replay(p_workspace_id bigint, p_id bigint, p_account text) FROM PUBLIC;

--
-- Name: FUNCTION claim(p_worker text, p_max integer, p_handles text[]); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.claim(p_worker text, p_max integer, p_handles text[]) FROM PUBLIC;

--
-- Name: FUNCTION claim_deliveries(p_worker text, p_max integer, p_ahead integer); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.claim_deliveries(p_worker text, p_max integer, p_ahead integer) FROM PUBLIC;

--
-- Name: FUNCTION complete(p_id bigint, p_epoch bigint, p_outcome text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.complete(p_id bigint, p_epoch bigint, p_outcome text) FROM PUBLIC;

--
-- Name: FUNCTION complete_deliveries(p_ids bigint[], p_epochs bigint[], p_statuses integer[], p_durations_ms integer[], p_responses text[]); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.complete_deliveries(p_ids bigint[], p_epochs bigint[], p_statuses integer[], p_durations_ms integer[], p_responses text[]) FROM PUBLIC;

--
-- Name: FUNCTION complete_delivery(p_id bigint, p_epoch bigint, p_status integer, p_duration_ms integer, p_response text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.complete_delivery(p_id bigint, p_epoch bigint, p_status integer, p_duration_ms integer, p_response text) FROM PUBLIC;

--
-- Name: FUNCTION complete_many(p_ids bigint[], p_epochs bigint[], p_outcomes text[]); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.complete_many(p_ids bigint[], p_epochs bigint[], p_outcomes text[]) FROM PUBLIC;

--
-- Name: FUNCTION connection_endpoint(p_connection_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.connection_endpoint(p_connection_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION continue_bulk_replay(p_workspace_id bigint, p_id bigint, p_batch integer); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.continue_bulk_replay(p_workspace_id bigint, p_id bigint, p_batch integer) FROM PUBLIC;

--
-- Name: FUNCTION count_bulk_replay(p_workspace_id bigint, p_filter jsonb, p_force boolean); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.count_bulk_replay(p_workspace_id bigint, p_filter jsonb, p_force boolean) FROM PUBLIC;

--
-- Name: FUNCTION count_dead_deliveries(p_workspace_id bigint, p_destination_id bigint, p_filter jsonb); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.count_dead_deliveries(p_workspace_id bigint, p_destination_id bigint, p_filter jsonb) FROM PUBLIC;

--
-- Name: FUNCTION create_alert_rule(p_workspace_id bigint, p_name text, p_kind text, p_threshold integer, p_window_seconds integer, p_destination text, p_url text, p_secret text, p_account text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.create_alert_rule(p_workspace_id bigint, p_name text, p_kind text, p_threshold integer, p_window_seconds integer, p_destination text, p_url text, p_secret text, p_account text) FROM PUBLIC;

--
-- Name: FUNCTION create_destination(p_workspace_id bigint, p_spec jsonb); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.create_destination(p_workspace_id bigint, p_spec jsonb) FROM PUBLIC;

--
-- Name: FUNCTION create_destination_rule(p_workspace_id bigint, p_spec jsonb); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.create_destination_rule(p_workspace_id bigint, p_spec jsonb) FROM PUBLIC;

--
-- Name: FUNCTION create_instance_alert_rule(p_name text, p_kind text, p_threshold integer, p_window_seconds integer, p_destination text, p_url text, p_secret text, p_account text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.create_instance_alert_rule(p_name text, p_kind text, p_threshold integer, p_window_seconds integer, p_destination text, p_url text, p_secret text, p_account text) FROM PUBLIC;

--
-- Name: FUNCTION create_token(p_workspace_id bigint, p_name text, p_token_hash bytea); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.create_token(p_workspace_id bigint, p_name text, p_token_hash bytea) FROM PUBLIC;

--
-- Name: FUNCTION dead_letter_scope_head(p_workspace_id bigint, p_scope_key text, p_event_id bigint, p_account text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.dead_letter_scope_head(p_workspace_id bigint, p_scope_key text, p_event_id bigint, p_account text) FROM PUBLIC;

--
-- Name: FUNCTION delete_alert_rule(p_workspace_id bigint, p_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.delete_alert_rule(p_workspace_id bigint, p_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION delete_destination(p_workspace_id bigint, p_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.delete_destination(p_workspace_id bigint, p_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION delete_destination_rule(p_workspace_id bigint, p_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.delete_destination_rule(p_workspace_id bigint, p_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION delivery_gauges(p_minute timestamp with time zone, p_top integer); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.delivery_gauges(p_minute timestamp with time zone, p_top integer) FROM PUBLIC;

--
-- Name: FUNCTION delivery_history(p_workspace_id bigint, p_hours integer); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.delivery_history(p_workspace_id bigint, p_hours integer) FROM PUBLIC;

--
-- Name: FUNCTION due_alerts(p_token uuid, p_limit integer); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.due_alerts(p_token uuid, p_limit integer) FROM PUBLIC;

--
-- Name: FUNCTION edit_alert_rule(p_workspace_id bigint, p_id bigint, p_name text, p_kind text, p_threshold integer, p_window_seconds integer, p_destination text, p_url text, p_secret text, p_account text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.edit_alert_rule(p_workspace_id bigint, p_id bigint, p_name text, p_kind text, p_threshold integer, p_window_seconds integer, p_destination text, p_url text, p_secret text, p_account text) FROM PUBLIC;

--
-- Name: FUNCTION evaluate_alert_rules(p_token uuid); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.evaluate_alert_rules(p_token uuid) FROM PUBLIC;

--
-- Name: FUNCTION event_deliveries(p_workspace_id bigint, p_event_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.event_deliveries(p_workspace_id bigint, p_event_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION fail(p_id bigint, p_epoch bigint, p_kind text, p_error_class text, p_frames text[]); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.fail(p_id bigint, p_epoch bigint, p_kind text, p_error_class text, p_frames text[]) FROM PUBLIC;

--
-- Name: FUNCTION fail_delivery(p_id bigint, p_epoch bigint, p_kind text, p_error_class text, p_status integer, p_duration_ms integer, p_response text, p_retry_after interval); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.fail_delivery(p_id bigint, p_epoch bigint, p_kind text, p_error_class text, p_status integer, p_duration_ms integer, p_response text, p_retry_after interval) FROM PUBLIC;

--
-- Name: FUNCTION failure_history(p_workspace_id bigint, p_hours integer); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.failure_history(p_workspace_id bigint, p_hours integer) FROM PUBLIC;

--
-- Name: FUNCTION fence(p_id bigint, p_epoch bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.fence(p_id bigint, p_epoch bigint) FROM PUBLIC;

--
-- Name: FUNCTION fence(p_id bigint, p_epoch bigint, p_lease_token uuid); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.fence(p_id bigint, p_epoch bigint, p_lease_token uuid) FROM PUBLIC;

--
-- Name: FUNCTION finish_sweep(p_app_id bigint, p_source text, p_token uuid); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.finish_sweep(p_app_id bigint, p_source text, p_token uuid) FROM PUBLIC;

--
-- Name: FUNCTION held_sweep(p_app_id bigint, p_source text, p_token uuid); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.held_sweep(p_app_id bigint, p_source text, p_token uuid) FROM PUBLIC;

--
-- Name: FUNCTION issue_events(p_workspace_id bigint, p_id bigint, p_limit integer, p_before_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.issue_events(p_workspace_id bigint, p_id bigint, p_limit integer, p_before_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION issue_gauges(); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.issue_gauges() FROM PUBLIC;

--
-- Name: FUNCTION issue_history(p_workspace_id bigint, p_id bigint, p_hours integer); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.issue_history(p_workspace_id bigint, p_id bigint, p_hours integer) FROM PUBLIC;

--
-- Name: FUNCTION list_admissions(p_workspace_id bigint, p_limit integer, p_before_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.list_admissions(p_workspace_id bigint, p_limit integer, p_before_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION list_alert_rules(p_workspace_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.list_alert_rules(p_workspace_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION list_alerts(p_workspace_id bigint, p_limit integer); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.list_alerts(p_workspace_id bigint, p_limit integer) FROM PUBLIC;

--
-- Name: FUNCTION list_all_admissions(p_limit integer, p_before_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.list_all_admissions(p_limit integer, p_before_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION list_bulk_replays(p_workspace_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.list_bulk_replays(p_workspace_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION list_connections(p_workspace_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.list_connections(p_workspace_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION list_dead(p_workspace_id bigint, p_subject text, p_limit integer, p_before_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.list_dead(p_workspace_id bigint, p_subject text, p_limit integer, p_before_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION list_deliveries(p_workspace_id bigint, p_destination_id bigint, p_state text, p_limit integer, p_before_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.list_deliveries(p_workspace_id bigint, p_destination_id bigint, p_state text, p_limit integer, p_before_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION list_destination_rules(p_workspace_id bigint, p_destination_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.list_destination_rules(p_workspace_id bigint, p_destination_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION list_destinations(p_workspace_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.list_destinations(p_workspace_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION list_events(p_workspace_id bigint, p_state text, p_subject text, p_limit integer, p_before_id bigint, p_provider text, p_event_type text, p_received_after timestamp with time zone, p_received_before timestamp with time zone); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.list_events(p_workspace_id bigint, p_state text, p_subject text, p_limit integer, p_before_id bigint, p_provider text, p_event_type text, p_received_after timestamp with time zone, p_received_before timestamp with time zone) FROM PUBLIC;

--
-- Name: FUNCTION list_installation_dead(p_subject text, p_limit integer, p_before_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.list_installation_dead(p_subject text, p_limit integer, p_before_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION list_installation_events(p_state text, p_subject text, p_limit integer, p_before_id bigint, p_provider text, p_event_type text, p_received_after timestamp with time zone, p_received_before timestamp with time zone); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.list_installation_events(p_state text, p_subject text, p_limit integer, p_before_id bigint, p_provider text, p_event_type text, p_received_after timestamp with time zone, p_received_before timestamp with time zone) FROM PUBLIC;

--
-- Name: FUNCTION list_installation_issues(p_status text, p_limit integer); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.list_installation_issues(p_status text, p_limit integer) FROM PUBLIC;

--
-- Name: FUNCTION list_instance_alert_rules(); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.list_instance_alert_rules() FROM PUBLIC;

--
-- Name: FUNCTION list_issues(p_workspace_id bigint, p_status text, p_limit integer); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.list_issues(p_workspace_id bigint, p_status text, p_limit integer) FROM PUBLIC;

--
-- Name: FUNCTION list_scope_actions(p_workspace_id bigint, p_limit integer); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.list_scope_actions(p_workspace_id bigint, p_limit integer) FROM PUBLIC;

--
-- Name: FUNCTION list_stuck_scopes(p_workspace_id bigint, p_older_than interval, p_limit integer); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.list_stuck_scopes(p_workspace_id bigint, p_older_than interval, p_limit integer) FROM PUBLIC;

--
-- Name: FUNCTION list_tokens(p_workspace_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.list_tokens(p_workspace_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION list_workspaces(); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.list_workspaces() FROM PUBLIC;

--
-- Name: FUNCTION live_token_hashes(); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.live_token_hashes() FROM PUBLIC;

--
-- Name: FUNCTION mark_busy(p_listener text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.mark_busy(p_listener text) FROM PUBLIC;

--
-- Name: FUNCTION mark_idle(p_listener text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.mark_idle(p_listener text) FROM PUBLIC;

--
-- Name: FUNCTION missing_deliveries(p_provider text, p_source text, p_delivery_keys text[]); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.missing_deliveries(p_provider text, p_source text, p_delivery_keys text[]) FROM PUBLIC;

--
-- Name: FUNCTION next_delivery_at(); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.next_delivery_at() FROM PUBLIC;

--
-- Name: FUNCTION next_due_at(); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.next_due_at() FROM PUBLIC;

--
-- Name: FUNCTION pause_scope_connection(p_workspace_id bigint, p_scope_key text, p_event_id bigint, p_account text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.pause_scope_connection(p_workspace_id bigint, p_scope_key text, p_event_id bigint, p_account text) FROM PUBLIC;

--
-- Name: FUNCTION purge(OUT done_deleted bigint, OUT dead_deleted bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.purge(OUT done_deleted bigint, OUT dead_deleted bigint) FROM PUBLIC;

--
-- Name: FUNCTION purge_alerts(p_batch integer); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.purge_alerts(p_batch integer) FROM PUBLIC;

--
-- Name: FUNCTION purge_issues(p_batch integer); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.purge_issues(p_batch integer) FROM PUBLIC;

--
-- Name: FUNCTION purge_logs(); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.purge_logs() FROM PUBLIC;

--
-- Name: FUNCTION purge_scope_actions(p_batch integer); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.purge_scope_actions(p_batch integer) FROM PUBLIC;

--
-- Name: FUNCTION queue_history(p_workspace_id bigint, p_hours integer); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.queue_history(p_workspace_id bigint, p_hours integer) FROM PUBLIC;

--
-- Name: FUNCTION queue_stats(OUT depth_by_state jsonb, OUT oldest_due_age double precision, OUT depth_estimated boolean, OUT stuck_scopes bigint, OUT oldest_stuck_age double precision); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.queue_stats(OUT depth_by_state jsonb, OUT oldest_due_age double precision, OUT depth_estimated boolean, OUT stuck_scopes bigint, OUT oldest_stuck_age double precision) FROM PUBLIC;

--
-- Name: FUNCTION reap(); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.reap() FROM PUBLIC;

--
-- Name: FUNCTION reap_deliveries(); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.reap_deliveries() FROM PUBLIC;

--
-- Name: FUNCTION record_alert_attempt(p_token uuid, p_id bigint, p_delivered boolean, p_status integer, p_error text, p_base_delay interval); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.record_alert_attempt(p_token uuid, p_id bigint, p_delivered boolean, p_status integer, p_error text, p_base_delay interval) FROM PUBLIC;

--
-- Name: FUNCTION release(p_id bigint, p_epoch bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.release(p_id bigint, p_epoch bigint) FROM PUBLIC;

--
-- Name: FUNCTION release_alert_sender(p_token uuid); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.release_alert_sender(p_token uuid) FROM PUBLIC;

--
-- Name: FUNCTION release_delivery(p_id bigint, p_epoch bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.release_delivery(p_id bigint, p_epoch bigint) FROM PUBLIC;

--
-- Name: FUNCTION renew(p_id bigint, p_epoch bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.renew(p_id bigint, p_epoch bigint) FROM PUBLIC;

--
-- Name: FUNCTION renew_sweep(p_app_id bigint, p_source text, p_token uuid, p_lease interval); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.renew_sweep(p_app_id bigint, p_source text, p_token uuid, p_lease interval) FROM PUBLIC;

--
-- Name: FUNCTION replace_signing_key_ciphertext(p_connection_id bigint, p_from text, p_to text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.replace_signing_key_ciphertext(p_connection_id bigint, p_from text, p_to text) FROM PUBLIC;

--
-- Name: FUNCTION replay(p_workspace_id bigint, p_id bigint, p_account text, p_force boolean); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.replay(p_workspace_id bigint, p_id bigint, p_account text, p_force boolean) FROM PUBLIC;

--
-- Name: FUNCTION replay_deliveries(p_workspace_id bigint, p_destination_id bigint, p_filter jsonb, p_account text, p_batch integer); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.replay_deliveries(p_workspace_id bigint, p_destination_id bigint, p_filter jsonb, p_account text, p_batch integer) FROM PUBLIC;

--
-- Name: FUNCTION replay_delivery(p_workspace_id bigint, p_id bigint, p_account text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.replay_delivery(p_workspace_id bigint, p_id bigint, p_account text) FROM PUBLIC;

--
-- Name: FUNCTION replay_installation(p_id bigint, p_account text, p_force boolean); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.replay_installation(p_id bigint, p_account text, p_force boolean) FROM PUBLIC;

--
-- Name: FUNCTION request_redelivery(p_app_id bigint, p_source text, p_token uuid, p_guid text, p_delivery_id bigint, p_stale interval, p_max_asks integer); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.request_redelivery(p_app_id bigint, p_source text, p_token uuid, p_guid text, p_delivery_id bigint, p_stale interval, p_max_asks integer) FROM PUBLIC;

--
-- Name: FUNCTION reset_claim_lines(); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.reset_claim_lines() FROM PUBLIC;

--
-- Name: FUNCTION retry_scope_head(p_workspace_id bigint, p_scope_key text, p_event_id bigint, p_account text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.retry_scope_head(p_workspace_id bigint, p_scope_key text, p_event_id bigint, p_account text) FROM PUBLIC;

--
-- Name: FUNCTION revoke_token(p_workspace_id bigint, p_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.revoke_token(p_workspace_id bigint, p_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION search_events(p_workspace_id bigint, p_payload jsonb, p_headers jsonb, p_state text, p_subject text, p_limit integer, p_before_id bigint, p_provider text, p_event_type text, p_received_after timestamp with time zone, p_received_before timestamp with time zone); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.search_events(p_workspace_id bigint, p_payload jsonb, p_headers jsonb, p_state text, p_subject text, p_limit integer, p_before_id bigint, p_provider text, p_event_type text, p_received_after timestamp with time zone, p_received_before timestamp with time zone) FROM PUBLIC;

--
-- Name: FUNCTION send_test_alert(p_workspace_id bigint, p_id bigint, p_account text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.send_test_alert(p_workspace_id bigint, p_id bigint, p_account text) FROM PUBLIC;

--
-- Name: FUNCTION set_connection_secret(p_connection_id bigint, p_secret text, p_keep_previous boolean); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.set_connection_secret(p_connection_id bigint, p_secret text, p_keep_previous boolean) FROM PUBLIC;

--
-- Name: FUNCTION set_connection_state(p_id bigint, p_state text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.set_connection_state(p_id bigint, p_state text) FROM PUBLIC;

--
-- Name: FUNCTION set_destination_credentials(p_workspace_id bigint, p_id bigint, p_sealed text, p_type text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.set_destination_credentials(p_workspace_id bigint, p_id bigint, p_sealed text, p_type text) FROM PUBLIC;

--
-- Name: FUNCTION set_destination_secret(p_workspace_id bigint, p_id bigint, p_sealed text, p_keep_previous boolean, p_overlap interval); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.set_destination_secret(p_workspace_id bigint, p_id bigint, p_sealed text, p_keep_previous boolean, p_overlap interval) FROM PUBLIC;

--
-- Name: FUNCTION set_destination_state(p_workspace_id bigint, p_id bigint, p_state text, p_account text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.set_destination_state(p_workspace_id bigint, p_id bigint, p_state text, p_account text) FROM PUBLIC;

--
-- Name: FUNCTION set_installation_issue_status(p_id bigint, p_status text, p_account text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.set_installation_issue_status(p_id bigint, p_status text, p_account text) FROM PUBLIC;

--
-- Name: FUNCTION set_issue_status(p_workspace_id bigint, p_id bigint, p_status text, p_account text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.set_issue_status(p_workspace_id bigint, p_id bigint, p_status text, p_account text) FROM PUBLIC;

--
-- Name: FUNCTION set_workspace_state(p_id bigint, p_state text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.set_workspace_state(p_id bigint, p_state text) FROM PUBLIC;

--
-- Name: FUNCTION settle_redelivery(p_app_id bigint, p_source text, p_token uuid, p_guid text, p_delivery_id bigint, p_outcome text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.settle_redelivery(p_app_id bigint, p_source text, p_token uuid, p_guid text, p_delivery_id bigint, p_outcome text) FROM PUBLIC;

--
-- Name: FUNCTION show_bulk_replay(p_workspace_id bigint, p_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.show_bulk_replay(p_workspace_id bigint, p_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION show_connection(p_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.show_connection(p_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION show_delivery(p_workspace_id bigint, p_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.show_delivery(p_workspace_id bigint, p_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION show_destination(p_workspace_id bigint, p_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.show_destination(p_workspace_id bigint, p_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION show_event(p_workspace_id bigint, p_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.show_event(p_workspace_id bigint, p_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION show_installation_event(p_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.show_installation_event(p_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION show_issue(p_workspace_id bigint, p_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.show_issue(p_workspace_id bigint, p_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION show_workspace(p_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.show_workspace(p_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION start_bulk_replay(p_workspace_id bigint, p_filter jsonb, p_account text, p_force boolean); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.start_bulk_replay(p_workspace_id bigint, p_filter jsonb, p_account text, p_force boolean) FROM PUBLIC;

--
-- Name: FUNCTION step(p_id bigint, p_epoch bigint, p_step_name text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.step(p_id bigint, p_epoch bigint, p_step_name text) FROM PUBLIC;

--
-- Name: FUNCTION step(p_id bigint, p_epoch bigint, p_step_name text, p_lease_token uuid); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.step(p_id bigint, p_epoch bigint, p_step_name text, p_lease_token uuid) FROM PUBLIC;

--
-- Name: FUNCTION stored_signing_keys(); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.stored_signing_keys() FROM PUBLIC;

--
-- Name: FUNCTION subscribe(p_connection_id bigint, p_subject text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.subscribe(p_connection_id bigint, p_subject text) FROM PUBLIC;

--
-- Name: FUNCTION sweep_page(p_app_id bigint, p_source text, p_token uuid, p_deliveries jsonb, p_last boolean); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.sweep_page(p_app_id bigint, p_source text, p_token uuid, p_deliveries jsonb, p_last boolean) FROM PUBLIC;

--
-- Name: FUNCTION sweep_status(p_app_id bigint, p_source text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.sweep_status(p_app_id bigint, p_source text) FROM PUBLIC;

--
-- Name: FUNCTION take_alert_sender(p_holder text, p_lease interval, p_token uuid); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.take_alert_sender(p_holder text, p_lease interval, p_token uuid) FROM PUBLIC;

--
-- Name: FUNCTION test_destination_filter(p_workspace_id bigint, p_filter jsonb, p_event_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.test_destination_filter(p_workspace_id bigint, p_filter jsonb, p_event_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION unsubscribe(p_connection_id bigint, p_subject text); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.unsubscribe(p_connection_id bigint, p_subject text) FROM PUBLIC;

--
-- Name: FUNCTION update_destination(p_workspace_id bigint, p_id bigint, p_spec jsonb); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.update_destination(p_workspace_id bigint, p_id bigint, p_spec jsonb) FROM PUBLIC;

--
-- Name: FUNCTION update_destination_rule(p_workspace_id bigint, p_id bigint, p_spec jsonb); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.update_destination_rule(p_workspace_id bigint, p_id bigint, p_spec jsonb) FROM PUBLIC;

--
-- Name: FUNCTION upsert_connection(p_workspace_id bigint, p_provider text, p_source text, p_kind text, p_external_id text, p_route jsonb); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.upsert_connection(p_workspace_id bigint, p_provider text, p_source text, p_kind text, p_external_id text, p_route jsonb) FROM PUBLIC;

--
-- Name: FUNCTION upsert_workspace(p_id bigint); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.upsert_workspace(p_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION validate_encrypted_secrets(); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.validate_encrypted_secrets() FROM PUBLIC;

--
-- Name: FUNCTION verify_token(p_token_hash bytea); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.verify_token(p_token_hash bytea) FROM PUBLIC;

--
-- Name: FUNCTION worker_settings(OUT renew_every double precision, OUT handler_timeout double precision, OUT poll_every double precision); Type: ACL; Schema: wharf; Owner: -
--

REVOKE ALL ON FUNCTION wharf.worker_settings(OUT renew_every double precision, OUT handler_timeout double precision, OUT poll_every double precision) FROM PUBLIC;

--
-- PostgreSQL database dump complete
--
