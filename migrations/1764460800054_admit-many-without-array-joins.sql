-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   changed  function wharf.admission_recipients(wharf.admission_route[])
--   changed  function wharf.admit_items(wharf.admission_item[])

-- ======== sql/80-admission.sql ========

-- The lifecycle objects of each routed item: its source connection
-- (is_source) and its recipients, read in one statement. An item without a
-- source (refused, dropped or control) has none. A provider-signed
-- delivery (an App's installation or a Slack team) reaches every connection
-- of its provider and source subscribed to one of its subjects; a
-- connection-signed one (GitLab, Outline, Forgejo, Standard Webhooks) its
-- own connection alone, when it subscribes. Two reads compare equal in their
-- (connection, generation) pairs exactly when no connection involved changed
-- in between; states come with them for the rules.
--
-- The plan is pinned to one shape, whatever the statistics: each item's
-- subjects' subscriptions (ix_subscription_recipients, one descent per
-- subject), then each subscriber's connection and workspace by primary key,
-- in the order written (join_collapse_limit). Left to choose, the planner
-- walked every subscription of the connection (subscription_pkey) for want of
-- statistics, which a GitHub App installation with many repositories paid on
-- every delivery; with statistics it planned each call afresh, which cost
-- more than the read. Led by the subjects, the read grows with a subject's
-- subscribers rather than with every connection of the source.
CREATE OR REPLACE FUNCTION wharf.admission_recipients(p_routes wharf.admission_route[])
RETURNS wharf.admission_recipient[]
-- plpgsql, not sql: its plan is cached per session instead of made per call.
LANGUAGE plpgsql STABLE
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off
SET join_collapse_limit = 1 SET plan_cache_mode = force_generic_plan SET jit = off AS $$
BEGIN
  RETURN ARRAY(
    SELECT ROW(r.n, true, s.id, s.generation, s.state, s.workspace_id, NULL)::wharf.admission_recipient
      FROM unnest(p_routes) r
      JOIN wharf.connection s ON s.id = r.source_id
     WHERE r.source_id IS NOT NULL AND r.drop_reason IS NULL AND NOT r.control AND r.body_events IS NULL
    UNION ALL
    SELECT ROW(r.n, false, c.id, c.generation, c.state, c.workspace_id, w.state)::wharf.admission_recipient
      FROM unnest(p_routes) r
      CROSS JOIN LATERAL (SELECT DISTINCT sub.connection_id FROM wharf.subscription sub
                           WHERE sub.subject = ANY (r.subjects)) subscribed
      -- LIMIT: a subquery of its own, which only the primary key can serve;
      -- joined plainly, the conditions below let the planner walk every
      -- connection of the source for each subscriber.
      CROSS JOIN LATERAL (SELECT c.id, c.provider, c.source, c.state, c.generation, c.workspace_id
                            FROM wharf.connection c WHERE c.id = subscribed.connection_id LIMIT 1) c
      JOIN wharf.workspace w ON w.id = c.workspace_id
     WHERE r.source_id IS NOT NULL AND r.drop_reason IS NULL AND NOT r.control AND r.body_events IS NULL
       AND c.provider = r.provider AND c.source = r.source
       AND (c.id = r.source_id OR NOT r.connection_signed));
END $$;

-- Admits the items of one round and returns, in their order, each one's
-- receipt or {"error": {"code", "message"}}:
--   {delivery_key, events: [{workspace_id, event_id, outcome: stored|duplicate}],
--    refused: [{connection_id, workspace_id, reason}], dropped: reason|null}
-- An item with an error, or whose route changed while admission waited for
-- its lifecycle locks (WH409), changes nothing. Two items of one round must
-- not share a body digest (admit_many defers the later one to a round of its
-- own). Internal: callers use admit and admit_many.
--
-- Plans: nested loops over the arrays and index lookups, generic (planned
-- once per session). JIT off: a plan the disabled methods price at their
-- penalty would otherwise be compiled on every call, at hundreds of ms.
-- Nested loops are quadratic when both sides are arrays, so no statement
-- joins two arrays: an item's facts are found by subscript (v_routes[n],
-- p_items[n]), and per-item arrays are made by grouping the facts together
-- with one filler row per item, never by joining them to a series.
CREATE OR REPLACE FUNCTION wharf.admit_items(p_items wharf.admission_item[]) RETURNS jsonb[]
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
SET plan_cache_mode = force_generic_plan SET jit = off AS $$
DECLARE
  v_routes    wharf.admission_route[];  -- per item: v_routes[n] is item n's
  v_first     wharf.admission_recipient[];
  v_locked    wharf.admission_recipient[];
  v_changed   integer[];
  v_source_active boolean[];  -- per item: its source ACTIVE or PAUSED
  v_subscribed    boolean[];  -- per item: some recipient read under the locks
  v_rows      wharf.admission_row[];
  v_events    jsonb[];   -- per item, the receipt's events
  v_refused   jsonb[];   -- per item, the receipt's refusals
  v_drops     text[];    -- per item, the drop reason
  v_stored    boolean;
  v_ids       bigint[];  -- the rows this call stored ...
  v_keys      text[];    -- ... and their dedupe keys
