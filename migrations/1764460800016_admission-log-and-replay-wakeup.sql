-- Up Migration

-- Release 0.2.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.admission_page(bigint,boolean,integer,bigint)
--   new      function wharf.list_admissions(bigint,integer,bigint)
--   new      function wharf.list_all_admissions(integer,bigint)
--   changed  function wharf.requeue_dead(bigint,bigint,text,boolean)

-- ======== sql/60-replay-retention.sql ========

-- Sends the DEAD row p_id whose workspace is p_workspace_id (NULL: an
-- installation row) back to QUEUED, due at once, with attempt and failures at
-- zero, keeping its id, error_class and committed steps. A row whose outcome is
-- 'uncertain' needs p_force. False, changing nothing, for anything else.
-- Idle claimers are woken at commit, so a replayed row runs at once rather
-- than at the next poll.
CREATE OR REPLACE FUNCTION wharf.requeue_dead(p_workspace_id bigint, p_id bigint, p_account text, p_force boolean)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  IF p_id IS NULL OR p_account IS NULL OR p_account = '' OR p_force IS NULL THEN
    RAISE EXCEPTION 'wharf: replay needs an event id, an account and force' USING ERRCODE = '22004';
  END IF;
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  UPDATE wharf.provider_event
     SET state = 'QUEUED', attempt = 0, failures = 0, outcome = NULL, dead_at = NULL,
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

-- ======== sql/95-operator.sql ========

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

-- Down Migration

-- The released text of everything the up changed.

DROP FUNCTION wharf.admission_page(bigint,boolean,integer,bigint);

DROP FUNCTION wharf.list_admissions(bigint,integer,bigint);

DROP FUNCTION wharf.list_all_admissions(integer,bigint);

CREATE OR REPLACE FUNCTION wharf.requeue_dead(p_workspace_id bigint, p_id bigint, p_account text, p_force boolean)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
BEGIN
  IF p_id IS NULL OR p_account IS NULL OR p_account = '' OR p_force IS NULL THEN
    RAISE EXCEPTION 'wharf: replay needs an event id, an account and force' USING ERRCODE = '22004';
  END IF;
  UPDATE wharf.provider_event
     SET state = 'QUEUED', attempt = 0, failures = 0, outcome = NULL, dead_at = NULL,
         next_attempt_at = now(), leased_until = NULL,
         replayed_by = p_account, replayed_at = now()
   WHERE id = p_id
     AND workspace_id IS NOT DISTINCT FROM p_workspace_id
     AND state = 'DEAD'
     AND (outcome IS DISTINCT FROM 'uncertain' OR p_force);
  RETURN FOUND;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.requeue_dead(bigint,bigint,text,boolean) TO PUBLIC;
