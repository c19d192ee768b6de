-- Connections: workspaces, the verified links between a provider and a
-- workspace, and their subscriptions. Every change takes the lifecycle lock
-- of each (provider, source) it touches in exclusive mode and bumps the
-- connection's generation, so that admission (which takes its sources' locks
-- shared before it reads anything about them) sees a change either wholly
-- before or wholly after a delivery.
--
-- Lifecycle locks are transaction-scoped advisory locks: unlike FOR SHARE row
-- locks they queue fairly, so a stream of admissions cannot starve a change
-- (a new shared request waits behind a waiting exclusive one).
--
-- The one lock order, for every transaction that takes several:
--   1. workspace (changes only: a workspace's state, a connection created in it),
--   2. body (admission only: one body signed alone, sql/80),
--   3. source (admission shared, changes exclusive),
--   4. scope rows (sql/20, lock_scopes),
-- each class in ascending key (bigint) order, never a class after a later
-- one. A transaction holding locks of class n waits only for locks of a class
-- after n, so no two of them wait for each other in a cycle.
--
-- The changes an operator makes are SECURITY DEFINER with a fixed
-- search_path and not executable by PUBLIC (sql/README.md, "Roles and GRANTs").

-- The advisory lock key of one lifecycle object ('workspace', 'body',
-- 'source'; and 'bulk_replay', taken alone: sql/62). 64-bit hashes: a
-- collision only makes two objects wait for each other (or a bulk replay's
-- runner stop until it is followed again), it never lets a change and an
-- admission overlap.
CREATE OR REPLACE FUNCTION wharf.lifecycle_key(p_kind text, p_id text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT hashtextextended('wharf:' || p_kind || ':' || p_id, 0)
$$;

-- The lifecycle object of a provider's source: its connections, their
-- states, routes, secrets and subscriptions, and the states of their
-- workspaces, as far as admission reads them.
CREATE OR REPLACE FUNCTION wharf.source_lock_id(p_provider text, p_source text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT p_provider || ' ' || p_source
$$;

-- Takes the lifecycle lock of one object in exclusive mode (for a change).
CREATE OR REPLACE FUNCTION wharf.lock_lifecycle(p_kind text, p_id text) RETURNS void
LANGUAGE sql AS $$
  SELECT pg_advisory_xact_lock(wharf.lifecycle_key(p_kind, p_id))
$$;

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

-- Creates workspace p_id ACTIVE when missing; changes nothing otherwise.
CREATE OR REPLACE FUNCTION wharf.upsert_workspace(p_id bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_id IS NULL THEN
    RAISE EXCEPTION 'wharf.upsert_workspace: id is required' USING ERRCODE = '22004';
  END IF;
  INSERT INTO wharf.workspace (id) VALUES (p_id) ON CONFLICT (id) DO NOTHING;
  RETURN p_id;
END $$;

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

-- Locks the source a connection falls under, exclusive, for a change of the
-- connection (its state, route, secret or subscriptions); P0002 for an
-- unknown connection. A connection's provider and source never change.
CREATE OR REPLACE FUNCTION wharf.lock_connection_for_change(p_connection_id bigint) RETURNS void
LANGUAGE plpgsql AS $$
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

-- The connection's workspace receives events about p_subject. True when the
-- subscription is new. 22023 for a subject outside the connection's
-- route.subject_prefixes: admission would drop every such event
-- (route-mismatch), so the subscription could never deliver.
CREATE OR REPLACE FUNCTION wharf.subscribe(p_connection_id bigint, p_subject text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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

-- Ends a subscription. True when there was one.
CREATE OR REPLACE FUNCTION wharf.unsubscribe(p_connection_id bigint, p_subject text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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

REVOKE ALL ON FUNCTION wharf.upsert_workspace(bigint),
  wharf.set_workspace_state(bigint, text),
  wharf.upsert_connection(bigint, text, text, text, text, jsonb),
  wharf.set_connection_state(bigint, text),
  wharf.subscribe(bigint, text),
  wharf.unsubscribe(bigint, text) FROM PUBLIC;
