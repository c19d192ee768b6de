-- Admission: the one write the edge makes. It decides, from routing facts
-- the edge took from the signed body or the endpoint, which workspaces get a
-- delivery, stores one row per admitted workspace (deduplicated), and logs
-- every refusal and drop. The rules apply in order; the first that applies
-- decides.
--
-- Two implementations of the rules, held equal by a property test
-- (test/sql/admit-many.test.ts): admit_item, statement by statement for one
-- delivery (admit, and admit_many of one), and admit_items, which admits an
-- array of deliveries in a fixed number of statements whatever its length:
-- each step of the rules is one statement over the whole array (the items,
-- their routes, their recipients, the rows to store). An admission's cost was
-- its statements' start-ups, about twenty per delivery, not its rows; for one
-- delivery, plans over arrays cost more to start than they save.
-- Admitting an array is admitting its elements one after another: the same
-- rows (ids in array order), duplicates, refusals, drops and admission_log
-- rows, and one wake-up. Its locks are taken class by class (bodies, then
-- sources, then scopes: the one lock order of sql/70), each class in key
-- order and all of them before the first row is stored, so that two
-- batches, a batch and an admit, or a batch and a lifecycle change can never
-- wait for each other in a cycle.

-- The headers kept with an event: lower-cased names, without credentials or
-- signatures whatever the edge sent. Every provider's signature header has
-- `signature` or `hmac` in its name (x-hub-signature-256, stripe-signature,
-- x-shopify-hmac-sha256, x-twilio-signature, x-zm-signature…);
-- test/edge/provider-registry.test.ts checks each adapter's against this.
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
     AND NOT jsonb_path_exists(p_headers, '$.keyvalue() ? (@.key like_regex "[^a-z0-9_-]|signature|hmac")') THEN
    RETURN p_headers - c_credentials;
  END IF;
  RETURN (
    SELECT coalesce(jsonb_object_agg(lower(h.key), h.value), '{}')
      FROM jsonb_each(CASE WHEN jsonb_typeof(p_headers) = 'object' THEN p_headers ELSE '{}' END) h
     WHERE lower(h.key) <> ALL (c_credentials)
       AND lower(h.key) NOT LIKE '%signature%' AND lower(h.key) NOT LIKE '%hmac%');
END $$;

-- Which rule of admit's arguments a delivery breaks, if any: 1, a missing
-- argument; 2, an unknown provider; 3, a route that is not an object; 4, a
-- body digest that is not lower-case hex; 5, a delivery key or event type
-- longer than 255 characters (the edge's bound, and an index entry's).
-- p_provider_known: whether the registry holds the provider, looked up once
-- per delivery by the caller (admit: provider_known; admit_many: a join),
-- not here: admission_item asks for the rule twice. Expressions without FROM
-- or sub-select, so that the planner inlines them into their callers.
CREATE OR REPLACE FUNCTION wharf.admission_rule_broken(
  p_provider text, p_source text, p_delivery_key text, p_event_type text,
  p_route jsonb, p_payload jsonb, p_body_sha256 text, p_provider_known boolean)
RETURNS integer
LANGUAGE sql STABLE AS $$
  SELECT CASE
    WHEN p_provider IS NULL OR p_source IS NULL OR p_source = '' OR p_delivery_key IS NULL
         OR p_delivery_key = '' OR p_event_type IS NULL OR p_event_type = '' OR p_payload IS NULL THEN 1
    WHEN NOT p_provider_known THEN 2
    WHEN jsonb_typeof(coalesce(p_route, '{}')) <> 'object' THEN 3
    WHEN p_body_sha256 !~ '^[0-9a-f]{64}$' THEN 4
    WHEN length(p_delivery_key) > 255 OR length(p_event_type) > 255 THEN 5
  END
$$;

-- The delivery of admit's arguments as an admission_item, with the error
-- admit raises for it, if any (admission_rule_broken): 22004 for a missing
-- argument, 22023 for the others. Subjects lose NULLs and empty strings;
-- headers are kept without credentials (safe_headers). p_provider_known as
-- admission_rule_broken takes it.
CREATE OR REPLACE FUNCTION wharf.admission_item(
  p_provider text, p_source text, p_delivery_key text, p_event_type text,
  p_route jsonb, p_subjects text[], p_payload jsonb, p_headers jsonb, p_body_sha256 text,
  p_provider_known boolean)
