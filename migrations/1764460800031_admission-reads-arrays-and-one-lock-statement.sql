-- Up Migration

-- Release 0.2.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.head_scope_on_insert()
--   new      trigger provider_event_sync_scope_insert_leased on wharf.provider_event
--   changed  function wharf.admission_snapshot(bigint,text,text,text[],boolean)
--   changed  function wharf.admit(text,text,text,text,jsonb,text[],jsonb,jsonb,text)
--   changed  function wharf.sync_scope_head()
--   changed  trigger provider_event_sync_scope_insert on wharf.provider_event

-- The grants of the functions dropped below, given again to the functions of the same name created after them.
CREATE TEMP TABLE wharf_release_grants ON COMMIT DROP AS
  SELECT p.proname::text AS name, a.grantee::regrole::text AS grantee
    FROM pg_proc p CROSS JOIN LATERAL aclexplode(p.proacl) a
   WHERE p.oid IN ('wharf.admission_snapshot(bigint,text,text,text[],boolean)'::regprocedure)
     AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> p.proowner;

DROP FUNCTION wharf.admission_snapshot(bigint,text,text,text[],boolean);

-- ======== sql/20-scope-heads.sql ========

-- Trigger on provider_event: moves the heads and lease marks of the scopes
-- whose rows a statement moved. A row entering the queue heads its scope
-- when it is older than the current head; a head leaving it hands over to
-- the next; a lease taken or ended marks or frees its scope. Updates run it
-- once per statement: a claim or a batch of completions moves many scopes at
-- once, and the three statements below move them together (per row, the
-- PL/pgSQL call and the statements it ran cost a claim more than its own
-- update). Deletes run it per row, and only for QUEUED and LEASED rows:
-- purge, which deletes DONE and DEAD rows by the million, must not copy them
-- into a transition table. So do inserts of a LEASED row (none of Wharf's
-- own); a QUEUED insert, every admission, has head_scope_on_insert below.
--
-- ready_at is when the scope last became claimable (never before its head is
-- due): claims serve scopes longest ready first, so a scope just served goes
-- to the back of the line. It also keeps ix_scope_claim healthy: its new
-- entries land at its end, while the dead entries of served heads stay at
-- its front, on pages no insert touches, where an index scan can mark them
-- dead. Keyed by the head's due time instead, a backlog's next heads would
-- land among those dead entries, the changing pages would keep scans from
-- marking them, and each claim would re-read every one.
--
-- The next head is read from provider_event, so whoever moves a head out of
-- the queue holds its scope row already (claim, erase, purge lock it first);
-- the other statements use only the scope row's own columns and stay exact
-- when they wait for its lock.
--
-- It runs inside claim, whose pinned plan settings it would inherit: hash
-- joins stay on here, or pairing the old and new rows of a claim becomes a
-- nested loop over both, costing more than the claim itself.
CREATE OR REPLACE FUNCTION wharf.sync_scope_head() RETURNS trigger
LANGUAGE plpgsql SET enable_seqscan = off SET enable_hashjoin = on SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_moves  wharf.scope_move[];
  v_ended  boolean;  -- some lease ended
  v_moved  boolean;  -- some row left the queue or took a lease
  v_queued boolean;  -- some row is QUEUED now