BEGIN
  -- Held to commit: a claimer going idle (mark_idle) waits for this
  -- admission, so that the claim it makes next sees its rows (rule 6).
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;

  -- 0. A body signed alone, stored before from this source (a redelivery
  -- under another delivery id, or a captured body relabelled by its unsigned
  -- headers): the rows already stored answer. A connection-signed body
  -- (Forgejo) only ever answers with its own connection's rows: two
  -- workspaces' webhooks on one repository receive identical bodies, and
  -- neither may see, or pre-empt, the other's. The lock makes concurrent
  -- admissions of one body take turns (the first class of locks, in key order).
  PERFORM pg_advisory_xact_lock(k.key)
     FROM (SELECT DISTINCT wharf.lifecycle_key('body',
                    i.source || ' ' || coalesce(i.route->>'connection_id', '') || ' ' || encode(i.body_sha256, 'hex')) AS key
             FROM unnest(p_items) i
            WHERE i.error_code IS NULL AND i.body_sha256 IS NOT NULL
            ORDER BY 1) k;

  -- 1.-2. Control events, and the source of every other item, with the drops
  -- these rules decide; an item refused by its arguments gets a route without
  -- source, drop or control, which nothing below admits.
  SELECT array_agg(ROW(r.n, i.provider, i.source, i.subjects, i.route ? 'connection_id', r.body_events,
                       r.control, r.drop_reason, r.source_id)::wharf.admission_route ORDER BY r.n)
    INTO v_routes
    FROM unnest(p_items) WITH ORDINALITY AS i(provider, source, delivery_key, event_type, route, subjects,
                                              payload, headers, body_sha256, error_code, error_message, n)
    CROSS JOIN LATERAL (
      SELECT i.n::integer AS n, dup.events AS body_events,
             i.error_code IS NULL AND coalesce(i.route->'control' = 'true', false) AS control,
             CASE
               WHEN i.error_code IS NOT NULL THEN NULL
               WHEN i.route->'control' = 'true' THEN
                 CASE WHEN wharf.is_control_event(i.provider, i.event_type, i.route, i.payload)
                      THEN NULL ELSE 'invalid-event-route' END
               WHEN NOT (i.route ? 'connection_id' OR i.route ? 'installation_id' OR i.route ? 'team_id')
                 THEN 'work-event-without-source'
               WHEN src.id IS NULL THEN 'unknown-source'
               WHEN cardinality(i.subjects) = 0 THEN 'work-event-without-subject'
               WHEN jsonb_typeof(src.route->'subject_prefixes') = 'array'
                    AND NOT EXISTS (SELECT FROM jsonb_array_elements_text(src.route->'subject_prefixes') p
                                     WHERE starts_with(i.subjects[1], p))
                 THEN 'route-mismatch'
             END AS drop_reason,
             CASE WHEN i.error_code IS NULL AND NOT coalesce(i.route->'control' = 'true', false) THEN src.id END AS source_id
        FROM (SELECT 1) one
        LEFT JOIN LATERAL (
          SELECT jsonb_agg(jsonb_build_object('workspace_id', e.workspace_id, 'event_id', e.id, 'outcome', 'duplicate')
                           ORDER BY e.workspace_id NULLS FIRST) AS events
            FROM wharf.provider_event e
           WHERE i.error_code IS NULL AND i.body_sha256 IS NOT NULL
             AND e.source = i.source AND e.body_sha256 = i.body_sha256
             AND (NOT i.route ? 'connection_id' OR e.connection_id::text = i.route->>'connection_id')
             AND e.received_at > now() - wharf.setting_interval('replay_window')
        ) dup ON true
        LEFT JOIN LATERAL (
          SELECT c.id, c.route FROM wharf.connection c
           WHERE i.route ? 'connection_id'
             AND c.id = CASE WHEN i.route->>'connection_id' ~ '^[0-9]{1,18}$' THEN (i.route->>'connection_id')::bigint END
             AND c.provider = i.provider AND c.source = i.source
          UNION ALL
          SELECT c.id, c.route FROM wharf.connection c
           WHERE NOT i.route ? 'connection_id' AND i.route ? 'installation_id'
             AND c.provider = i.provider AND c.source = i.source AND c.kind = 'app_installation'
             AND c.external_id = i.route->>'installation_id'
          UNION ALL
          SELECT c.id, c.route FROM wharf.connection c
           WHERE NOT i.route ? 'connection_id' AND NOT i.route ? 'installation_id' AND i.route ? 'team_id'
             AND c.provider = i.provider AND c.source = i.source AND c.kind = 'slack_team'
             AND c.external_id = i.route->>'team_id'
          LIMIT 1
        ) src ON i.error_code IS NULL
    ) r;
  -- A body stored before answers alone: nothing else is decided for it.
  v_routes := ARRAY(SELECT ROW(r.n, r.provider, r.source, r.subjects, r.connection_signed,
                               r.body_events, r.control AND r.body_events IS NULL,
                               CASE WHEN r.body_events IS NULL THEN r.drop_reason END,
                               CASE WHEN r.body_events IS NULL THEN r.source_id END)::wharf.admission_route
                      FROM unnest(v_routes) r ORDER BY r.n);

  -- 3. Lifecycle lock: read the recipients, lock every source, connection
  -- and workspace in shared mode (sources by key, connections by id,
  -- workspaces by id: the second class of locks, in one order for every
  -- caller), read them again under the locks. An item whose source or
  -- recipients changed in between is refused with WH409.
  IF EXISTS (SELECT FROM unnest(v_routes) r WHERE r.source_id IS NOT NULL AND r.drop_reason IS NULL) THEN
    v_first := wharf.admission_recipients(v_routes);
    PERFORM wharf.lock_lifecycles(v_routes, v_first);
    v_locked := wharf.admission_recipients(v_routes);
    v_changed := wharf.routes_changed(v_first, v_locked);
  END IF;

  -- 4. Activity, per item: whether its source is ACTIVE (or PAUSED, which
  -- stores and holds) and whether anyone subscribes; one filler row per item,
  -- so that every item has its slot.
  SELECT array_agg(x.source_active ORDER BY x.n), array_agg(x.subscribed ORDER BY x.n)
    INTO v_source_active, v_subscribed
    FROM (SELECT f.n, bool_or(f.is_source AND f.state IN ('ACTIVE', 'PAUSED')) AS source_active,
                 coalesce(bool_or(NOT f.is_source), false) AS subscribed
            FROM (SELECT k AS n, NULL::boolean AS is_source, NULL::text AS state
                    FROM generate_series(1, cardinality(p_items)) k
                  UNION ALL
                  SELECT l.n, l.is_source, l.state FROM unnest(v_locked) l) f
           GROUP BY f.n) x;

  -- ... then per workspace of each item with an active source (it admits
  -- when ACTIVE or PAUSED, through a connection ACTIVE or PAUSED), and 5.
  -- the rows to store: one per admitted workspace, or the control row in the
  -- provider's system scope.
  WITH recipients AS (
    SELECT l.n, l.connection_id, l.workspace_id,
           bool_or(l.workspace_state IN ('ACTIVE', 'PAUSED')) OVER ws AS workspace_active,
           bool_or(l.workspace_state = 'ACTIVE') OVER ws AS claimable,
           min(l.connection_id) FILTER (WHERE l.state IN ('ACTIVE', 'PAUSED')) OVER ws AS active_connection_id
      FROM unnest(v_locked) l
     WHERE NOT l.is_source AND v_source_active[l.n] AND l.n <> ALL (coalesce(v_changed, '{}'))
    WINDOW ws AS (PARTITION BY l.n, l.workspace_id)
  )
  SELECT
    -- Rows to store, in array order, each item's workspaces in id order.
    ARRAY(SELECT DISTINCT ROW(x.n, x.workspace_id, x.active_connection_id,
                              x.workspace_id || ':' || (v_routes[x.n]).provider || ':' || ((p_items[x.n]).subjects)[1],
                              x.claimable)::wharf.admission_row
            FROM recipients x
           WHERE x.workspace_active AND x.active_connection_id IS NOT NULL
          UNION ALL
          SELECT ROW(r.n, NULL, NULL, 'system:' || r.provider || ':' || r.source, true)::wharf.admission_row
            FROM unnest(v_routes) r
           WHERE r.control AND r.body_events IS NULL AND r.drop_reason IS NULL
             AND r.n <> ALL (coalesce(v_changed, '{}'))
          ORDER BY 1),
    -- Refusals: every recipient of a workspace that admits nothing.
    ARRAY(SELECT coalesce(jsonb_agg(jsonb_build_object(
                                      'connection_id', f.connection_id, 'workspace_id', f.workspace_id,
                                      'reason', CASE WHEN f.workspace_active THEN 'connection-inactive'
                                                     ELSE 'workspace-inactive' END)
                                    ORDER BY f.workspace_id, f.connection_id)
                            FILTER (WHERE f.connection_id IS NOT NULL), '[]')
            FROM (SELECT k AS n, NULL::bigint AS connection_id, NULL::bigint AS workspace_id,
                         NULL::boolean AS workspace_active
                    FROM generate_series(1, cardinality(p_items)) k
                  UNION ALL
                  SELECT x.n, x.connection_id, x.workspace_id, x.workspace_active FROM recipients x
                   WHERE NOT (x.workspace_active AND x.active_connection_id IS NOT NULL)) f
           GROUP BY f.n ORDER BY f.n),
    -- Drops decided under the locks.
    ARRAY(SELECT CASE WHEN (p_items[k]).error_code IS NOT NULL OR k = ANY (coalesce(v_changed, '{}'))
                           OR (v_routes[k]).body_events IS NOT NULL THEN NULL
                      WHEN (v_routes[k]).drop_reason IS NOT NULL THEN (v_routes[k]).drop_reason
                      WHEN (v_routes[k]).control THEN NULL
                      WHEN NOT v_source_active[k] THEN 'source-inactive'
                      WHEN NOT v_subscribed[k] THEN 'no-subscriber'
                 END
            FROM generate_series(1, cardinality(p_items)) k ORDER BY k)
    INTO v_rows, v_refused, v_drops;

  -- The scope of every row to store, made when missing and locked, in the
  -- one lock order (lock_scopes, sql/20): the third class of locks. Locked
  -- before the rows are inserted, so that within a scope ids are assigned
  -- and committed in the same order and a claim never passes over a row
  -- still being inserted.
  PERFORM wharf.lock_scopes(ARRAY(SELECT r.scope_key FROM unnest(v_rows) r),
                            ARRAY(SELECT r.workspace_id FROM unnest(v_rows) r),
                            ARRAY(SELECT r.scope_active FROM unnest(v_rows) r));

  -- 5. Insert, in array order, each workspace's row due at once; a delivery
  -- stored before (or earlier in the array) is a duplicate. The new rows are
  -- the youngest of their scopes: each heads its scope when it has no head.
  -- The scope trigger is told that this statement keeps the scopes (sql/20).
  PERFORM set_config('wharf.keeping_scopes', 'on', true);
  WITH stored AS (
    INSERT INTO wharf.provider_event
      (workspace_id, provider, delivery_key, event_type, subject, scope_key, source, connection_id,
       payload, headers, body_sha256)
    SELECT r.workspace_id, i.provider, i.delivery_key, i.event_type, i.subjects[1], r.scope_key, i.source,
           r.connection_id, i.payload, i.headers, i.body_sha256
      FROM unnest(v_rows) WITH ORDINALITY AS r(n, workspace_id, connection_id, scope_key, scope_active, k)
      CROSS JOIN LATERAL (SELECT (p_items[r.n]).*) i
     ORDER BY r.k
    ON CONFLICT (workspace_id, provider, delivery_key) DO NOTHING
    RETURNING id, scope_key, next_attempt_at, provider || ':' || event_type AS kind,
              coalesce(workspace_id::text, '') || ' ' || provider || ' ' || delivery_key AS dedupe_key
  ), heads AS (
    UPDATE wharf.scope s
       SET head_id = h.id, head_due_at = h.due_at, head_kind = h.kind, ready_at = greatest(h.due_at, clock_timestamp())
      FROM (SELECT DISTINCT ON (x.scope_key) x.scope_key, x.id, x.next_attempt_at AS due_at, x.kind
              FROM stored x ORDER BY x.scope_key, x.id) h
     WHERE s.scope_key = h.scope_key AND s.head_id IS NULL
  )
  SELECT count(*) > 0, array_agg(id), array_agg(dedupe_key) INTO v_stored, v_ids, v_keys FROM stored;
  PERFORM set_config('wharf.keeping_scopes', 'off', true);

  -- The receipts' events: each row's id, stored by this call (the first row
  -- of its dedupe key, matched to what the INSERT returned by grouping both
  -- by that key) or found stored before.
  v_events := ARRAY(
    SELECT coalesce(jsonb_agg(jsonb_build_object('workspace_id', e.workspace_id, 'event_id', e.event_id,
                                                 'outcome', e.outcome)
                              ORDER BY e.workspace_id NULLS FIRST) FILTER (WHERE e.is_row), '[]')
      FROM (SELECT k AS n, false AS is_row, NULL::bigint AS workspace_id, NULL::bigint AS event_id, NULL::text AS outcome
              FROM generate_series(1, cardinality(p_items)) k
            UNION ALL
            SELECT x.n, true, x.workspace_id, coalesce(x.stored_id, d.id),
                   CASE WHEN x.stored_id IS NOT NULL THEN 'stored' ELSE 'duplicate' END
              FROM (SELECT y.n, y.k, y.workspace_id, y.provider, y.delivery_key,
                           CASE WHEN y.k = min(y.k) OVER same_key THEN max(y.stored_id) OVER same_key END AS stored_id
                      FROM (SELECT r.n, r.k, r.workspace_id, i.provider, i.delivery_key,
                                   coalesce(r.workspace_id::text, '') || ' ' || i.provider || ' ' || i.delivery_key AS dedupe_key,
                                   NULL::bigint AS stored_id
                              FROM unnest(v_rows) WITH ORDINALITY AS r(n, workspace_id, connection_id, scope_key, scope_active, k)
                              CROSS JOIN LATERAL (SELECT (p_items[r.n]).provider, (p_items[r.n]).delivery_key) i
                            UNION ALL
                            SELECT NULL, NULL, NULL, NULL, NULL, s.dedupe_key, s.id
                              FROM unnest(v_ids, v_keys) AS s(id, dedupe_key)) y
                    WINDOW same_key AS (PARTITION BY y.dedupe_key)) x
              LEFT JOIN LATERAL (
                SELECT e.id FROM wharf.provider_event e
                 WHERE x.stored_id IS NULL AND x.workspace_id IS NOT NULL
                   AND e.workspace_id = x.workspace_id AND e.provider = x.provider AND e.delivery_key = x.delivery_key
                UNION ALL
                SELECT e.id FROM wharf.provider_event e
                 WHERE x.stored_id IS NULL AND x.workspace_id IS NULL AND e.workspace_id IS NULL
                   AND e.provider = x.provider AND e.delivery_key = x.delivery_key
              ) d ON true
             WHERE x.k IS NOT NULL) e
     GROUP BY e.n
     ORDER BY e.n);

  -- Every refusal and drop, in array order: no payload, no header.
  INSERT INTO wharf.admission_log (provider, source, delivery_key, connection_id, workspace_id, reason)
  SELECT i.provider, i.source, i.delivery_key, x.connection_id, x.workspace_id, x.reason
    FROM generate_series(1, cardinality(p_items)) k(n)
    CROSS JOIN LATERAL (SELECT (p_items[k.n]).*) i
    CROSS JOIN LATERAL (
      SELECT (f->>'connection_id')::bigint AS connection_id, (f->>'workspace_id')::bigint AS workspace_id,
             f->>'reason' AS reason, o AS rank
        FROM jsonb_array_elements(v_refused[k.n]) WITH ORDINALITY AS f(f, o)
      UNION ALL
      SELECT (v_routes[k.n]).source_id, NULL, v_drops[k.n], 0
       WHERE v_drops[k.n] IS NOT NULL
    ) x
   ORDER BY k.n, x.rank;

  -- 6. Wake-up, delivered at commit, only while some claimer is idle.
  IF v_stored THEN
    PERFORM wharf.notify_idle_claimers();
  END IF;

  RETURN ARRAY(
    SELECT CASE
             WHEN i.error_code IS NOT NULL
               THEN jsonb_build_object('error', jsonb_build_object('code', i.error_code, 'message', i.error_message))
             WHEN k.n = ANY (coalesce(v_changed, '{}'))
               THEN jsonb_build_object('error', jsonb_build_object('code', 'WH409',
                      'message', format('wharf.admit: the route of %s changed during admission; retry', i.source)))
             ELSE jsonb_build_object('delivery_key', i.delivery_key,
                                     'events', coalesce(r.body_events, v_events[k.n]),
                                     'refused', CASE WHEN r.body_events IS NULL THEN v_refused[k.n] ELSE '[]' END,
                                     'dropped', v_drops[k.n])
           END
      FROM generate_series(1, cardinality(p_items)) k(n)
      CROSS JOIN LATERAL (SELECT (p_items[k.n]).*) i
      CROSS JOIN LATERAL (SELECT (v_routes[k.n]).body_events) r
     ORDER BY k.n);
