-- Operator surface: what the HTTP API (operator/api) and the CLI read and
-- change. Every workspace query binds its workspace; installation rows (NULL
-- workspace) are reached only through the *_installation_* functions, which
-- only an instance admin may call. Results are jsonb, so that the API and the
-- CLI print exactly what the database says.
--
-- The functions the operator surface calls are SECURITY DEFINER with a fixed
-- search_path and not executable by PUBLIC: the operator's role gets EXECUTE
-- on them and no access to the tables (sql/README.md, "Roles and GRANTs").

-- Raises P0002 unless workspace p_workspace_id exists (22004 when NULL).
CREATE OR REPLACE FUNCTION wharf.require_workspace(p_workspace_id bigint) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF p_workspace_id IS NULL THEN
    RAISE EXCEPTION 'wharf: workspace is required' USING ERRCODE = '22004';
  END IF;
  IF NOT EXISTS (SELECT FROM wharf.workspace WHERE id = p_workspace_id) THEN
    RAISE EXCEPTION 'wharf: unknown workspace %', p_workspace_id USING ERRCODE = 'P0002';
  END IF;
END $$;

-- One event in a listing: its state and history, without payload or headers.
CREATE OR REPLACE FUNCTION wharf.event_summary(e wharf.provider_event) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', e.id, 'workspace_id', e.workspace_id, 'provider', e.provider, 'source', e.source,
    'event_type', e.event_type, 'subject', e.subject, 'state', e.state,
    'attempt', e.attempt, 'failures', e.failures, 'received_at', e.received_at,
    'next_attempt_at', e.next_attempt_at, 'error_class', e.error_class, 'outcome', e.outcome,
    'handled_at', e.handled_at, 'dead_at', e.dead_at)
$$;

-- Whether event e is in workspace p_workspace_id (NULL: an installation row)
-- and passes every filter given (see event_page). An expression the planner
-- inlines into event_page's queries.
CREATE OR REPLACE FUNCTION wharf.event_page_matches(
  e wharf.provider_event, p_workspace_id bigint, p_subject text, p_provider text, p_event_type text,
  p_received_after timestamptz, p_received_before timestamptz, p_before_id bigint)
RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT (e.workspace_id = p_workspace_id OR (p_workspace_id IS NULL AND e.workspace_id IS NULL))
     AND (p_subject IS NULL OR e.subject = p_subject)
     AND (p_provider IS NULL OR e.provider = p_provider)
     AND (p_event_type IS NULL OR e.event_type = p_event_type)
     AND (p_received_after IS NULL OR e.received_at >= p_received_after)
     AND (p_received_before IS NULL OR e.received_at < p_received_before)
     AND (p_before_id IS NULL OR e.id < p_before_id)
$$;

-- A page of the events whose workspace IS NOT DISTINCT FROM p_workspace_id
-- (NULL: installation rows), newest first, older than p_before_id when given,
-- narrowed by every filter given: state, subject, provider, event type, and
-- received at or after p_received_after and before p_received_before.
-- {events, next_cursor}: next_cursor is the id to pass as p_before_id for the
-- next page, NULL on the last. Ids only grow, so rows inserted between pages
-- land before the first page and never shift a later one. Internal: callers
-- use the bound list_* functions below.
CREATE OR REPLACE FUNCTION wharf.event_page(
  p_workspace_id bigint, p_state text, p_subject text, p_limit integer, p_before_id bigint,
  p_provider text, p_event_type text, p_received_after timestamptz, p_received_before timestamptz)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
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

