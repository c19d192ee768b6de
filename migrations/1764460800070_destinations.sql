-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.check_destination_spec(jsonb)
--   new      function wharf.check_rule_spec(bigint,jsonb)
--   new      function wharf.claim_deliveries(text,integer)
--   new      function wharf.complete_delivery(bigint,bigint,integer,integer,text)
--   new      function wharf.count_dead_deliveries(bigint,bigint,jsonb)
--   new      function wharf.count_delivery_issue(bigint,bigint,text,timestamp with time zone,boolean)
--   new      function wharf.create_destination(bigint,jsonb)
--   new      function wharf.create_destination_rule(bigint,jsonb)
--   new      function wharf.dead_deliveries(bigint,bigint,jsonb)
--   new      function wharf.delete_destination(bigint,bigint)
--   new      function wharf.delete_destination_rule(bigint,bigint)
--   new      function wharf.deliveries_purgeable(bigint,timestamp with time zone,timestamp with time zone)
--   new      function wharf.delivery_scope_key(bigint,text)
--   new      function wharf.delivery_summary(wharf.destination_delivery)
--   new      function wharf.destination_for_change(bigint,bigint)
--   new      function wharf.destination_summary(wharf.destination)
--   new      function wharf.event_deliveries(bigint,bigint)
--   new      function wharf.event_type_matches(text[],text)
--   new      function wharf.fail_delivery(bigint,bigint,text,text,integer,integer,text,interval)
--   new      function wharf.filter_condition_matches(jsonb,jsonb)
--   new      function wharf.filter_condition_problem(jsonb,text,integer,boolean)
--   new      function wharf.filter_matches(jsonb,jsonb,jsonb)
--   new      function wharf.filter_problem(jsonb)
--   new      function wharf.json_integer_between(jsonb,bigint,bigint)
--   new      function wharf.list_deliveries(bigint,bigint,text,integer,bigint)
--   new      function wharf.list_destination_rules(bigint,bigint)
--   new      function wharf.list_destinations(bigint)
--   new      function wharf.next_delivery_at()
--   new      function wharf.promote_after_deleted_deliveries()
--   new      function wharf.promote_next_delivery(bigint,text)
--   new      function wharf.purge_forwarding(integer)
--   new      function wharf.reap_deliveries()
--   new      function wharf.release_delivery(bigint,bigint)
--   new      function wharf.replay_deliveries(bigint,bigint,jsonb,text,integer)
--   new      function wharf.replay_delivery(bigint,bigint,text)
--   new      function wharf.route_events(bigint[])
--   new      function wharf.rule_summary(wharf.destination_rule)
--   new      function wharf.set_destination_credentials(bigint,bigint,text,text)
--   new      function wharf.set_destination_secret(bigint,bigint,text,boolean,interval)
--   new      function wharf.set_destination_state(bigint,bigint,text,text)
--   new      function wharf.show_delivery(bigint,bigint)
--   new      function wharf.show_destination(bigint,bigint)
--   new      function wharf.test_destination_filter(bigint,jsonb,bigint)
--   new      function wharf.update_destination(bigint,bigint,jsonb)
--   new      function wharf.update_destination_rule(bigint,bigint,jsonb)
--   new      function wharf.workspaces_route(bigint[])
--   new      trigger destination_delivery_promote_after_delete on wharf.destination_delivery
--   changed  function wharf.admit_items(wharf.admission_item[])
--   changed  function wharf.purge()
--   changed  function wharf.purge_logs()
--   changed  function wharf.store_event(wharf.admission_item,bigint,bigint,text)

-- ======== sql/60-replay-retention.sql ========

