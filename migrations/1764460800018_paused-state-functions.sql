-- Up Migration

-- Release 0.2.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   changed  function wharf.admit(text,text,text,text,jsonb,text[],jsonb,jsonb,text)
--   changed  function wharf.claim(text,integer,text[])
--   changed  function wharf.set_connection_state(bigint,text)
--   changed  function wharf.set_workspace_state(bigint,text)

-- ======== sql/30-claim-lease.sql ========

-- Leases up to p_max rows, each the oldest QUEUED row of its scope, due now,
-- in a scope with no LEASED row and an ACTIVE (or no) workspace, admitted by a
-- connection that is not PAUSED; scopes are
-- served longest ready first (wharf.scope.ready_at). Increments attempt and
-- lease_epoch, and draws the lease's random lease_token, which the handler's
-- step and fence present (sql/50-steps-fences.sql). Concurrent claimers pass
-- over each other. With p_handles (`provider:event_type` and `provider:*`
-- keys), only heads this host has a handler for: another head keeps its scope
-- waiting, in order, for a host that handles it.
--
-- The plan is pinned to its one good shape: walk ix_scope_claim in order and
-- fetch each head by primary key, stopping after p_max. PL/pgSQL caches a
-- generic plan after five calls, and for a small scope table the planner's
-- generic choice is a sequential scan of wharf.scope merge-joined with the
-- whole provider_event primary key, which reads the backlog on every claim.
-- Turning off the other scan and join methods leaves it the index path alone.
--
-- That plan is also forced generic: left to choose, the plan cache finds the
-- custom plans (LIMIT p_max known) cheaper and plans every call afresh, which
-- costs a claim a quarter of its time. The figures are in bench/RESULTS.md
-- and the commits that pinned both.
CREATE OR REPLACE FUNCTION wharf.claim(p_worker text, p_max integer DEFAULT 1, p_handles text[] DEFAULT NULL)
RETURNS SETOF wharf.provider_event
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_mergejoin = off SET enable_hashjoin = off
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_now   timestamptz := clock_timestamp();
  v_lease interval := wharf.setting_interval('lease');
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

  RETURN QUERY
  WITH due_heads AS (
    SELECT e.id
      FROM wharf.scope s
      JOIN wharf.provider_event e ON e.id = s.head_id
     WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
       AND s.ready_at <= v_now  -- never earlier than head_due_at: the head is due
       AND e.state = 'QUEUED'
       -- A paused connection's rows wait, holding their scopes, until it resumes.
       AND (e.connection_id IS NULL
            OR NOT EXISTS (SELECT FROM wharf.connection c WHERE c.id = e.connection_id AND c.state = 'PAUSED'))
       AND (p_handles IS NULL
            OR e.provider || ':' || e.event_type = ANY (p_handles)
            OR e.provider || ':*' = ANY (p_handles))
     ORDER BY s.ready_at, s.head_id
     LIMIT p_max
     -- NO KEY UPDATE: a claimer that locks a head another claimer has just
     -- leased (its snapshot was older) must not make the winner's fence
     -- (FOR KEY SHARE NOWAIT) fail as busy; the reaper, lock_scope, purge and
     -- erasure take FOR UPDATE and still conflict.
     FOR NO KEY UPDATE OF s, e SKIP LOCKED
  )
  UPDATE wharf.provider_event e
     SET state        = 'LEASED',
         attempt      = e.attempt + 1,
         lease_epoch  = e.lease_epoch + 1,
         leased_until = v_now + v_lease,
         leased_by    = p_worker,
         lease_token  = gen_random_uuid()
    FROM due_heads
   WHERE e.id = due_heads.id
  RETURNING e.*;
END $$;

REVOKE ALL ON FUNCTION wharf.claim(text, integer, text[]), wharf.renew(bigint, bigint),
  wharf.complete(bigint, bigint, text), wharf.release(bigint, bigint), wharf.reap(),
  wharf.mark_idle(text), wharf.mark_busy(text), wharf.queue_stats() FROM PUBLIC;

-- ======== sql/70-connections.sql ========

