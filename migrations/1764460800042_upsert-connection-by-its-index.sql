-- Up Migration

-- Release 0.3.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   changed  function wharf.upsert_connection(bigint,text,text,text,text,jsonb)

-- ======== sql/70-connections.sql ========

-- Creates a connection (ACTIVE) or gives an existing one, found by its natural
-- key (workspace, provider, source, kind, external_id), the route p_route.
-- Returns the connection id. P0002 for an unknown workspace.
CREATE OR REPLACE FUNCTION wharf.upsert_connection(
  p_workspace_id bigint, p_provider text, p_source text, p_kind text, p_external_id text,
  p_route jsonb DEFAULT '{}')
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
    PERFORM wharf.lock_lifecycle('connection', v_id::text);
    UPDATE wharf.connection
       SET route = p_route, generation = generation + 1, updated_at = now()
     WHERE id = v_id;
  END IF;
  RETURN v_id;
END $$;

REVOKE ALL ON FUNCTION wharf.upsert_workspace(bigint),
  wharf.set_workspace_state(bigint, text),
  wharf.upsert_connection(bigint, text, text, text, text, jsonb),
  wharf.set_connection_state(bigint, text),
  wharf.subscribe(bigint, text),
  wharf.unsubscribe(bigint, text) FROM PUBLIC;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

CREATE OR REPLACE FUNCTION wharf.upsert_connection(p_workspace_id bigint, p_provider text, p_source text, p_kind text, p_external_id text, p_route jsonb DEFAULT '{}'::jsonb)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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

  PERFORM wharf.lock_lifecycle('source', wharf.source_lock_id(p_provider, p_source));
  SELECT id, route INTO v_id, v_route
    FROM wharf.connection
   WHERE workspace_id = p_workspace_id AND provider = p_provider AND source = p_source
     AND kind = p_kind AND external_id IS NOT DISTINCT FROM p_external_id;
  IF NOT FOUND THEN
    INSERT INTO wharf.connection (workspace_id, provider, source, kind, external_id, route)
    VALUES (p_workspace_id, p_provider, p_source, p_kind, p_external_id, p_route)
    RETURNING id INTO v_id;
  ELSIF v_route IS DISTINCT FROM p_route THEN
    PERFORM wharf.lock_lifecycle('connection', v_id::text);
    UPDATE wharf.connection
       SET route = p_route, generation = generation + 1, updated_at = now()
     WHERE id = v_id;
  END IF;
  RETURN v_id;
END $function$;
REVOKE ALL ON FUNCTION wharf.upsert_connection(bigint,text,text,text,text,jsonb) FROM PUBLIC;