RETURNS wharf.admission_item
LANGUAGE sql STABLE AS $$
  SELECT ROW(p_provider, p_source, p_delivery_key, p_event_type, coalesce(p_route, '{}'),
             coalesce(array_remove(array_remove(p_subjects, NULL), ''), '{}'), p_payload,
             wharf.safe_headers(p_headers),
             CASE WHEN p_body_sha256 ~ '^[0-9a-f]{64}$' THEN decode(p_body_sha256, 'hex') END,
             (ARRAY['22004', '22023', '22023', '22023', '22023'])
               [wharf.admission_rule_broken(p_provider, p_source, p_delivery_key, p_event_type, p_route, p_payload, p_body_sha256,
                                            p_provider_known)],
             (ARRAY['wharf.admit: provider, source, delivery_key, event_type and payload are required',
                    format('wharf: unknown provider %s', quote_literal(p_provider)),
                    'wharf.admit: route must be a JSON object',
                    'wharf.admit: body_sha256 is a SHA-256 in lower-case hex',
                    'wharf.admit: delivery_key and event_type are at most 255 characters'])
               [wharf.admission_rule_broken(p_provider, p_source, p_delivery_key, p_event_type, p_route, p_payload, p_body_sha256,
                                            p_provider_known)]
             )::wharf.admission_item
$$;