-- Sets a workspace ACTIVE, PAUSED (deliveries stored, nothing claimed until
-- ACTIVE again), SUSPENDED or DELETING (no admission, no claim). Back to
-- ACTIVE, idle claimers are woken. P0002 for an unknown workspace, 22023 for
-- an unknown state.
CREATE OR REPLACE FUNCTION wharf.set_workspace_state(p_id bigint, p_state text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_id IS NULL OR p_state IS NULL THEN
    RAISE EXCEPTION 'wharf.set_workspace_state: id and state are required' USING ERRCODE = '22004';
  END IF;
  IF p_state NOT IN ('ACTIVE', 'PAUSED', 'SUSPENDED', 'DELETING') THEN
    RAISE EXCEPTION 'wharf: unknown workspace state %', quote_literal(p_state) USING ERRCODE = '22023';
  END IF;
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  PERFORM wharf.lock_lifecycle('workspace', p_id::text);
  UPDATE wharf.workspace SET state = p_state WHERE id = p_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: unknown workspace %', p_id USING ERRCODE = 'P0002';
  END IF;
  IF p_state = 'ACTIVE' THEN
    PERFORM wharf.notify_idle_claimers();
  END IF;
END $$;

-- Sets a connection ACTIVE, PAUSED (its deliveries stored, none claimed until
-- ACTIVE again), SUSPENDED or REVOKED. Back to ACTIVE, idle claimers are
-- woken. P0002 for an unknown one.
CREATE OR REPLACE FUNCTION wharf.set_connection_state(p_id bigint, p_state text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_id IS NULL OR p_state IS NULL THEN
    RAISE EXCEPTION 'wharf.set_connection_state: id and state are required' USING ERRCODE = '22004';
  END IF;
  IF p_state NOT IN ('ACTIVE', 'PAUSED', 'SUSPENDED', 'REVOKED') THEN
    RAISE EXCEPTION 'wharf: unknown connection state %', quote_literal(p_state) USING ERRCODE = '22023';
  END IF;
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  PERFORM wharf.lock_lifecycle('connection', p_id::text);
  UPDATE wharf.connection
     SET state = p_state, generation = generation + 1, updated_at = now()
   WHERE id = p_id AND state IS DISTINCT FROM p_state;
  IF NOT FOUND AND NOT EXISTS (SELECT FROM wharf.connection WHERE id = p_id) THEN
    RAISE EXCEPTION 'wharf: unknown connection %', p_id USING ERRCODE = 'P0002';
  END IF;
  IF p_state = 'ACTIVE' THEN
    PERFORM wharf.notify_idle_claimers();
  END IF;
END $$;

REVOKE ALL ON FUNCTION wharf.upsert_workspace(bigint),
  wharf.set_workspace_state(bigint, text),
  wharf.upsert_connection(bigint, text, text, text, text, jsonb),
  wharf.set_connection_state(bigint, text),
  wharf.subscribe(bigint, text),
  wharf.unsubscribe(bigint, text) FROM PUBLIC;

-- ======== sql/80-admission.sql ========

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
  v_first      jsonb;
  v_locked     jsonb;
  v_events     jsonb := '[]'::jsonb;
  v_refused    jsonb := '[]'::jsonb;
  v_drop       text;
  v_lock       bigint;
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
    ELSIF v_drop IS NULL AND jsonb_typeof(v_source.route->'subject_prefixes') = 'array'
          AND NOT EXISTS (SELECT FROM jsonb_array_elements_text(v_source.route->'subject_prefixes') p
                           WHERE starts_with(v_subject, p)) THEN
      v_drop := 'route-mismatch';
    END IF;
  END IF;

  IF v_drop IS NULL AND v_source.id IS NOT NULL THEN
    -- 3. Lifecycle lock: read the recipients (a provider-signed delivery fans
    -- out to every subscribed connection of its source; a connection-signed
    -- one reaches its own connection only), lock source, connections (id
    -- order) and workspaces (id order) in shared mode, read them again.
    v_first := wharf.admission_snapshot(v_source.id, p_provider, p_source, v_subjects, v_connection_signed);
    PERFORM pg_advisory_xact_lock_shared(wharf.lifecycle_key('source', wharf.source_lock_id(p_provider, p_source)));
    FOR v_lock IN
      SELECT DISTINCT (c->>'id')::bigint AS id FROM jsonb_array_elements(v_first->'connections') c ORDER BY 1
    LOOP
      PERFORM pg_advisory_xact_lock_shared(wharf.lifecycle_key('connection', v_lock::text));
    END LOOP;
    FOR v_lock IN
      SELECT DISTINCT (c->>'workspace_id')::bigint FROM jsonb_array_elements(v_first->'recipients') c ORDER BY 1
    LOOP
      PERFORM pg_advisory_xact_lock_shared(wharf.lifecycle_key('workspace', v_lock::text));
    END LOOP;
    v_locked := wharf.admission_snapshot(v_source.id, p_provider, p_source, v_subjects, v_connection_signed);
    IF v_locked->'connections' IS DISTINCT FROM v_first->'connections' THEN
      RAISE EXCEPTION 'wharf.admit: the route of % changed during admission; retry', p_source
        USING ERRCODE = 'WH409';
    END IF;

    -- 4. Activity: the source itself must be ACTIVE (or PAUSED: a paused
    -- workspace or connection stores and holds); then per workspace.
    IF v_locked->>'source_state' NOT IN ('ACTIVE', 'PAUSED') THEN
      v_drop := 'source-inactive';
    ELSIF jsonb_array_length(v_locked->'recipients') = 0 THEN
      v_drop := 'no-subscriber';
    ELSE
      FOR v_ws IN
        SELECT (r->>'workspace_id')::bigint AS workspace_id,
               bool_or(r->>'workspace_state' IN ('ACTIVE', 'PAUSED')) AS workspace_active,
               min((r->>'id')::bigint) FILTER (WHERE r->>'state' IN ('ACTIVE', 'PAUSED')) AS active_connection_id
          FROM jsonb_array_elements(v_locked->'recipients') r
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
            SELECT (r->>'id')::bigint AS connection_id,
                   CASE WHEN v_ws.workspace_active THEN 'connection-inactive'
                        ELSE 'workspace-inactive' END AS reason
              FROM jsonb_array_elements(v_locked->'recipients') r
             WHERE (r->>'workspace_id')::bigint = v_ws.workspace_id
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
  v_first      jsonb;
  v_locked     jsonb;
  v_events     jsonb := '[]'::jsonb;
  v_refused    jsonb := '[]'::jsonb;
  v_drop       text;
  v_lock       bigint;
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
    ELSIF v_drop IS NULL AND jsonb_typeof(v_source.route->'subject_prefixes') = 'array'
          AND NOT EXISTS (SELECT FROM jsonb_array_elements_text(v_source.route->'subject_prefixes') p
                           WHERE starts_with(v_subject, p)) THEN
      v_drop := 'route-mismatch';
    END IF;
  END IF;

  IF v_drop IS NULL AND v_source.id IS NOT NULL THEN
    -- 3. Lifecycle lock: read the recipients (a provider-signed delivery fans
    -- out to every subscribed connection of its source; a connection-signed
    -- one reaches its own connection only), lock source, connections (id
    -- order) and workspaces (id order) in shared mode, read them again.
    v_first := wharf.admission_snapshot(v_source.id, p_provider, p_source, v_subjects, v_connection_signed);
    PERFORM pg_advisory_xact_lock_shared(wharf.lifecycle_key('source', wharf.source_lock_id(p_provider, p_source)));
    FOR v_lock IN
      SELECT DISTINCT (c->>'id')::bigint AS id FROM jsonb_array_elements(v_first->'connections') c ORDER BY 1
    LOOP
      PERFORM pg_advisory_xact_lock_shared(wharf.lifecycle_key('connection', v_lock::text));
    END LOOP;
    FOR v_lock IN
      SELECT DISTINCT (c->>'workspace_id')::bigint FROM jsonb_array_elements(v_first->'recipients') c ORDER BY 1
    LOOP
      PERFORM pg_advisory_xact_lock_shared(wharf.lifecycle_key('workspace', v_lock::text));
    END LOOP;
    v_locked := wharf.admission_snapshot(v_source.id, p_provider, p_source, v_subjects, v_connection_signed);
    IF v_locked->'connections' IS DISTINCT FROM v_first->'connections' THEN
      RAISE EXCEPTION 'wharf.admit: the route of % changed during admission; retry', p_source
        USING ERRCODE = 'WH409';
    END IF;

    -- 4. Activity: the source itself must be ACTIVE; then per workspace.
    IF v_locked->>'source_state' <> 'ACTIVE' THEN
      v_drop := 'source-inactive';
    ELSIF jsonb_array_length(v_locked->'recipients') = 0 THEN
      v_drop := 'no-subscriber';
    ELSE
      FOR v_ws IN
        SELECT (r->>'workspace_id')::bigint AS workspace_id,
               bool_or(r->>'workspace_state' = 'ACTIVE') AS workspace_active,
               min((r->>'id')::bigint) FILTER (WHERE r->>'state' = 'ACTIVE') AS active_connection_id
          FROM jsonb_array_elements(v_locked->'recipients') r
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
            SELECT (r->>'id')::bigint AS connection_id,
                   CASE WHEN v_ws.workspace_active THEN 'connection-inactive'
                        ELSE 'workspace-inactive' END AS reason
              FROM jsonb_array_elements(v_locked->'recipients') r
             WHERE (r->>'workspace_id')::bigint = v_ws.workspace_id
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

CREATE OR REPLACE FUNCTION wharf.claim(p_worker text, p_max integer DEFAULT 1, p_handles text[] DEFAULT NULL::text[])
 RETURNS SETOF wharf.provider_event
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_mergejoin TO 'off'
 SET enable_hashjoin TO 'off'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
  v_now   timestamptz := clock_timestamp();
  v_lease interval := wharf.setting_interval('lease');
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

  RETURN QUERY
  WITH due_heads AS (
    SELECT e.id
      FROM wharf.scope s
      JOIN wharf.provider_event e ON e.id = s.head_id
     WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
       AND s.ready_at <= v_now  -- never earlier than head_due_at: the head is due
       AND e.state = 'QUEUED'
       AND (p_handles IS NULL
            OR e.provider || ':' || e.event_type = ANY (p_handles)
            OR e.provider || ':*' = ANY (p_handles))
     ORDER BY s.ready_at, s.head_id
     LIMIT p_max
     -- NO KEY UPDATE: a claimer that locks a head another claimer has just
     -- leased (its snapshot was older) must not make the winner's fence
     -- (FOR KEY SHARE NOWAIT) fail as busy; the reaper, lock_scope, purge and
     -- erasure take FOR UPDATE and still conflict.
     FOR NO KEY UPDATE OF s, e SKIP LOCKED
  )
  UPDATE wharf.provider_event e
     SET state        = 'LEASED',
         attempt      = e.attempt + 1,
         lease_epoch  = e.lease_epoch + 1,
         leased_until = v_now + v_lease,
         leased_by    = p_worker,
         lease_token  = gen_random_uuid()
    FROM due_heads
   WHERE e.id = due_heads.id
  RETURNING e.*;
END $function$;
REVOKE ALL ON FUNCTION wharf.claim(text,integer,text[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.set_connection_state(p_id bigint, p_state text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
  IF p_id IS NULL OR p_state IS NULL THEN
    RAISE EXCEPTION 'wharf.set_connection_state: id and state are required' USING ERRCODE = '22004';
  END IF;
  IF p_state NOT IN ('ACTIVE', 'SUSPENDED', 'REVOKED') THEN
    RAISE EXCEPTION 'wharf: unknown connection state %', quote_literal(p_state) USING ERRCODE = '22023';
  END IF;
  PERFORM wharf.lock_lifecycle('connection', p_id::text);
  UPDATE wharf.connection
     SET state = p_state, generation = generation + 1, updated_at = now()
   WHERE id = p_id AND state IS DISTINCT FROM p_state;
  IF NOT FOUND AND NOT EXISTS (SELECT FROM wharf.connection WHERE id = p_id) THEN
    RAISE EXCEPTION 'wharf: unknown connection %', p_id USING ERRCODE = 'P0002';
  END IF;
END $function$;
REVOKE ALL ON FUNCTION wharf.set_connection_state(bigint,text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.set_workspace_state(p_id bigint, p_state text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
  IF p_id IS NULL OR p_state IS NULL THEN
    RAISE EXCEPTION 'wharf.set_workspace_state: id and state are required' USING ERRCODE = '22004';
  END IF;
  IF p_state NOT IN ('ACTIVE', 'SUSPENDED', 'DELETING') THEN
    RAISE EXCEPTION 'wharf: unknown workspace state %', quote_literal(p_state) USING ERRCODE = '22023';
  END IF;
  PERFORM wharf.lock_lifecycle('workspace', p_id::text);
  UPDATE wharf.workspace SET state = p_state WHERE id = p_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: unknown workspace %', p_id USING ERRCODE = 'P0002';
  END IF;
END $function$;
REVOKE ALL ON FUNCTION wharf.set_workspace_state(bigint,text) FROM PUBLIC;
