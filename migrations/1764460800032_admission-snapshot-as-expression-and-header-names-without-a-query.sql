-- Up Migration

-- Release 0.2.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   changed  function wharf.admit(text,text,text,text,jsonb,text[],jsonb,jsonb,text)
--   changed  function wharf.safe_headers(jsonb)

-- ======== sql/80-admission.sql ========

-- The headers kept with an event: lower-cased names, without credentials or
-- signatures whatever the edge sent.
CREATE OR REPLACE FUNCTION wharf.safe_headers(p_headers jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  c_credentials CONSTANT text[] := ARRAY['authorization', 'proxy-authorization', 'cookie', 'set-cookie',
                                         'x-gitlab-token'];
BEGIN
  -- Names already lower-case and none a signature (what the edge sends: Web
  -- Headers lower-case them, and it keeps no signature): drop the credentials
  -- by name in one expression. The query below costs three times as much,
  -- on every admission.
  IF jsonb_typeof(p_headers) = 'object'
     AND NOT jsonb_path_exists(p_headers, '$.keyvalue() ? (@.key like_regex "[^a-z0-9_-]|signature")') THEN
    RETURN p_headers - c_credentials;
  END IF;
  RETURN (
    SELECT coalesce(jsonb_object_agg(lower(h.key), h.value), '{}')
      FROM jsonb_each(CASE WHEN jsonb_typeof(p_headers) = 'object' THEN p_headers ELSE '{}' END) h
     WHERE lower(h.key) <> ALL (c_credentials)
       AND lower(h.key) NOT LIKE '%signature%');
END $$;

-- Admits one verified delivery and returns its receipt:
--   {delivery_key, events: [{workspace_id, event_id, outcome}],
--    refused: [{connection_id, workspace_id, reason}], dropped: reason|null}
-- Raises 22004/22023 for missing or malformed arguments (nothing written) and
-- WH409 when a connection changed while admission waited for its lock (the
-- edge answers 503 and the provider retries against the current route).
-- p_body_sha256 (hex), for providers that sign the body alone (GitHub,
-- Forgejo): a body already stored from this source within replay_window is
-- a duplicate, whatever delivery key or event type comes with it.
-- SECURITY DEFINER: the edge's role needs EXECUTE on this function only.
CREATE OR REPLACE FUNCTION wharf.admit(
  p_provider text, p_source text, p_delivery_key text, p_event_type text,
  p_route jsonb, p_subjects text[], p_payload jsonb, p_headers jsonb, p_body_sha256 text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_route      jsonb := coalesce(p_route, '{}');
  v_headers    jsonb := wharf.safe_headers(p_headers);
  v_subjects   text[] := coalesce(array_remove(array_remove(p_subjects, NULL), ''), '{}');
  v_subject    text;
  v_source     wharf.connection;
  v_first      record;  -- admission_snapshot before the lifecycle locks
  v_locked     record;  -- ... and under them
  v_events     jsonb := '[]'::jsonb;
  v_refused    jsonb := '[]'::jsonb;
  v_drop       text;
  v_ws         record;
  v_rec        record;
  v_stored     boolean := false;
  -- Signed with a secret one workspace shares with the provider (GitLab,
  -- Outline, Forgejo, Standard Webhooks): the body is only as trusted as that
  -- workspace, so it reaches that connection alone, whatever it names.
  v_connection_signed boolean := coalesce(p_route ? 'connection_id', false);
  v_body_sha256 bytea;
BEGIN
  IF p_provider IS NULL OR p_source IS NULL OR p_source = '' OR p_delivery_key IS NULL OR p_delivery_key = ''
     OR p_event_type IS NULL OR p_event_type = '' OR p_payload IS NULL THEN
    RAISE EXCEPTION 'wharf.admit: provider, source, delivery_key, event_type and payload are required'
      USING ERRCODE = '22004';
  END IF;
  PERFORM wharf.check_provider(p_provider);
  IF jsonb_typeof(v_route) <> 'object' THEN
    RAISE EXCEPTION 'wharf.admit: route must be a JSON object' USING ERRCODE = '22023';
  END IF;
  IF p_body_sha256 IS NOT NULL AND p_body_sha256 !~ '^[0-9a-f]{64}$' THEN
    RAISE EXCEPTION 'wharf.admit: body_sha256 is a SHA-256 in lower-case hex' USING ERRCODE = '22023';
  END IF;
  v_subject := v_subjects[1];
  v_body_sha256 := decode(p_body_sha256, 'hex');

  -- Held to commit: a claimer going idle (mark_idle) waits for this
  -- admission, so that the claim it makes next sees the row (see rule 6).
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;

  -- 0. A body signed alone, stored before from this source (a redelivery
  -- under another delivery id, or a captured body relabelled by its
  -- unsigned headers): the rows already stored answer. A connection-signed
  -- body (Forgejo) only ever answers with its own connection's rows: two
  -- workspaces' webhooks on one repository receive identical bodies, and
  -- neither may see, or pre-empt, the other's. The lock makes concurrent
  -- admissions of one body take turns.
  IF v_body_sha256 IS NOT NULL THEN
    PERFORM pg_advisory_xact_lock(wharf.lifecycle_key('body',
      p_source || ' ' || coalesce(v_route->>'connection_id', '') || ' ' || p_body_sha256));
    v_events := coalesce((
      SELECT jsonb_agg(jsonb_build_object('workspace_id', e.workspace_id, 'event_id', e.id, 'outcome', 'duplicate')
                       ORDER BY e.workspace_id NULLS FIRST)
        FROM wharf.provider_event e
       WHERE e.source = p_source AND e.body_sha256 = v_body_sha256
         AND (NOT v_connection_signed OR e.connection_id::text = v_route->>'connection_id')
         AND e.received_at > now() - wharf.setting_interval('replay_window')), '[]'::jsonb);
    IF jsonb_array_length(v_events) > 0 THEN
      RETURN jsonb_build_object('delivery_key', p_delivery_key, 'events', v_events,
                                'refused', '[]'::jsonb, 'dropped', NULL);
    END IF;
  END IF;

  -- 1. Control events: one installation row in the provider's system scope.
  IF v_route->'control' = 'true' THEN
    IF p_provider = 'github'
       AND p_event_type IN ('installation', 'installation_repositories', 'installation_target')
       AND v_route->>'installation_id' IS NOT NULL
       AND p_payload->'installation'->>'id' = v_route->>'installation_id'
       AND coalesce(p_payload->>'action', '') <> '' THEN
      v_events := jsonb_build_array(wharf.store_event(
        NULL, p_provider, p_source, NULL, p_delivery_key, p_event_type, v_subject,
        'system:' || p_provider || ':' || p_source, p_payload, v_headers, v_body_sha256));
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
    -- 3. Lifecycle lock: read the recipients (a provider-signed delivery fans
    -- out to every subscribed connection of its source; a connection-signed
    -- one reaches its own connection only), lock source, connections (id
    -- order) and workspaces (id order) in shared mode, read them again. The
    -- locks are taken by one statement, in the order its subquery sorts them
    -- (a sorted subquery is scanned in order, never pulled up). The reads
    -- are expressions, not SELECT … FROM: a function in FROM pays for a plan,
    -- an executor start and a tuplestore around the row it returns.
    v_first := wharf.admission_snapshot(v_source.id, p_provider, p_source, v_subjects, v_connection_signed);
    PERFORM pg_advisory_xact_lock_shared(l.key)
       FROM (SELECT 0 AS rank, 0::bigint AS id,
                    wharf.lifecycle_key('source', wharf.source_lock_id(p_provider, p_source)) AS key
             UNION
             SELECT 1, c.id, wharf.lifecycle_key('connection', c.id::text)
               FROM unnest(v_source.id || v_first.recipient_ids) AS c(id)
             UNION
             SELECT 2, w.id, wharf.lifecycle_key('workspace', w.id::text)
               FROM unnest(v_first.recipient_workspace_ids) AS w(id)
             ORDER BY rank, id) l;
    v_locked := wharf.admission_snapshot(v_source.id, p_provider, p_source, v_subjects, v_connection_signed);
    IF (v_locked.source_generation, v_locked.recipient_ids, v_locked.recipient_generations)
       IS DISTINCT FROM (v_first.source_generation, v_first.recipient_ids, v_first.recipient_generations) THEN
      RAISE EXCEPTION 'wharf.admit: the route of % changed during admission; retry', p_source
        USING ERRCODE = 'WH409';
    END IF;

    -- 4. Activity: the source itself must be ACTIVE (or PAUSED: a paused
    -- workspace or connection stores and holds); then per workspace.
    IF v_locked.source_state NOT IN ('ACTIVE', 'PAUSED') THEN
      v_drop := 'source-inactive';
    ELSIF cardinality(v_locked.recipient_ids) = 0 THEN
      v_drop := 'no-subscriber';
    ELSE
      FOR v_ws IN
        SELECT r.workspace_id,
               bool_or(r.workspace_state IN ('ACTIVE', 'PAUSED')) AS workspace_active,
               min(r.id) FILTER (WHERE r.state IN ('ACTIVE', 'PAUSED')) AS active_connection_id
          FROM unnest(v_locked.recipient_ids, v_locked.recipient_states,
                      v_locked.recipient_workspace_ids, v_locked.recipient_workspace_states)
               AS r(id, state, workspace_id, workspace_state)
         GROUP BY 1 ORDER BY 1
      LOOP
        IF v_ws.workspace_active AND v_ws.active_connection_id IS NOT NULL THEN
          -- 5. Insert: one row per admitted workspace, due at once.
          v_events := v_events || wharf.store_event(
            v_ws.workspace_id, p_provider, p_source, v_ws.active_connection_id, p_delivery_key,
            p_event_type, v_subject, v_ws.workspace_id || ':' || p_provider || ':' || v_subject,
            p_payload, v_headers, v_body_sha256);
          v_stored := v_stored OR v_events->-1->>'outcome' = 'stored';
        ELSE
          FOR v_rec IN
            SELECT r.id AS connection_id,
                   CASE WHEN v_ws.workspace_active THEN 'connection-inactive'
                        ELSE 'workspace-inactive' END AS reason
              FROM unnest(v_locked.recipient_ids, v_locked.recipient_workspace_ids) AS r(id, workspace_id)
             WHERE r.workspace_id = v_ws.workspace_id
             ORDER BY 1
          LOOP
            v_refused := v_refused || jsonb_build_object(
              'connection_id', v_rec.connection_id, 'workspace_id', v_ws.workspace_id, 'reason', v_rec.reason);
            PERFORM wharf.log_admission(p_provider, p_source, p_delivery_key, v_rec.connection_id,
                                        v_ws.workspace_id, v_rec.reason);
          END LOOP;
        END IF;
      END LOOP;
    END IF;
  END IF;

  IF v_drop IS NOT NULL THEN
    PERFORM wharf.log_admission(p_provider, p_source, p_delivery_key, v_source.id, NULL, v_drop);
  END IF;

  -- 6. Wake-up, delivered at commit, only while some claimer is idle.
  IF v_stored THEN
    PERFORM wharf.notify_idle_claimers();
  END IF;

  RETURN jsonb_build_object('delivery_key', p_delivery_key, 'events', v_events,
                            'refused', v_refused, 'dropped', v_drop);
END $$;

REVOKE ALL ON FUNCTION wharf.admit(text, text, text, text, jsonb, text[], jsonb, jsonb, text) FROM PUBLIC;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

CREATE OR REPLACE FUNCTION wharf.admit(p_provider text, p_source text, p_delivery_key text, p_event_type text, p_route jsonb, p_subjects text[], p_payload jsonb, p_headers jsonb, p_body_sha256 text DEFAULT NULL::text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_route      jsonb := coalesce(p_route, '{}');
  v_headers    jsonb := wharf.safe_headers(p_headers);
  v_subjects   text[] := coalesce(array_remove(array_remove(p_subjects, NULL), ''), '{}');
  v_subject    text;
  v_source     wharf.connection;
  v_first      record;  -- admission_snapshot before the lifecycle locks
  v_locked     record;  -- ... and under them
  v_events     jsonb := '[]'::jsonb;
  v_refused    jsonb := '[]'::jsonb;
  v_drop       text;
  v_ws         record;
  v_rec        record;
  v_stored     boolean := false;
  -- Signed with a secret one workspace shares with the provider (GitLab,
  -- Outline, Forgejo, Standard Webhooks): the body is only as trusted as that
  -- workspace, so it reaches that connection alone, whatever it names.
  v_connection_signed boolean := coalesce(p_route ? 'connection_id', false);
  v_body_sha256 bytea;
BEGIN
  IF p_provider IS NULL OR p_source IS NULL OR p_source = '' OR p_delivery_key IS NULL OR p_delivery_key = ''
     OR p_event_type IS NULL OR p_event_type = '' OR p_payload IS NULL THEN
    RAISE EXCEPTION 'wharf.admit: provider, source, delivery_key, event_type and payload are required'
      USING ERRCODE = '22004';
  END IF;
  PERFORM wharf.check_provider(p_provider);
  IF jsonb_typeof(v_route) <> 'object' THEN
    RAISE EXCEPTION 'wharf.admit: route must be a JSON object' USING ERRCODE = '22023';
  END IF;
  IF p_body_sha256 IS NOT NULL AND p_body_sha256 !~ '^[0-9a-f]{64}$' THEN
    RAISE EXCEPTION 'wharf.admit: body_sha256 is a SHA-256 in lower-case hex' USING ERRCODE = '22023';
  END IF;
  v_subject := v_subjects[1];
  v_body_sha256 := decode(p_body_sha256, 'hex');

  -- Held to commit: a claimer going idle (mark_idle) waits for this
  -- admission, so that the claim it makes next sees the row (see rule 6).
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;

  -- 0. A body signed alone, stored before from this source (a redelivery
  -- under another delivery id, or a captured body relabelled by its
  -- unsigned headers): the rows already stored answer. A connection-signed
  -- body (Forgejo) only ever answers with its own connection's rows: two
  -- workspaces' webhooks on one repository receive identical bodies, and
  -- neither may see, or pre-empt, the other's. The lock makes concurrent
  -- admissions of one body take turns.
  IF v_body_sha256 IS NOT NULL THEN
    PERFORM pg_advisory_xact_lock(wharf.lifecycle_key('body',
      p_source || ' ' || coalesce(v_route->>'connection_id', '') || ' ' || p_body_sha256));
    v_events := coalesce((
      SELECT jsonb_agg(jsonb_build_object('workspace_id', e.workspace_id, 'event_id', e.id, 'outcome', 'duplicate')
                       ORDER BY e.workspace_id NULLS FIRST)
        FROM wharf.provider_event e
       WHERE e.source = p_source AND e.body_sha256 = v_body_sha256
         AND (NOT v_connection_signed OR e.connection_id::text = v_route->>'connection_id')
         AND e.received_at > now() - wharf.setting_interval('replay_window')), '[]'::jsonb);
    IF jsonb_array_length(v_events) > 0 THEN
      RETURN jsonb_build_object('delivery_key', p_delivery_key, 'events', v_events,
                                'refused', '[]'::jsonb, 'dropped', NULL);
    END IF;
  END IF;

  -- 1. Control events: one installation row in the provider's system scope.
  IF v_route->'control' = 'true' THEN
    IF p_provider = 'github'
       AND p_event_type IN ('installation', 'installation_repositories', 'installation_target')
       AND v_route->>'installation_id' IS NOT NULL
       AND p_payload->'installation'->>'id' = v_route->>'installation_id'
       AND coalesce(p_payload->>'action', '') <> '' THEN
      v_events := jsonb_build_array(wharf.store_event(
        NULL, p_provider, p_source, NULL, p_delivery_key, p_event_type, v_subject,
        'system:' || p_provider || ':' || p_source, p_payload, v_headers, v_body_sha256));
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
    -- 3. Lifecycle lock: read the recipients (a provider-signed delivery fans
    -- out to every subscribed connection of its source; a connection-signed
    -- one reaches its own connection only), lock source, connections (id
    -- order) and workspaces (id order) in shared mode, read them again. The
    -- locks are taken by one statement, in the order its subquery sorts them
    -- (a sorted subquery is scanned in order, never pulled up).
    SELECT * INTO v_first FROM wharf.admission_snapshot(v_source.id, p_provider, p_source, v_subjects, v_connection_signed);
    PERFORM pg_advisory_xact_lock_shared(l.key)
       FROM (SELECT 0 AS rank, 0::bigint AS id,
                    wharf.lifecycle_key('source', wharf.source_lock_id(p_provider, p_source)) AS key
             UNION
             SELECT 1, c.id, wharf.lifecycle_key('connection', c.id::text)
               FROM unnest(v_source.id || v_first.recipient_ids) AS c(id)
             UNION
             SELECT 2, w.id, wharf.lifecycle_key('workspace', w.id::text)
               FROM unnest(v_first.recipient_workspace_ids) AS w(id)
             ORDER BY rank, id) l;
    SELECT * INTO v_locked FROM wharf.admission_snapshot(v_source.id, p_provider, p_source, v_subjects, v_connection_signed);
    IF (v_locked.source_generation, v_locked.recipient_ids, v_locked.recipient_generations)
       IS DISTINCT FROM (v_first.source_generation, v_first.recipient_ids, v_first.recipient_generations) THEN
      RAISE EXCEPTION 'wharf.admit: the route of % changed during admission; retry', p_source
        USING ERRCODE = 'WH409';
    END IF;

    -- 4. Activity: the source itself must be ACTIVE (or PAUSED: a paused
    -- workspace or connection stores and holds); then per workspace.
    IF v_locked.source_state NOT IN ('ACTIVE', 'PAUSED') THEN
      v_drop := 'source-inactive';
    ELSIF cardinality(v_locked.recipient_ids) = 0 THEN
      v_drop := 'no-subscriber';
    ELSE
      FOR v_ws IN
        SELECT r.workspace_id,
               bool_or(r.workspace_state IN ('ACTIVE', 'PAUSED')) AS workspace_active,
               min(r.id) FILTER (WHERE r.state IN ('ACTIVE', 'PAUSED')) AS active_connection_id
          FROM unnest(v_locked.recipient_ids, v_locked.recipient_states,
                      v_locked.recipient_workspace_ids, v_locked.recipient_workspace_states)
               AS r(id, state, workspace_id, workspace_state)
         GROUP BY 1 ORDER BY 1
      LOOP
        IF v_ws.workspace_active AND v_ws.active_connection_id IS NOT NULL THEN
          -- 5. Insert: one row per admitted workspace, due at once.
          v_events := v_events || wharf.store_event(
            v_ws.workspace_id, p_provider, p_source, v_ws.active_connection_id, p_delivery_key,
            p_event_type, v_subject, v_ws.workspace_id || ':' || p_provider || ':' || v_subject,
            p_payload, v_headers, v_body_sha256);
          v_stored := v_stored OR v_events->-1->>'outcome' = 'stored';
        ELSE
          FOR v_rec IN
            SELECT r.id AS connection_id,
                   CASE WHEN v_ws.workspace_active THEN 'connection-inactive'
                        ELSE 'workspace-inactive' END AS reason
              FROM unnest(v_locked.recipient_ids, v_locked.recipient_workspace_ids) AS r(id, workspace_id)
             WHERE r.workspace_id = v_ws.workspace_id
             ORDER BY 1
          LOOP
            v_refused := v_refused || jsonb_build_object(
              'connection_id', v_rec.connection_id, 'workspace_id', v_ws.workspace_id, 'reason', v_rec.reason);
            PERFORM wharf.log_admission(p_provider, p_source, p_delivery_key, v_rec.connection_id,
                                        v_ws.workspace_id, v_rec.reason);
          END LOOP;
        END IF;
      END LOOP;
    END IF;
  END IF;

  IF v_drop IS NOT NULL THEN
    PERFORM wharf.log_admission(p_provider, p_source, p_delivery_key, v_source.id, NULL, v_drop);
  END IF;

  -- 6. Wake-up, delivered at commit, only while some claimer is idle.
  IF v_stored THEN
    PERFORM wharf.notify_idle_claimers();
  END IF;

  RETURN jsonb_build_object('delivery_key', p_delivery_key, 'events', v_events,
                            'refused', v_refused, 'dropped', v_drop);
END $function$;
REVOKE ALL ON FUNCTION wharf.admit(text,text,text,text,jsonb,text[],jsonb,jsonb,text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.safe_headers(p_headers jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
BEGIN
  RETURN (
    SELECT coalesce(jsonb_object_agg(lower(h.key), h.value), '{}')
      FROM jsonb_each(CASE WHEN jsonb_typeof(p_headers) = 'object' THEN p_headers ELSE '{}' END) h
     WHERE lower(h.key) NOT IN ('authorization', 'proxy-authorization', 'cookie', 'set-cookie',
                                'x-gitlab-token')
       AND lower(h.key) NOT LIKE '%signature%');
END $function$;
GRANT EXECUTE ON FUNCTION wharf.safe_headers(jsonb) TO PUBLIC;