-- A page of workspace p_workspace_id's events (see event_page); P0002 for an
-- unknown workspace, 22023 for an unknown state or a limit outside 1..500.
CREATE OR REPLACE FUNCTION wharf.list_events(
  p_workspace_id bigint, p_state text DEFAULT NULL, p_subject text DEFAULT NULL,
  p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL,
  p_provider text DEFAULT NULL, p_event_type text DEFAULT NULL,
  p_received_after timestamptz DEFAULT NULL, p_received_before timestamptz DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN wharf.event_page(p_workspace_id, p_state, p_subject, p_limit, p_before_id,
                          p_provider, p_event_type, p_received_after, p_received_before);
END $$;

-- The dead letters of workspace p_workspace_id, newest first (list_events
-- with state DEAD).
CREATE OR REPLACE FUNCTION wharf.list_dead(
  p_workspace_id bigint, p_subject text DEFAULT NULL, p_limit integer DEFAULT 50,
  p_before_id bigint DEFAULT NULL)
RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.list_events(p_workspace_id, 'DEAD', p_subject, p_limit, p_before_id)
$$;

-- Instance admin only: a page of installation rows (NULL workspace), with
-- the filters of list_events.
CREATE OR REPLACE FUNCTION wharf.list_installation_events(
  p_state text DEFAULT NULL, p_subject text DEFAULT NULL, p_limit integer DEFAULT 50,
  p_before_id bigint DEFAULT NULL, p_provider text DEFAULT NULL, p_event_type text DEFAULT NULL,
  p_received_after timestamptz DEFAULT NULL, p_received_before timestamptz DEFAULT NULL)
RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.event_page(NULL, p_state, p_subject, p_limit, p_before_id,
                          p_provider, p_event_type, p_received_after, p_received_before)
$$;

-- Instance admin only: the dead installation rows, newest first.
CREATE OR REPLACE FUNCTION wharf.list_installation_dead(
  p_subject text DEFAULT NULL, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL)
RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.event_page(NULL, 'DEAD', p_subject, p_limit, p_before_id, NULL, NULL, NULL, NULL)
$$;

-- Every lease of event e, oldest first, as {attempt, epoch, worker,
-- started_at, ended_at, ended, error_class, frames}: those that ended other
-- than by completion from wharf.event_attempt (frames: where a failure was
-- thrown in the application's code, as wharf.fail took them; [] when its
-- worker passed none), then the lease the row itself
-- describes when it is LEASED ('running') or was completed by it (its
-- outcome). Internal, like event_page.
CREATE OR REPLACE FUNCTION wharf.event_attempts(e wharf.provider_event) RETURNS jsonb
LANGUAGE sql STABLE AS $$
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

-- Event p_id with its payload, headers (stored without credentials by admit),
-- lease and replay facts, attempts, the frames of its last failure
-- (error_frames: a dead letter's, where it was thrown; [] when none) and
-- committed steps, when its workspace IS
-- NOT DISTINCT FROM p_workspace_id; NULL otherwise. Internal, like event_page.
CREATE OR REPLACE FUNCTION wharf.event_detail(p_workspace_id bigint, p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
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

-- Event p_id of workspace p_workspace_id (see event_detail); NULL when it is
-- not an event of that workspace, whether or not it exists elsewhere.
CREATE OR REPLACE FUNCTION wharf.show_event(p_workspace_id bigint, p_id bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_workspace_id IS NULL THEN
    RAISE EXCEPTION 'wharf.show_event: workspace is required (installation rows: show_installation_event)'
      USING ERRCODE = '22004';
  END IF;
  RETURN wharf.event_detail(p_workspace_id, p_id);
END $$;

-- Instance admin only: installation row p_id (see event_detail); NULL when
-- there is no such installation row.
CREATE OR REPLACE FUNCTION wharf.show_installation_event(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.event_detail(NULL, p_id)
$$;

-- Workspace p_id as {id, state, created_at, connections}; NULL when unknown.
CREATE OR REPLACE FUNCTION wharf.show_workspace(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT jsonb_build_object('id', w.id, 'state', w.state, 'created_at', w.created_at,
           'connections', (SELECT count(*) FROM wharf.connection c WHERE c.workspace_id = w.id))
    FROM wharf.workspace w WHERE w.id = p_id
$$;

-- Every workspace (see show_workspace), by id.
CREATE OR REPLACE FUNCTION wharf.list_workspaces() RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT coalesce(jsonb_agg(wharf.show_workspace(id) ORDER BY id), '[]') FROM wharf.workspace
$$;

-- Connection p_id with its subscriptions; NULL when unknown.
CREATE OR REPLACE FUNCTION wharf.show_connection(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT jsonb_build_object(
           'id', c.id, 'workspace_id', c.workspace_id, 'provider', c.provider,
           'source', c.source, 'kind', c.kind, 'external_id', c.external_id, 'route', c.route,
           'state', c.state, 'generation', c.generation, 'created_at', c.created_at,
           'updated_at', c.updated_at,
           'subscriptions', (SELECT coalesce(jsonb_agg(s.subject ORDER BY s.subject), '[]')
                               FROM wharf.subscription s WHERE s.connection_id = c.id))
    FROM wharf.connection c WHERE c.id = p_id
$$;

-- The connections of workspace p_workspace_id (every workspace when NULL), by id.
CREATE OR REPLACE FUNCTION wharf.list_connections(p_workspace_id bigint DEFAULT NULL) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_workspace_id IS NOT NULL THEN
    PERFORM wharf.require_workspace(p_workspace_id);
  END IF;
  RETURN (SELECT coalesce(jsonb_agg(wharf.show_connection(id) ORDER BY id), '[]')
            FROM wharf.connection
           WHERE p_workspace_id IS NULL OR workspace_id = p_workspace_id);
END $$;

-- Records a workspace API token by the SHA-256 hash of its secret (the
-- caller generates the secret and shows it once). Returns {id, workspace_id,
-- name, created_at}. P0002 for an unknown workspace, 23505 for a name that a
-- live token of the workspace already has.
CREATE OR REPLACE FUNCTION wharf.create_token(p_workspace_id bigint, p_name text, p_token_hash bytea)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
END $$;

-- The live (not revoked) token whose secret hashes to p_token_hash, as {id,
-- workspace_id, name}; NULL when there is none. Records last_used_at, at most
-- once a minute so that busy tokens do not write on every request.
CREATE OR REPLACE FUNCTION wharf.verify_token(p_token_hash bytea) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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

-- The SHA-256 hashes, in hex, of every live (not revoked) token, as a jsonb
-- array. The operator surface keeps them in memory and refuses a token that
-- is none of them without a query, so that a flood of wrong tokens costs the
-- database a reload now and then instead of a lookup each; a token among
-- them is still checked by verify_token. A hash gives no way in: the tokens
-- are 256 random bits, and never reach the database themselves.
CREATE OR REPLACE FUNCTION wharf.live_token_hashes() RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT coalesce(jsonb_agg(encode(t.token_hash, 'hex')), '[]') FROM wharf.api_token t WHERE t.revoked_at IS NULL
$$;

-- The tokens of workspace p_workspace_id, revoked ones included, without
-- their hashes. P0002 for an unknown workspace.
CREATE OR REPLACE FUNCTION wharf.list_tokens(p_workspace_id bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', t.id, 'workspace_id', t.workspace_id, 'name', t.name,
                   'created_at', t.created_at, 'last_used_at', t.last_used_at,
                   'revoked_at', t.revoked_at) ORDER BY t.id), '[]')
            FROM wharf.api_token t WHERE t.workspace_id = p_workspace_id);
END $$;

-- Revokes token p_id of workspace p_workspace_id. True when a live token was
-- revoked; false for a token already revoked or not of that workspace.
CREATE OR REPLACE FUNCTION wharf.revoke_token(p_workspace_id bigint, p_id bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  UPDATE wharf.api_token SET revoked_at = now()
   WHERE id = p_id AND workspace_id = p_workspace_id AND revoked_at IS NULL;
  RETURN FOUND;
END $$;

REVOKE ALL ON FUNCTION wharf.list_events(bigint, text, text, integer, bigint, text, text, timestamptz, timestamptz),
  wharf.list_dead(bigint, text, integer, bigint),
  wharf.list_installation_events(text, text, integer, bigint, text, text, timestamptz, timestamptz),
  wharf.list_installation_dead(text, integer, bigint),
  wharf.show_event(bigint, bigint),
  wharf.show_installation_event(bigint),
  wharf.show_workspace(bigint),
  wharf.list_workspaces(),
  wharf.show_connection(bigint),
  wharf.list_connections(bigint),
  wharf.create_token(bigint, text, bytea),
  wharf.verify_token(bytea),
  wharf.live_token_hashes(),
  wharf.list_tokens(bigint),
  wharf.revoke_token(bigint, bigint) FROM PUBLIC;

-- A page of admission_log, newest first, older than p_before_id when given:
-- {entries, next_cursor}. Every refusal and drop: time, provider, source,
-- delivery key, connection, workspace, reason; never a payload or header.
-- Internal: callers use the bound list_admissions / list_all_admissions.
CREATE OR REPLACE FUNCTION wharf.admission_page(p_workspace_id bigint, p_all boolean, p_limit integer, p_before_id bigint)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
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

-- The refusals and drops that concern workspace p_workspace_id (see
-- admission_page). P0002 for an unknown workspace, 22023 for a bad limit.
CREATE OR REPLACE FUNCTION wharf.list_admissions(
  p_workspace_id bigint, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN wharf.admission_page(p_workspace_id, false, p_limit, p_before_id);
END $$;

-- Instance admin only: every refusal and drop (see admission_page).
CREATE OR REPLACE FUNCTION wharf.list_all_admissions(p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL)
RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.admission_page(NULL, true, p_limit, p_before_id)
$$;

REVOKE ALL ON FUNCTION wharf.list_admissions(bigint, integer, bigint), wharf.list_all_admissions(integer, bigint) FROM PUBLIC;
