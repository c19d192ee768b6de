-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.admission_item(text,text,text,text,jsonb,text[],jsonb,jsonb,text,boolean)
--   new      function wharf.admission_rule_broken(text,text,text,text,jsonb,jsonb,text,boolean)
--   new      function wharf.provider_known(text)
--   changed  function wharf.admission_items(jsonb)
--   changed  function wharf.admit(text,text,text,text,jsonb,text[],jsonb,jsonb,text)
--   changed  function wharf.check_provider(text)
--   changed  function wharf.scope_workspace_active(bigint)
--   dropped  function wharf.admission_item(text,text,text,text,jsonb,text[],jsonb,jsonb,text)
--   dropped  function wharf.admission_rule_broken(text,text,text,text,jsonb,jsonb,text)

-- The grants of the functions dropped below, given again to the functions of the same name created after them.
CREATE TEMP TABLE wharf_release_grants ON COMMIT DROP AS
  SELECT p.proname::text AS name, a.grantee::regrole::text AS grantee
    FROM pg_proc p CROSS JOIN LATERAL aclexplode(p.proacl) a
   WHERE p.oid IN ('wharf.admission_item(text,text,text,text,jsonb,text[],jsonb,jsonb,text)'::regprocedure, 'wharf.admission_rule_broken(text,text,text,text,jsonb,jsonb,text)'::regprocedure)
     AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> p.proowner;

DROP FUNCTION wharf.admission_item(text,text,text,text,jsonb,text[],jsonb,jsonb,text);

DROP FUNCTION wharf.admission_rule_broken(text,text,text,text,jsonb,jsonb,text);

-- ======== sql/20-scope-heads.sql ========

-- Whether scopes of workspace p_workspace_id may be claimed from: it is
-- ACTIVE, or the scope is an installation scope (no workspace). plpgsql
-- for the plan it keeps per session (see wharf.provider_known): each
-- admission calls it twice.
CREATE OR REPLACE FUNCTION wharf.scope_workspace_active(p_workspace_id bigint) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN coalesce((SELECT w.state = 'ACTIVE' FROM wharf.workspace w WHERE w.id = p_workspace_id), true);
END $$;

-- ======== sql/70-connections.sql ========