-- Deletes DONE rows handled longer ago than replay_window and DEAD rows dead
-- longer than dead_retention (never a QUEUED or LEASED row), at most
-- purge_batch of each, oldest arrivals first, then the scope rows left with
-- nothing queued or leased. One call is one short transaction's work, so
-- retention never holds back the cleanup horizon the way a long transaction
-- does: the retention loop (worker/retention.ts) calls it again until it
-- deletes nothing.
--
-- The candidates are found by arrival (ix_provider_event_received): a row
-- handled or dead before a time arrived before it. handled_at and state are
-- in no index, so that completing a row stays a heap-only update; what purge
-- reads besides what it deletes is the older rows it keeps (dead letters
-- within their retention, rows held by a paused workspace). A row locked by
-- an erasure or a replay is passed over (SKIP LOCKED) for the next call.
CREATE OR REPLACE FUNCTION wharf.purge(OUT done_deleted bigint, OUT dead_deleted bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_done_before timestamptz := now() - wharf.setting_interval('replay_window');
  v_dead_before timestamptz := now() - wharf.setting_interval('dead_retention');
  v_batch       integer := wharf.setting_integer('purge_batch');
BEGIN
  DELETE FROM wharf.provider_event
   WHERE id IN (SELECT id FROM wharf.provider_event
                 WHERE received_at < v_done_before AND state = 'DONE' AND handled_at < v_done_before
                   AND wharf.deliveries_purgeable(id, v_done_before, v_dead_before)
                 ORDER BY received_at
                 LIMIT v_batch
                   FOR UPDATE SKIP LOCKED);
  GET DIAGNOSTICS done_deleted = ROW_COUNT;

  DELETE FROM wharf.provider_event
   WHERE id IN (SELECT id FROM wharf.provider_event
                 WHERE received_at < v_dead_before AND state = 'DEAD' AND dead_at < v_dead_before
                   AND wharf.deliveries_purgeable(id, v_done_before, v_dead_before)
                 ORDER BY received_at
                 LIMIT v_batch
                   FOR UPDATE SKIP LOCKED);
  GET DIAGNOSTICS dead_deleted = ROW_COUNT;

  -- A scope row being used right now is locked: pass over it.
  DELETE FROM wharf.scope s
   WHERE s.scope_key IN (SELECT scope_key FROM wharf.scope
                          WHERE head_id IS NULL AND leased_id IS NULL
                          FOR UPDATE SKIP LOCKED);
END $$;

-- Retention of the tables that grow with traffic besides the inbox (whose
-- attempts and steps go with their event): admission_log entries older than
-- log_retention, replay_audit entries and finished bulk replays older than
-- audit_retention, at most purge_batch of each per call, like purge; and
-- issues, stuck-scope actions and alerts by their own rules (sql/97-99).
-- Returns how many rows it deleted; the retention loop calls it until that is 0.
-- (GitHub redelivery bookkeeping is pruned by its own sweep, sql/85.)
CREATE OR REPLACE FUNCTION wharf.purge_logs() RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_log_before   timestamptz := now() - wharf.setting_interval('log_retention');
  v_audit_before timestamptz := now() - wharf.setting_interval('audit_retention');
  v_batch        integer := wharf.setting_integer('purge_batch');
  v_deleted      bigint;
  v_total        bigint := 0::bigint;
BEGIN
  DELETE FROM wharf.admission_log
   WHERE id IN (SELECT id FROM wharf.admission_log WHERE at < v_log_before ORDER BY at LIMIT v_batch);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  v_total := v_total + v_deleted;

  DELETE FROM wharf.replay_audit
   WHERE id IN (SELECT id FROM wharf.replay_audit WHERE at < v_audit_before ORDER BY at LIMIT v_batch);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  v_total := v_total + v_deleted;

  DELETE FROM wharf.bulk_replay
   WHERE id IN (SELECT id FROM wharf.bulk_replay
                 WHERE finished_at < v_audit_before ORDER BY finished_at LIMIT v_batch);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  v_total := v_total + v_deleted;

  -- The on-call surface's own tables (sql/97-99), each with its rule.
  RETURN v_total + wharf.purge_issues(v_batch) + wharf.purge_scope_actions(v_batch) + wharf.purge_alerts(v_batch)
       + wharf.purge_forwarding(v_batch);
END $$;

REVOKE ALL ON FUNCTION wharf.replay(bigint, bigint, text, boolean),
  wharf.replay_installation(bigint, text, boolean),
  wharf.purge(), wharf.purge_logs() FROM PUBLIC;

-- ======== sql/80-admission.sql ========

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

-- ======== sql/88-destinations.sql ========

-- The first problem of condition p_cond at p_path ('filter.payload.action:
-- unknown operator $regex'), or NULL when it is valid. A condition is a
-- literal (equality), an object of operators (keys starting with $), or an
-- object of field names, each with a condition on that field. p_top: the
-- filter itself, whose fields are payload and headers and which is an object.
-- Internal: filter_problem's.
CREATE OR REPLACE FUNCTION wharf.filter_condition_problem(p_cond jsonb, p_path text, p_depth integer, p_top boolean)
RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_part    record;
  v_problem text;
  v_type    text;
BEGIN
  IF p_depth > 16 THEN
    RETURN p_path || ': nested deeper than 16 levels';
  END IF;
  IF jsonb_typeof(p_cond) <> 'object' THEN
    RETURN CASE WHEN p_top THEN p_path || ': must be an object' END;
  END IF;
  IF p_cond = '{}' THEN
    RETURN p_path || ': is empty';
  END IF;
  IF EXISTS (SELECT FROM jsonb_object_keys(p_cond) k WHERE left(k, 1) = '$')
     AND EXISTS (SELECT FROM jsonb_object_keys(p_cond) k WHERE left(k, 1) <> '$') THEN
    RETURN p_path || ': mixes operators and field names';
  END IF;
  FOR v_part IN SELECT key, value FROM jsonb_each(p_cond) ORDER BY key LOOP
    v_type := jsonb_typeof(v_part.value);
    v_problem := CASE
      WHEN left(v_part.key, 1) <> '$' THEN
        CASE WHEN p_top AND v_part.key NOT IN ('payload', 'headers')
             THEN p_path || '.' || v_part.key || ': unknown field (a filter starts with payload or headers)'
             ELSE wharf.filter_condition_problem(v_part.value, p_path || '.' || v_part.key, p_depth + 1, false) END
      WHEN v_part.key IN ('$and', '$or') THEN
        CASE WHEN v_type <> 'array' OR jsonb_array_length(v_part.value) = 0
             THEN p_path || '.' || v_part.key || ': must be a non-empty array'
             ELSE (SELECT i.problem FROM jsonb_array_elements(v_part.value) WITH ORDINALITY AS a(item, n)
                     CROSS JOIN LATERAL (SELECT wharf.filter_condition_problem(
                                           a.item, p_path || '.' || v_part.key || '[' || (a.n - 1) || ']',
                                           p_depth + 1, p_top) AS problem) i
                    WHERE i.problem IS NOT NULL ORDER BY a.n LIMIT 1) END
      WHEN v_part.key = '$not' THEN
        wharf.filter_condition_problem(v_part.value, p_path || '.$not', p_depth + 1, p_top)
      WHEN p_top THEN
        p_path || ': ' || v_part.key || ' applies to a field, e.g. {"payload": {"action": {"' || v_part.key || '": …}}}'
      WHEN v_part.key IN ('$eq', '$neq') THEN NULL
      WHEN v_part.key IN ('$in', '$nin') THEN
        CASE WHEN v_type <> 'array' THEN p_path || '.' || v_part.key || ': must be an array' END
      WHEN v_part.key IN ('$startsWith', '$endsWith') THEN
        CASE WHEN v_type <> 'string' THEN p_path || '.' || v_part.key || ': must be a string' END
      WHEN v_part.key = '$contains' THEN
        CASE WHEN v_type IN ('object', 'array') THEN p_path || '.$contains: must be a string, number, boolean or null' END
      WHEN v_part.key IN ('$gt', '$gte', '$lt', '$lte') THEN
        CASE WHEN v_type NOT IN ('number', 'string') THEN p_path || '.' || v_part.key || ': must be a number or a string' END
      WHEN v_part.key = '$exist' THEN
        CASE WHEN v_type <> 'boolean' THEN p_path || '.$exist: must be true or false' END
      ELSE p_path || ': unknown operator ' || v_part.key
    END;
    IF v_problem IS NOT NULL THEN
      RETURN v_problem;
    END IF;
  END LOOP;
  RETURN NULL;
END $$;

-- The first problem of rule filter p_filter, a text naming its place, or
-- NULL when it is valid (or NULL: no filter). At most 16384 characters and
-- 16 levels. The language is in docs/forwarding.md ("Filters").
CREATE OR REPLACE FUNCTION wharf.filter_problem(p_filter jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p_filter IS NULL THEN NULL
              WHEN length(p_filter::text) > 16384 THEN 'filter: longer than 16384 characters'
              ELSE wharf.filter_condition_problem(p_filter, 'filter', 1, true) END
$$;

-- Whether value p_value (NULL: the field is missing) meets condition p_cond,
-- a valid one (filter_condition_problem). Numbers compare as numbers,
-- strings by code point. Internal: filter_matches'.
CREATE OR REPLACE FUNCTION wharf.filter_condition_matches(p_cond jsonb, p_value jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_part   record;
  v_ok     boolean;
  v_string boolean := jsonb_typeof(p_value) = 'string';
BEGIN
  IF jsonb_typeof(p_cond) <> 'object' THEN
    RETURN coalesce(p_value = p_cond, false);
  END IF;
  FOR v_part IN SELECT key, value FROM jsonb_each(p_cond) LOOP
    v_ok := CASE
      WHEN left(v_part.key, 1) <> '$' THEN
        wharf.filter_condition_matches(v_part.value,
                                       CASE WHEN jsonb_typeof(p_value) = 'object' THEN p_value -> v_part.key END)
      WHEN v_part.key = '$and' THEN
        NOT EXISTS (SELECT FROM jsonb_array_elements(v_part.value) c
                     WHERE NOT wharf.filter_condition_matches(c, p_value))
      WHEN v_part.key = '$or' THEN
        EXISTS (SELECT FROM jsonb_array_elements(v_part.value) c WHERE wharf.filter_condition_matches(c, p_value))
      WHEN v_part.key = '$not' THEN NOT wharf.filter_condition_matches(v_part.value, p_value)
      WHEN v_part.key = '$eq' THEN p_value = v_part.value
      WHEN v_part.key = '$neq' THEN p_value IS DISTINCT FROM v_part.value
      WHEN v_part.key = '$in' THEN EXISTS (SELECT FROM jsonb_array_elements(v_part.value) c WHERE c = p_value)
      WHEN v_part.key = '$nin' THEN NOT EXISTS (SELECT FROM jsonb_array_elements(v_part.value) c WHERE c = p_value)
      WHEN v_part.key = '$startsWith' THEN v_string AND starts_with(p_value #>> '{}', v_part.value #>> '{}')
      WHEN v_part.key = '$endsWith' THEN
        v_string AND right(p_value #>> '{}', length(v_part.value #>> '{}')) = v_part.value #>> '{}'
      WHEN v_part.key = '$contains' THEN
        CASE jsonb_typeof(p_value)
          WHEN 'string' THEN jsonb_typeof(v_part.value) = 'string' AND strpos(p_value #>> '{}', v_part.value #>> '{}') > 0
          WHEN 'array' THEN EXISTS (SELECT FROM jsonb_array_elements(p_value) e WHERE e = v_part.value)
          ELSE false END
      WHEN v_part.key IN ('$gt', '$gte', '$lt', '$lte') THEN
        CASE WHEN jsonb_typeof(p_value) = 'number' AND jsonb_typeof(v_part.value) = 'number' THEN
               CASE v_part.key WHEN '$gt' THEN p_value::numeric > v_part.value::numeric
                               WHEN '$gte' THEN p_value::numeric >= v_part.value::numeric
                               WHEN '$lt' THEN p_value::numeric < v_part.value::numeric
                               ELSE p_value::numeric <= v_part.value::numeric END
             WHEN v_string AND jsonb_typeof(v_part.value) = 'string' THEN
               CASE v_part.key WHEN '$gt' THEN (p_value #>> '{}') COLLATE "C" > (v_part.value #>> '{}')
                               WHEN '$gte' THEN (p_value #>> '{}') COLLATE "C" >= (v_part.value #>> '{}')
                               WHEN '$lt' THEN (p_value #>> '{}') COLLATE "C" < (v_part.value #>> '{}')
                               ELSE (p_value #>> '{}') COLLATE "C" <= (v_part.value #>> '{}') END
             ELSE false END
      WHEN v_part.key = '$exist' THEN (p_value IS NOT NULL) = (v_part.value = 'true')
      ELSE false
    END;
    IF NOT coalesce(v_ok, false) THEN
      RETURN false;
    END IF;
  END LOOP;
  RETURN true;
END $$;

-- Whether an event with payload p_payload and (kept, lower-case) headers
-- p_headers meets filter p_filter; true for a NULL filter. 22023 naming the
-- problem for an invalid filter.
CREATE OR REPLACE FUNCTION wharf.filter_matches(p_filter jsonb, p_payload jsonb, p_headers jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_problem text := wharf.filter_problem(p_filter);
BEGIN
  IF v_problem IS NOT NULL THEN
    RAISE EXCEPTION 'wharf: %', v_problem USING ERRCODE = '22023';
  END IF;
  RETURN p_filter IS NULL
      OR wharf.filter_condition_matches(p_filter, jsonb_build_object('payload', p_payload, 'headers', p_headers));
END $$;

-- Whether event type p_type matches one of patterns p_patterns, in which `*`
-- stands for any run of characters (`pull_request.*`, `issue*`, `*`); true
-- for NULL patterns.
CREATE OR REPLACE FUNCTION wharf.event_type_matches(p_patterns text[], p_type text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT p_patterns IS NULL
      OR EXISTS (SELECT FROM unnest(p_patterns) p
                  WHERE p_type LIKE replace(replace(replace(replace(p, '\', '\\'), '%', '\%'), '_', '\_'), '*', '%'))
$$;

-- The advisory lock of (destination, scope) that routing holds shared and a
-- promotion exclusive (see the top of this file). Internal.
CREATE OR REPLACE FUNCTION wharf.delivery_scope_key(p_destination_id bigint, p_scope_key text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT wharf.lifecycle_key('delivery-scope', p_destination_id || ' ' || p_scope_key)
$$;

-- Routes the stored events p_ids (their ids, in any order) to the
-- destinations whose rules they match: one QUEUED delivery per (event,
-- matched destination), made in event order, due at once when it heads its
-- (destination, scope) and 'infinity' (waiting) behind a head; an event
-- matched by a forward_only rule is DONE for the workspace's handlers
-- (outcome 'forwarded'); what a rule's filter alone left out is counted per
-- rule and minute. Wakes the forwarders (channel wharf_delivery) when it made
-- a delivery. Internal: admission's, for the workspaces that have rules.
CREATE OR REPLACE FUNCTION wharf.route_events(p_ids bigint[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_events       bigint[];
  v_rules        bigint[];
  v_destinations bigint[];
  v_passed       boolean[];
  v_made         integer;
BEGIN
  SELECT coalesce(array_agg(e.id ORDER BY e.id, r.id), '{}'), array_agg(r.id ORDER BY e.id, r.id),
         array_agg(r.destination_id ORDER BY e.id, r.id),
         array_agg(wharf.filter_matches(r.filter, e.payload, e.headers) ORDER BY e.id, r.id)
    INTO v_events, v_rules, v_destinations, v_passed
    FROM wharf.provider_event e
    JOIN wharf.destination_rule r ON r.workspace_id = e.workspace_id
   WHERE e.id = ANY (p_ids)
     AND (r.connection_id IS NULL OR r.connection_id = e.connection_id)
     AND (r.provider IS NULL OR r.provider = e.provider)
     AND wharf.event_type_matches(r.event_types, e.event_type)
     AND (r.subject_prefix IS NULL OR starts_with(e.subject, r.subject_prefix));
  IF cardinality(v_events) = 0 THEN
    RETURN 0;
  END IF;

  -- Before reading whether a head exists, in key order (top of this file).
  PERFORM pg_advisory_xact_lock_shared(k.key)
     FROM (SELECT DISTINCT wharf.delivery_scope_key(m.destination_id, e.scope_key) AS key
             FROM unnest(v_events, v_destinations, v_passed) AS m(event_id, destination_id, passed)
             JOIN wharf.provider_event e ON e.id = m.event_id
            WHERE m.passed
            ORDER BY 1) k;

  WITH matched AS (
    SELECT DISTINCT ON (m.event_id, m.destination_id) m.event_id, m.destination_id, e.workspace_id, e.scope_key,
           d.ordered
      FROM unnest(v_events, v_destinations, v_passed) AS m(event_id, destination_id, passed)
      JOIN wharf.provider_event e ON e.id = m.event_id
      JOIN wharf.destination d ON d.id = m.destination_id
     WHERE m.passed
     ORDER BY m.event_id, m.destination_id
  )
  INSERT INTO wharf.destination_delivery (event_id, destination_id, workspace_id, scope_key, ordered, next_attempt_at)
  SELECT m.event_id, m.destination_id, m.workspace_id, m.scope_key, m.ordered,
         CASE WHEN m.ordered
                   AND (row_number() OVER (PARTITION BY m.destination_id, m.scope_key ORDER BY m.event_id) > 1
                        OR EXISTS (SELECT FROM wharf.destination_delivery o
                                    WHERE o.destination_id = m.destination_id AND o.scope_key = m.scope_key
                                      AND o.ordered AND o.state IN ('QUEUED', 'LEASED')))
              THEN 'infinity' ELSE clock_timestamp() END
    FROM matched m
   ORDER BY m.event_id, m.destination_id
  ON CONFLICT (event_id, destination_id) DO NOTHING;
  GET DIAGNOSTICS v_made = ROW_COUNT;

  UPDATE wharf.provider_event e
     SET state = 'DONE', outcome = 'forwarded', handled_at = clock_timestamp()
   WHERE e.id IN (SELECT m.event_id
                    FROM unnest(v_events, v_rules, v_passed) AS m(event_id, rule_id, passed)
                    JOIN wharf.destination_rule r ON r.id = m.rule_id
                   WHERE m.passed AND r.forward_only)
     AND e.state = 'QUEUED';

  -- In rule order: two admissions counting into the same rows take their
  -- locks in one order.
  INSERT INTO wharf.rule_filtered_minute AS f (rule_id, minute, filtered)
  SELECT m.rule_id, date_trunc('minute', clock_timestamp()), count(*)
    FROM unnest(v_rules, v_passed) AS m(rule_id, passed) WHERE NOT m.passed
   GROUP BY m.rule_id ORDER BY m.rule_id
  ON CONFLICT (rule_id, minute) DO UPDATE SET filtered = f.filtered + excluded.filtered;

  IF v_made > 0 THEN
    PERFORM pg_notify('wharf_delivery', '');
  END IF;
  RETURN v_made;
END $$;

-- Makes the first QUEUED delivery of (p_destination_id, p_scope_key) due at
-- once when it was waiting ('infinity'): its head's turn ended. Under the
-- (destination, scope)'s advisory lock, exclusive, so that a delivery being
-- routed behind the ended head has committed first (top of this file).
-- Internal: what ends a head's turn calls it, in key order when several.
CREATE OR REPLACE FUNCTION wharf.promote_next_delivery(p_destination_id bigint, p_scope_key text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(wharf.delivery_scope_key(p_destination_id, p_scope_key));
  UPDATE wharf.destination_delivery q
     SET next_attempt_at = clock_timestamp()
   WHERE q.id = (SELECT o.id FROM wharf.destination_delivery o
                  WHERE o.destination_id = p_destination_id AND o.scope_key = p_scope_key AND o.ordered
                    AND o.state IN ('QUEUED', 'LEASED')
                  ORDER BY o.event_id LIMIT 1)
     AND q.state = 'QUEUED' AND q.next_attempt_at = 'infinity';
END $$;

-- Trigger on wharf.destination_delivery, per statement: a delivery deleted
-- while QUEUED or LEASED (its event erased or deleted) ends its turn; the
-- next of its (destination, scope) becomes due.
CREATE OR REPLACE FUNCTION wharf.promote_after_deleted_deliveries() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM wharf.promote_next_delivery(k.destination_id, k.scope_key)
     FROM (SELECT DISTINCT d.destination_id, d.scope_key,
                  wharf.delivery_scope_key(d.destination_id, d.scope_key) AS key
             FROM deliveries_deleted d
            WHERE d.ordered AND d.state IN ('QUEUED', 'LEASED')
              AND EXISTS (SELECT FROM wharf.destination x WHERE x.id = d.destination_id)
            ORDER BY 3) k;
  RETURN NULL;
END $$;

CREATE TRIGGER destination_delivery_promote_after_delete
  AFTER DELETE ON wharf.destination_delivery
  REFERENCING OLD TABLE AS deliveries_deleted
  FOR EACH STATEMENT EXECUTE FUNCTION wharf.promote_after_deleted_deliveries();

-- Whether any of workspaces p_workspace_ids has a rule: what admission asks
-- before it routes, one index probe (ix_destination_rule_workspace) each.
-- plpgsql for the plan it keeps per session. Internal.
CREATE OR REPLACE FUNCTION wharf.workspaces_route(p_workspace_ids bigint[]) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN EXISTS (SELECT FROM wharf.destination_rule r WHERE r.workspace_id = ANY (p_workspace_ids));
END $$;

-- Leases up to p_max deliveries for worker p_worker, with what the forwarder
-- needs to send each (the sealed secrets, decrypted by the worker; the
-- payload as stored text). A delivery is handed out when its destination has
-- a signing secret and is ACTIVE (or its breaker is open and its probe is
-- due: one delivery, the probe), its workspace is ACTIVE, its event's
-- connection is not PAUSED, it is due, and, for an ordered destination,
-- nothing of its (destination, scope) before it is QUEUED or LEASED. At most
-- max_in_flight leases per destination across every host, and no more than
-- the rate limit's bucket holds. Destinations take turns (the one served
-- longest ago first); one a concurrent claim holds is passed over.
CREATE OR REPLACE FUNCTION wharf.claim_deliveries(p_worker text, p_max integer DEFAULT 1)
RETURNS TABLE (delivery_id bigint, epoch bigint, attempt integer, event_id bigint, destination_id bigint,
               url text, timeout_ms integer, signing_secret text, previous_signing_secret text,
               credentials text, extra_headers jsonb, provider text, event_type text, subject text,
               delivery_key text, event_headers jsonb, payload text, received_at timestamptz, probe boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_now      timestamptz := clock_timestamp();
  v_lease    interval := wharf.setting_interval('lease');
  v_left     integer := least(greatest(coalesce(p_max, 1), 1), 1000);
  v_dest     record;
  v_take     integer;
  v_tokens   double precision;
  v_taken    integer;
BEGIN
  IF p_worker IS NULL OR p_worker = '' THEN
    RAISE EXCEPTION 'wharf.claim_deliveries: worker is required' USING ERRCODE = '22004';
  END IF;
  FOR v_dest IN
    SELECT d.id, d.state, d.max_in_flight, d.rate_limit, d.rate_period, d.tokens, d.tokens_at,
           d.signing_secret, d.previous_valid_until, d.previous_signing_secret, d.credentials,
           d.url, d.timeout_ms, d.headers
      FROM wharf.destination d
      JOIN wharf.workspace w ON w.id = d.workspace_id
     WHERE d.signing_secret IS NOT NULL AND w.state = 'ACTIVE'
       AND (d.state = 'ACTIVE' OR (d.state = 'BREAKER_OPEN' AND d.probe_at <= v_now))
       AND EXISTS (SELECT FROM wharf.destination_delivery q
                    WHERE q.destination_id = d.id AND q.state = 'QUEUED' AND q.next_attempt_at <= v_now)
     ORDER BY d.claimed_at NULLS FIRST, d.id
       FOR NO KEY UPDATE OF d SKIP LOCKED
  LOOP
    v_take := v_left;
    IF v_dest.state = 'BREAKER_OPEN' THEN
      v_take := 1;  -- the probe
    END IF;
    v_take := least(v_take, v_dest.max_in_flight - (
      SELECT count(*)::integer FROM wharf.destination_delivery q WHERE q.destination_id = v_dest.id AND q.state = 'LEASED'));
    IF v_dest.rate_limit IS NOT NULL THEN
      -- A bucket of rate_limit tokens, refilled at rate_limit per period.
      v_tokens := least(v_dest.rate_limit::double precision,
                        coalesce(v_dest.tokens, v_dest.rate_limit)
                        + extract(epoch FROM v_now - coalesce(v_dest.tokens_at, v_now))
                          * v_dest.rate_limit / CASE v_dest.rate_period WHEN 'minute' THEN 60 ELSE 1 END);
      v_take := least(v_take, floor(v_tokens)::integer);
    END IF;
    CONTINUE WHEN v_take <= 0;

    RETURN QUERY
    WITH picked AS (
      -- The due deliveries, longest due first (ix_destination_delivery_due):
      -- of an ordered destination only its heads are ever due.
      SELECT q.id FROM wharf.destination_delivery q
       WHERE q.destination_id = v_dest.id AND q.state = 'QUEUED' AND q.next_attempt_at <= v_now
         AND NOT (q.ordered AND EXISTS (
               SELECT FROM wharf.destination_delivery o
                WHERE o.destination_id = v_dest.id AND o.scope_key = q.scope_key AND o.ordered
                  AND o.state IN ('QUEUED', 'LEASED') AND o.event_id < q.event_id))
         AND NOT EXISTS (SELECT FROM wharf.provider_event e JOIN wharf.connection c ON c.id = e.connection_id
                          WHERE e.id = q.event_id AND c.state = 'PAUSED')
       -- Index order alone, so that LIMIT stops the read: within a scope at
       -- most its head is due, and across scopes there is no order to keep.
       ORDER BY q.next_attempt_at
       LIMIT v_take
         FOR UPDATE OF q SKIP LOCKED
    ), leased AS (
      UPDATE wharf.destination_delivery q
         SET state = 'LEASED', attempt = q.attempt + 1, lease_epoch = q.lease_epoch + 1,
             leased_until = v_now + v_lease, leased_by = p_worker, leased_at = v_now
        FROM picked
       WHERE q.id = picked.id
      RETURNING q.id, q.lease_epoch, q.attempt, q.event_id
    )
    SELECT l.id, l.lease_epoch, l.attempt, l.event_id, v_dest.id, v_dest.url, v_dest.timeout_ms,
           v_dest.signing_secret,
           CASE WHEN v_dest.previous_valid_until > v_now THEN v_dest.previous_signing_secret END,
           v_dest.credentials, v_dest.headers, e.provider, e.event_type, e.subject, e.delivery_key,
           e.headers, e.payload::text, e.received_at, v_dest.state = 'BREAKER_OPEN'
      FROM leased l
      JOIN wharf.provider_event e ON e.id = l.event_id
     ORDER BY l.event_id;
    GET DIAGNOSTICS v_taken = ROW_COUNT;

    UPDATE wharf.destination d
       SET claimed_at = v_now,
           tokens     = CASE WHEN d.rate_limit IS NOT NULL THEN v_tokens - v_taken END,
           tokens_at  = CASE WHEN d.rate_limit IS NOT NULL THEN v_now END,
           -- One probe at a time: the next waits until this one's lease could have ended.
           probe_at   = CASE WHEN d.state = 'BREAKER_OPEN' AND v_taken > 0 THEN v_now + v_lease ELSE d.probe_at END
     WHERE d.id = v_dest.id;
    v_left := v_left - v_taken;
    EXIT WHEN v_left <= 0;
  END LOOP;
END $$;

-- When a claim_deliveries could next hand something out: the earliest due
-- time of a queued delivery of a destination that may send, or of a probe,
-- or of a rate limit's next token; NULL when nothing waits. The forwarder
-- sleeps until then (or a wake-up). It may be early (a head held back by a
-- paused connection), never late.
CREATE OR REPLACE FUNCTION wharf.next_delivery_at() RETURNS timestamptz
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT nullif(min(greatest(
           q.due,
           CASE WHEN d.state = 'BREAKER_OPEN' THEN d.probe_at END,
           CASE WHEN d.rate_limit IS NOT NULL AND d.tokens < 1 THEN
             d.tokens_at + (1 - d.tokens) * CASE d.rate_period WHEN 'minute' THEN 60 ELSE 1 END
                           / d.rate_limit * interval '1 second' END)), 'infinity')
    FROM wharf.destination d
    JOIN wharf.workspace w ON w.id = d.workspace_id AND w.state = 'ACTIVE'
    CROSS JOIN LATERAL (SELECT min(x.next_attempt_at) AS due FROM wharf.destination_delivery x
                         WHERE x.destination_id = d.id AND x.state = 'QUEUED') q
   WHERE d.signing_secret IS NOT NULL AND d.state <> 'PAUSED' AND q.due IS NOT NULL
$$;

-- Counts a failure of a delivery to destination p_destination_id into the
-- issues of its workspace (sql/97), grouped per destination (the fingerprint
-- 'destination:<id>') and class, opening or reopening the issue, so that the
-- alert rules on issues fire. Internal.
CREATE OR REPLACE FUNCTION wharf.count_delivery_issue(
  p_destination_id bigint, p_event_id bigint, p_error_class text, p_at timestamptz, p_dead boolean)
RETURNS void
LANGUAGE sql AS $$
  INSERT INTO wharf.issue AS i (workspace_id, provider, event_type, error_class, fingerprint, frames,
                                first_seen_at, last_seen_at, failures, dead, sample_event_id, status_at)
  SELECT e.workspace_id, e.provider, e.event_type, p_error_class, 'destination:' || p_destination_id,
         ARRAY['destination ' || p_destination_id || ' ' || d.name], p_at, p_at, 1,
         CASE WHEN p_dead THEN 1 ELSE 0 END, e.id, p_at
    FROM wharf.provider_event e, wharf.destination d
   WHERE e.id = p_event_id AND d.id = p_destination_id
  ON CONFLICT (workspace_id, provider, event_type, error_class, fingerprint) DO UPDATE
     SET last_seen_at    = greatest(i.last_seen_at, excluded.last_seen_at),
         failures        = i.failures + 1,
         dead            = i.dead + excluded.dead,
         sample_event_id = excluded.sample_event_id,
         status          = CASE WHEN i.status = 'resolved' THEN 'open' ELSE i.status END,
         status_by       = CASE WHEN i.status = 'resolved' THEN NULL ELSE i.status_by END,
         status_at       = CASE WHEN i.status = 'resolved' THEN excluded.last_seen_at ELSE i.status_at END,
         reopened        = i.reopened + CASE WHEN i.status = 'resolved' THEN 1 ELSE 0 END,
         reopened_at     = CASE WHEN i.status = 'resolved' THEN excluded.last_seen_at ELSE i.reopened_at END
$$;

-- Delivery p_id, LEASED under p_epoch, was answered 2xx: DONE, recorded with
-- the answer's status, duration and (at most 1 KB of) body; its destination's
-- failure run ends, and a probe closes its breaker. True; false when the
-- lease is gone, unless this epoch's lease was completed before (a repeat
-- whose first reply was lost).
CREATE OR REPLACE FUNCTION wharf.complete_delivery(
  p_id bigint, p_epoch bigint, p_status integer, p_duration_ms integer, p_response text)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_now timestamptz := clock_timestamp();
  v_row record;
BEGIN
  UPDATE wharf.destination_delivery q
     SET state = 'DONE', outcome = 'delivered', handled_at = v_now, last_status = p_status,
         leased_until = NULL, transient_since = NULL
   WHERE q.id = p_id AND q.lease_epoch = p_epoch AND q.state = 'LEASED'
  RETURNING q.destination_id, q.attempt, q.leased_by, q.leased_at, q.ordered, q.scope_key INTO v_row;
  IF NOT FOUND THEN
    RETURN EXISTS (SELECT FROM wharf.delivery_attempt h
                    WHERE h.delivery_id = p_id AND h.lease_epoch = p_epoch AND h.ended = 'handled');
  END IF;
  INSERT INTO wharf.delivery_attempt (delivery_id, lease_epoch, destination_id, attempt, worker, started_at,
                                      ended_at, ended, left_state, status, duration_ms, response)
  VALUES (p_id, p_epoch, v_row.destination_id, v_row.attempt, v_row.leased_by, v_row.leased_at,
          v_now, 'handled', 'DONE', p_status, p_duration_ms, left(p_response, 1024));
  UPDATE wharf.destination d
     SET consecutive_failures = 0, failing_since = NULL,
         state         = CASE WHEN d.state = 'BREAKER_OPEN' THEN 'ACTIVE' ELSE d.state END,
         paused_reason = CASE WHEN d.state = 'BREAKER_OPEN' THEN NULL ELSE d.paused_reason END,
         probe_at      = NULL
   WHERE d.id = v_row.destination_id
     AND (d.consecutive_failures <> 0 OR d.failing_since IS NOT NULL OR d.state = 'BREAKER_OPEN');
  IF v_row.ordered THEN
    PERFORM wharf.promote_next_delivery(v_row.destination_id, v_row.scope_key);
  END IF;
  RETURN true;
END $$;

-- Delivery p_id, LEASED under p_epoch, failed; records the attempt (status,
-- duration, at most 1 KB of the answer, error class: a class name, never a
-- message) and returns the delivery's new state; NULL when the lease is gone,
-- unless a repeat of a failure of this epoch (its first reply lost), which
-- answers as the first did. p_kind:
--   transient  QUEUED after the retry delay, or after p_retry_after (an
--              answer's Retry-After) when longer, up to max_delay; DEAD once
--              its transient failures lasted past transient_max_age while
--              its destination answered others meanwhile (a destination
--              failing for everything is the breaker's, and dead-letters
--              nothing); counts into the destination's failure run, whose
--              breaker_failures-th failure or breaker_minutes-th minute opens
--              the breaker (BREAKER_OPEN: its deliveries wait; a probe after
--              the retry delay closes it), opening an issue
--   permanent  DEAD at once (a 4xx, a redirect, a refused address)
--   gone       an HTTP 410: QUEUED, due at once, and the destination PAUSED
--              ('gone') until an operator resumes it, opening an issue
-- 22004 for a NULL argument, 22023 for an unknown kind or an error class
-- that is not a class name.
CREATE OR REPLACE FUNCTION wharf.fail_delivery(
  p_id bigint, p_epoch bigint, p_kind text, p_error_class text, p_status integer, p_duration_ms integer,
  p_response text, p_retry_after interval DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_now    timestamptz := clock_timestamp();
  v_row    record;
  v_dest   record;
  v_dead   boolean;
  v_state  text;
  v_opened boolean := false;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL OR p_kind IS NULL OR p_error_class IS NULL THEN
    RAISE EXCEPTION 'wharf.fail_delivery: id, epoch, kind and error_class are required' USING ERRCODE = '22004';
  END IF;
  IF p_kind NOT IN ('transient', 'permanent', 'gone') THEN
    RAISE EXCEPTION 'wharf.fail_delivery: unknown failure kind %', quote_literal(p_kind) USING ERRCODE = '22023';
  END IF;
  IF p_error_class !~ '^[A-Za-z_$][A-Za-z0-9_$.:-]{0,127}$' THEN
    RAISE EXCEPTION 'wharf.fail_delivery: error_class must be a class name, not free text' USING ERRCODE = '22023';
  END IF;

  SELECT q.destination_id, q.event_id, q.attempt, q.leased_by, q.leased_at, q.transient_since, q.ordered, q.scope_key
    INTO v_row
    FROM wharf.destination_delivery q
   WHERE q.id = p_id AND q.lease_epoch = p_epoch AND q.state = 'LEASED'
     FOR UPDATE;
  IF NOT FOUND THEN
    RETURN (SELECT h.left_state FROM wharf.delivery_attempt h
             WHERE h.delivery_id = p_id AND h.lease_epoch = p_epoch AND h.ended = p_kind
               AND h.error_class = p_error_class);
  END IF;
  SELECT d.state, d.name, d.consecutive_failures, d.failing_since, d.breaker_failures, d.breaker_minutes INTO v_dest
    FROM wharf.destination d WHERE d.id = v_row.destination_id
     FOR NO KEY UPDATE;

  v_dead := p_kind = 'permanent'
            OR (p_kind = 'transient' AND v_row.transient_since IS NOT NULL
                AND v_now - v_row.transient_since > wharf.setting_interval('transient_max_age')
                AND v_dest.failing_since IS NOT NULL AND v_dest.failing_since > v_row.transient_since);
  v_state := CASE WHEN v_dead THEN 'DEAD' ELSE 'QUEUED' END;

  UPDATE wharf.destination_delivery q
     SET state           = v_state,
         error_class     = p_error_class,
         last_status     = p_status,
         leased_until    = NULL,
         failures        = q.failures + CASE WHEN p_kind = 'transient' THEN 1 ELSE 0 END,
         transient_since = CASE WHEN p_kind = 'transient' THEN coalesce(q.transient_since, v_now) ELSE q.transient_since END,
         dead_at         = CASE WHEN v_dead THEN v_now END,
         -- A 410 gives the delivery back as it was: it waits for the resume.
         attempt         = CASE WHEN p_kind = 'gone' THEN q.attempt - 1 ELSE q.attempt END,
         next_attempt_at = CASE WHEN v_dead OR p_kind = 'gone' THEN v_now
                                ELSE v_now + greatest(wharf.retry_delay(v_row.attempt),
                                                      least(p_retry_after, wharf.setting_interval('max_delay'))) END
   WHERE q.id = p_id;
  INSERT INTO wharf.delivery_attempt (delivery_id, lease_epoch, destination_id, attempt, worker, started_at,
                                      ended_at, ended, left_state, error_class, status, duration_ms, response)
  VALUES (p_id, p_epoch, v_row.destination_id, v_row.attempt, v_row.leased_by, v_row.leased_at,
          v_now, p_kind, v_state, p_error_class, p_status, p_duration_ms, left(p_response, 1024));

  IF p_kind = 'gone' THEN
    UPDATE wharf.destination d
       SET state = 'PAUSED', paused_reason = 'gone', paused_by = NULL, probe_at = NULL, updated_at = v_now
     WHERE d.id = v_row.destination_id;
    PERFORM wharf.count_delivery_issue(v_row.destination_id, v_row.event_id, 'DestinationGone', v_now, false);
  ELSIF p_kind = 'transient' THEN
    v_opened := v_dest.state = 'ACTIVE'
                AND (v_dest.consecutive_failures + 1 >= v_dest.breaker_failures
                     OR v_now - coalesce(v_dest.failing_since, v_now) >= v_dest.breaker_minutes * interval '1 minute');
    UPDATE wharf.destination d
       SET consecutive_failures = d.consecutive_failures + 1,
           failing_since        = coalesce(d.failing_since, v_now),
           state                = CASE WHEN v_opened THEN 'BREAKER_OPEN' ELSE d.state END,
           paused_reason        = CASE WHEN v_opened THEN 'breaker' ELSE d.paused_reason END,
           -- Closed by a probe: the first after the retry delay of the run so far.
           probe_at             = CASE WHEN v_opened OR d.state = 'BREAKER_OPEN'
                                       THEN v_now + wharf.retry_delay(d.consecutive_failures + 1)
                                       ELSE d.probe_at END
     WHERE d.id = v_row.destination_id;
    IF v_opened THEN
      PERFORM wharf.count_delivery_issue(v_row.destination_id, v_row.event_id, 'DestinationBreakerOpen', v_now, false);
    END IF;
  END IF;
  IF p_kind <> 'gone' THEN
    PERFORM wharf.count_delivery_issue(v_row.destination_id, v_row.event_id, p_error_class, v_now, v_dead);
  END IF;
  IF v_dead AND v_row.ordered THEN
    PERFORM wharf.promote_next_delivery(v_row.destination_id, v_row.scope_key);
  END IF;
  RETURN v_state;
END $$;

-- A stopping forwarder gives delivery p_id, LEASED under p_epoch, back:
-- QUEUED, due at once, attempt as before the claim. True; false when the
-- lease is gone, unless this epoch's lease was released before.
CREATE OR REPLACE FUNCTION wharf.release_delivery(p_id bigint, p_epoch bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_now timestamptz := clock_timestamp();
  v_row record;
BEGIN
  UPDATE wharf.destination_delivery q
     SET state = 'QUEUED', attempt = q.attempt - 1, leased_until = NULL, next_attempt_at = v_now
   WHERE q.id = p_id AND q.lease_epoch = p_epoch AND q.state = 'LEASED'
  RETURNING q.destination_id, q.attempt + 1 AS attempt, q.leased_by, q.leased_at INTO v_row;
  IF NOT FOUND THEN
    RETURN EXISTS (SELECT FROM wharf.delivery_attempt h
                    WHERE h.delivery_id = p_id AND h.lease_epoch = p_epoch AND h.ended = 'released');
  END IF;
  INSERT INTO wharf.delivery_attempt (delivery_id, lease_epoch, destination_id, attempt, worker, started_at,
                                      ended_at, ended, left_state)
  VALUES (p_id, p_epoch, v_row.destination_id, v_row.attempt, v_row.leased_by, v_row.leased_at,
          v_now, 'released', 'QUEUED');
  PERFORM pg_notify('wharf_delivery', '');
  RETURN true;
END $$;

-- Every delivery lease past its leased_until goes back to QUEUED after the
-- retry delay with failures + 1 and error class 'LeaseExpired' (a forwarder
-- died mid-request: the request is sent again, with the same webhook-id);
-- DEAD when its failures reach max_attempts. Returns how many it reaped.
-- SKIP LOCKED: it never waits on a lease being ended.
CREATE OR REPLACE FUNCTION wharf.reap_deliveries() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_now   timestamptz := clock_timestamp();
  v_max               integer := wharf.setting_integer('max_attempts');
  v_count             integer;
  v_dead_destinations bigint[];
  v_dead_scope_keys   text[];
BEGIN
  WITH expired AS (
    SELECT q.id FROM wharf.destination_delivery q
     WHERE q.state = 'LEASED' AND q.leased_until < v_now
     ORDER BY q.id
       FOR UPDATE SKIP LOCKED
  ), reaped AS (
    UPDATE wharf.destination_delivery q
       SET state = CASE WHEN q.failures + 1 >= v_max THEN 'DEAD' ELSE 'QUEUED' END,
           failures = q.failures + 1, error_class = 'LeaseExpired', leased_until = NULL,
           dead_at = CASE WHEN q.failures + 1 >= v_max THEN v_now END,
           next_attempt_at = CASE WHEN q.failures + 1 >= v_max THEN q.next_attempt_at
                                  ELSE v_now + wharf.retry_delay(q.attempt) END
      FROM expired
     WHERE q.id = expired.id
    RETURNING q.id, q.lease_epoch, q.destination_id, q.attempt, q.leased_by, q.leased_at, q.state, q.ordered,
              q.scope_key
  ), recorded AS (
    INSERT INTO wharf.delivery_attempt (delivery_id, lease_epoch, destination_id, attempt, worker, started_at,
                                        ended_at, ended, left_state, error_class)
    SELECT r.id, r.lease_epoch, r.destination_id, r.attempt, r.leased_by, r.leased_at, v_now, 'expired', r.state,
           'LeaseExpired'
      FROM reaped r
    RETURNING 1
  )
  SELECT (SELECT count(*)::integer FROM recorded),
         ARRAY(SELECT r.destination_id FROM reaped r WHERE r.state = 'DEAD' AND r.ordered ORDER BY r.id),
         ARRAY(SELECT r.scope_key FROM reaped r WHERE r.state = 'DEAD' AND r.ordered ORDER BY r.id)
    INTO v_count, v_dead_destinations, v_dead_scope_keys;
  -- A head reaped into the dead letters ends its turn.
  PERFORM wharf.promote_next_delivery(k.destination_id, k.scope_key)
     FROM (SELECT DISTINCT d.destination_id, d.scope_key, wharf.delivery_scope_key(d.destination_id, d.scope_key) AS key
             FROM unnest(v_dead_destinations, v_dead_scope_keys) AS d(destination_id, scope_key)
            ORDER BY 3) k;
  IF v_count > 0 THEN
    PERFORM pg_notify('wharf_delivery', '');
  END IF;
  RETURN v_count;
END $$;

-- Raises 22023 naming the first problem of destination spec p_spec (the keys
-- it gives: name, url, timeout_ms, rate_limit, rate_period, max_in_flight,
-- ordered, headers, breaker_failures, breaker_minutes). Internal.
CREATE OR REPLACE FUNCTION wharf.check_destination_spec(p_spec jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_problem text;
  v_key     text;
BEGIN
  IF jsonb_typeof(p_spec) IS DISTINCT FROM 'object' THEN
    RAISE EXCEPTION 'wharf: destination: must be an object' USING ERRCODE = '22023';
  END IF;
  SELECT min(k) INTO v_key FROM jsonb_object_keys(p_spec) k
   WHERE k NOT IN ('name', 'url', 'timeout_ms', 'rate_limit', 'rate_period', 'max_in_flight', 'ordered',
                   'headers', 'breaker_failures', 'breaker_minutes');
  v_problem := CASE
    WHEN v_key IS NOT NULL THEN v_key || ': unknown setting'
    WHEN p_spec ? 'name' AND (jsonb_typeof(p_spec->'name') <> 'string'
                              OR p_spec->>'name' !~ '^[^[:cntrl:]]{1,100}$' OR btrim(p_spec->>'name') = '')
      THEN 'name: 1 to 100 characters'
    WHEN p_spec ? 'url' AND (jsonb_typeof(p_spec->'url') <> 'string' OR length(p_spec->>'url') > 2048
                             OR p_spec->>'url' !~ '^https?://[A-Za-z0-9._~-]+(:[0-9]{1,5})?(/[^[:space:][:cntrl:]#]*)?$'
                             AND p_spec->>'url' !~ '^https?://\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?(/[^[:space:][:cntrl:]#]*)?$')
      THEN 'url: must be an https:// (or http://) URL with a host, no credentials and no fragment'
    WHEN p_spec ? 'timeout_ms' AND NOT wharf.json_integer_between(p_spec->'timeout_ms', 100, 60000)
      THEN 'timeout_ms: an integer from 100 to 60000'
    WHEN p_spec ? 'rate_limit' AND p_spec->'rate_limit' <> 'null'
         AND NOT wharf.json_integer_between(p_spec->'rate_limit', 1, 1000000)
      THEN 'rate_limit: null or an integer from 1 to 1000000'
    WHEN p_spec ? 'rate_period' AND p_spec->>'rate_period' IS DISTINCT FROM 'second'
         AND p_spec->>'rate_period' IS DISTINCT FROM 'minute'
      THEN 'rate_period: second or minute'
    WHEN p_spec ? 'max_in_flight' AND NOT wharf.json_integer_between(p_spec->'max_in_flight', 1, 1000)
      THEN 'max_in_flight: an integer from 1 to 1000'
    WHEN p_spec ? 'ordered' AND jsonb_typeof(p_spec->'ordered') <> 'boolean'
      THEN 'ordered: true or false'
    WHEN p_spec ? 'breaker_failures' AND NOT wharf.json_integer_between(p_spec->'breaker_failures', 1, 100000)
      THEN 'breaker_failures: an integer from 1 to 100000'
    WHEN p_spec ? 'breaker_minutes' AND NOT wharf.json_integer_between(p_spec->'breaker_minutes', 1, 10080)
      THEN 'breaker_minutes: an integer from 1 to 10080'
    WHEN p_spec ? 'headers' AND jsonb_typeof(p_spec->'headers') <> 'object'
      THEN 'headers: an object of header names and string values'
    WHEN p_spec ? 'headers' AND (SELECT count(*) FROM jsonb_object_keys(p_spec->'headers')) > 32
      THEN 'headers: at most 32'
    ELSE (SELECT 'headers.' || h.key || CASE
                   WHEN h.key !~ '^[A-Za-z0-9!#$%&''*+.^_`|~-]{1,100}$' THEN ': not a header name'
                   WHEN lower(h.key) ~ '^(webhook-|wharf-|content-)' OR lower(h.key) IN
                        ('host', 'authorization', 'proxy-authorization', 'cookie', 'connection', 'keep-alive',
                         'transfer-encoding', 'te', 'trailer', 'upgrade', 'expect')
                     THEN ': set by Wharf (credentials go in the destination''s credentials)'
                   WHEN jsonb_typeof(h.value) <> 'string' OR h.value #>> '{}' ~ '[[:cntrl:]]'
                        OR length(h.value #>> '{}') > 1000
                     THEN ': a string of at most 1000 characters without control characters' END
            FROM jsonb_each(p_spec->'headers') h
           WHERE h.key !~ '^[A-Za-z0-9!#$%&''*+.^_`|~-]{1,100}$'
              OR lower(h.key) ~ '^(webhook-|wharf-|content-)'
              OR lower(h.key) IN ('host', 'authorization', 'proxy-authorization', 'cookie', 'connection',
                                  'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'expect')
              OR jsonb_typeof(h.value) <> 'string' OR h.value #>> '{}' ~ '[[:cntrl:]]'
              OR length(h.value #>> '{}') > 1000
           ORDER BY h.key LIMIT 1)
  END;
  IF v_problem IS NOT NULL THEN
    RAISE EXCEPTION 'wharf: destination %', v_problem USING ERRCODE = '22023';
  END IF;
END $$;

-- Whether JSON value p_value is an integer from p_low to p_high. Internal.
CREATE OR REPLACE FUNCTION wharf.json_integer_between(p_value jsonb, p_low bigint, p_high bigint) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_typeof(p_value) = 'number' AND p_value::numeric = trunc(p_value::numeric)
     AND p_value::numeric BETWEEN p_low AND p_high
$$;

-- Destination d as the operator surface shows it: its settings, state and
-- figures (queued, leased, dead; over the last hour delivered, failed,
-- success rate, latency p50/p99; delivered in the last minute), never a
-- secret. Internal.
CREATE OR REPLACE FUNCTION wharf.destination_summary(d wharf.destination) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', d.id, 'workspace_id', d.workspace_id, 'name', d.name, 'url', d.url, 'timeout_ms', d.timeout_ms,
    'rate_limit', d.rate_limit, 'rate_period', d.rate_period, 'max_in_flight', d.max_in_flight,
    'ordered', d.ordered, 'headers', d.headers, 'breaker_failures', d.breaker_failures,
    'breaker_minutes', d.breaker_minutes, 'state', d.state, 'paused_reason', d.paused_reason,
    'paused_by', d.paused_by, 'consecutive_failures', d.consecutive_failures,
    'failing_since', d.failing_since, 'probe_at', d.probe_at,
    'has_secret', d.signing_secret IS NOT NULL,
    'has_credentials', d.credentials IS NOT NULL, 'credentials_type', d.credentials_type,
    'secret_rotating_until', CASE WHEN d.previous_valid_until > now() THEN d.previous_valid_until END,
    'created_at', d.created_at, 'updated_at', d.updated_at,
    'stats', (
      SELECT jsonb_build_object(
        'queued', (SELECT count(*) FROM wharf.destination_delivery q WHERE q.destination_id = d.id AND q.state = 'QUEUED'),
        'leased', (SELECT count(*) FROM wharf.destination_delivery q WHERE q.destination_id = d.id AND q.state = 'LEASED'),
        'dead', (SELECT count(*) FROM wharf.destination_delivery q WHERE q.destination_id = d.id AND q.state = 'DEAD'),
        'delivered_last_hour', count(*) FILTER (WHERE a.ended = 'handled'),
        'failed_last_hour', count(*) FILTER (WHERE a.ended IN ('transient', 'permanent', 'gone', 'expired')),
        'per_minute', count(*) FILTER (WHERE a.ended = 'handled' AND a.ended_at > now() - interval '1 minute'),
        'success_rate', round(count(*) FILTER (WHERE a.ended = 'handled')::numeric
                              / nullif(count(*) FILTER (WHERE a.ended <> 'released'), 0), 4),
        'latency_p50_ms', percentile_cont(0.5) WITHIN GROUP (ORDER BY a.duration_ms)
                            FILTER (WHERE a.duration_ms IS NOT NULL),
        'latency_p99_ms', percentile_cont(0.99) WITHIN GROUP (ORDER BY a.duration_ms)
                            FILTER (WHERE a.duration_ms IS NOT NULL),
        'filtered_last_hour', (SELECT coalesce(sum(f.filtered), 0) FROM wharf.rule_filtered_minute f
                                 JOIN wharf.destination_rule r ON r.id = f.rule_id
                                WHERE r.destination_id = d.id AND f.minute > now() - interval '1 hour'))
        FROM wharf.delivery_attempt a
       WHERE a.destination_id = d.id AND a.ended_at > now() - interval '1 hour'))
$$;

-- Destination p_id of workspace p_workspace_id, locked for a change; raises
-- P0002 for an unknown workspace; NULL id when it is not one of that
-- workspace's. Internal.
CREATE OR REPLACE FUNCTION wharf.destination_for_change(p_workspace_id bigint, p_id bigint) RETURNS wharf.destination
LANGUAGE plpgsql AS $$
DECLARE
  v_dest wharf.destination;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  SELECT * INTO v_dest FROM wharf.destination WHERE id = p_id AND workspace_id = p_workspace_id FOR NO KEY UPDATE;
  RETURN v_dest;
END $$;

-- Creates a destination of workspace p_workspace_id from spec p_spec (name
-- and url required; see check_destination_spec) and returns it (see
-- destination_summary). It has no signing secret yet and is never claimed
-- until set_destination_secret gives it one: the caller seals the secret
-- with the returned id and sets it in the same transaction. 22023 naming the
-- bad part (a name already used included), P0002 unknown workspace.
CREATE OR REPLACE FUNCTION wharf.create_destination(p_workspace_id bigint, p_spec jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_dest wharf.destination;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  PERFORM wharf.check_destination_spec(p_spec);
  IF NOT (p_spec ? 'name' AND p_spec ? 'url') THEN
    RAISE EXCEPTION 'wharf: destination %: required', CASE WHEN p_spec ? 'name' THEN 'url' ELSE 'name' END
      USING ERRCODE = '22023';
  END IF;
  INSERT INTO wharf.destination (workspace_id, name, url, timeout_ms, rate_limit, rate_period, max_in_flight,
                                 ordered, headers, breaker_failures, breaker_minutes)
  VALUES (p_workspace_id, btrim(p_spec->>'name'), p_spec->>'url', coalesce((p_spec->>'timeout_ms')::integer, 10000),
          (p_spec->>'rate_limit')::integer, coalesce(p_spec->>'rate_period', 'second'),
          coalesce((p_spec->>'max_in_flight')::integer, 10), coalesce((p_spec->>'ordered')::boolean, true),
          coalesce(p_spec->'headers', '{}'), coalesce((p_spec->>'breaker_failures')::integer, 20),
          coalesce((p_spec->>'breaker_minutes')::integer, 10))
  ON CONFLICT ON CONSTRAINT uq_destination_name DO NOTHING
  RETURNING * INTO v_dest;
  IF v_dest.id IS NULL THEN
    RAISE EXCEPTION 'wharf: destination name: % is already used in this workspace', quote_literal(btrim(p_spec->>'name'))
      USING ERRCODE = '22023';
  END IF;
  RETURN wharf.destination_summary(v_dest);
END $$;

-- Changes the settings p_spec gives of destination p_id of workspace
-- p_workspace_id (see check_destination_spec) and returns it; NULL when it
-- is not one of that workspace's. A change of ordered applies to the
-- deliveries still queued. 22023 naming the bad part, P0002 unknown workspace.
CREATE OR REPLACE FUNCTION wharf.update_destination(p_workspace_id bigint, p_id bigint, p_spec jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_dest wharf.destination := wharf.destination_for_change(p_workspace_id, p_id);
BEGIN
  PERFORM wharf.check_destination_spec(p_spec);
  IF v_dest.id IS NULL THEN
    RETURN NULL;
  END IF;
  IF p_spec ? 'name' AND EXISTS (SELECT FROM wharf.destination WHERE workspace_id = p_workspace_id
                                    AND name = btrim(p_spec->>'name') AND id <> p_id) THEN
    RAISE EXCEPTION 'wharf: destination name: % is already used in this workspace', quote_literal(btrim(p_spec->>'name'))
      USING ERRCODE = '22023';
  END IF;
  UPDATE wharf.destination d
     SET name             = coalesce(btrim(p_spec->>'name'), d.name),
         url              = coalesce(p_spec->>'url', d.url),
         timeout_ms       = coalesce((p_spec->>'timeout_ms')::integer, d.timeout_ms),
         rate_limit       = CASE WHEN p_spec ? 'rate_limit' THEN (p_spec->>'rate_limit')::integer ELSE d.rate_limit END,
         rate_period      = coalesce(p_spec->>'rate_period', d.rate_period),
         tokens           = CASE WHEN p_spec ? 'rate_limit' OR p_spec ? 'rate_period' THEN NULL ELSE d.tokens END,
         max_in_flight    = coalesce((p_spec->>'max_in_flight')::integer, d.max_in_flight),
         ordered          = coalesce((p_spec->>'ordered')::boolean, d.ordered),
         headers          = coalesce(p_spec->'headers', d.headers),
         breaker_failures = coalesce((p_spec->>'breaker_failures')::integer, d.breaker_failures),
         breaker_minutes  = coalesce((p_spec->>'breaker_minutes')::integer, d.breaker_minutes),
         updated_at       = now()
   WHERE d.id = p_id
  RETURNING * INTO v_dest;
  -- Unordered, every queued delivery is due; ordered, those behind a head wait.
  UPDATE wharf.destination_delivery q
     SET ordered = v_dest.ordered,
         next_attempt_at = CASE WHEN NOT v_dest.ordered AND q.next_attempt_at = 'infinity' THEN now()
                                WHEN v_dest.ordered AND EXISTS (
                                       SELECT FROM wharf.destination_delivery o
                                        WHERE o.destination_id = p_id AND o.scope_key = q.scope_key
                                          AND o.state IN ('QUEUED', 'LEASED') AND o.event_id < q.event_id)
                                  THEN 'infinity'
                                ELSE q.next_attempt_at END
   WHERE q.destination_id = p_id AND q.state = 'QUEUED' AND q.ordered <> v_dest.ordered;
  RETURN wharf.destination_summary(v_dest);
END $$;

-- Sets the signing secret of destination p_id of workspace p_workspace_id,
-- sealed (aes256gcm:…, by the key ring the database never sees). The secret
-- it replaces keeps signing beside the new one for p_overlap unless
-- p_keep_previous is false (a leaked secret: cut it off at once). Returns the
-- destination; NULL when it is not one of that workspace's. 22004 for a NULL
-- secret, 22023 for one not sealed.
CREATE OR REPLACE FUNCTION wharf.set_destination_secret(
  p_workspace_id bigint, p_id bigint, p_sealed text, p_keep_previous boolean DEFAULT true,
  p_overlap interval DEFAULT '24 hours')
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_dest wharf.destination := wharf.destination_for_change(p_workspace_id, p_id);
BEGIN
  IF p_sealed IS NULL THEN
    RAISE EXCEPTION 'wharf: destination signing secret is required' USING ERRCODE = '22004';
  END IF;
  IF p_sealed NOT LIKE 'aes256gcm:%' THEN
    RAISE EXCEPTION 'wharf: destination signing secret must arrive sealed (aes256gcm:…)' USING ERRCODE = '22023';
  END IF;
  IF v_dest.id IS NULL THEN
    RETURN NULL;
  END IF;
  UPDATE wharf.destination d
     SET previous_signing_secret = CASE WHEN p_keep_previous AND d.signing_secret IS NOT NULL THEN d.signing_secret END,
         previous_valid_until    = CASE WHEN p_keep_previous AND d.signing_secret IS NOT NULL THEN now() + p_overlap END,
         signing_secret          = p_sealed,
         updated_at              = now()
   WHERE d.id = p_id
  RETURNING * INTO v_dest;
  RETURN wharf.destination_summary(v_dest);
END $$;

-- Sets (or, with NULL, clears) the credentials destination p_id of
-- workspace p_workspace_id sends to an endpoint behind an API gateway:
-- sealed JSON, of type p_type ('bearer', 'basic' or 'header'). Returns the
-- destination; NULL when it is not one of that workspace's. 22023 for a
-- value not sealed or an unknown type.
CREATE OR REPLACE FUNCTION wharf.set_destination_credentials(
  p_workspace_id bigint, p_id bigint, p_sealed text, p_type text)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_dest wharf.destination := wharf.destination_for_change(p_workspace_id, p_id);
BEGIN
  IF p_sealed IS NOT NULL AND p_sealed NOT LIKE 'aes256gcm:%' THEN
    RAISE EXCEPTION 'wharf: destination credentials must arrive sealed (aes256gcm:…)' USING ERRCODE = '22023';
  END IF;
  IF p_sealed IS NOT NULL AND p_type IS DISTINCT FROM 'bearer' AND p_type IS DISTINCT FROM 'basic'
     AND p_type IS DISTINCT FROM 'header' THEN
    RAISE EXCEPTION 'wharf: destination credentials type: bearer, basic or header' USING ERRCODE = '22023';
  END IF;
  IF v_dest.id IS NULL THEN
    RETURN NULL;
  END IF;
  UPDATE wharf.destination d
     SET credentials = p_sealed, credentials_type = CASE WHEN p_sealed IS NOT NULL THEN p_type END, updated_at = now()
   WHERE d.id = p_id
  RETURNING * INTO v_dest;
  RETURN wharf.destination_summary(v_dest);
END $$;

-- Pauses (p_state 'PAUSED': its deliveries wait) or resumes ('ACTIVE')
-- destination p_id of workspace p_workspace_id, recording p_account; a
-- resume also closes an open breaker and ends a 410's pause at once, and
-- wakes the forwarders. Returns the destination; NULL when it is not one of
-- that workspace's. 22023 for another state.
CREATE OR REPLACE FUNCTION wharf.set_destination_state(
  p_workspace_id bigint, p_id bigint, p_state text, p_account text)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_dest wharf.destination := wharf.destination_for_change(p_workspace_id, p_id);
BEGIN
  IF p_state IS DISTINCT FROM 'ACTIVE' AND p_state IS DISTINCT FROM 'PAUSED' THEN
    RAISE EXCEPTION 'wharf: destination state: ACTIVE or PAUSED' USING ERRCODE = '22023';
  END IF;
  IF v_dest.id IS NULL THEN
    RETURN NULL;
  END IF;
  UPDATE wharf.destination d
     SET state = p_state,
         paused_reason = CASE WHEN p_state = 'PAUSED' THEN 'operator' END,
         paused_by = CASE WHEN p_state = 'PAUSED' THEN p_account END,
         consecutive_failures = CASE WHEN p_state = 'ACTIVE' THEN 0 ELSE d.consecutive_failures END,
         failing_since = CASE WHEN p_state = 'ACTIVE' THEN NULL ELSE d.failing_since END,
         probe_at = NULL, updated_at = now()
   WHERE d.id = p_id
  RETURNING * INTO v_dest;
  IF p_state = 'ACTIVE' THEN
    PERFORM pg_notify('wharf_delivery', '');
  END IF;
  RETURN wharf.destination_summary(v_dest);
END $$;

-- Deletes destination p_id of workspace p_workspace_id with its rules and
-- deliveries (the events stay); false when it is not one of that
-- workspace's. P0002 unknown workspace.
CREATE OR REPLACE FUNCTION wharf.delete_destination(p_workspace_id bigint, p_id bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  DELETE FROM wharf.destination WHERE id = p_id AND workspace_id = p_workspace_id;
  RETURN FOUND;
END $$;

-- The destinations of workspace p_workspace_id by name (see
-- destination_summary). P0002 unknown workspace.
CREATE OR REPLACE FUNCTION wharf.list_destinations(p_workspace_id bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN (SELECT coalesce(jsonb_agg(wharf.destination_summary(d) ORDER BY d.name, d.id), '[]')
            FROM wharf.destination d WHERE d.workspace_id = p_workspace_id);
END $$;

-- Destination p_id of workspace p_workspace_id (see destination_summary);
-- NULL when it is not one of that workspace's.
CREATE OR REPLACE FUNCTION wharf.show_destination(p_workspace_id bigint, p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.destination_summary(d) FROM wharf.destination d WHERE d.id = p_id AND d.workspace_id = p_workspace_id
$$;

-- Rule r as the operator surface shows it. Internal.
CREATE OR REPLACE FUNCTION wharf.rule_summary(r wharf.destination_rule) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', r.id, 'workspace_id', r.workspace_id, 'destination_id', r.destination_id,
    'connection_id', r.connection_id, 'provider', r.provider, 'event_types', to_jsonb(r.event_types),
    'subject_prefix', r.subject_prefix, 'filter', r.filter, 'forward_only', r.forward_only,
    'filtered_last_hour', (SELECT coalesce(sum(f.filtered), 0) FROM wharf.rule_filtered_minute f
                            WHERE f.rule_id = r.id AND f.minute > now() - interval '1 hour'),
    'created_at', r.created_at, 'updated_at', r.updated_at)
$$;

-- Raises 22023 naming the first problem of rule spec p_spec in workspace
-- p_workspace_id (keys: destination_id, connection_id, provider,
-- event_types, subject_prefix, filter, forward_only; the destination and the
-- connection must be the workspace's). Internal.
CREATE OR REPLACE FUNCTION wharf.check_rule_spec(p_workspace_id bigint, p_spec jsonb) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_problem text;
  v_key     text;
BEGIN
  IF jsonb_typeof(p_spec) IS DISTINCT FROM 'object' THEN
    RAISE EXCEPTION 'wharf: rule: must be an object' USING ERRCODE = '22023';
  END IF;
  SELECT min(k) INTO v_key FROM jsonb_object_keys(p_spec) k
   WHERE k NOT IN ('destination_id', 'connection_id', 'provider', 'event_types', 'subject_prefix', 'filter',
                   'forward_only');
  v_problem := CASE
    WHEN v_key IS NOT NULL THEN v_key || ': unknown setting'
    WHEN p_spec ? 'destination_id' AND NOT EXISTS (
           SELECT FROM wharf.destination d
            WHERE d.id = CASE WHEN wharf.json_integer_between(p_spec->'destination_id', 1, 9223372036854775807)
                              THEN (p_spec->>'destination_id')::bigint END
              AND d.workspace_id = p_workspace_id)
      THEN 'destination_id: no such destination in this workspace'
    WHEN p_spec ? 'connection_id' AND p_spec->'connection_id' <> 'null' AND NOT EXISTS (
           SELECT FROM wharf.connection c
            WHERE c.id = CASE WHEN wharf.json_integer_between(p_spec->'connection_id', 1, 9223372036854775807)
                              THEN (p_spec->>'connection_id')::bigint END
              AND c.workspace_id = p_workspace_id)
      THEN 'connection_id: no such connection in this workspace'
    WHEN p_spec ? 'provider' AND p_spec->'provider' <> 'null'
         AND NOT wharf.provider_known(p_spec->>'provider')
      THEN 'provider: unknown provider'
    WHEN p_spec ? 'event_types' AND p_spec->'event_types' <> 'null'
         AND (jsonb_typeof(p_spec->'event_types') <> 'array' OR jsonb_array_length(p_spec->'event_types') NOT BETWEEN 1 AND 100
              OR EXISTS (SELECT FROM jsonb_array_elements(p_spec->'event_types') t
                          WHERE jsonb_typeof(t) <> 'string' OR t #>> '{}' !~ '^[^[:cntrl:]]{1,255}$'))
      THEN 'event_types: null or 1 to 100 patterns of 1 to 255 characters (* stands for any run)'
    WHEN p_spec ? 'subject_prefix' AND p_spec->'subject_prefix' <> 'null'
         AND (jsonb_typeof(p_spec->'subject_prefix') <> 'string' OR p_spec->>'subject_prefix' !~ '^[^[:cntrl:]]{1,255}$')
      THEN 'subject_prefix: null or 1 to 255 characters'
    WHEN p_spec ? 'forward_only' AND jsonb_typeof(p_spec->'forward_only') <> 'boolean'
      THEN 'forward_only: true or false'
    WHEN p_spec ? 'filter' AND p_spec->'filter' <> 'null'
      THEN wharf.filter_problem(p_spec->'filter')
  END;
  IF v_problem IS NOT NULL THEN
    RAISE EXCEPTION 'wharf: rule %', v_problem USING ERRCODE = '22023';
  END IF;
END $$;

-- Creates a rule of workspace p_workspace_id from p_spec (destination_id
-- required; see check_rule_spec) and returns it. It routes the events
-- admitted after it commits. 22023 naming the bad part, P0002 unknown workspace.
CREATE OR REPLACE FUNCTION wharf.create_destination_rule(p_workspace_id bigint, p_spec jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_rule wharf.destination_rule;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  PERFORM wharf.check_rule_spec(p_workspace_id, p_spec);
  IF NOT p_spec ? 'destination_id' THEN
    RAISE EXCEPTION 'wharf: rule destination_id: required' USING ERRCODE = '22023';
  END IF;
  INSERT INTO wharf.destination_rule (workspace_id, destination_id, connection_id, provider, event_types,
                                      subject_prefix, filter, forward_only)
  VALUES (p_workspace_id, (p_spec->>'destination_id')::bigint, (p_spec->>'connection_id')::bigint,
          p_spec->>'provider',
          CASE WHEN jsonb_typeof(p_spec->'event_types') = 'array'
               THEN ARRAY(SELECT jsonb_array_elements_text(p_spec->'event_types')) END,
          p_spec->>'subject_prefix', nullif(p_spec->'filter', 'null'),
          coalesce((p_spec->>'forward_only')::boolean, false))
  RETURNING * INTO v_rule;
  RETURN wharf.rule_summary(v_rule);
END $$;

-- Changes what p_spec gives of rule p_id of workspace p_workspace_id (a key
-- given as null clears that criterion) and returns it; NULL when it is not
-- one of that workspace's. 22023 naming the bad part.
CREATE OR REPLACE FUNCTION wharf.update_destination_rule(p_workspace_id bigint, p_id bigint, p_spec jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_rule wharf.destination_rule;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  PERFORM wharf.check_rule_spec(p_workspace_id, p_spec);
  IF p_spec->'destination_id' = 'null' THEN
    RAISE EXCEPTION 'wharf: rule destination_id: required' USING ERRCODE = '22023';
  END IF;
  UPDATE wharf.destination_rule r
     SET destination_id = coalesce((p_spec->>'destination_id')::bigint, r.destination_id),
         connection_id  = CASE WHEN p_spec ? 'connection_id' THEN (p_spec->>'connection_id')::bigint ELSE r.connection_id END,
         provider       = CASE WHEN p_spec ? 'provider' THEN p_spec->>'provider' ELSE r.provider END,
         event_types    = CASE WHEN p_spec ? 'event_types'
                               THEN CASE WHEN jsonb_typeof(p_spec->'event_types') = 'array'
                                         THEN ARRAY(SELECT jsonb_array_elements_text(p_spec->'event_types')) END
                               ELSE r.event_types END,
         subject_prefix = CASE WHEN p_spec ? 'subject_prefix' THEN p_spec->>'subject_prefix' ELSE r.subject_prefix END,
         filter         = CASE WHEN p_spec ? 'filter' THEN nullif(p_spec->'filter', 'null') ELSE r.filter END,
         forward_only   = coalesce((p_spec->>'forward_only')::boolean, r.forward_only),
         updated_at     = now()
   WHERE r.id = p_id AND r.workspace_id = p_workspace_id
  RETURNING * INTO v_rule;
  RETURN CASE WHEN v_rule.id IS NOT NULL THEN wharf.rule_summary(v_rule) END;
END $$;

-- Deletes rule p_id of workspace p_workspace_id; false when it is not one of
-- that workspace's. Deliveries it made stay.
CREATE OR REPLACE FUNCTION wharf.delete_destination_rule(p_workspace_id bigint, p_id bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  DELETE FROM wharf.destination_rule WHERE id = p_id AND workspace_id = p_workspace_id;
  RETURN FOUND;
END $$;

-- The rules of workspace p_workspace_id (of destination p_destination_id
-- when given), oldest first. P0002 unknown workspace.
CREATE OR REPLACE FUNCTION wharf.list_destination_rules(p_workspace_id bigint, p_destination_id bigint DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN (SELECT coalesce(jsonb_agg(wharf.rule_summary(r) ORDER BY r.id), '[]')
            FROM wharf.destination_rule r
           WHERE r.workspace_id = p_workspace_id
             AND (p_destination_id IS NULL OR r.destination_id = p_destination_id));
END $$;

-- Whether filter p_filter matches event p_event_id of workspace
-- p_workspace_id, as a rule would: {"matched": true|false}; NULL when the
-- event is not one of that workspace's. 22023 naming the problem of a bad filter.
CREATE OR REPLACE FUNCTION wharf.test_destination_filter(p_workspace_id bigint, p_filter jsonb, p_event_id bigint)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_problem text := wharf.filter_problem(p_filter);
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF v_problem IS NOT NULL THEN
    RAISE EXCEPTION 'wharf: %', v_problem USING ERRCODE = '22023';
  END IF;
  RETURN (SELECT jsonb_build_object('matched', wharf.filter_matches(p_filter, e.payload, e.headers))
            FROM wharf.provider_event e WHERE e.id = p_event_id AND e.workspace_id = p_workspace_id);
END $$;

-- Delivery q as a listing shows it, with its event's facts. Internal.
CREATE OR REPLACE FUNCTION wharf.delivery_summary(q wharf.destination_delivery) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', q.id, 'event_id', q.event_id, 'destination_id', q.destination_id, 'state', q.state,
    'attempt', q.attempt, 'failures', q.failures,
    -- Behind its scope's head it has no time of its own: it waits its turn.
    'next_attempt_at', nullif(q.next_attempt_at, 'infinity'), 'waiting_behind_head', q.next_attempt_at = 'infinity',
    'error_class', q.error_class, 'outcome', q.outcome, 'last_status', q.last_status,
    'handled_at', q.handled_at, 'dead_at', q.dead_at, 'replayed_by', q.replayed_by,
    'replayed_at', q.replayed_at, 'provider', e.provider, 'event_type', e.event_type, 'subject', e.subject,
    'received_at', e.received_at)
    FROM wharf.provider_event e WHERE e.id = q.event_id
$$;

-- The deliveries of destination p_destination_id of workspace
-- p_workspace_id, newest first, of state p_state when given, at most p_limit
-- (1..500), older than p_before_id when given: {deliveries, next_cursor};
-- NULL when the destination is not one of that workspace's. 22023 for an
-- unknown state or a limit outside 1..500.
CREATE OR REPLACE FUNCTION wharf.list_deliveries(
  p_workspace_id bigint, p_destination_id bigint, p_state text DEFAULT NULL, p_limit integer DEFAULT 50,
  p_before_id bigint DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_page jsonb;
BEGIN
  IF p_state IS NOT NULL AND p_state NOT IN ('QUEUED', 'LEASED', 'DONE', 'DEAD') THEN
    RAISE EXCEPTION 'wharf: delivery state: QUEUED, LEASED, DONE or DEAD' USING ERRCODE = '22023';
  END IF;
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 500 THEN
    RAISE EXCEPTION 'wharf: limit: from 1 to 500' USING ERRCODE = '22023';
  END IF;
  IF NOT EXISTS (SELECT FROM wharf.destination WHERE id = p_destination_id AND workspace_id = p_workspace_id) THEN
    RETURN NULL;
  END IF;
  SELECT coalesce(jsonb_agg(wharf.delivery_summary(q) ORDER BY q.id DESC), '[]') INTO v_page
    FROM (SELECT * FROM wharf.destination_delivery q
           WHERE q.destination_id = p_destination_id
             AND (p_state IS NULL OR q.state = p_state)
             AND (p_before_id IS NULL OR q.id < p_before_id)
           ORDER BY q.id DESC LIMIT p_limit) q;
  RETURN jsonb_build_object('deliveries', v_page,
                            'next_cursor', CASE WHEN jsonb_array_length(v_page) = p_limit
                                                THEN v_page -> (p_limit - 1) -> 'id' END);
END $$;

-- Delivery p_id of workspace p_workspace_id with its attempts (status,
-- duration, at most 1 KB of the answer); NULL when it is not one of that
-- workspace's.
CREATE OR REPLACE FUNCTION wharf.show_delivery(p_workspace_id bigint, p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.delivery_summary(q) || jsonb_build_object(
           'webhook_id', 'wd_' || q.id,
           'attempts', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                          'attempt', a.attempt, 'epoch', a.lease_epoch, 'worker', a.worker,
                          'started_at', a.started_at, 'ended_at', a.ended_at, 'ended', a.ended,
                          'error_class', a.error_class, 'status', a.status, 'duration_ms', a.duration_ms,
                          'response', a.response) ORDER BY a.lease_epoch), '[]')
                          FROM wharf.delivery_attempt a WHERE a.delivery_id = q.id))
    FROM wharf.destination_delivery q WHERE q.id = p_id AND q.workspace_id = p_workspace_id
$$;

-- Every destination delivery of event p_event_id of workspace
-- p_workspace_id, with its destination's name (the event page); NULL when
-- the event is not one of that workspace's.
CREATE OR REPLACE FUNCTION wharf.event_deliveries(p_workspace_id bigint, p_event_id bigint) RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT (SELECT coalesce(jsonb_agg(wharf.delivery_summary(q) || jsonb_build_object('destination_name', d.name)
                                    ORDER BY q.destination_id), '[]')
            FROM wharf.destination_delivery q JOIN wharf.destination d ON d.id = q.destination_id
           WHERE q.event_id = e.id)
    FROM wharf.provider_event e WHERE e.id = p_event_id AND e.workspace_id = p_workspace_id
$$;

-- Replays DEAD delivery p_id of workspace p_workspace_id: QUEUED, due at
-- once, attempt 0, failures 0, error class kept as its last cause, recorded
-- as replayed by p_account. It keeps its id, so its webhook-id, and heads its
-- (destination, scope) again. False when it is not a DEAD delivery of that
-- workspace.
CREATE OR REPLACE FUNCTION wharf.replay_delivery(p_workspace_id bigint, p_id bigint, p_account text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  UPDATE wharf.destination_delivery q
     SET state = 'QUEUED', attempt = 0, failures = 0, dead_at = NULL, outcome = NULL, transient_since = NULL,
         next_attempt_at = clock_timestamp(), replayed_by = p_account, replayed_at = clock_timestamp()
   WHERE q.id = p_id AND q.workspace_id = p_workspace_id AND q.state = 'DEAD';
  IF FOUND THEN
    PERFORM pg_notify('wharf_delivery', '');
  END IF;
  RETURN FOUND;
END $$;

-- The DEAD deliveries of destination p_destination_id of workspace
-- p_workspace_id that filter p_filter selects: event_type, error_class,
-- dead_after, dead_before (each optional). Internal.
CREATE OR REPLACE FUNCTION wharf.dead_deliveries(p_workspace_id bigint, p_destination_id bigint, p_filter jsonb)
RETURNS SETOF wharf.destination_delivery
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_key text;
BEGIN
  SELECT min(k) INTO v_key FROM jsonb_object_keys(coalesce(p_filter, '{}')) k
   WHERE k NOT IN ('event_type', 'error_class', 'dead_after', 'dead_before');
  IF v_key IS NOT NULL THEN
    RAISE EXCEPTION 'wharf: replay filter %: unknown (event_type, error_class, dead_after, dead_before)', v_key
      USING ERRCODE = '22023';
  END IF;
  RETURN QUERY
  SELECT q.* FROM wharf.destination_delivery q
   WHERE q.destination_id = p_destination_id AND q.workspace_id = p_workspace_id AND q.state = 'DEAD'
     AND (p_filter->>'error_class' IS NULL OR q.error_class = p_filter->>'error_class')
     AND (p_filter->>'dead_after' IS NULL OR q.dead_at >= (p_filter->>'dead_after')::timestamptz)
     AND (p_filter->>'dead_before' IS NULL OR q.dead_at < (p_filter->>'dead_before')::timestamptz)
     AND (p_filter->>'event_type' IS NULL
          OR EXISTS (SELECT FROM wharf.provider_event e WHERE e.id = q.event_id AND e.event_type = p_filter->>'event_type'));
END $$;

-- How many DEAD deliveries of destination p_destination_id of workspace
-- p_workspace_id filter p_filter selects (see dead_deliveries): what a bulk
-- replay shows before it starts. 22023 for an unknown filter key.
CREATE OR REPLACE FUNCTION wharf.count_dead_deliveries(p_workspace_id bigint, p_destination_id bigint, p_filter jsonb)
RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT count(*) FROM wharf.dead_deliveries(p_workspace_id, p_destination_id, p_filter)
$$;

-- Replays, as replay_delivery does, at most p_batch (1..5000) of the DEAD
-- deliveries filter p_filter selects (see dead_deliveries), in id order, and
-- returns how many; the caller repeats until 0, so that each transaction
-- stays short. 22023 for an unknown filter key or a batch outside 1..5000.
CREATE OR REPLACE FUNCTION wharf.replay_deliveries(
  p_workspace_id bigint, p_destination_id bigint, p_filter jsonb, p_account text, p_batch integer DEFAULT 500)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_count bigint;
BEGIN
  IF p_batch IS NULL OR p_batch NOT BETWEEN 1 AND 5000 THEN
    RAISE EXCEPTION 'wharf: batch: from 1 to 5000' USING ERRCODE = '22023';
  END IF;
  UPDATE wharf.destination_delivery q
     SET state = 'QUEUED', attempt = 0, failures = 0, dead_at = NULL, outcome = NULL, transient_since = NULL,
         next_attempt_at = clock_timestamp(), replayed_by = p_account, replayed_at = clock_timestamp()
   WHERE q.id IN (SELECT d.id FROM wharf.dead_deliveries(p_workspace_id, p_destination_id, p_filter) d
                   ORDER BY d.id LIMIT p_batch)
     AND q.state = 'DEAD';
  GET DIAGNOSTICS v_count = ROW_COUNT;
  IF v_count > 0 THEN
    PERFORM pg_notify('wharf_delivery', '');
  END IF;
  RETURN v_count;
END $$;

-- Retention of what forwarding adds besides the deliveries (which go with
-- their event): at most p_batch rule_filtered_minute rows older than
-- log_retention. Returns how many it deleted. Internal: purge_logs'.
CREATE OR REPLACE FUNCTION wharf.purge_forwarding(p_batch integer) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_deleted bigint;
BEGIN
  DELETE FROM wharf.rule_filtered_minute f
   WHERE (f.rule_id, f.minute) IN (SELECT x.rule_id, x.minute FROM wharf.rule_filtered_minute x
                                    WHERE x.minute < now() - wharf.setting_interval('log_retention')
                                    LIMIT p_batch);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  RETURN v_deleted;
END $$;

-- Whether event p_event_id's deliveries let purge delete it (and them, by
-- cascade): each is DONE before p_done_before or DEAD before p_dead_before,
-- the same retention as the event's own; true for an event with none. One
-- probe of uq_destination_delivery_event. Internal: purge's.
CREATE OR REPLACE FUNCTION wharf.deliveries_purgeable(p_event_id bigint, p_done_before timestamptz,
                                                      p_dead_before timestamptz)
RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT NOT EXISTS (SELECT FROM wharf.destination_delivery q
                      WHERE q.event_id = p_event_id
                        AND NOT ((q.state = 'DONE' AND q.handled_at < p_done_before)
                                 OR (q.state = 'DEAD' AND q.dead_at < p_dead_before)))
$$;

REVOKE ALL ON FUNCTION wharf.claim_deliveries(text, integer), wharf.next_delivery_at(),
  wharf.complete_delivery(bigint, bigint, integer, integer, text),
  wharf.fail_delivery(bigint, bigint, text, text, integer, integer, text, interval),
  wharf.release_delivery(bigint, bigint), wharf.reap_deliveries(),
  wharf.create_destination(bigint, jsonb), wharf.update_destination(bigint, bigint, jsonb),
  wharf.set_destination_secret(bigint, bigint, text, boolean, interval),
  wharf.set_destination_credentials(bigint, bigint, text, text),
  wharf.set_destination_state(bigint, bigint, text, text), wharf.delete_destination(bigint, bigint),
  wharf.list_destinations(bigint), wharf.show_destination(bigint, bigint),
  wharf.create_destination_rule(bigint, jsonb), wharf.update_destination_rule(bigint, bigint, jsonb),
  wharf.delete_destination_rule(bigint, bigint), wharf.list_destination_rules(bigint, bigint),
  wharf.test_destination_filter(bigint, jsonb, bigint),
  wharf.list_deliveries(bigint, bigint, text, integer, bigint), wharf.show_delivery(bigint, bigint),
  wharf.event_deliveries(bigint, bigint), wharf.replay_delivery(bigint, bigint, text),
  wharf.count_dead_deliveries(bigint, bigint, jsonb),
  wharf.replay_deliveries(bigint, bigint, jsonb, text, integer) FROM PUBLIC;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

DROP TRIGGER destination_delivery_promote_after_delete ON wharf.destination_delivery;

DROP FUNCTION wharf.check_destination_spec(jsonb);

DROP FUNCTION wharf.check_rule_spec(bigint,jsonb);

DROP FUNCTION wharf.claim_deliveries(text,integer);

DROP FUNCTION wharf.complete_delivery(bigint,bigint,integer,integer,text);

DROP FUNCTION wharf.count_dead_deliveries(bigint,bigint,jsonb);

DROP FUNCTION wharf.count_delivery_issue(bigint,bigint,text,timestamp with time zone,boolean);

DROP FUNCTION wharf.create_destination(bigint,jsonb);

DROP FUNCTION wharf.create_destination_rule(bigint,jsonb);

DROP FUNCTION wharf.dead_deliveries(bigint,bigint,jsonb);

DROP FUNCTION wharf.delete_destination(bigint,bigint);

DROP FUNCTION wharf.delete_destination_rule(bigint,bigint);

DROP FUNCTION wharf.deliveries_purgeable(bigint,timestamp with time zone,timestamp with time zone);

DROP FUNCTION wharf.delivery_scope_key(bigint,text);

DROP FUNCTION wharf.delivery_summary(wharf.destination_delivery);

DROP FUNCTION wharf.destination_for_change(bigint,bigint);

DROP FUNCTION wharf.destination_summary(wharf.destination);

DROP FUNCTION wharf.event_deliveries(bigint,bigint);

DROP FUNCTION wharf.event_type_matches(text[],text);

DROP FUNCTION wharf.fail_delivery(bigint,bigint,text,text,integer,integer,text,interval);

DROP FUNCTION wharf.filter_condition_matches(jsonb,jsonb);

DROP FUNCTION wharf.filter_condition_problem(jsonb,text,integer,boolean);

DROP FUNCTION wharf.filter_matches(jsonb,jsonb,jsonb);

DROP FUNCTION wharf.filter_problem(jsonb);

DROP FUNCTION wharf.json_integer_between(jsonb,bigint,bigint);

DROP FUNCTION wharf.list_deliveries(bigint,bigint,text,integer,bigint);

DROP FUNCTION wharf.list_destination_rules(bigint,bigint);

DROP FUNCTION wharf.list_destinations(bigint);

DROP FUNCTION wharf.next_delivery_at();

DROP FUNCTION wharf.promote_after_deleted_deliveries();

DROP FUNCTION wharf.promote_next_delivery(bigint,text);

DROP FUNCTION wharf.purge_forwarding(integer);

DROP FUNCTION wharf.reap_deliveries();

DROP FUNCTION wharf.release_delivery(bigint,bigint);

DROP FUNCTION wharf.replay_deliveries(bigint,bigint,jsonb,text,integer);

DROP FUNCTION wharf.replay_delivery(bigint,bigint,text);

DROP FUNCTION wharf.route_events(bigint[]);

DROP FUNCTION wharf.rule_summary(wharf.destination_rule);

DROP FUNCTION wharf.set_destination_credentials(bigint,bigint,text,text);

DROP FUNCTION wharf.set_destination_secret(bigint,bigint,text,boolean,interval);

DROP FUNCTION wharf.set_destination_state(bigint,bigint,text,text);

DROP FUNCTION wharf.show_delivery(bigint,bigint);

DROP FUNCTION wharf.show_destination(bigint,bigint);

DROP FUNCTION wharf.test_destination_filter(bigint,jsonb,bigint);

DROP FUNCTION wharf.update_destination(bigint,bigint,jsonb);

DROP FUNCTION wharf.update_destination_rule(bigint,bigint,jsonb);

DROP FUNCTION wharf.workspaces_route(bigint[]);

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
END $function$;
GRANT EXECUTE ON FUNCTION wharf.admit_items(wharf.admission_item[]) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.purge(OUT done_deleted bigint, OUT dead_deleted bigint)
 RETURNS record
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_done_before timestamptz := now() - wharf.setting_interval('replay_window');
  v_dead_before timestamptz := now() - wharf.setting_interval('dead_retention');
  v_batch       integer := wharf.setting_integer('purge_batch');
BEGIN
  DELETE FROM wharf.provider_event
   WHERE id IN (SELECT id FROM wharf.provider_event
                 WHERE received_at < v_done_before AND state = 'DONE' AND handled_at < v_done_before
                 ORDER BY received_at
                 LIMIT v_batch
                   FOR UPDATE SKIP LOCKED);
  GET DIAGNOSTICS done_deleted = ROW_COUNT;

  DELETE FROM wharf.provider_event
   WHERE id IN (SELECT id FROM wharf.provider_event
                 WHERE received_at < v_dead_before AND state = 'DEAD' AND dead_at < v_dead_before
                 ORDER BY received_at
                 LIMIT v_batch
                   FOR UPDATE SKIP LOCKED);
  GET DIAGNOSTICS dead_deleted = ROW_COUNT;

  -- A scope row being used right now is locked: pass over it.
  DELETE FROM wharf.scope s
   WHERE s.scope_key IN (SELECT scope_key FROM wharf.scope
                          WHERE head_id IS NULL AND leased_id IS NULL
                          FOR UPDATE SKIP LOCKED);
END $function$;
REVOKE ALL ON FUNCTION wharf.purge() FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.purge_logs()
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_log_before   timestamptz := now() - wharf.setting_interval('log_retention');
  v_audit_before timestamptz := now() - wharf.setting_interval('audit_retention');
  v_batch        integer := wharf.setting_integer('purge_batch');
  v_deleted      bigint;
  v_total        bigint := 0::bigint;
BEGIN
  DELETE FROM wharf.admission_log
   WHERE id IN (SELECT id FROM wharf.admission_log WHERE at < v_log_before ORDER BY at LIMIT v_batch);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  v_total := v_total + v_deleted;

  DELETE FROM wharf.replay_audit
   WHERE id IN (SELECT id FROM wharf.replay_audit WHERE at < v_audit_before ORDER BY at LIMIT v_batch);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  v_total := v_total + v_deleted;

  DELETE FROM wharf.bulk_replay
   WHERE id IN (SELECT id FROM wharf.bulk_replay
                 WHERE finished_at < v_audit_before ORDER BY finished_at LIMIT v_batch);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  v_total := v_total + v_deleted;

  -- The on-call surface's own tables (sql/97-99), each with its rule.
  RETURN v_total + wharf.purge_issues(v_batch) + wharf.purge_scope_actions(v_batch) + wharf.purge_alerts(v_batch);
END $function$;
REVOKE ALL ON FUNCTION wharf.purge_logs() FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.store_event(p_item wharf.admission_item, p_workspace_id bigint, p_connection_id bigint, p_scope_key text)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
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
END $function$;
GRANT EXECUTE ON FUNCTION wharf.store_event(wharf.admission_item,bigint,bigint,text) TO PUBLIC;