BEGIN
  IF TG_OP = 'INSERT' THEN  -- of a LEASED row
    -- Its scope may have no row yet: admission makes one before it inserts,
    -- a row inserted by hand does not.
    PERFORM wharf.lock_scope(NEW.scope_key, NEW.workspace_id);
    v_moves := ARRAY[(NEW.id, NEW.scope_key, NEW.workspace_id, NEW.next_attempt_at,
                      false, true, false, false)::wharf.scope_move];
    v_ended := false;
    v_moved := true;
    v_queued := false;
  ELSIF TG_OP = 'DELETE' THEN
    v_moves := ARRAY[(OLD.id, OLD.scope_key, OLD.workspace_id, OLD.next_attempt_at,
                      OLD.state = 'QUEUED', false, OLD.state = 'LEASED', false)::wharf.scope_move];
    v_ended := OLD.state = 'LEASED';
    v_moved := OLD.state = 'QUEUED';
    v_queued := false;
  ELSE
    SELECT array_agg((n.id, n.scope_key, n.workspace_id, n.next_attempt_at,
                      o.state = 'QUEUED' AND n.state <> 'QUEUED',
                      n.state = 'LEASED' AND o.state <> 'LEASED',
                      o.state = 'LEASED' AND n.state <> 'LEASED',
                      n.state = 'QUEUED')::wharf.scope_move),
           bool_or(o.state = 'LEASED' AND n.state <> 'LEASED'),
           bool_or((o.state = 'QUEUED' AND n.state <> 'QUEUED') OR (n.state = 'LEASED' AND o.state <> 'LEASED')),
           bool_or(n.state = 'QUEUED')
      INTO v_moves, v_ended, v_moved, v_queued
      FROM old_rows o
      JOIN new_rows n ON n.id = o.id
     WHERE o.state <> n.state
        OR (n.state = 'QUEUED' AND o.next_attempt_at IS DISTINCT FROM n.next_attempt_at);
  END IF;
  -- Each statement below runs only when some row needs it: a claim, a
  -- completion or an admission pays for one. (The flags come with the moves,
  -- not from a statement of their own: one statement less on every write.)

  -- Leases that ended: a scope with nothing queued is deleted (admission
  -- makes it again), which costs less than writing it empty; any other is
  -- free, ready when its head is due.
  IF v_ended THEN
    DELETE FROM wharf.scope s
     USING unnest(v_moves) m
     WHERE m.ended_lease AND s.scope_key = m.scope_key AND s.leased_id = m.id AND s.head_id IS NULL;
    UPDATE wharf.scope s
       SET leased_id = NULL, ready_at = greatest(s.head_due_at, clock_timestamp())
      FROM unnest(v_moves) m
     WHERE m.ended_lease AND s.scope_key = m.scope_key AND s.leased_id = m.id;
  END IF;

  -- Rows that left the queue (claimed, ended, deleted) and leases taken, in
  -- one write per scope: a claim moves the head and marks the lease at once.
  IF v_moved THEN
    UPDATE wharf.scope s
       SET head_id     = CASE WHEN s.head_id = ANY (m.left_ids) THEN next.id ELSE s.head_id END,
           head_due_at = CASE WHEN s.head_id = ANY (m.left_ids) THEN next.due_at ELSE s.head_due_at END,
           ready_at    = CASE WHEN s.head_id = ANY (m.left_ids) THEN greatest(next.due_at, clock_timestamp())
                              ELSE s.ready_at END,
           leased_id   = coalesce(m.leased_id, s.leased_id)
      FROM (SELECT m.scope_key,
                   array_agg(m.id) FILTER (WHERE m.left_queue) AS left_ids,
                   max(m.id) FILTER (WHERE m.took_lease) AS leased_id
              FROM unnest(v_moves) m
             WHERE m.left_queue OR m.took_lease
             GROUP BY m.scope_key) m
      LEFT JOIN LATERAL (
        SELECT e.id, e.next_attempt_at AS due_at
          FROM wharf.provider_event e
         WHERE e.scope_key = m.scope_key AND e.state = 'QUEUED'
         ORDER BY e.id
         LIMIT 1
      ) next ON true
     WHERE s.scope_key = m.scope_key;
  END IF;

  -- Rows that entered the queue (retried, released, reaped, replayed; an
  -- admitted row has head_scope_on_insert) or were rescheduled in it: the
  -- oldest of each scope heads it when it is older than the current head.
  IF v_queued THEN
    INSERT INTO wharf.scope AS s (scope_key, workspace_id, head_id, head_due_at, ready_at, active)
    SELECT DISTINCT ON (m.scope_key)
           m.scope_key, m.workspace_id, m.id, m.due_at, greatest(m.due_at, clock_timestamp()),
           coalesce((SELECT w.state = 'ACTIVE' FROM wharf.workspace w WHERE w.id = m.workspace_id), true)
      FROM unnest(v_moves) m
     WHERE m.queued
     ORDER BY m.scope_key, m.id
    ON CONFLICT (scope_key) DO UPDATE
       SET head_id = excluded.head_id, head_due_at = excluded.head_due_at, ready_at = excluded.ready_at
     WHERE s.head_id IS NULL OR excluded.head_id <= s.head_id;
  END IF;
  RETURN NULL;
