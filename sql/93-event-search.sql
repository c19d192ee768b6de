-- Event search: a workspace's events whose payload and/or headers contain a
-- JSON value (jsonb @>: `{"repository": {"full_name": "acme/api"}}` matches
-- every payload with that nested field), combined with the listing filters,
-- newest first, paged like list_events.
--
-- Cost: the search reads the workspace's events newest first (its own rows,
-- never another tenant's) until it has filled the page, so a rare match costs
-- a read of the workspace's events within retention. A deployment that
-- searches often can add, at its own choice, a GIN index that the planner then
-- uses (docs/operating.md, "Searching payloads"); Wharf ships none, because
-- every admission would pay for its entries.

-- A page of workspace p_workspace_id's events whose payload contains
-- p_payload and whose headers contain p_headers (each a JSON object; NULL:
-- any), narrowed by the filters of list_events, newest first: {events,
-- next_cursor}. P0002 for an unknown workspace; 22004 when neither
-- p_payload nor p_headers is given; 22023 for a value that is not a JSON
-- object, an unknown state or a limit outside 1..500.
CREATE OR REPLACE FUNCTION wharf.search_events(
  p_workspace_id bigint, p_payload jsonb, p_headers jsonb DEFAULT NULL,
  p_state text DEFAULT NULL, p_subject text DEFAULT NULL, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL,
  p_provider text DEFAULT NULL, p_event_type text DEFAULT NULL,
  p_received_after timestamptz DEFAULT NULL, p_received_before timestamptz DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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

REVOKE ALL ON FUNCTION wharf.search_events(bigint, jsonb, jsonb, text, text, integer, bigint, text, text, timestamptz, timestamptz)
  FROM PUBLIC;