END $$;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

CREATE OR REPLACE FUNCTION wharf.admission_recipients(p_routes wharf.admission_route[])
 RETURNS wharf.admission_recipient[]
 LANGUAGE plpgsql
 STABLE
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
 SET join_collapse_limit TO '1'
 SET plan_cache_mode TO 'force_generic_plan'
 SET jit TO 'off'
AS $function$
BEGIN
  RETURN ARRAY(
    SELECT ROW(r.n, true, s.id, s.generation, s.state, s.workspace_id, NULL)::wharf.admission_recipient
      FROM unnest(p_routes) r
      JOIN wharf.connection s ON s.id = r.source_id
     WHERE r.drop_reason IS NULL AND NOT r.control AND r.body_events IS NULL
    UNION ALL
    SELECT ROW(r.n, false, c.id, c.generation, c.state, c.workspace_id, w.state)::wharf.admission_recipient
      FROM unnest(p_routes) r
      CROSS JOIN LATERAL (SELECT DISTINCT sub.connection_id FROM wharf.subscription sub
                           WHERE sub.subject = ANY (r.subjects)) subscribed
      -- LIMIT: a subquery of its own, which only the primary key can serve;
      -- joined plainly, the conditions below let the planner walk every
      -- connection of the source for each subscriber.
      CROSS JOIN LATERAL (SELECT c.id, c.provider, c.source, c.state, c.generation, c.workspace_id
                            FROM wharf.connection c WHERE c.id = subscribed.connection_id LIMIT 1) c
      JOIN wharf.workspace w ON w.id = c.workspace_id
     WHERE r.drop_reason IS NULL AND NOT r.control AND r.body_events IS NULL
       AND c.provider = r.provider AND c.source = r.source
       AND (c.id = r.source_id OR NOT r.connection_signed));