END $$;

-- Trigger on provider_event, per inserted QUEUED row (an admission): the row
-- heads its scope when the scope has no head or a younger one, and makes the
-- scope row when there is none. The same move as sync_scope_head's last
-- statement, for one row: an admission paid more for that function's
-- generality (its plan settings, the move array and its sort) than for the
-- statement itself. No plan setting is needed: the scope row is found
-- through the arbiter index, and the workspace by primary key.
CREATE OR REPLACE FUNCTION wharf.head_scope_on_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO wharf.scope AS s (scope_key, workspace_id, head_id, head_due_at, ready_at, active)
  VALUES (NEW.scope_key, NEW.workspace_id, NEW.id, NEW.next_attempt_at,
          greatest(NEW.next_attempt_at, clock_timestamp()),
          coalesce((SELECT w.state = 'ACTIVE' FROM wharf.workspace w WHERE w.id = NEW.workspace_id), true))
  ON CONFLICT (scope_key) DO UPDATE
     SET head_id = excluded.head_id, head_due_at = excluded.head_due_at, ready_at = excluded.ready_at
   WHERE s.head_id IS NULL OR excluded.head_id <= s.head_id;
  RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS provider_event_sync_scope_insert ON wharf.provider_event;

CREATE TRIGGER provider_event_sync_scope_insert
  AFTER INSERT ON wharf.provider_event
  FOR EACH ROW WHEN (NEW.state = 'QUEUED')
  EXECUTE FUNCTION wharf.head_scope_on_insert();

CREATE TRIGGER provider_event_sync_scope_insert_leased
  AFTER INSERT ON wharf.provider_event
  FOR EACH ROW WHEN (NEW.state = 'LEASED')
  EXECUTE FUNCTION wharf.sync_scope_head();

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
  v_first      record;  -- admission_snapshot before the lifecycle locks
  v_locked     record;  -- ... and under them
  v_events     jsonb := '[]'::jsonb;
  v_refused    jsonb := '[]'::jsonb;
  v_drop       text;
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
    ELSIF v_drop IS NULL AND jsonb_typeof(v_source.route->'subject_prefixes') = 'array' THEN
      -- (A test of its own: a connection without prefixes runs no query here.)
      IF NOT EXISTS (SELECT FROM jsonb_array_elements_text(v_source.route->'subject_prefixes') p
                      WHERE starts_with(v_subject, p)) THEN
        v_drop := 'route-mismatch';
      END IF;
    END IF;
  END IF;

  IF v_drop IS NULL AND v_source.id IS NOT NULL THEN
    -- 3. Lifecycle lock: read the recipients (a provider-signed delivery fans
    -- out to every subscribed connection of its source; a connection-signed
    -- one reaches its own connection only), lock source, connections (id
    -- order) and workspaces (id order) in shared mode, read them again. The
    -- locks are taken by one statement, in the order its subquery sorts them
    -- (a sorted subquery is scanned in order, never pulled up).
    SELECT * INTO v_first FROM wharf.admission_snapshot(v_source.id, p_provider, p_source, v_subjects, v_connection_signed);
    PERFORM pg_advisory_xact_lock_shared(l.key)
       FROM (SELECT 0 AS rank, 0::bigint AS id,
                    wharf.lifecycle_key('source', wharf.source_lock_id(p_provider, p_source)) AS key
             UNION
             SELECT 1, c.id, wharf.lifecycle_key('connection', c.id::text)
               FROM unnest(v_source.id || v_first.recipient_ids) AS c(id)
             UNION
             SELECT 2, w.id, wharf.lifecycle_key('workspace', w.id::text)
               FROM unnest(v_first.recipient_workspace_ids) AS w(id)
             ORDER BY rank, id) l;
    SELECT * INTO v_locked FROM wharf.admission_snapshot(v_source.id, p_provider, p_source, v_subjects, v_connection_signed);
    IF (v_locked.source_generation, v_locked.recipient_ids, v_locked.recipient_generations)
       IS DISTINCT FROM (v_first.source_generation, v_first.recipient_ids, v_first.recipient_generations) THEN
      RAISE EXCEPTION 'wharf.admit: the route of % changed during admission; retry', p_source
        USING ERRCODE = 'WH409';
    END IF;

    -- 4. Activity: the source itself must be ACTIVE (or PAUSED: a paused
    -- workspace or connection stores and holds); then per workspace.
    IF v_locked.source_state NOT IN ('ACTIVE', 'PAUSED') THEN
      v_drop := 'source-inactive';
    ELSIF cardinality(v_locked.recipient_ids) = 0 THEN
      v_drop := 'no-subscriber';
    ELSE
      FOR v_ws IN
        SELECT r.workspace_id,
               bool_or(r.workspace_state IN ('ACTIVE', 'PAUSED')) AS workspace_active,
               min(r.id) FILTER (WHERE r.state IN ('ACTIVE', 'PAUSED')) AS active_connection_id
          FROM unnest(v_locked.recipient_ids, v_locked.recipient_states,
                      v_locked.recipient_workspace_ids, v_locked.recipient_workspace_states)
               AS r(id, state, workspace_id, workspace_state)
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
            SELECT r.id AS connection_id,
                   CASE WHEN v_ws.workspace_active THEN 'connection-inactive'
                        ELSE 'workspace-inactive' END AS reason
              FROM unnest(v_locked.recipient_ids, v_locked.recipient_workspace_ids) AS r(id, workspace_id)
             WHERE r.workspace_id = v_ws.workspace_id
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

