-- Up Migration

-- Release 0.2.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   changed  function wharf.subscribe(bigint,text)

-- ======== sql/70-connections.sql ========

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

REVOKE ALL ON FUNCTION wharf.upsert_workspace(bigint),
  wharf.set_workspace_state(bigint, text),
  wharf.upsert_connection(bigint, text, text, text, text, jsonb),
  wharf.set_connection_state(bigint, text),
  wharf.subscribe(bigint, text),
  wharf.unsubscribe(bigint, text) FROM PUBLIC;

-- Down Migration

-- The released text of everything the up changed.

CREATE OR REPLACE FUNCTION wharf.subscribe(p_connection_id bigint, p_subject text)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
  IF p_connection_id IS NULL OR p_subject IS NULL OR p_subject = '' THEN
    RAISE EXCEPTION 'wharf.subscribe: connection and subject are required' USING ERRCODE = '22004';
  END IF;
  PERFORM wharf.lock_connection_for_change(p_connection_id);
  INSERT INTO wharf.subscription (connection_id, subject) VALUES (p_connection_id, p_subject)
  ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  UPDATE wharf.connection SET generation = generation + 1, updated_at = now() WHERE id = p_connection_id;
  RETURN true;
END $function$;
REVOKE ALL ON FUNCTION wharf.subscribe(bigint,text) FROM PUBLIC;