-- Whether p_provider is one Wharf knows: a row of the registry
-- wharf.provider (its TypeScript twin is db/providers.ts); false for NULL.
-- plpgsql, not sql: a sql function holding a sub-select is never inlined
-- and is planned again in every transaction that calls it (with
-- scope_workspace_active, a quarter of an admission's instructions:
-- bench/RESULTS.md); a plpgsql one keeps its plan for the session.
CREATE OR REPLACE FUNCTION wharf.provider_known(p_provider text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN EXISTS (SELECT FROM wharf.provider WHERE name = p_provider);
END $$;

-- Raises 22023 unless p_provider is one Wharf knows (provider_known).
CREATE OR REPLACE FUNCTION wharf.check_provider(p_provider text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF NOT wharf.provider_known(p_provider) THEN
    RAISE EXCEPTION 'wharf: unknown provider %', coalesce(quote_literal(p_provider), 'NULL')
      USING ERRCODE = '22023';
  END IF;
END $$;

-- ======== sql/80-admission.sql ========

-- Which rule of admit's arguments a delivery breaks, if any: 1, a missing
-- argument; 2, an unknown provider; 3, a route that is not an object; 4, a
-- body digest that is not lower-case hex; 5, a delivery key or event type
-- longer than 255 characters (the edge's bound, and an index entry's).
-- p_provider_known: whether the registry holds the provider, looked up once
-- per delivery by the caller (admit: provider_known; admit_many: a join),
-- not here: admission_item asks for the rule twice. Expressions without FROM
-- or sub-select, so that the planner inlines them into their callers.
CREATE OR REPLACE FUNCTION wharf.admission_rule_broken(
  p_provider text, p_source text, p_delivery_key text, p_event_type text,
  p_route jsonb, p_payload jsonb, p_body_sha256 text, p_provider_known boolean)
RETURNS integer
LANGUAGE sql STABLE AS $$
  SELECT CASE
    WHEN p_provider IS NULL OR p_source IS NULL OR p_source = '' OR p_delivery_key IS NULL
         OR p_delivery_key = '' OR p_event_type IS NULL OR p_event_type = '' OR p_payload IS NULL THEN 1
    WHEN NOT p_provider_known THEN 2
    WHEN jsonb_typeof(coalesce(p_route, '{}')) <> 'object' THEN 3
    WHEN p_body_sha256 !~ '^[0-9a-f]{64}$' THEN 4
    WHEN length(p_delivery_key) > 255 OR length(p_event_type) > 255 THEN 5
  END
$$;

-- The delivery of admit's arguments as an admission_item, with the error
-- admit raises for it, if any (admission_rule_broken): 22004 for a missing
-- argument, 22023 for the others. Subjects lose NULLs and empty strings;
-- headers are kept without credentials (safe_headers). p_provider_known as
-- admission_rule_broken takes it.
CREATE OR REPLACE FUNCTION wharf.admission_item(
  p_provider text, p_source text, p_delivery_key text, p_event_type text,
  p_route jsonb, p_subjects text[], p_payload jsonb, p_headers jsonb, p_body_sha256 text,
  p_provider_known boolean)
RETURNS wharf.admission_item
LANGUAGE sql STABLE AS $$
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
$$;

-- The deliveries of admit_many's argument as items, in array order. An
-- element that is not an object, or whose subjects are not an array of
-- strings, gets 22023; everything else as admission_item decides. 22023 for
-- an argument that is not an array (nothing is admitted).
CREATE OR REPLACE FUNCTION wharf.admission_items(p_deliveries jsonb) RETURNS wharf.admission_item[]
LANGUAGE plpgsql STABLE AS $$
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
END $$;

-- Admits one verified delivery and returns its receipt:
--   {delivery_key, events: [{workspace_id, event_id, outcome}],
--    refused: [{connection_id, workspace_id, reason}], dropped: reason|null}
-- Raises 22004/22023 for missing or malformed arguments (admission_item;
-- nothing written) and WH409 when a connection changed while admission
-- waited for its lock (the edge answers 503 and the provider retries against
-- the current route). p_body_sha256 (hex), for providers that sign the body
-- alone (GitHub, Forgejo): a body already stored from this source within
-- replay_window is a duplicate, whatever delivery key or event type comes
-- with it. SECURITY DEFINER: the edge's role needs EXECUTE on this function.
--
-- The rules of admit_items for one delivery, statement by statement: for
-- one delivery a plan over arrays costs more to start than the statements it
-- saves (bench/RESULTS.md). A property test admits random arrays through
-- both and compares everything they write (test/sql/admit-many.test.ts).
CREATE OR REPLACE FUNCTION wharf.admit(
  p_provider text, p_source text, p_delivery_key text, p_event_type text,
  p_route jsonb, p_subjects text[], p_payload jsonb, p_headers jsonb, p_body_sha256 text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  -- A variable, not an argument expression: admission_item is inlined only
  -- while its arguments are cheap, and a call to provider_known is not.
  v_known    boolean := wharf.provider_known(p_provider);
  v_item     wharf.admission_item := wharf.admission_item(p_provider, p_source, p_delivery_key, p_event_type,
                                                           p_route, p_subjects, p_payload, p_headers, p_body_sha256,
                                                           v_known);
  v_route    jsonb := v_item.route;
  v_subject  text := v_item.subjects[1];
  v_source   wharf.connection;
  v_routes   wharf.admission_route[];
  v_first    wharf.admission_recipient[];  -- before the lifecycle locks
  v_locked   wharf.admission_recipient[];  -- ... and under them
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
  IF v_item.error_code IS NOT NULL THEN
    RAISE EXCEPTION '%', v_item.error_message USING ERRCODE = v_item.error_code;
  END IF;

  -- Held to commit: a claimer going idle (mark_idle) waits for this
  -- admission, so that the claim it makes next sees the row (rule 6).
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;

  -- 0. A body signed alone, stored before from this source: the rows already
  -- stored answer (see admit_items).
  IF v_item.body_sha256 IS NOT NULL THEN
    PERFORM pg_advisory_xact_lock(wharf.lifecycle_key('body',
      p_source || ' ' || coalesce(v_route->>'connection_id', '') || ' ' || p_body_sha256));
    v_events := coalesce((
      SELECT jsonb_agg(jsonb_build_object('workspace_id', e.workspace_id, 'event_id', e.id, 'outcome', 'duplicate')
                       ORDER BY e.workspace_id NULLS FIRST)
        FROM wharf.provider_event e
       WHERE e.source = p_source AND e.body_sha256 = v_item.body_sha256
         AND (NOT v_connection_signed OR e.connection_id::text = v_route->>'connection_id')
         AND e.received_at > now() - wharf.setting_interval('replay_window')), '[]'::jsonb);
    IF jsonb_array_length(v_events) > 0 THEN
      RETURN jsonb_build_object('delivery_key', p_delivery_key, 'events', v_events,
                                'refused', '[]'::jsonb, 'dropped', NULL);
    END IF;
  END IF;

  -- 1. Control events: one installation row in the provider's system scope.
  IF v_route->'control' = 'true' THEN
    IF wharf.is_control_event(p_provider, p_event_type, v_route, p_payload) THEN
      v_events := jsonb_build_array(wharf.store_event(v_item, NULL, NULL, 'system:' || p_provider || ':' || p_source));
      v_stored := v_events->0->>'outcome' = 'stored';
    ELSE
      v_drop := 'invalid-event-route';
    END IF;
  ELSE
    -- 2. Source: the connection named by a verified route fact.
    IF v_route ? 'connection_id' THEN
      SELECT * INTO v_source FROM wharf.connection
       WHERE id = CASE WHEN v_route->>'connection_id' ~ '^[0-9]{1,18}$'
                       THEN (v_route->>'connection_id')::bigint END
         AND provider = p_provider AND source = p_source;
    ELSIF v_route ? 'installation_id' THEN
      SELECT * INTO v_source FROM wharf.connection
       WHERE provider = p_provider AND source = p_source AND kind = 'app_installation'
         AND external_id = v_route->>'installation_id';
    ELSIF v_route ? 'team_id' THEN
      SELECT * INTO v_source FROM wharf.connection
       WHERE provider = p_provider AND source = p_source AND kind = 'slack_team'
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
    -- 3. Lifecycle lock: read the source and recipients, lock them shared
    -- (source, connections by id, workspaces by id), read them again.
    v_routes := ARRAY[ROW(1, p_provider, p_source, v_item.subjects, v_connection_signed, NULL, false, NULL,
                          v_source.id)::wharf.admission_route];
    v_first := wharf.admission_recipients(v_routes);
    PERFORM wharf.lock_lifecycles(v_routes, v_first);
    v_locked := wharf.admission_recipients(v_routes);
    IF cardinality(wharf.routes_changed(v_first, v_locked)) > 0 THEN
      RAISE EXCEPTION 'wharf.admit: the route of % changed during admission; retry', p_source
        USING ERRCODE = 'WH409';
    END IF;

    -- 4. Activity: the source itself must be ACTIVE (or PAUSED: a paused
    -- workspace or connection stores and holds); then per workspace.
    IF NOT EXISTS (SELECT FROM unnest(v_locked) f WHERE f.is_source AND f.state IN ('ACTIVE', 'PAUSED')) THEN
      v_drop := 'source-inactive';
    ELSIF NOT EXISTS (SELECT FROM unnest(v_locked) f WHERE NOT f.is_source) THEN
      v_drop := 'no-subscriber';
    ELSE
      FOR v_ws IN
        SELECT f.workspace_id,
               bool_or(f.workspace_state IN ('ACTIVE', 'PAUSED')) AS workspace_active,
               min(f.connection_id) FILTER (WHERE f.state IN ('ACTIVE', 'PAUSED')) AS active_connection_id,
               jsonb_agg(f.connection_id ORDER BY f.connection_id) AS connection_ids
          FROM unnest(v_locked) f WHERE NOT f.is_source
         GROUP BY 1 ORDER BY 1
      LOOP
        IF v_ws.workspace_active AND v_ws.active_connection_id IS NOT NULL THEN
          -- 5. Insert: one row per admitted workspace, due at once.
          v_events := v_events || wharf.store_event(v_item, v_ws.workspace_id, v_ws.active_connection_id,
                                                    v_ws.workspace_id || ':' || p_provider || ':' || v_subject);
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
    SELECT p_provider, p_source, p_delivery_key, (r->>'connection_id')::bigint, (r->>'workspace_id')::bigint, r->>'reason'
      FROM jsonb_array_elements(v_refused) WITH ORDINALITY AS x(r, o)
    UNION ALL
    SELECT p_provider, p_source, p_delivery_key, v_source.id, NULL, v_drop WHERE v_drop IS NOT NULL;
  END IF;

  -- 6. Wake-up, delivered at commit, only while some claimer is idle.
  IF v_stored THEN
    PERFORM wharf.notify_idle_claimers();
  END IF;

  RETURN jsonb_build_object('delivery_key', p_delivery_key, 'events', v_events,
                            'refused', v_refused, 'dropped', v_drop);
END $$;

REVOKE ALL ON FUNCTION wharf.admit(text, text, text, text, jsonb, text[], jsonb, jsonb, text),
  wharf.admit_many(jsonb) FROM PUBLIC;

DO $$
DECLARE g record;
BEGIN
  FOR g IN SELECT * FROM wharf_release_grants LOOP
    IF g.name = 'admission_item' THEN EXECUTE format('GRANT EXECUTE ON FUNCTION wharf.admission_item(text,text,text,text,jsonb,text[],jsonb,jsonb,text,boolean) TO %s', g.grantee); END IF;
    IF g.name = 'admission_rule_broken' THEN EXECUTE format('GRANT EXECUTE ON FUNCTION wharf.admission_rule_broken(text,text,text,text,jsonb,jsonb,text,boolean) TO %s', g.grantee); END IF;
  END LOOP;
END $$;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

DROP FUNCTION wharf.admission_item(text,text,text,text,jsonb,text[],jsonb,jsonb,text,boolean);

DROP FUNCTION wharf.admission_rule_broken(text,text,text,text,jsonb,jsonb,text,boolean);

DROP FUNCTION wharf.provider_known(text);

CREATE OR REPLACE FUNCTION wharf.admission_items(p_deliveries jsonb)
 RETURNS wharf.admission_item[]
 LANGUAGE plpgsql
 STABLE
AS $function$
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
                         d->'headers', d->>'body_sha256')
             END ORDER BY n), '{}')
      FROM jsonb_array_elements(p_deliveries) WITH ORDINALITY AS a(d, n));