-- What admission decides from, read in one statement: the source connection's
-- state and generation, and the recipients (connections of the same provider
-- and source subscribed to any of the subjects; for a connection-signed
-- delivery, the source connection alone, when it subscribes) as parallel
-- arrays in id order: id, generation, state, workspace and its state. Two
-- reads compare equal in the source's generation and the recipients' ids and
-- generations exactly when no connection involved changed in between.
-- Arrays, not jsonb: building and reading jsonb, and the plan nodes it
-- took, cost more than the rows read.
CREATE OR REPLACE FUNCTION wharf.admission_snapshot(
  p_source_id bigint, p_provider text, p_source text, p_subjects text[], p_connection_signed boolean,
  OUT source_state text, OUT source_generation bigint,
  OUT recipient_ids bigint[], OUT recipient_generations bigint[], OUT recipient_states text[],
  OUT recipient_workspace_ids bigint[], OUT recipient_workspace_states text[])
-- plpgsql, not sql: its plan is cached per session instead of made per call.
LANGUAGE plpgsql STABLE AS $$
BEGIN
  SELECT s.state, s.generation,
         coalesce(r.ids, '{}'), coalesce(r.generations, '{}'), coalesce(r.states, '{}'),
         coalesce(r.workspace_ids, '{}'), coalesce(r.workspace_states, '{}')
    INTO source_state, source_generation,
         recipient_ids, recipient_generations, recipient_states, recipient_workspace_ids, recipient_workspace_states
    FROM (SELECT array_agg(c.id ORDER BY c.id) AS ids, array_agg(c.generation ORDER BY c.id) AS generations,
                 array_agg(c.state ORDER BY c.id) AS states,
                 array_agg(c.workspace_id ORDER BY c.id) AS workspace_ids,
                 array_agg(w.state ORDER BY c.id) AS workspace_states
            FROM wharf.connection c
            JOIN wharf.workspace w ON w.id = c.workspace_id
           WHERE c.provider = p_provider AND c.source = p_source
             AND (c.id = p_source_id OR NOT p_connection_signed)
             AND EXISTS (SELECT FROM wharf.subscription s
                          WHERE s.connection_id = c.id AND s.subject = ANY (p_subjects))) r
    LEFT JOIN wharf.connection s ON s.id = p_source_id;
END $$;

REVOKE ALL ON FUNCTION wharf.admit(text, text, text, text, jsonb, text[], jsonb, jsonb, text) FROM PUBLIC;

