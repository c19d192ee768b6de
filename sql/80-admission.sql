-- Admission: the one function the edge calls. It decides, from routing facts
-- the edge took from the signed body or the endpoint, which workspaces get the
-- delivery, stores one row per admitted workspace (deduplicated), and logs
-- every refusal and drop. The rules apply in order; the first that applies
-- decides.

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

-- Writes one refusal or drop to admission_log (no payload, no header).
CREATE OR REPLACE FUNCTION wharf.log_admission(
  p_provider text, p_source text, p_delivery_key text, p_connection_id bigint,
  p_workspace_id bigint, p_reason text)
RETURNS void
LANGUAGE sql AS $$
  INSERT INTO wharf.admission_log (provider, source, delivery_key, connection_id, workspace_id, reason)
  VALUES (p_provider, p_source, p_delivery_key, p_connection_id, p_workspace_id, p_reason)
$$;

-- Stores one event row in p_scope_key unless the delivery is already stored
-- for that workspace; returns the receipt entry {workspace_id, event_id,
-- outcome: stored|duplicate}.
CREATE OR REPLACE FUNCTION wharf.store_event(
  p_workspace_id bigint, p_provider text, p_source text, p_connection_id bigint,
  p_delivery_key text, p_event_type text, p_subject text, p_scope_key text,
  p_payload jsonb, p_headers jsonb, p_body_sha256 bytea)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_id bigint;
BEGIN
  PERFORM wharf.lock_scope(p_scope_key, p_workspace_id);
  INSERT INTO wharf.provider_event
    (workspace_id, provider, delivery_key, event_type, subject, scope_key, source, connection_id,
     payload, headers, body_sha256)
  VALUES
    (p_workspace_id, p_provider, p_delivery_key, p_event_type, p_subject, p_scope_key, p_source,
     p_connection_id, p_payload, p_headers, p_body_sha256)
  ON CONFLICT (workspace_id, provider, delivery_key) DO NOTHING
  RETURNING id INTO v_id;
  IF v_id IS NOT NULL THEN
    RETURN jsonb_build_object('workspace_id', p_workspace_id, 'event_id', v_id, 'outcome', 'stored');
  END IF;
  SELECT id INTO v_id FROM wharf.provider_event
   WHERE workspace_id IS NOT DISTINCT FROM p_workspace_id AND provider = p_provider
     AND delivery_key = p_delivery_key;
  RETURN jsonb_build_object('workspace_id', p_workspace_id, 'event_id', v_id, 'outcome', 'duplicate');
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

-- What admission decides from, read in one statement: the source connection's
-- state and generation, and the recipients (connections of the same provider
-- and source subscribed to any of the subjects; for a connection-signed
-- delivery, the source connection alone, when it subscribes) as parallel
-- arrays in id order: id, generation, state, workspace and its state. Two
-- reads compare equal in the source's generation and the recipients' ids and
-- generations exactly when no connection involved changed in between.
-- Arrays, not jsonb: building and reading jsonb, and the plan nodes it
-- took, cost more than the rows read.
--
-- The plan is pinned to one shape, whatever the statistics: the routed
-- subjects' subscriptions (ix_subscription_recipients, one descent per
-- subject), then each subscriber's connection and workspace by primary key,
-- in the order written (join_collapse_limit). Left to choose, the planner walked every
-- subscription of the connection (subscription_pkey) for want of
-- statistics, which a GitHub App installation with many repositories pays on
-- every delivery, twice; with statistics it planned each call afresh, which
-- cost more than the read. Admission ran half as many instructions again
-- without statistics, twice as many with them (bench/RESULTS.md). Led by the
-- subjects, the read also grows with a subject's subscribers rather than with
-- every connection of the source.
CREATE OR REPLACE FUNCTION wharf.admission_snapshot(
  p_source_id bigint, p_provider text, p_source text, p_subjects text[], p_connection_signed boolean,
  OUT source_state text, OUT source_generation bigint,
  OUT recipient_ids bigint[], OUT recipient_generations bigint[], OUT recipient_states text[],
  OUT recipient_workspace_ids bigint[], OUT recipient_workspace_states text[])
-- plpgsql, not sql: its plan is cached per session instead of made per call.
LANGUAGE plpgsql STABLE
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off
SET join_collapse_limit = 1 SET plan_cache_mode = force_generic_plan AS $$
BEGIN
  SELECT s.state, s.generation,
         coalesce(r.ids, '{}'), coalesce(r.generations, '{}'), coalesce(r.states, '{}'),
         coalesce(r.workspace_ids, '{}'), coalesce(r.workspace_states, '{}')
    INTO source_state, source_generation,
         recipient_ids, recipient_generations, recipient_states, recipient_workspace_ids, recipient_workspace_states
    FROM (SELECT array_agg(c.id ORDER BY c.id) AS ids, array_agg(c.generation ORDER BY c.id) AS generations,
                 array_agg(c.state ORDER BY c.id) AS states,
                 array_agg(c.workspace_id ORDER BY c.id) AS workspace_ids,
                 array_agg(w.state ORDER BY c.id) AS workspace_states
            FROM (SELECT DISTINCT sub.connection_id FROM wharf.subscription sub
                   WHERE sub.subject = ANY (p_subjects)) subscribed
            -- LIMIT: a subquery of its own, which only the primary key can
            -- serve; joined plainly, the conditions below let the planner
            -- walk every connection of the source for each subscriber.
            CROSS JOIN LATERAL (SELECT c.id, c.provider, c.source, c.state, c.generation, c.workspace_id
                                  FROM wharf.connection c WHERE c.id = subscribed.connection_id LIMIT 1) c
            JOIN wharf.workspace w ON w.id = c.workspace_id
           WHERE c.provider = p_provider AND c.source = p_source
             AND (c.id = p_source_id OR NOT p_connection_signed)) r
    LEFT JOIN wharf.connection s ON s.id = p_source_id;
END $$;

REVOKE ALL ON FUNCTION wharf.admit(text, text, text, text, jsonb, text[], jsonb, jsonb, text) FROM PUBLIC;