END $function$;
GRANT EXECUTE ON FUNCTION wharf.admission_items(jsonb) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.admit(p_provider text, p_source text, p_delivery_key text, p_event_type text, p_route jsonb, p_subjects text[], p_payload jsonb, p_headers jsonb, p_body_sha256 text DEFAULT NULL::text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_item     wharf.admission_item := wharf.admission_item(p_provider, p_source, p_delivery_key, p_event_type,
                                                           p_route, p_subjects, p_payload, p_headers, p_body_sha256);
  v_route    jsonb := v_item.route;
  v_subject  text := v_item.subjects[1];
  v_source   wharf.connection;
  v_routes   wharf.admission_route[];
  v_first    wharf.admission_recipient[];  -- before the lifecycle locks
  v_locked   wharf.admission_recipient[];  -- ... and under them
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
  IF v_item.error_code IS NOT NULL THEN
    RAISE EXCEPTION '%', v_item.error_message USING ERRCODE = v_item.error_code;
  END IF;

  -- Held to commit: a claimer going idle (mark_idle) waits for this
  -- admission, so that the claim it makes next sees the row (rule 6).
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;

  -- 0. A body signed alone, stored before from this source: the rows already
  -- stored answer (see admit_items).
  IF v_item.body_sha256 IS NOT NULL THEN
    PERFORM pg_advisory_xact_lock(wharf.lifecycle_key('body',
      p_source || ' ' || coalesce(v_route->>'connection_id', '') || ' ' || p_body_sha256));
    v_events := coalesce((
      SELECT jsonb_agg(jsonb_build_object('workspace_id', e.workspace_id, 'event_id', e.id, 'outcome', 'duplicate')
                       ORDER BY e.workspace_id NULLS FIRST)
        FROM wharf.provider_event e
       WHERE e.source = p_source AND e.body_sha256 = v_item.body_sha256
         AND (NOT v_connection_signed OR e.connection_id::text = v_route->>'connection_id')
         AND e.received_at > now() - wharf.setting_interval('replay_window')), '[]'::jsonb);
    IF jsonb_array_length(v_events) > 0 THEN
      RETURN jsonb_build_object('delivery_key', p_delivery_key, 'events', v_events,
                                'refused', '[]'::jsonb, 'dropped', NULL);
    END IF;
  END IF;

  -- 1. Control events: one installation row in the provider's system scope.
  IF v_route->'control' = 'true' THEN
    IF wharf.is_control_event(p_provider, p_event_type, v_route, p_payload) THEN
      v_events := jsonb_build_array(wharf.store_event(v_item, NULL, NULL, 'system:' || p_provider || ':' || p_source));
      v_stored := v_events->0->>'outcome' = 'stored';
    ELSE
      v_drop := 'invalid-event-route';
    END IF;
  ELSE
    -- 2. Source: the connection named by a verified route fact.
    IF v_route ? 'connection_id' THEN
      SELECT * INTO v_source FROM wharf.connection
       WHERE id = CASE WHEN v_route->>'connection_id' ~ '^[0-9]{1,18}$'
                       THEN (v_route->>'connection_id')::bigint END
         AND provider = p_provider AND source = p_source;
    ELSIF v_route ? 'installation_id' THEN
      SELECT * INTO v_source FROM wharf.connection
       WHERE provider = p_provider AND source = p_source AND kind = 'app_installation'
         AND external_id = v_route->>'installation_id';
    ELSIF v_route ? 'team_id' THEN
      SELECT * INTO v_source FROM wharf.connection
       WHERE provider = p_provider AND source = p_source AND kind = 'slack_team'
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
    -- 3. Lifecycle lock: read the source and recipients, lock them shared
    -- (source, connections by id, workspaces by id), read them again.
    v_routes := ARRAY[ROW(1, p_provider, p_source, v_item.subjects, v_connection_signed, NULL, false, NULL,
                          v_source.id)::wharf.admission_route];
    v_first := wharf.admission_recipients(v_routes);
    PERFORM wharf.lock_lifecycles(v_routes, v_first);
    v_locked := wharf.admission_recipients(v_routes);
    IF cardinality(wharf.routes_changed(v_first, v_locked)) > 0 THEN
      RAISE EXCEPTION 'wharf.admit: the route of % changed during admission; retry', p_source
        USING ERRCODE = 'WH409';
    END IF;

    -- 4. Activity: the source itself must be ACTIVE (or PAUSED: a paused
    -- workspace or connection stores and holds); then per workspace.
    IF NOT EXISTS (SELECT FROM unnest(v_locked) f WHERE f.is_source AND f.state IN ('ACTIVE', 'PAUSED')) THEN
      v_drop := 'source-inactive';
    ELSIF NOT EXISTS (SELECT FROM unnest(v_locked) f WHERE NOT f.is_source) THEN
      v_drop := 'no-subscriber';
    ELSE
      FOR v_ws IN
        SELECT f.workspace_id,
               bool_or(f.workspace_state IN ('ACTIVE', 'PAUSED')) AS workspace_active,
               min(f.connection_id) FILTER (WHERE f.state IN ('ACTIVE', 'PAUSED')) AS active_connection_id,
               jsonb_agg(f.connection_id ORDER BY f.connection_id) AS connection_ids
          FROM unnest(v_locked) f WHERE NOT f.is_source
         GROUP BY 1 ORDER BY 1
      LOOP
        IF v_ws.workspace_active AND v_ws.active_connection_id IS NOT NULL THEN
          -- 5. Insert: one row per admitted workspace, due at once.
          v_events := v_events || wharf.store_event(v_item, v_ws.workspace_id, v_ws.active_connection_id,
                                                    v_ws.workspace_id || ':' || p_provider || ':' || v_subject);
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
    SELECT p_provider, p_source, p_delivery_key, (r->>'connection_id')::bigint, (r->>'workspace_id')::bigint, r->>'reason'
      FROM jsonb_array_elements(v_refused) WITH ORDINALITY AS x(r, o)
    UNION ALL
    SELECT p_provider, p_source, p_delivery_key, v_source.id, NULL, v_drop WHERE v_drop IS NOT NULL;
  END IF;

  -- 6. Wake-up, delivered at commit, only while some claimer is idle.
  IF v_stored THEN
    PERFORM wharf.notify_idle_claimers();
  END IF;

  RETURN jsonb_build_object('delivery_key', p_delivery_key, 'events', v_events,
                            'refused', v_refused, 'dropped', v_drop);
END $function$;
REVOKE ALL ON FUNCTION wharf.admit(text,text,text,text,jsonb,text[],jsonb,jsonb,text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.check_provider(p_provider text)
 RETURNS void
 LANGUAGE plpgsql
 STABLE
AS $function$
BEGIN
  IF p_provider IS NULL OR NOT EXISTS (SELECT FROM wharf.provider WHERE name = p_provider) THEN
    RAISE EXCEPTION 'wharf: unknown provider %', coalesce(quote_literal(p_provider), 'NULL')
      USING ERRCODE = '22023';
  END IF;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.check_provider(text) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.scope_workspace_active(p_workspace_id bigint)
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
  SELECT coalesce((SELECT w.state = 'ACTIVE' FROM wharf.workspace w WHERE w.id = p_workspace_id), true)
$function$;
GRANT EXECUTE ON FUNCTION wharf.scope_workspace_active(bigint) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.admission_item(p_provider text, p_source text, p_delivery_key text, p_event_type text, p_route jsonb, p_subjects text[], p_payload jsonb, p_headers jsonb, p_body_sha256 text)
 RETURNS wharf.admission_item
 LANGUAGE sql
 STABLE
AS $function$
  SELECT ROW(p_provider, p_source, p_delivery_key, p_event_type, coalesce(p_route, '{}'),
             coalesce(array_remove(array_remove(p_subjects, NULL), ''), '{}'), p_payload,
             wharf.safe_headers(p_headers),
             CASE WHEN p_body_sha256 ~ '^[0-9a-f]{64}$' THEN decode(p_body_sha256, 'hex') END,
             (ARRAY['22004', '22023', '22023', '22023', '22023'])
               [wharf.admission_rule_broken(p_provider, p_source, p_delivery_key, p_event_type, p_route, p_payload, p_body_sha256)],
             (ARRAY['wharf.admit: provider, source, delivery_key, event_type and payload are required',
                    format('wharf: unknown provider %s', quote_literal(p_provider)),
                    'wharf.admit: route must be a JSON object',
                    'wharf.admit: body_sha256 is a SHA-256 in lower-case hex',
                    'wharf.admit: delivery_key and event_type are at most 255 characters'])
               [wharf.admission_rule_broken(p_provider, p_source, p_delivery_key, p_event_type, p_route, p_payload, p_body_sha256)]
             )::wharf.admission_item
$function$;
GRANT EXECUTE ON FUNCTION wharf.admission_item(text,text,text,text,jsonb,text[],jsonb,jsonb,text) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.admission_rule_broken(p_provider text, p_source text, p_delivery_key text, p_event_type text, p_route jsonb, p_payload jsonb, p_body_sha256 text)
 RETURNS integer
 LANGUAGE sql
 STABLE
AS $function$
  SELECT CASE
    WHEN p_provider IS NULL OR p_source IS NULL OR p_source = '' OR p_delivery_key IS NULL
         OR p_delivery_key = '' OR p_event_type IS NULL OR p_event_type = '' OR p_payload IS NULL THEN 1
    WHEN NOT EXISTS (SELECT FROM wharf.provider WHERE name = p_provider) THEN 2
    WHEN jsonb_typeof(coalesce(p_route, '{}')) <> 'object' THEN 3
    WHEN p_body_sha256 !~ '^[0-9a-f]{64}$' THEN 4
    WHEN length(p_delivery_key) > 255 OR length(p_event_type) > 255 THEN 5
  END
$function$;
GRANT EXECUTE ON FUNCTION wharf.admission_rule_broken(text,text,text,text,jsonb,jsonb,text) TO PUBLIC;