DO $$
DECLARE g record;
BEGIN
  FOR g IN SELECT * FROM wharf_release_grants LOOP
    IF g.name = 'admission_snapshot' THEN EXECUTE format('GRANT EXECUTE ON FUNCTION wharf.admission_snapshot(bigint,text,text,text[],boolean) TO %s', g.grantee); END IF;
  END LOOP;
END $$;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

DROP TRIGGER provider_event_sync_scope_insert_leased ON wharf.provider_event;

DROP TRIGGER IF EXISTS provider_event_sync_scope_insert ON wharf.provider_event;

DROP FUNCTION wharf.head_scope_on_insert();

DROP FUNCTION wharf.admission_snapshot(bigint,text,text,text[],boolean);

CREATE OR REPLACE FUNCTION wharf.admission_snapshot(p_source_id bigint, p_provider text, p_source text, p_subjects text[], p_connection_signed boolean)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
AS $function$
BEGIN
  RETURN (
  WITH recipients AS (
    SELECT c.id, c.workspace_id, c.state, c.generation, w.state AS workspace_state
      FROM wharf.connection c
      JOIN wharf.workspace w ON w.id = c.workspace_id
     WHERE c.provider = p_provider AND c.source = p_source
       AND (c.id = p_source_id OR NOT p_connection_signed)
       AND EXISTS (SELECT FROM wharf.subscription s
                    WHERE s.connection_id = c.id AND s.subject = ANY (p_subjects))
  ),
  involved AS (
    SELECT id, generation FROM recipients
    UNION
    SELECT id, generation FROM wharf.connection WHERE id = p_source_id
  )
  SELECT jsonb_build_object(
    'source_state', (SELECT state FROM wharf.connection WHERE id = p_source_id),
    'recipients', coalesce((SELECT jsonb_agg(to_jsonb(r) ORDER BY r.id) FROM recipients r), '[]'),
    'connections', coalesce((SELECT jsonb_agg(jsonb_build_object('id', i.id, 'generation', i.generation)
                                               ORDER BY i.id) FROM involved i), '[]'))
  );