END $function$;
GRANT EXECUTE ON FUNCTION wharf.admission_recipients(wharf.admission_route[]) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.admit_items(p_items wharf.admission_item[])
 RETURNS jsonb[]
 LANGUAGE plpgsql
 SET enable_seqscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
 SET plan_cache_mode TO 'force_generic_plan'
 SET jit TO 'off'
AS $function$
DECLARE
  v_routes    wharf.admission_route[];
  v_first     wharf.admission_recipient[];
  v_locked    wharf.admission_recipient[];
  v_changed   integer[];
  v_rows      wharf.admission_row[];
  v_events    jsonb[];   -- per item, the receipt's events
  v_refused   jsonb[];   -- per item, the receipt's refusals
  v_drops     text[];    -- per item, the drop reason
  v_stored    boolean;
  v_ids       bigint[];  -- the rows this call stored ...
  v_keys      text[];    -- ... and their dedupe keys
BEGIN
  -- Held to commit: a claimer going idle (mark_idle) waits for this
  -- admission, so that the claim it makes next sees its rows (rule 6).
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;

  -- 0. A body signed alone, stored before from this source (a redelivery
  -- under another delivery id, or a captured body relabelled by its unsigned
  -- headers): the rows already stored answer. A connection-signed body
  -- (Forgejo) only ever answers with its own connection's rows: two
  -- workspaces' webhooks on one repository receive identical bodies, and
  -- neither may see, or pre-empt, the other's. The lock makes concurrent
  -- admissions of one body take turns (the first class of locks, in key order).
  PERFORM pg_advisory_xact_lock(k.key)
     FROM (SELECT DISTINCT wharf.lifecycle_key('body',
                    i.source || ' ' || coalesce(i.route->>'connection_id', '') || ' ' || encode(i.body_sha256, 'hex')) AS key
             FROM unnest(p_items) i
            WHERE i.error_code IS NULL AND i.body_sha256 IS NOT NULL
            ORDER BY 1) k;

  -- 1.-2. Control events, and the source of every other item, with the drops
  -- these rules decide.
  SELECT array_agg(ROW(r.n, i.provider, i.source, i.subjects, i.route ? 'connection_id', r.body_events,
                       r.control, r.drop_reason, r.source_id)::wharf.admission_route ORDER BY r.n)
    INTO v_routes
    FROM unnest(p_items) WITH ORDINALITY AS i(provider, source, delivery_key, event_type, route, subjects,
                                              payload, headers, body_sha256, error_code, error_message, n)
    CROSS JOIN LATERAL (
      SELECT i.n::integer AS n, dup.events AS body_events,
             coalesce(i.route->'control' = 'true', false) AS control,
             CASE
               WHEN i.route->'control' = 'true' THEN
                 CASE WHEN wharf.is_control_event(i.provider, i.event_type, i.route, i.payload)
                      THEN NULL ELSE 'invalid-event-route' END
               WHEN NOT (i.route ? 'connection_id' OR i.route ? 'installation_id' OR i.route ? 'team_id')
                 THEN 'work-event-without-source'
               WHEN src.id IS NULL THEN 'unknown-source'
               WHEN cardinality(i.subjects) = 0 THEN 'work-event-without-subject'
               WHEN jsonb_typeof(src.route->'subject_prefixes') = 'array'
                    AND NOT EXISTS (SELECT FROM jsonb_array_elements_text(src.route->'subject_prefixes') p
                                     WHERE starts_with(i.subjects[1], p))
                 THEN 'route-mismatch'
             END AS drop_reason,
             CASE WHEN NOT coalesce(i.route->'control' = 'true', false) THEN src.id END AS source_id
        FROM (SELECT 1) one
        LEFT JOIN LATERAL (
          SELECT jsonb_agg(jsonb_build_object('workspace_id', e.workspace_id, 'event_id', e.id, 'outcome', 'duplicate')
                           ORDER BY e.workspace_id NULLS FIRST) AS events
            FROM wharf.provider_event e
           WHERE i.body_sha256 IS NOT NULL
             AND e.source = i.source AND e.body_sha256 = i.body_sha256
             AND (NOT i.route ? 'connection_id' OR e.connection_id::text = i.route->>'connection_id')
             AND e.received_at > now() - wharf.setting_interval('replay_window')
        ) dup ON true
        LEFT JOIN LATERAL (
          SELECT c.id, c.route FROM wharf.connection c
           WHERE i.route ? 'connection_id'
             AND c.id = CASE WHEN i.route->>'connection_id' ~ '^[0-9]{1,18}$' THEN (i.route->>'connection_id')::bigint END
             AND c.provider = i.provider AND c.source = i.source
          UNION ALL
          SELECT c.id, c.route FROM wharf.connection c
           WHERE NOT i.route ? 'connection_id' AND i.route ? 'installation_id'
             AND c.provider = i.provider AND c.source = i.source AND c.kind = 'app_installation'
             AND c.external_id = i.route->>'installation_id'
          UNION ALL
          SELECT c.id, c.route FROM wharf.connection c
           WHERE NOT i.route ? 'connection_id' AND NOT i.route ? 'installation_id' AND i.route ? 'team_id'
             AND c.provider = i.provider AND c.source = i.source AND c.kind = 'slack_team'
             AND c.external_id = i.route->>'team_id'
          LIMIT 1
        ) src ON true
    ) r
   WHERE i.error_code IS NULL;
  -- A body stored before answers alone: nothing else is decided for it.
  v_routes := ARRAY(SELECT ROW(r.n, r.provider, r.source, r.subjects, r.connection_signed,
                               r.body_events, r.control AND r.body_events IS NULL,
                               CASE WHEN r.body_events IS NULL THEN r.drop_reason END,
                               CASE WHEN r.body_events IS NULL THEN r.source_id END)::wharf.admission_route
                      FROM unnest(v_routes) r);

  -- 3. Lifecycle lock: read the recipients, lock every source, connection
  -- and workspace in shared mode (sources by key, connections by id,
  -- workspaces by id: the second class of locks, in one order for every
  -- caller), read them again under the locks. An item whose source or
  -- recipients changed in between is refused with WH409.
  IF EXISTS (SELECT FROM unnest(v_routes) r WHERE r.source_id IS NOT NULL AND r.drop_reason IS NULL) THEN
    v_first := wharf.admission_recipients(v_routes);
    PERFORM wharf.lock_lifecycles(v_routes, v_first);
    v_locked := wharf.admission_recipients(v_routes);
    v_changed := wharf.routes_changed(v_first, v_locked);
  END IF;

  -- 4. Activity, per item and workspace (PAUSED counts as active: it stores
  -- and holds), and 5. the rows to store: one per admitted workspace, or the
  -- control row in the provider's system scope.
  WITH routed AS (
    SELECT r.*, ((p_items[r.n]).subjects)[1] AS subject
      FROM unnest(v_routes) r
     WHERE r.n <> ALL (coalesce(v_changed, '{}')) AND r.body_events IS NULL AND r.drop_reason IS NULL
  ), recipients AS (
    SELECT l.* FROM unnest(v_locked) l WHERE NOT l.is_source AND l.n <> ALL (coalesce(v_changed, '{}'))
  ), workspaces AS (
    SELECT x.n, x.workspace_id,
           bool_or(x.workspace_state IN ('ACTIVE', 'PAUSED')) AS workspace_active,
           bool_or(x.workspace_state = 'ACTIVE') AS claimable,
           min(x.connection_id) FILTER (WHERE x.state IN ('ACTIVE', 'PAUSED')) AS active_connection_id
      FROM recipients x GROUP BY x.n, x.workspace_id
  ), source_active AS (
    SELECT l.n, l.state IN ('ACTIVE', 'PAUSED') AS active FROM unnest(v_locked) l WHERE l.is_source
  )
  SELECT
    -- Rows to store, in array order, each item's workspaces in id order.
    ARRAY(SELECT ROW(w.n, w.workspace_id, w.active_connection_id,
                     w.workspace_id || ':' || r.provider || ':' || r.subject, w.claimable)::wharf.admission_row
            FROM workspaces w JOIN routed r ON r.n = w.n
            JOIN source_active s ON s.n = w.n AND s.active
           WHERE w.workspace_active AND w.active_connection_id IS NOT NULL
          UNION ALL
          SELECT ROW(r.n, NULL, NULL, 'system:' || r.provider || ':' || r.source, true)::wharf.admission_row
            FROM routed r WHERE r.control
          ORDER BY 1),
    -- Refusals: every recipient of a workspace that admits nothing.
    array_agg_refused.per_item,
    -- Drops decided under the locks.
    array_agg_drops.per_item
    INTO v_rows, v_refused, v_drops
    FROM (SELECT 1) one
    CROSS JOIN LATERAL (
      SELECT array_agg(coalesce(f.refused, '[]') ORDER BY k.n) AS per_item
        FROM generate_series(1, cardinality(p_items)) k(n)
        LEFT JOIN (SELECT x.n, jsonb_agg(jsonb_build_object(
                                  'connection_id', x.connection_id, 'workspace_id', x.workspace_id,
                                  'reason', CASE WHEN w.workspace_active THEN 'connection-inactive'
                                                 ELSE 'workspace-inactive' END)
                                ORDER BY x.workspace_id, x.connection_id) AS refused
                     FROM recipients x
                     JOIN workspaces w ON w.n = x.n AND w.workspace_id = x.workspace_id
                     JOIN source_active s ON s.n = x.n AND s.active
                    WHERE NOT (w.workspace_active AND w.active_connection_id IS NOT NULL)
                    GROUP BY x.n) f ON f.n = k.n
    ) array_agg_refused
    CROSS JOIN LATERAL (
      SELECT array_agg(
               CASE WHEN r.n IS NULL OR r.n = ANY (coalesce(v_changed, '{}')) OR r.body_events IS NOT NULL THEN NULL
                    WHEN r.drop_reason IS NOT NULL THEN r.drop_reason
                    WHEN r.control THEN NULL
                    WHEN NOT (SELECT s.active FROM source_active s WHERE s.n = r.n) THEN 'source-inactive'
                    WHEN NOT EXISTS (SELECT FROM recipients x WHERE x.n = r.n) THEN 'no-subscriber'
               END ORDER BY k.n) AS per_item
        FROM generate_series(1, cardinality(p_items)) k(n)
        LEFT JOIN unnest(v_routes) r ON r.n = k.n
    ) array_agg_drops;

  -- The scope of every row to store, made when missing and locked, in the
  -- one lock order (lock_scopes, sql/20): the third class of locks. Locked
  -- before the rows are inserted, so that within a scope ids are assigned
  -- and committed in the same order and a claim never passes over a row
  -- still being inserted.
  PERFORM wharf.lock_scopes(ARRAY(SELECT r.scope_key FROM unnest(v_rows) r),
                            ARRAY(SELECT r.workspace_id FROM unnest(v_rows) r),
                            ARRAY(SELECT r.scope_active FROM unnest(v_rows) r));

  -- 5. Insert, in array order, each workspace's row due at once; a delivery
  -- stored before (or earlier in the array) is a duplicate. The new rows are
  -- the youngest of their scopes: each heads its scope when it has no head.
  -- The scope trigger is told that this statement keeps the scopes (sql/20).
  PERFORM set_config('wharf.keeping_scopes', 'on', true);
  WITH stored AS (
    INSERT INTO wharf.provider_event
      (workspace_id, provider, delivery_key, event_type, subject, scope_key, source, connection_id,
       payload, headers, body_sha256)
    SELECT r.workspace_id, i.provider, i.delivery_key, i.event_type, i.subjects[1], r.scope_key, i.source,
           r.connection_id, i.payload, i.headers, i.body_sha256
      FROM unnest(v_rows) WITH ORDINALITY AS r(n, workspace_id, connection_id, scope_key, scope_active, k)
      CROSS JOIN LATERAL (SELECT (p_items[r.n]).*) i
     ORDER BY r.k
    ON CONFLICT (workspace_id, provider, delivery_key) DO NOTHING
    RETURNING id, scope_key, next_attempt_at, provider || ':' || event_type AS kind,
              coalesce(workspace_id::text, '') || ' ' || provider || ' ' || delivery_key AS dedupe_key
  ), heads AS (
    UPDATE wharf.scope s
       SET head_id = h.id, head_due_at = h.due_at, head_kind = h.kind, ready_at = greatest(h.due_at, clock_timestamp())
      FROM (SELECT DISTINCT ON (x.scope_key) x.scope_key, x.id, x.next_attempt_at AS due_at, x.kind
              FROM stored x ORDER BY x.scope_key, x.id) h
     WHERE s.scope_key = h.scope_key AND s.head_id IS NULL
  )
  SELECT count(*) > 0, array_agg(id), array_agg(dedupe_key) INTO v_stored, v_ids, v_keys FROM stored;
  PERFORM set_config('wharf.keeping_scopes', 'off', true);

  -- The receipts' events: each row's id, stored by this call (the first row
  -- of its dedupe key) or found stored before.
  v_events := ARRAY(
    SELECT coalesce(jsonb_agg(jsonb_build_object('workspace_id', r.workspace_id,
                                                 'event_id', coalesce(v_ids[r.stored_at], e.id),
                                                 'outcome', CASE WHEN r.stored_at IS NOT NULL THEN 'stored'
                                                                 ELSE 'duplicate' END)
                              ORDER BY r.workspace_id NULLS FIRST) FILTER (WHERE r.n IS NOT NULL), '[]')
      FROM generate_series(1, cardinality(p_items)) k(n)
      LEFT JOIN (SELECT x.n, x.workspace_id, i.provider, i.delivery_key,
                        CASE WHEN x.k = min(x.k) OVER (PARTITION BY x.workspace_id, i.provider, i.delivery_key)
                             THEN array_position(v_keys, coalesce(x.workspace_id::text, '') || ' ' || i.provider
                                                         || ' ' || i.delivery_key) END AS stored_at
                   FROM unnest(v_rows) WITH ORDINALITY AS x(n, workspace_id, connection_id, scope_key, scope_active, k)
                   CROSS JOIN LATERAL (SELECT (p_items[x.n]).provider, (p_items[x.n]).delivery_key) i) r ON r.n = k.n
      LEFT JOIN LATERAL (
        SELECT e.id FROM wharf.provider_event e
         WHERE r.stored_at IS NULL AND r.workspace_id IS NOT NULL
           AND e.workspace_id = r.workspace_id AND e.provider = r.provider AND e.delivery_key = r.delivery_key
        UNION ALL
        SELECT e.id FROM wharf.provider_event e
         WHERE r.stored_at IS NULL AND r.workspace_id IS NULL AND e.workspace_id IS NULL
           AND e.provider = r.provider AND e.delivery_key = r.delivery_key
      ) e ON true
     GROUP BY k.n
     ORDER BY k.n);

  -- Every refusal and drop, in array order: no payload, no header.
  INSERT INTO wharf.admission_log (provider, source, delivery_key, connection_id, workspace_id, reason)
  SELECT i.provider, i.source, i.delivery_key, x.connection_id, x.workspace_id, x.reason
    FROM generate_series(1, cardinality(p_items)) k(n)
    CROSS JOIN LATERAL (SELECT (p_items[k.n]).*) i
    CROSS JOIN LATERAL (
      SELECT (f->>'connection_id')::bigint AS connection_id, (f->>'workspace_id')::bigint AS workspace_id,
             f->>'reason' AS reason, o AS rank
        FROM jsonb_array_elements(v_refused[k.n]) WITH ORDINALITY AS f(f, o)
      UNION ALL
      SELECT r.source_id, NULL, v_drops[k.n], 0
        FROM (SELECT 1) one LEFT JOIN unnest(v_routes) r ON r.n = k.n
       WHERE v_drops[k.n] IS NOT NULL
    ) x
   ORDER BY k.n, x.rank;

  -- 6. Wake-up, delivered at commit, only while some claimer is idle.
  IF v_stored THEN
    PERFORM wharf.notify_idle_claimers();
  END IF;

  RETURN ARRAY(
    SELECT CASE
             WHEN i.error_code IS NOT NULL
               THEN jsonb_build_object('error', jsonb_build_object('code', i.error_code, 'message', i.error_message))
             WHEN k.n = ANY (coalesce(v_changed, '{}'))
               THEN jsonb_build_object('error', jsonb_build_object('code', 'WH409',
                      'message', format('wharf.admit: the route of %s changed during admission; retry', i.source)))
             ELSE jsonb_build_object('delivery_key', i.delivery_key,
                                     'events', coalesce(r.body_events, v_events[k.n]),
                                     'refused', CASE WHEN r.body_events IS NULL THEN v_refused[k.n] ELSE '[]' END,
                                     'dropped', v_drops[k.n])
           END
      FROM generate_series(1, cardinality(p_items)) k(n)
      CROSS JOIN LATERAL (SELECT (p_items[k.n]).*) i
      LEFT JOIN unnest(v_routes) r ON r.n = k.n
     ORDER BY k.n);
END $function$;
GRANT EXECUTE ON FUNCTION wharf.admit_items(wharf.admission_item[]) TO PUBLIC;