-- The deliveries of admit_many's argument as items, in array order. An
-- element that is not an object, or whose subjects are not an array of
-- strings, gets 22023; everything else as admission_item decides. 22023 for
-- an argument that is not an array (nothing is admitted).
CREATE OR REPLACE FUNCTION wharf.admission_items(p_deliveries jsonb) RETURNS wharf.admission_item[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF p_deliveries IS NULL OR jsonb_typeof(p_deliveries) <> 'array' THEN
    RAISE EXCEPTION 'wharf.admit_many: deliveries must be a JSON array' USING ERRCODE = '22023';
  END IF;
  RETURN (
    SELECT coalesce(array_agg(
             CASE WHEN jsonb_typeof(d) <> 'object'
                    THEN ROW(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '22023',
                             'wharf.admit_many: each delivery is a JSON object')::wharf.admission_item
                  WHEN jsonb_typeof(coalesce(d->'subjects', '[]')) NOT IN ('array', 'null')
                       OR jsonb_path_exists(d, '$.subjects[*] ? (@.type() != "string" && @.type() != "null")')
                    THEN ROW(d->>'provider', d->>'source', d->>'delivery_key', d->>'event_type', NULL, NULL, NULL,
                             NULL, NULL, '22023', 'wharf.admit_many: subjects must be an array of strings')::wharf.admission_item
                  ELSE wharf.admission_item(
                         d->>'provider', d->>'source', d->>'delivery_key', d->>'event_type',
                         CASE WHEN d ? 'route' AND d->'route' <> 'null' THEN d->'route' END,
                         ARRAY(SELECT jsonb_array_elements_text(CASE jsonb_typeof(d->'subjects') WHEN 'array'
                                                                     THEN d->'subjects' ELSE '[]' END)),
                         CASE WHEN d->'payload' <> 'null' THEN d->'payload' END,
                         d->'headers', d->>'body_sha256', known.name IS NOT NULL)
             END ORDER BY n), '{}')
      FROM jsonb_array_elements(p_deliveries) WITH ORDINALITY AS a(d, n)
      LEFT JOIN wharf.provider known ON known.name = d->>'provider');
END $$;

-- The lifecycle objects of each routed item: its source connection
-- (is_source) and its recipients, read in one statement. An item without a
-- source (refused, dropped or control) has none. A provider-signed
-- delivery (an App's installation or a Slack team) reaches every connection
-- of its provider and source subscribed to one of its subjects; a
-- connection-signed one (GitLab, Outline, Forgejo, Standard Webhooks) its
-- own connection alone, when it subscribes. Read once, under the source
-- locks (lock order class 3): every change of a connection, subscription or
-- workspace it reads holds that source's lock exclusive, so the read sees each
-- change wholly or not at all, and nothing it read changes before commit.
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

-- Whether a delivery marked control (route.control) is a control event Wharf
-- stores: a GitHub installation event whose payload names the routed
-- installation and an action. Anything else marked control is dropped
-- invalid-event-route. An expression, inlined into its callers.
CREATE OR REPLACE FUNCTION wharf.is_control_event(p_provider text, p_event_type text, p_route jsonb, p_payload jsonb)
RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(p_provider = 'github'
                  AND p_event_type IN ('installation', 'installation_repositories', 'installation_target')
                  AND p_route->>'installation_id' IS NOT NULL
                  AND p_payload->'installation'->>'id' = p_route->>'installation_id'
                  AND coalesce(p_payload->>'action', '') <> '', false)
$$;

-- The receipt's events for a body signed alone (GitHub, Forgejo) that its
-- source already stored within replay_window: each row as a duplicate, in
-- workspace order; NULL when there is none, or the item has no digest. A
-- connection-signed body (Forgejo) only ever answers with its own
-- connection's rows: two workspaces' webhooks on one repository receive
-- identical bodies, and neither may see, or pre-empt, the other's. The
-- caller holds the body's lock (admit, admit_items). plpgsql: its plan is
-- kept for the session.
CREATE OR REPLACE FUNCTION wharf.body_stored(p_item wharf.admission_item) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF p_item.error_code IS NOT NULL OR p_item.body_sha256 IS NULL THEN
    RETURN NULL;
  END IF;
  RETURN (
    SELECT jsonb_agg(jsonb_build_object('workspace_id', e.workspace_id, 'event_id', e.id, 'outcome', 'duplicate')
                     ORDER BY e.workspace_id NULLS FIRST)
      FROM wharf.provider_event e
     WHERE e.source = p_item.source AND e.body_sha256 = p_item.body_sha256
       AND (NOT p_item.route ? 'connection_id' OR e.connection_id::text = p_item.route->>'connection_id')
       AND e.received_at > now() - wharf.setting_interval('replay_window'));
END $$;

-- Admits the items of an array and returns, in their order, each one's
-- receipt or {"error": {"code", "message"}}:
--   {delivery_key, events: [{workspace_id, event_id, outcome: stored|duplicate}],
--    refused: [{connection_id, workspace_id, reason}], dropped: reason|null}
-- An item with an error changes nothing. Internal: admit_many's.
--
-- As one after another: every item is decided and every lock taken once,
-- for the whole array; the rows are then stored segment by segment, in
-- array order. An item whose body (source and digest) an earlier item of the
-- array carries starts a segment, so that it sees what the items before it
-- stored, as it would one after another, and every scope receives its rows
-- in the order of the array. Nearly every array is one segment.
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
  v_read      wharf.admission_recipient[];  -- read once, under the source locks
  v_segments  integer[];  -- per item: the segment it is stored in, from 1
  v_source_active boolean[];  -- per item: its source ACTIVE or PAUSED
  v_subscribed    boolean[];  -- per item: some recipient read
  v_rows      wharf.admission_row[];
  v_events    jsonb[];   -- per item, the receipt's events
  v_refused   jsonb[];   -- per item, the receipt's refusals
  v_drops     text[];    -- per item, the drop reason
  v_stored    boolean := false;
  v_ids       bigint[] := ARRAY[]::bigint[];  -- the rows this call stored ...
  v_keys      text[] := ARRAY[]::text[];    -- ... and their dedupe keys
  v_first     integer;   -- the item that starts a segment
  v_answer    jsonb;     -- ... and the rows its body already has
  v_answered  integer[] := ARRAY[]::integer[];  -- the items a segment answered so
  v_existing  text[];    -- the scopes of those items that existed before
BEGIN
  IF cardinality(p_items) = 0 THEN
    RETURN ARRAY[]::jsonb[];
  END IF;
  -- Held to commit: a claimer going idle (mark_idle) waits for this
  -- admission, so that the claim it makes next sees its rows (rule 6).
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;

  -- 0. and 3. The locks before anything is read (classes 2 and 3 of the one
  -- lock order, sql/70), each class in key order, in one statement:
  --  - every body signed alone, exclusive: concurrent admissions of one body
  --    take turns, so that the second is the first's duplicate (rule 0);
  --  - every source of a work event, shared: a change of the source's
  --    connections, their subscriptions or their workspaces (which takes it
  --    exclusive) commits before the reads below, or waits until this
  --    transaction commits. Queued fairly, so no stream of admissions starves
  --    a change.
  PERFORM CASE WHEN l.shared THEN pg_advisory_xact_lock_shared(l.key) ELSE pg_advisory_xact_lock(l.key) END
     FROM (SELECT false AS shared, wharf.lifecycle_key('body',
                    i.source || ' ' || coalesce(i.route->>'connection_id', '') || ' ' || encode(i.body_sha256, 'hex')) AS key
             FROM unnest(p_items) i
            WHERE i.error_code IS NULL AND i.body_sha256 IS NOT NULL
           UNION
           SELECT true, wharf.lifecycle_key('source', wharf.source_lock_id(i.provider, i.source))
             FROM unnest(p_items) i
            WHERE i.error_code IS NULL AND NOT coalesce(i.route->'control' = 'true', false)
           ORDER BY 1, 2) l;

  -- 0.-2. A body signed alone, stored before from this source (a redelivery
  -- under another delivery id, or a captured body relabelled by its unsigned
  -- headers): the rows already stored answer. A connection-signed body
  -- (Forgejo) only ever answers with its own connection's rows: two
  -- workspaces' webhooks on one repository receive identical bodies, and
  -- neither may see, or pre-empt, the other's. Then control events, and the
  -- source of every other item, with the drops these rules decide; an item
  -- refused by its arguments gets a route without source, drop or control,
  -- which nothing below admits.
  SELECT array_agg(ROW(r.n, i.provider, i.source, i.subjects, i.route ? 'connection_id', r.body_events,
                       r.control, r.drop_reason, r.source_id)::wharf.admission_route ORDER BY r.n)
    INTO v_routes
    FROM unnest(p_items) WITH ORDINALITY AS i(provider, source, delivery_key, event_type, route, subjects,
                                              payload, headers, body_sha256, error_code, error_message, n)
    CROSS JOIN LATERAL (
      SELECT i.n::integer AS n,
             CASE WHEN i.body_sha256 IS NOT NULL THEN wharf.body_stored(p_items[i.n]) END AS body_events,
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

  -- The segments: each item whose body an earlier valid item carries starts
  -- one (a source and digest, whatever the connection: more segments than
  -- needed never change what is stored, fewer would).
  IF cardinality(p_items) = 1 THEN
    v_segments := '{1}';
  ELSE
    v_segments := ARRAY(
      SELECT 1 + count(*) FILTER (WHERE x.repeats) OVER (ORDER BY x.n)
        FROM (SELECT i.n, i.error_code IS NULL AND i.body_sha256 IS NOT NULL
                          AND row_number() OVER (PARTITION BY i.error_code IS NULL AND i.body_sha256 IS NOT NULL,
                                                              i.source, i.body_sha256 ORDER BY i.n) > 1 AS repeats
                FROM unnest(p_items) WITH ORDINALITY AS i(provider, source, delivery_key, event_type, route, subjects,
                                                          payload, headers, body_sha256, error_code, error_message, n)) x
       ORDER BY x.n);
  END IF;

  -- 3. The recipients, read once under the source locks (nearly every
  -- array has an item to route: no statement first to find out).
  v_read := wharf.admission_recipients(v_routes);

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
                  SELECT l.n, l.is_source, l.state FROM unnest(v_read) l) f
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
      FROM unnest(v_read) l
     WHERE NOT l.is_source AND v_source_active[l.n]
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
    -- Drops decided after the reads.
    ARRAY(SELECT CASE WHEN (p_items[k]).error_code IS NOT NULL OR (v_routes[k]).body_events IS NOT NULL THEN NULL
                      WHEN (v_routes[k]).drop_reason IS NOT NULL THEN (v_routes[k]).drop_reason
                      WHEN (v_routes[k]).control THEN NULL
                      WHEN NOT v_source_active[k] THEN 'source-inactive'
                      WHEN NOT v_subscribed[k] THEN 'no-subscriber'
                 END
            FROM generate_series(1, cardinality(p_items)) k ORDER BY k)
    INTO v_rows, v_refused, v_drops;

  -- The scope of every row to store, made when missing and locked, in the
  -- one lock order (lock_scopes, sql/20): the last class of locks, taken for
  -- every segment at once, so that no segment waits for a scope lock while
  -- holding those of the segments before it. Locked before the rows are
  -- inserted, so that within a scope ids are assigned and committed in the
  -- same order and a claim never passes over a row still being inserted. An
  -- item that starts a segment may yet be answered by its body's rows: the
  -- scopes it would make are noted, to be removed again if it is.
  IF v_segments[cardinality(v_segments)] > 1 THEN
    v_existing := ARRAY(SELECT s.scope_key FROM wharf.scope s
                         WHERE s.scope_key = ANY (ARRAY(SELECT r.scope_key FROM unnest(v_rows) r
                                                         WHERE v_segments[r.n] > 1
                                                           AND r.n = array_position(v_segments, v_segments[r.n]))));
  END IF;
  PERFORM wharf.lock_scopes(ARRAY(SELECT r.scope_key FROM unnest(v_rows) r),
                            ARRAY(SELECT r.workspace_id FROM unnest(v_rows) r),
                            ARRAY(SELECT r.scope_active FROM unnest(v_rows) r));

  -- 5. Insert, segment by segment, in array order, each workspace's row due
  -- at once; a delivery stored before (or earlier in the array) is a
  -- duplicate. The new rows are the youngest of their scopes: each heads its
  -- scope when it has no head. The scope trigger is told that this statement
  -- keeps the scopes (sql/20).
  PERFORM set_config('wharf.keeping_scopes', 'on', true);
  FOR v_segment IN 1 .. v_segments[cardinality(v_segments)] LOOP
    IF v_segment > 1 THEN
      -- Its first item repeats a body of the segments before: what they
      -- stored answers it now, and nothing else is decided for it.
      v_first := array_position(v_segments, v_segment);
      v_answer := wharf.body_stored(p_items[v_first]);
      IF v_answer IS NOT NULL THEN
        v_routes := ARRAY(SELECT CASE WHEN r.n = v_first
                                      THEN ROW(r.n, r.provider, r.source, r.subjects, r.connection_signed, v_answer,
                                               false, NULL, NULL)::wharf.admission_route
                                      ELSE r END
                            FROM unnest(v_routes) r ORDER BY r.n);
        v_refused[v_first] := '[]';
        v_drops[v_first] := NULL;
        v_answered := v_answered || v_first;
      END IF;
    END IF;
    WITH stored AS (
      INSERT INTO wharf.provider_event
        (workspace_id, provider, delivery_key, event_type, subject, scope_key, source, connection_id,
         payload, headers, body_sha256)
      SELECT r.workspace_id, i.provider, i.delivery_key, i.event_type, i.subjects[1], r.scope_key, i.source,
             r.connection_id, i.payload, i.headers, i.body_sha256
        FROM unnest(v_rows) WITH ORDINALITY AS r(n, workspace_id, connection_id, scope_key, scope_active, k)
        CROSS JOIN LATERAL (SELECT (p_items[r.n]).*) i
       WHERE v_segments[r.n] = v_segment AND (v_routes[r.n]).body_events IS NULL
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
    SELECT v_stored OR count(*) > 0, v_ids || coalesce(array_agg(id), '{}'), v_keys || coalesce(array_agg(dedupe_key), '{}')
      INTO v_stored, v_ids, v_keys FROM stored;
  END LOOP;
  PERFORM set_config('wharf.keeping_scopes', 'off', true);
  -- The stored rows' destinations' deliveries commit with them (sql/88).
  IF cardinality(v_ids) > 0
     AND wharf.workspaces_route(ARRAY(SELECT DISTINCT r.workspace_id FROM unnest(v_rows) r WHERE r.workspace_id IS NOT NULL)) THEN
    PERFORM wharf.route_events(v_ids);
  END IF;
  -- The scopes made in vain for answered items, as if never made: one after
  -- another, an answered item locks no scope.
  IF cardinality(v_answered) > 0 THEN
    DELETE FROM wharf.scope s
     WHERE s.scope_key = ANY (ARRAY(SELECT r.scope_key FROM unnest(v_rows) r WHERE r.n = ANY (v_answered)
                                    EXCEPT
                                    SELECT r.scope_key FROM unnest(v_rows) r WHERE r.n <> ALL (v_answered)))
       AND s.scope_key <> ALL (v_existing) AND s.head_id IS NULL AND s.leased_id IS NULL;
  END IF;

  -- The receipts' events: each row's id, stored by this call (the first row
  -- of its dedupe key, matched to what the INSERT returned by grouping both
  -- by that key) or found stored before. The rows of an item a segment
  -- answered with its body's rows were never offered.
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
                             WHERE (v_routes[r.n]).body_events IS NULL
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

  -- Every refusal and drop, in array order: no payload, no header. (Tested
  -- as expressions, not a query: most arrays have none.)
  IF cardinality(array_remove(v_drops, NULL)) > 0
     OR v_refused <> array_fill('[]'::jsonb, ARRAY[cardinality(p_items)]) THEN
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
  END IF;

  -- 6. Wake-up, delivered at commit, only while some claimer is idle.
  IF v_stored THEN
    PERFORM wharf.notify_idle_claimers();
  END IF;

  RETURN ARRAY(
    SELECT CASE
             WHEN i.error_code IS NOT NULL
               THEN jsonb_build_object('error', jsonb_build_object('code', i.error_code, 'message', i.error_message))
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

-- Stores one event row in p_scope_key unless the delivery is already stored
-- for that workspace; returns the receipt entry {workspace_id, event_id,
-- outcome: stored|duplicate}. The row heads its scope through the scope
-- trigger (sql/20), after lock_scope has locked the scope: within a scope ids
-- are assigned and committed in the same order, and a claim never passes
-- over a row still being inserted. Internal: admit_item's.
CREATE OR REPLACE FUNCTION wharf.store_event(
  p_item wharf.admission_item, p_workspace_id bigint, p_connection_id bigint, p_scope_key text)
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
    (p_workspace_id, p_item.provider, p_item.delivery_key, p_item.event_type, p_item.subjects[1], p_scope_key,
     p_item.source, p_connection_id, p_item.payload, p_item.headers, p_item.body_sha256)
  ON CONFLICT (workspace_id, provider, delivery_key) DO NOTHING
  RETURNING id INTO v_id;
  IF v_id IS NOT NULL THEN
    -- Its destinations' deliveries commit with it (sql/88).
    IF p_workspace_id IS NOT NULL AND wharf.workspaces_route(ARRAY[p_workspace_id]) THEN
      PERFORM wharf.route_events(ARRAY[v_id]);
    END IF;
    RETURN jsonb_build_object('workspace_id', p_workspace_id, 'event_id', v_id, 'outcome', 'stored');
  END IF;
  -- Two lookups, not `IS NOT DISTINCT FROM`, which no btree serves: a
  -- repeated delivery must cost an index probe whatever the inbox holds.
  IF p_workspace_id IS NULL THEN
    SELECT id INTO v_id FROM wharf.provider_event
     WHERE workspace_id IS NULL AND provider = p_item.provider AND delivery_key = p_item.delivery_key;
  ELSE
    SELECT id INTO v_id FROM wharf.provider_event
     WHERE workspace_id = p_workspace_id AND provider = p_item.provider AND delivery_key = p_item.delivery_key;
  END IF;
  RETURN jsonb_build_object('workspace_id', p_workspace_id, 'event_id', v_id, 'outcome', 'duplicate');
END $$;

-- Admits one delivery, an admission_item without error, and returns its
-- receipt (see admit). The rules of admit_items for one delivery, statement
-- by statement: for one delivery a plan over arrays costs more to start than
-- the statements it saves (bench/RESULTS.md §1). A property test admits random
-- arrays through both and compares everything they write
-- (test/sql/admit-many.test.ts). Internal: admit's and admit_many's.
CREATE OR REPLACE FUNCTION wharf.admit_item(p_item wharf.admission_item) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_route    jsonb := p_item.route;
  v_subject  text := p_item.subjects[1];
  v_source   wharf.connection;
  v_read     wharf.admission_recipient[];  -- under the source's lifecycle lock
  v_events   jsonb := '[]'::jsonb;
  v_refused  jsonb := '[]'::jsonb;
  v_drop     text;
  v_ws       record;
  v_stored   boolean := false;
  -- Signed with a secret one workspace shares with the provider (GitLab,
  -- Outline, Forgejo, Standard Webhooks): the body is only as trusted as that
  -- workspace, so it reaches that connection alone, whatever it names.
  v_connection_signed boolean := v_route ? 'connection_id';
BEGIN
  -- Held to commit: a claimer going idle (mark_idle) waits for this
  -- admission, so that the claim it makes next sees the row (rule 6).
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;

  -- 0. A body signed alone, stored before from this source: the rows already
  -- stored answer (body_stored). Its lock makes concurrent admissions of one
  -- body take turns (class 2 of the one lock order, sql/70).
  IF p_item.body_sha256 IS NOT NULL THEN
    PERFORM pg_advisory_xact_lock(wharf.lifecycle_key('body',
      p_item.source || ' ' || coalesce(v_route->>'connection_id', '') || ' ' || encode(p_item.body_sha256, 'hex')));
    v_events := wharf.body_stored(p_item);
    IF v_events IS NOT NULL THEN
      RETURN jsonb_build_object('delivery_key', p_item.delivery_key, 'events', v_events,
                                'refused', '[]'::jsonb, 'dropped', NULL);
    END IF;
    v_events := '[]'::jsonb;
  END IF;

  -- 1. Control events: one installation row in the provider's system scope.
  IF v_route->'control' = 'true' THEN
    IF wharf.is_control_event(p_item.provider, p_item.event_type, v_route, p_item.payload) THEN
      v_events := jsonb_build_array(wharf.store_event(p_item, NULL, NULL, 'system:' || p_item.provider || ':' || p_item.source));
      v_stored := v_events->0->>'outcome' = 'stored';
    ELSE
      v_drop := 'invalid-event-route';
    END IF;
  ELSE
    -- 3. Lifecycle lock, taken before rule 2 reads the source: the source's,
    -- shared, before anything about it is read (class 3 of the one lock
    -- order, sql/70). Every change of
    -- its connections, their subscriptions or their workspaces holds it
    -- exclusive: it committed before the reads below, or waits until this
    -- admission commits. Queued fairly, so no stream of admissions starves a
    -- change.
    PERFORM pg_advisory_xact_lock_shared(wharf.lifecycle_key('source', wharf.source_lock_id(p_item.provider, p_item.source)));

    -- 2. Source: the connection named by a verified route fact.
    IF v_route ? 'connection_id' THEN
      SELECT * INTO v_source FROM wharf.connection
       WHERE id = CASE WHEN v_route->>'connection_id' ~ '^[0-9]{1,18}$'
                       THEN (v_route->>'connection_id')::bigint END
         AND provider = p_item.provider AND source = p_item.source;
    ELSIF v_route ? 'installation_id' THEN
      SELECT * INTO v_source FROM wharf.connection
       WHERE provider = p_item.provider AND source = p_item.source AND kind = 'app_installation'
         AND external_id = v_route->>'installation_id';
    ELSIF v_route ? 'team_id' THEN
      SELECT * INTO v_source FROM wharf.connection
       WHERE provider = p_item.provider AND source = p_item.source AND kind = 'slack_team'
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
    -- 3. The source and recipients, read once under the source's lock.
    v_read := wharf.admission_recipients(ARRAY[ROW(1, p_item.provider, p_item.source, p_item.subjects, v_connection_signed,
                                                   NULL, false, NULL, v_source.id)::wharf.admission_route]);

    -- 4. Activity: the source itself must be ACTIVE (or PAUSED: a paused
    -- workspace or connection stores and holds); then per workspace.
    IF NOT EXISTS (SELECT FROM unnest(v_read) f WHERE f.is_source AND f.state IN ('ACTIVE', 'PAUSED')) THEN
      v_drop := 'source-inactive';
    ELSIF NOT EXISTS (SELECT FROM unnest(v_read) f WHERE NOT f.is_source) THEN
      v_drop := 'no-subscriber';
    ELSE
      FOR v_ws IN
        SELECT f.workspace_id,
               bool_or(f.workspace_state IN ('ACTIVE', 'PAUSED')) AS workspace_active,
               min(f.connection_id) FILTER (WHERE f.state IN ('ACTIVE', 'PAUSED')) AS active_connection_id,
               jsonb_agg(f.connection_id ORDER BY f.connection_id) AS connection_ids
          FROM unnest(v_read) f WHERE NOT f.is_source
         GROUP BY 1 ORDER BY 1
      LOOP
        IF v_ws.workspace_active AND v_ws.active_connection_id IS NOT NULL THEN
          -- 5. Insert: one row per admitted workspace, due at once.
          v_events := v_events || wharf.store_event(p_item, v_ws.workspace_id, v_ws.active_connection_id,
                                                    v_ws.workspace_id || ':' || p_item.provider || ':' || v_subject);
          v_stored := v_stored OR v_events->-1->>'outcome' = 'stored';
        ELSE
          v_refused := v_refused || (
            SELECT jsonb_agg(jsonb_build_object('connection_id', c::bigint, 'workspace_id', v_ws.workspace_id,
                                                'reason', CASE WHEN v_ws.workspace_active THEN 'connection-inactive'
                                                               ELSE 'workspace-inactive' END))
              FROM jsonb_array_elements(v_ws.connection_ids) c);
        END IF;
      END LOOP;
    END IF;
  END IF;

  -- Every refusal and drop, in order: no payload, no header.
  IF v_drop IS NOT NULL OR jsonb_array_length(v_refused) > 0 THEN
    INSERT INTO wharf.admission_log (provider, source, delivery_key, connection_id, workspace_id, reason)
    SELECT p_item.provider, p_item.source, p_item.delivery_key, (r->>'connection_id')::bigint, (r->>'workspace_id')::bigint, r->>'reason'
      FROM jsonb_array_elements(v_refused) WITH ORDINALITY AS x(r, o)
    UNION ALL
    SELECT p_item.provider, p_item.source, p_item.delivery_key, v_source.id, NULL, v_drop WHERE v_drop IS NOT NULL;
  END IF;

  -- 6. Wake-up, delivered at commit, only while some claimer is idle.
  IF v_stored THEN
    PERFORM wharf.notify_idle_claimers();
  END IF;

  RETURN jsonb_build_object('delivery_key', p_item.delivery_key, 'events', v_events,
                            'refused', v_refused, 'dropped', v_drop);
END $$;

-- Admits one verified delivery and returns its receipt:
--   {delivery_key, events: [{workspace_id, event_id, outcome}],
--    refused: [{connection_id, workspace_id, reason}], dropped: reason|null}
-- Raises 22004/22023 for missing or malformed arguments (admission_item;
-- nothing written). (WH409, "route changed", is no longer raised: the route
-- is read once, under its source's lock; the edge still maps it to 503 for
-- a database of an earlier release.) p_body_sha256 (hex), for providers that
-- sign the body alone (GitHub, Forgejo): a body already stored from this
-- source within replay_window is a duplicate, whatever delivery key or event
-- type comes with it. SECURITY DEFINER: the edge's role needs EXECUTE on this
-- function.
CREATE OR REPLACE FUNCTION wharf.admit(
  p_provider text, p_source text, p_delivery_key text, p_event_type text,
  p_route jsonb, p_subjects text[], p_payload jsonb, p_headers jsonb, p_body_sha256 text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  -- A variable, not an argument expression: admission_item is inlined only
  -- while its arguments are cheap, and a call to provider_known is not.
  v_known    boolean := wharf.provider_known(p_provider);
  v_item     wharf.admission_item := wharf.admission_item(p_provider, p_source, p_delivery_key, p_event_type,
                                                           p_route, p_subjects, p_payload, p_headers, p_body_sha256,
                                                           v_known);
BEGIN
  IF v_item.error_code IS NOT NULL THEN
    RAISE EXCEPTION '%', v_item.error_message USING ERRCODE = v_item.error_code;
  END IF;
  RETURN wharf.admit_item(v_item);
END $$;

-- Admits many deliveries in one transaction, as admitting them one after
-- another with admit would: p_deliveries is a JSON array of {provider,
-- source, delivery_key, event_type, route, subjects, payload, headers,
-- body_sha256}; the result is the array of their receipts, in order. An
-- element admit would reject gets {"error": {"code", "message"}} in its slot
-- and changes nothing; the others are admitted (admit_items). 22023 when
-- p_deliveries is not an array.
-- SECURITY DEFINER: the edge's role needs EXECUTE on this function only.
CREATE OR REPLACE FUNCTION wharf.admit_many(p_deliveries jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_items wharf.admission_item[] := wharf.admission_items(p_deliveries);
BEGIN
  -- One delivery (a receiver's lone request, the common case at low load):
  -- admit's own path, whose fixed cost is a third of admit_items' plans over
  -- arrays (bench/RESULTS.md §1).
  IF cardinality(v_items) = 1 AND v_items[1].error_code IS NULL THEN
    RETURN jsonb_build_array(wharf.admit_item(v_items[1]));
  END IF;
  RETURN to_jsonb(wharf.admit_items(v_items));
END $$;

REVOKE ALL ON FUNCTION wharf.admit(text, text, text, text, jsonb, text[], jsonb, jsonb, text),
  wharf.admit_many(jsonb) FROM PUBLIC;