END $function$;
GRANT EXECUTE ON FUNCTION wharf.admission_snapshot(bigint,text,text,text[],boolean) TO PUBLIC;

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
END $function$;
REVOKE ALL ON FUNCTION wharf.admit(text,text,text,text,jsonb,text[],jsonb,jsonb,text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.sync_scope_head()
 RETURNS trigger
 LANGUAGE plpgsql
 SET enable_seqscan TO 'off'
 SET enable_hashjoin TO 'on'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
  v_moves  wharf.scope_move[];
  v_ended  boolean;  -- some lease ended
  v_moved  boolean;  -- some row left the queue or took a lease
  v_queued boolean;  -- some row is QUEUED now
BEGIN
  IF TG_OP = 'INSERT' THEN
    v_moves := ARRAY[(NEW.id, NEW.scope_key, NEW.workspace_id, NEW.next_attempt_at,
                      false, NEW.state = 'LEASED', false, NEW.state = 'QUEUED')::wharf.scope_move];
    v_ended := false;
    v_moved := NEW.state = 'LEASED';
    v_queued := NEW.state = 'QUEUED';
  ELSIF TG_OP = 'DELETE' THEN
    v_moves := ARRAY[(OLD.id, OLD.scope_key, OLD.workspace_id, OLD.next_attempt_at,
                      OLD.state = 'QUEUED', false, OLD.state = 'LEASED', false)::wharf.scope_move];
    v_ended := OLD.state = 'LEASED';
    v_moved := OLD.state = 'QUEUED';
    v_queued := false;
  ELSE
    SELECT array_agg((n.id, n.scope_key, n.workspace_id, n.next_attempt_at,
                      o.state = 'QUEUED' AND n.state <> 'QUEUED',
                      n.state = 'LEASED' AND o.state <> 'LEASED',
                      o.state = 'LEASED' AND n.state <> 'LEASED',
                      n.state = 'QUEUED')::wharf.scope_move),
           bool_or(o.state = 'LEASED' AND n.state <> 'LEASED'),
           bool_or((o.state = 'QUEUED' AND n.state <> 'QUEUED') OR (n.state = 'LEASED' AND o.state <> 'LEASED')),
           bool_or(n.state = 'QUEUED')
      INTO v_moves, v_ended, v_moved, v_queued
      FROM old_rows o
      JOIN new_rows n ON n.id = o.id
     WHERE o.state <> n.state
        OR (n.state = 'QUEUED' AND o.next_attempt_at IS DISTINCT FROM n.next_attempt_at);
  END IF;
  -- Each statement below runs only when some row needs it: a claim, a
  -- completion or an admission pays for one. (The flags come with the moves,
  -- not from a statement of their own: one statement less on every write.)

  -- Leases that ended: a scope with nothing queued is deleted (admission
  -- makes it again), which costs less than writing it empty; any other is
  -- free, ready when its head is due.
  IF v_ended THEN
    DELETE FROM wharf.scope s
     USING unnest(v_moves) m
     WHERE m.ended_lease AND s.scope_key = m.scope_key AND s.leased_id = m.id AND s.head_id IS NULL;
    UPDATE wharf.scope s
       SET leased_id = NULL, ready_at = greatest(s.head_due_at, clock_timestamp())
      FROM unnest(v_moves) m
     WHERE m.ended_lease AND s.scope_key = m.scope_key AND s.leased_id = m.id;
  END IF;

  -- Rows that left the queue (claimed, ended, deleted) and leases taken, in
  -- one write per scope: a claim moves the head and marks the lease at once.
  IF v_moved THEN
    UPDATE wharf.scope s
       SET head_id     = CASE WHEN s.head_id = ANY (m.left_ids) THEN next.id ELSE s.head_id END,
           head_due_at = CASE WHEN s.head_id = ANY (m.left_ids) THEN next.due_at ELSE s.head_due_at END,
           ready_at    = CASE WHEN s.head_id = ANY (m.left_ids) THEN greatest(next.due_at, clock_timestamp())
                              ELSE s.ready_at END,
           leased_id   = coalesce(m.leased_id, s.leased_id)
      FROM (SELECT m.scope_key,
                   array_agg(m.id) FILTER (WHERE m.left_queue) AS left_ids,
                   max(m.id) FILTER (WHERE m.took_lease) AS leased_id
              FROM unnest(v_moves) m
             WHERE m.left_queue OR m.took_lease
             GROUP BY m.scope_key) m
      LEFT JOIN LATERAL (
        SELECT e.id, e.next_attempt_at AS due_at
          FROM wharf.provider_event e
         WHERE e.scope_key = m.scope_key AND e.state = 'QUEUED'
         ORDER BY e.id
         LIMIT 1
      ) next ON true
     WHERE s.scope_key = m.scope_key;
  END IF;

  -- Rows that entered the queue (admitted, retried, released, reaped,
  -- replayed) or were rescheduled in it: the oldest of each scope heads it
  -- when it is older than the current head.
  IF v_queued THEN
    INSERT INTO wharf.scope AS s (scope_key, workspace_id, head_id, head_due_at, ready_at, active)
    SELECT DISTINCT ON (m.scope_key)
           m.scope_key, m.workspace_id, m.id, m.due_at, greatest(m.due_at, clock_timestamp()),
           coalesce((SELECT w.state = 'ACTIVE' FROM wharf.workspace w WHERE w.id = m.workspace_id), true)
      FROM unnest(v_moves) m
     WHERE m.queued
     ORDER BY m.scope_key, m.id
    ON CONFLICT (scope_key) DO UPDATE
       SET head_id = excluded.head_id, head_due_at = excluded.head_due_at, ready_at = excluded.ready_at
     WHERE s.head_id IS NULL OR excluded.head_id <= s.head_id;
  END IF;
  RETURN NULL;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.sync_scope_head() TO PUBLIC;

CREATE TRIGGER provider_event_sync_scope_insert AFTER INSERT ON wharf.provider_event FOR EACH ROW WHEN ((new.state = ANY (ARRAY['QUEUED'::text, 'LEASED'::text]))) EXECUTE FUNCTION wharf.sync_scope_head();
