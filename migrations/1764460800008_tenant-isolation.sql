-- Up Migration

-- Release 0.2.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.admission_snapshot(bigint,text,text,text[],boolean)
--   new      function wharf.check_lease(bigint,bigint,uuid,boolean)
--   new      function wharf.fence(bigint,bigint,uuid)
--   new      function wharf.queue_stats()
--   new      function wharf.record_step(bigint,bigint,text,uuid,boolean)
--   new      function wharf.replace_signing_key_ciphertext(bigint,text,text)
--   new      function wharf.set_connection_secret(bigint,text,boolean)
--   new      function wharf.step(bigint,bigint,text,uuid)
--   new      function wharf.stored_signing_keys()
--   new      function wharf.validate_encrypted_secrets()
--   new      function wharf.worker_settings()
--   changed  function wharf.admit(text,text,text,text,jsonb,text[],jsonb,jsonb)
--   changed  function wharf.claim(text,integer)
--   changed  function wharf.complete(bigint,bigint,text)
--   changed  function wharf.connection_endpoint(bigint)
--   changed  function wharf.create_token(bigint,text,bytea)
--   changed  function wharf.fail(bigint,bigint,text,text)
--   changed  function wharf.fence(bigint,bigint)
--   changed  function wharf.list_connections(bigint)
--   changed  function wharf.list_dead(bigint,text,integer,bigint)
--   changed  function wharf.list_events(bigint,text,text,integer,bigint)
--   changed  function wharf.list_installation_dead(text,integer,bigint)
--   changed  function wharf.list_installation_events(text,text,integer,bigint)
--   changed  function wharf.list_tokens(bigint)
--   changed  function wharf.list_workspaces()
--   changed  function wharf.mark_busy(text)
--   changed  function wharf.mark_idle(text)
--   changed  function wharf.person_paths(text)
--   changed  function wharf.purge()
--   changed  function wharf.reap()
--   changed  function wharf.release(bigint,bigint)
--   changed  function wharf.renew(bigint,bigint)
--   changed  function wharf.replay(bigint,bigint,text,boolean)
--   changed  function wharf.replay_installation(bigint,text,boolean)
--   changed  function wharf.revoke_token(bigint,bigint)
--   changed  function wharf.set_connection_state(bigint,text)
--   changed  function wharf.set_workspace_state(bigint,text)
--   changed  function wharf.show_connection(bigint)
--   changed  function wharf.show_event(bigint,bigint)
--   changed  function wharf.show_installation_event(bigint)
--   changed  function wharf.show_workspace(bigint)
--   changed  function wharf.step(bigint,bigint,text)
--   changed  function wharf.subscribe(bigint,text)
--   changed  function wharf.unsubscribe(bigint,text)
--   changed  function wharf.upsert_connection(bigint,text,text,text,text,jsonb)
--   changed  function wharf.upsert_workspace(bigint)
--   changed  function wharf.verify_token(bytea)
--   dropped  function wharf.admission_snapshot(bigint,text,text,text[])
--   dropped  function wharf.set_connection_secret(bigint,text)

DROP FUNCTION wharf.admission_snapshot(bigint,text,text,text[]);

DROP FUNCTION wharf.set_connection_secret(bigint,text);

DROP FUNCTION wharf.connection_endpoint(bigint);

-- ======== sql/10-settings.sql ========

-- The worker-side settings, in milliseconds. SECURITY DEFINER: the worker's
-- role needs EXECUTE on it, not read access to wharf.setting.
CREATE OR REPLACE FUNCTION wharf.worker_settings(OUT renew_every float8, OUT handler_timeout float8, OUT poll_every float8)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT extract(epoch FROM wharf.setting_interval('renew_every'))::float8 * 1000,
         extract(epoch FROM wharf.setting_interval('handler_timeout'))::float8 * 1000,
         extract(epoch FROM wharf.setting_interval('poll_every'))::float8 * 1000
$$;

REVOKE ALL ON FUNCTION wharf.worker_settings() FROM PUBLIC;

-- ======== sql/30-claim-lease.sql ========

-- Leases up to p_max rows, each the oldest QUEUED row of its scope, due now,
-- in a scope with no LEASED row and an ACTIVE (or no) workspace; scopes are
-- served longest ready first (wharf.scope.ready_at). Increments attempt and
-- lease_epoch, and draws the lease's random lease_token, which the handler's
-- step and fence present (sql/50-steps-fences.sql). Concurrent claimers pass
-- over each other.
--
-- The plan is pinned to its one good shape: walk ix_scope_claim in order and
-- fetch each head by primary key, stopping after p_max. PL/pgSQL caches a
-- generic plan after five calls, and for a small scope table the planner's
-- generic choice is a sequential scan of wharf.scope merge-joined with the
-- whole provider_event primary key, which reads the backlog on every claim.
-- Turning off the other scan and join methods leaves it the index path alone.
--
-- That plan is also forced generic: left to choose, the plan cache finds the
-- custom plans (LIMIT p_max known) cheaper and plans every call afresh, which
-- costs a claim a quarter of its time. The figures are in bench/RESULTS.md
-- and the commits that pinned both.
CREATE OR REPLACE FUNCTION wharf.claim(p_worker text, p_max integer DEFAULT 1)
RETURNS SETOF wharf.provider_event
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_mergejoin = off SET enable_hashjoin = off
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_now   timestamptz := clock_timestamp();
  v_lease interval := wharf.setting_interval('lease');
BEGIN
  IF p_worker IS NULL OR p_worker = '' THEN
    RAISE EXCEPTION 'wharf.claim: worker must be named' USING ERRCODE = '22004';
  END IF;
  IF p_max IS NULL THEN
    RAISE EXCEPTION 'wharf.claim: max is required' USING ERRCODE = '22004';
  END IF;
  IF p_max < 0 THEN
    RAISE EXCEPTION 'wharf.claim: max must be zero or more, not %', p_max USING ERRCODE = '22023';
  END IF;

  RETURN QUERY
  WITH due_heads AS (
    SELECT e.id
      FROM wharf.scope s
      JOIN wharf.provider_event e ON e.id = s.head_id
     WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
       AND s.ready_at <= v_now  -- never earlier than head_due_at: the head is due
       AND e.state = 'QUEUED'
     ORDER BY s.ready_at, s.head_id
     LIMIT p_max
     -- NO KEY UPDATE: a claimer that locks a head another claimer has just
     -- leased (its snapshot was older) must not make the winner's fence
     -- (FOR KEY SHARE NOWAIT) fail as busy; the reaper, lock_scope, purge and
     -- erasure take FOR UPDATE and still conflict.
     FOR NO KEY UPDATE OF s, e SKIP LOCKED
  )
  UPDATE wharf.provider_event e
     SET state        = 'LEASED',
         attempt      = e.attempt + 1,
         lease_epoch  = e.lease_epoch + 1,
         leased_until = v_now + v_lease,
         leased_by    = p_worker,
         lease_token  = gen_random_uuid()
    FROM due_heads
   WHERE e.id = due_heads.id
  RETURNING e.*;
END $$;

-- Extends the lease of a row LEASED under p_epoch to now + lease, also when it
-- expired but was not reaped yet. False when the lease is gone.
CREATE OR REPLACE FUNCTION wharf.renew(p_id bigint, p_epoch bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL THEN
    RAISE EXCEPTION 'wharf.renew: id and epoch are required' USING ERRCODE = '22004';
  END IF;
  UPDATE wharf.provider_event
     SET leased_until = clock_timestamp() + wharf.setting_interval('lease')
   WHERE id = p_id AND lease_epoch = p_epoch AND state = 'LEASED';
  RETURN FOUND;
END $$;

-- Ends a lease with success: DONE with p_outcome ('handled', 'ignored', ...).
-- False when the row is not LEASED under p_epoch.
CREATE OR REPLACE FUNCTION wharf.complete(p_id bigint, p_epoch bigint, p_outcome text DEFAULT 'handled')
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL OR p_outcome IS NULL OR p_outcome = '' THEN
    RAISE EXCEPTION 'wharf.complete: id, epoch and outcome are required' USING ERRCODE = '22004';
  END IF;
  UPDATE wharf.provider_event
     SET state = 'DONE', outcome = p_outcome, handled_at = clock_timestamp(), leased_until = NULL
   WHERE id = p_id AND lease_epoch = p_epoch AND state = 'LEASED';
  RETURN FOUND;
END $$;

-- A stopping worker gives the row back: QUEUED, due at once, attempt as it
-- was before the claim, and idle claimers woken. False when the row is not
-- LEASED under p_epoch.
CREATE OR REPLACE FUNCTION wharf.release(p_id bigint, p_epoch bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL THEN
    RAISE EXCEPTION 'wharf.release: id and epoch are required' USING ERRCODE = '22004';
  END IF;
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  UPDATE wharf.provider_event
     SET state = 'QUEUED', attempt = greatest(attempt - 1, 0), next_attempt_at = now(),
         leased_until = NULL
   WHERE id = p_id AND lease_epoch = p_epoch AND state = 'LEASED';
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM wharf.notify_idle_claimers();
  RETURN true;
END $$;

-- Takes back every lease past leased_until: QUEUED after the retry delay with
-- failures + 1 and error_class 'LeaseExpired', or DEAD once failures reach
-- max_attempts. Skips rows under a fenced write or in a scope busy elsewhere
-- (the next run takes them). Returns how many it reaped.
-- Also forgets idle listeners whose session has ended.
CREATE OR REPLACE FUNCTION wharf.reap() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_now          timestamptz := clock_timestamp();
  v_max_attempts integer := wharf.setting_integer('max_attempts');
  v_reaped       integer;
BEGIN
  -- The scope rows are locked here, skipping busy ones, rather than by the
  -- trigger in update order: an admission fanning out holds one scope and
  -- waits for the next, and must never wait for a reaper waiting for it.
  WITH expired AS (
    SELECT e.id
      FROM wharf.provider_event e
      JOIN wharf.scope s ON s.scope_key = e.scope_key
     WHERE e.state = 'LEASED' AND e.leased_until < v_now
     FOR UPDATE OF e, s SKIP LOCKED
  )
  UPDATE wharf.provider_event e
     SET failures        = e.failures + 1,
         error_class     = 'LeaseExpired',
         leased_until    = NULL,
         state           = CASE WHEN e.failures + 1 >= v_max_attempts THEN 'DEAD' ELSE 'QUEUED' END,
         dead_at         = CASE WHEN e.failures + 1 >= v_max_attempts THEN v_now END,
         next_attempt_at = CASE WHEN e.failures + 1 >= v_max_attempts THEN e.next_attempt_at
                                ELSE v_now + wharf.retry_delay(e.attempt) END
    FROM expired
   WHERE e.id = expired.id;
  GET DIAGNOSTICS v_reaped = ROW_COUNT;

  DELETE FROM wharf.idle_listener l
   WHERE NOT EXISTS (SELECT FROM pg_stat_activity a WHERE a.pid = l.backend_pid);
  RETURN v_reaped;
END $$;

-- A claimer's listener says it has nothing to do and waits on LISTEN
-- wharf_event: the next admission notifies it, once. True when marked; false,
-- changing nothing, while an admission is in flight (try again shortly). The
-- lock proves no admission is past its check, so the claim the caller makes
-- after this commits sees every row admitted before; NOWAIT because a waiting
-- request would queue every new admission behind it.
CREATE OR REPLACE FUNCTION wharf.mark_idle(p_listener text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_listener IS NULL OR p_listener = '' THEN
    RAISE EXCEPTION 'wharf.mark_idle: listener must be named' USING ERRCODE = '22004';
  END IF;
  BEGIN
    LOCK TABLE wharf.idle_listener IN SHARE ROW EXCLUSIVE MODE NOWAIT;
  EXCEPTION WHEN lock_not_available THEN
    RETURN false;
  END;
  INSERT INTO wharf.idle_listener (listener, backend_pid) VALUES (p_listener, pg_backend_pid())
  ON CONFLICT (listener) DO UPDATE SET backend_pid = excluded.backend_pid, since = now();
  RETURN true;
END $$;

-- The listener's host is busy again: admissions stop paying for pg_notify.
CREATE OR REPLACE FUNCTION wharf.mark_busy(p_listener text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  DELETE FROM wharf.idle_listener WHERE listener = p_listener
$$;

-- Queue depth by state and the age in seconds of the oldest due scope head
-- that no lease holds (0 when none is): the worker's gauges.
CREATE OR REPLACE FUNCTION wharf.queue_stats(OUT depth_by_state jsonb, OUT oldest_due_age float8)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT (SELECT coalesce(jsonb_object_agg(state, n), '{}')
            FROM (SELECT state, count(*) AS n FROM wharf.provider_event GROUP BY state) s),
         coalesce((SELECT extract(epoch FROM clock_timestamp() - min(head_due_at))::float8
                     FROM wharf.scope
                    WHERE head_id IS NOT NULL AND leased_id IS NULL AND active
                      AND head_due_at <= clock_timestamp()), 0)
$$;

REVOKE ALL ON FUNCTION wharf.claim(text, integer), wharf.renew(bigint, bigint),
  wharf.complete(bigint, bigint, text), wharf.release(bigint, bigint), wharf.reap(),
  wharf.mark_idle(text), wharf.mark_busy(text), wharf.queue_stats() FROM PUBLIC;

-- ======== sql/40-failure-dead-letters.sql ========

-- Records a failed attempt of a row LEASED under p_epoch and returns its new
-- state; NULL when the lease is gone. p_kind:
--   transient  back to QUEUED after the delay; failures unchanged
--   unknown    failures + 1; DEAD at max_attempts, else QUEUED after the delay
--   permanent  DEAD at once
--   uncertain  DEAD with outcome 'uncertain', never retried automatically
-- p_error_class is a class name (e.g. 'TypeError'), never a message: 22023
-- for anything else, 22023 for an unknown kind.
CREATE OR REPLACE FUNCTION wharf.fail(p_id bigint, p_epoch bigint, p_kind text, p_error_class text)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_now   timestamptz := clock_timestamp();
  v_row   record;
  v_dead  boolean;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL OR p_kind IS NULL OR p_error_class IS NULL THEN
    RAISE EXCEPTION 'wharf.fail: id, epoch, kind and error_class are required' USING ERRCODE = '22004';
  END IF;
  IF p_kind NOT IN ('transient', 'unknown', 'permanent', 'uncertain') THEN
    RAISE EXCEPTION 'wharf.fail: unknown failure kind %', quote_literal(p_kind) USING ERRCODE = '22023';
  END IF;
  IF p_error_class !~ '^[A-Za-z_$][A-Za-z0-9_$.:-]{0,127}$' THEN
    RAISE EXCEPTION 'wharf.fail: error_class must be a class name, not free text' USING ERRCODE = '22023';
  END IF;

  SELECT attempt, failures INTO v_row
    FROM wharf.provider_event
   WHERE id = p_id AND lease_epoch = p_epoch AND state = 'LEASED'
   FOR NO KEY UPDATE;  -- the lock the UPDATE below takes anyway
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;

  v_dead := p_kind IN ('permanent', 'uncertain')
            OR (p_kind = 'unknown' AND v_row.failures + 1 >= wharf.setting_integer('max_attempts'));

  UPDATE wharf.provider_event
     SET failures        = failures + CASE WHEN p_kind = 'unknown' THEN 1 ELSE 0 END,
         error_class     = p_error_class,
         leased_until    = NULL,
         state           = CASE WHEN v_dead THEN 'DEAD' ELSE 'QUEUED' END,
         outcome         = CASE WHEN p_kind = 'uncertain' THEN 'uncertain' END,
         dead_at         = CASE WHEN v_dead THEN v_now END,
         next_attempt_at = CASE WHEN v_dead THEN next_attempt_at
                                ELSE v_now + wharf.retry_delay(v_row.attempt) END
   WHERE id = p_id;
  RETURN CASE WHEN v_dead THEN 'DEAD' ELSE 'QUEUED' END;
END $$;

REVOKE ALL ON FUNCTION wharf.fail(bigint, bigint, text, text) FROM PUBLIC;

-- ======== sql/50-steps-fences.sql ========

-- Raises WH410 when the event is gone (erased), WH412 when it is no longer
-- LEASED under p_epoch (or, given a token, not under that lease's token),
-- 55P03 when another writer holds it; else returns. Internal: callers use
-- fence or step.
CREATE OR REPLACE FUNCTION wharf.check_lease(p_id bigint, p_epoch bigint, p_token uuid, p_token_given boolean)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_state text;
  v_epoch bigint;
  v_token uuid;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL THEN
    RAISE EXCEPTION 'wharf: a lease is named by its event id and epoch' USING ERRCODE = '22004';
  END IF;
  IF p_token_given AND p_token IS NULL THEN
    RAISE EXCEPTION 'wharf: the lease token is required' USING ERRCODE = '22004';
  END IF;
  SELECT state, lease_epoch, lease_token INTO v_state, v_epoch, v_token
    FROM wharf.provider_event WHERE id = p_id
     FOR KEY SHARE NOWAIT;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: event % is gone', p_id USING ERRCODE = 'WH410';
  END IF;
  IF v_state <> 'LEASED' OR v_epoch <> p_epoch OR (p_token_given AND v_token IS DISTINCT FROM p_token) THEN
    RAISE EXCEPTION 'wharf: lease % of event % is no longer held', p_epoch, p_id USING ERRCODE = 'WH412';
  END IF;
END $$;

-- The fence of a handler's business transaction (see check_lease), as the
-- worker's role calls it.
CREATE OR REPLACE FUNCTION wharf.fence(p_id bigint, p_epoch bigint) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.check_lease(p_id, p_epoch, NULL, false)
$$;

-- The same fence as a handler's role calls it: also under the lease's token.
CREATE OR REPLACE FUNCTION wharf.fence(p_id bigint, p_epoch bigint, p_lease_token uuid) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.check_lease(p_id, p_epoch, p_lease_token, true)
$$;

-- Fences the event (raising like fence, never false for a lost lease), then
-- claims step p_step_name: true when the caller must run its writes, false
-- when it committed earlier. Internal: callers use step.
CREATE OR REPLACE FUNCTION wharf.record_step(p_id bigint, p_epoch bigint, p_step_name text, p_token uuid, p_token_given boolean)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  IF p_step_name IS NULL THEN
    RAISE EXCEPTION 'wharf.step: id, epoch and step name are required' USING ERRCODE = '22004';
  END IF;
  IF p_step_name = '' OR length(p_step_name) > 200 THEN
    RAISE EXCEPTION 'wharf.step: step name must be 1 to 200 characters' USING ERRCODE = '22023';
  END IF;
  PERFORM wharf.check_lease(p_id, p_epoch, p_token, p_token_given);
  INSERT INTO wharf.provider_event_step (event_id, step_name) VALUES (p_id, p_step_name)
  ON CONFLICT DO NOTHING;
  RETURN FOUND;
END $$;

-- A step (see record_step), as the worker's role calls it.
CREATE OR REPLACE FUNCTION wharf.step(p_id bigint, p_epoch bigint, p_step_name text) RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.record_step(p_id, p_epoch, p_step_name, NULL, false)
$$;

-- The same step as a handler's role calls it: also under the lease's token.
CREATE OR REPLACE FUNCTION wharf.step(p_id bigint, p_epoch bigint, p_step_name text, p_lease_token uuid)
RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.record_step(p_id, p_epoch, p_step_name, p_lease_token, true)
$$;

REVOKE ALL ON FUNCTION wharf.fence(bigint, bigint), wharf.fence(bigint, bigint, uuid),
  wharf.step(bigint, bigint, text), wharf.step(bigint, bigint, text, uuid) FROM PUBLIC;

-- ======== sql/60-replay-retention.sql ========

-- Replays a DEAD row of workspace p_workspace_id (see requeue_dead). An
-- installation row (NULL workspace) is never reached here: a NULL workspace
-- returns false like any other workspace that does not hold the row.
CREATE OR REPLACE FUNCTION wharf.replay(p_workspace_id bigint, p_id bigint, p_account text, p_force boolean DEFAULT false)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_workspace_id IS NULL THEN
    RETURN false;
  END IF;
  RETURN wharf.requeue_dead(p_workspace_id, p_id, p_account, p_force);
END $$;

-- Replays a DEAD installation row (NULL workspace) and records who did it in
-- replay_audit, in the same transaction.
CREATE OR REPLACE FUNCTION wharf.replay_installation(p_id bigint, p_account text, p_force boolean DEFAULT false)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF NOT wharf.requeue_dead(NULL, p_id, p_account, p_force) THEN
    RETURN false;
  END IF;
  INSERT INTO wharf.replay_audit (event_id, account) VALUES (p_id, p_account);
  RETURN true;
END $$;

-- Deletes DONE rows handled longer ago than replay_window and DEAD rows dead
-- longer than dead_retention (never a QUEUED or LEASED row), then the scope
-- rows left with nothing queued or leased.
CREATE OR REPLACE FUNCTION wharf.purge(OUT done_deleted bigint, OUT dead_deleted bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  DELETE FROM wharf.provider_event
   WHERE state = 'DONE' AND handled_at < now() - wharf.setting_interval('replay_window');
  GET DIAGNOSTICS done_deleted = ROW_COUNT;

  DELETE FROM wharf.provider_event
   WHERE state = 'DEAD' AND dead_at < now() - wharf.setting_interval('dead_retention');
  GET DIAGNOSTICS dead_deleted = ROW_COUNT;

  -- A scope row being used right now is locked: pass over it.
  DELETE FROM wharf.scope s
   WHERE s.scope_key IN (SELECT scope_key FROM wharf.scope
                          WHERE head_id IS NULL AND leased_id IS NULL
                          FOR UPDATE SKIP LOCKED);
END $$;

REVOKE ALL ON FUNCTION wharf.replay(bigint, bigint, text, boolean),
  wharf.replay_installation(bigint, text, boolean),
  wharf.purge() FROM PUBLIC;

-- ======== sql/70-connections.sql ========

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

-- Sets a workspace ACTIVE, SUSPENDED or DELETING (no admission, no claim while
-- not ACTIVE). P0002 for an unknown workspace, 22023 for an unknown state.
CREATE OR REPLACE FUNCTION wharf.set_workspace_state(p_id bigint, p_state text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_id IS NULL OR p_state IS NULL THEN
    RAISE EXCEPTION 'wharf.set_workspace_state: id and state are required' USING ERRCODE = '22004';
  END IF;
  IF p_state NOT IN ('ACTIVE', 'SUSPENDED', 'DELETING') THEN
    RAISE EXCEPTION 'wharf: unknown workspace state %', quote_literal(p_state) USING ERRCODE = '22023';
  END IF;
  PERFORM wharf.lock_lifecycle('workspace', p_id::text);
  UPDATE wharf.workspace SET state = p_state WHERE id = p_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: unknown workspace %', p_id USING ERRCODE = 'P0002';
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
END $$;

-- Sets a connection ACTIVE, SUSPENDED or REVOKED. P0002 for an unknown one.
CREATE OR REPLACE FUNCTION wharf.set_connection_state(p_id bigint, p_state text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_id IS NULL OR p_state IS NULL THEN
    RAISE EXCEPTION 'wharf.set_connection_state: id and state are required' USING ERRCODE = '22004';
  END IF;
  IF p_state NOT IN ('ACTIVE', 'SUSPENDED', 'REVOKED') THEN
    RAISE EXCEPTION 'wharf: unknown connection state %', quote_literal(p_state) USING ERRCODE = '22023';
  END IF;
  PERFORM wharf.lock_lifecycle('connection', p_id::text);
  UPDATE wharf.connection
     SET state = p_state, generation = generation + 1, updated_at = now()
   WHERE id = p_id AND state IS DISTINCT FROM p_state;
  IF NOT FOUND AND NOT EXISTS (SELECT FROM wharf.connection WHERE id = p_id) THEN
    RAISE EXCEPTION 'wharf: unknown connection %', p_id USING ERRCODE = 'P0002';
  END IF;
END $$;

-- The connection's workspace receives events about p_subject. True when the
-- subscription is new.
CREATE OR REPLACE FUNCTION wharf.subscribe(p_connection_id bigint, p_subject text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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

-- ======== sql/75-connection-secrets.sql ========

-- The endpoint of connection p_connection_id in one round trip: its provider,
-- source and route, its secret (token_sha256 as hex, or the encrypted
-- signing_key), and the previous secret while its overlap lasts. No row: no
-- such connection. SECURITY DEFINER: the edge needs EXECUTE only.
CREATE OR REPLACE FUNCTION wharf.connection_endpoint(p_connection_id bigint)
RETURNS TABLE (provider text, source text, route jsonb, token_sha256 text, signing_key text,
               previous_token_sha256 text, previous_signing_key text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN QUERY
  SELECT c.provider, c.source, c.route, encode(s.token_sha256, 'hex'), s.signing_key,
         CASE WHEN s.previous_valid_until > now() THEN encode(s.previous_token_sha256, 'hex') END,
         CASE WHEN s.previous_valid_until > now() THEN s.previous_signing_key END
    FROM wharf.connection c
    LEFT JOIN wharf.connection_secret s ON s.connection_id = c.id
   WHERE c.id = p_connection_id;
END $$;

-- Sets or rotates the webhook secret of connection p_connection_id: a GitLab
-- token is stored as its SHA-256 only; other providers' keys arrive
-- encrypted (aes256gcm:…) and are stored as given. The secret it replaces
-- stays valid for `secret_overlap` unless p_keep_previous is false (a leaked
-- secret: cut it off at once); a key stored in plaintext before 0.2.0 is not
-- kept. 22004 NULL/empty, P0002 unknown connection, 22023 a provider with
-- app-level secrets or a key not encrypted.
CREATE OR REPLACE FUNCTION wharf.set_connection_secret(
  p_connection_id bigint, p_secret text, p_keep_previous boolean DEFAULT true)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_provider text;
BEGIN
  IF p_connection_id IS NULL OR p_secret IS NULL OR p_secret = '' OR p_keep_previous IS NULL THEN
    RAISE EXCEPTION 'wharf.set_connection_secret: connection and secret are required'
      USING ERRCODE = '22004';
  END IF;
  SELECT provider INTO v_provider FROM wharf.connection WHERE id = p_connection_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: unknown connection %', p_connection_id USING ERRCODE = 'P0002';
  END IF;
  IF v_provider IN ('github', 'slack') THEN
    RAISE EXCEPTION 'wharf.set_connection_secret: % secrets belong to the app, not the connection',
      v_provider USING ERRCODE = '22023';
  END IF;
  IF v_provider <> 'gitlab'
     AND p_secret !~ '^aes256gcm:[A-Za-z0-9_.-]{1,32}:[A-Za-z0-9+/]+={0,2}:[A-Za-z0-9+/]+={0,2}$' THEN
    RAISE EXCEPTION 'wharf.set_connection_secret: a signing key is stored encrypted with the key ring (WHARF_SECRET_KEYS)'
      USING ERRCODE = '22023';
  END IF;

  -- A secret is part of the connection's configuration: same lock, same
  -- generation bump as every other change (sql/70-connections.sql).
  PERFORM wharf.lock_lifecycle('connection', p_connection_id::text);
  INSERT INTO wharf.connection_secret (connection_id, token_sha256, signing_key)
  SELECT p_connection_id,
         CASE WHEN v_provider = 'gitlab' THEN sha256(convert_to(p_secret, 'UTF8')) END,
         CASE WHEN v_provider <> 'gitlab' THEN p_secret END
  ON CONFLICT (connection_id) DO UPDATE
     SET previous_token_sha256 = CASE WHEN p_keep_previous THEN connection_secret.token_sha256 END,
         previous_signing_key  = CASE WHEN p_keep_previous AND connection_secret.signing_key LIKE 'aes256gcm:%'
                                      THEN connection_secret.signing_key END,
         previous_valid_until  = CASE WHEN p_keep_previous THEN now() + wharf.setting_interval('secret_overlap') END,
         token_sha256 = EXCLUDED.token_sha256, signing_key = EXCLUDED.signing_key, updated_at = now();
  UPDATE wharf.connection SET generation = generation + 1, updated_at = now() WHERE id = p_connection_id;
END $$;

-- Every encrypted signing key, current and previous, for `wharf secrets
-- reencrypt` (keys stored in plaintext before release 0.2.0 included).
CREATE OR REPLACE FUNCTION wharf.stored_signing_keys()
RETURNS TABLE (connection_id bigint, signing_key text, previous_signing_key text)
LANGUAGE sql STABLE AS $$
  SELECT s.connection_id, s.signing_key, s.previous_signing_key
    FROM wharf.connection_secret s
   WHERE s.signing_key IS NOT NULL OR s.previous_signing_key IS NOT NULL
   ORDER BY s.connection_id
$$;

-- Replaces the stored text p_from of connection p_connection_id's signing key
-- (current or previous) by p_to, the same key encrypted under another key of
-- the ring. The key itself does not change: no generation bump. False when
-- p_from is no longer stored (rotated meanwhile).
CREATE OR REPLACE FUNCTION wharf.replace_signing_key_ciphertext(p_connection_id bigint, p_from text, p_to text)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  IF p_connection_id IS NULL OR p_from IS NULL OR p_to IS NULL THEN
    RAISE EXCEPTION 'wharf.replace_signing_key_ciphertext: connection, from and to are required'
      USING ERRCODE = '22004';
  END IF;
  UPDATE wharf.connection_secret
     SET signing_key          = CASE WHEN signing_key = p_from THEN p_to ELSE signing_key END,
         previous_signing_key = CASE WHEN previous_signing_key = p_from THEN p_to ELSE previous_signing_key END,
         updated_at           = now()
   WHERE connection_id = p_connection_id AND p_from IN (signing_key, previous_signing_key);
  RETURN FOUND;
END $$;

-- Once every signing key is encrypted: the constraint that keeps them so
-- covers the rows stored before release 0.2.0 too.
CREATE OR REPLACE FUNCTION wharf.validate_encrypted_secrets() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  ALTER TABLE wharf.connection_secret VALIDATE CONSTRAINT connection_secret_signing_key_encrypted;
END $$;

REVOKE ALL ON FUNCTION wharf.connection_endpoint(bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION wharf.set_connection_secret(bigint, text, boolean) FROM PUBLIC;

-- The owner's alone, like migrations.
REVOKE ALL ON FUNCTION wharf.stored_signing_keys(), wharf.replace_signing_key_ciphertext(bigint, text, text),
  wharf.validate_encrypted_secrets() FROM PUBLIC;

-- ======== sql/80-admission.sql ========

-- Admits one verified delivery and returns its receipt:
--   {delivery_key, events: [{workspace_id, event_id, outcome}],
--    refused: [{connection_id, workspace_id, reason}], dropped: reason|null}
-- Raises 22004/22023 for missing or malformed arguments (nothing written) and
-- WH409 when a connection changed while admission waited for its lock (the
-- edge answers 503 and the provider retries against the current route).
-- SECURITY DEFINER: the edge's role needs EXECUTE on this function only.
CREATE OR REPLACE FUNCTION wharf.admit(
  p_provider text, p_source text, p_delivery_key text, p_event_type text,
  p_route jsonb, p_subjects text[], p_payload jsonb, p_headers jsonb)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
  v_subject := v_subjects[1];

  -- Held to commit: a claimer going idle (mark_idle) waits for this
  -- admission, so that the claim it makes next sees the row (see rule 6).
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;

  -- 1. Control events: one installation row in the provider's system scope.
  IF v_route->'control' = 'true' THEN
    IF p_provider = 'github'
       AND p_event_type IN ('installation', 'installation_repositories', 'installation_target')
       AND v_route->>'installation_id' IS NOT NULL
       AND p_payload->'installation'->>'id' = v_route->>'installation_id'
       AND coalesce(p_payload->>'action', '') <> '' THEN
      v_events := jsonb_build_array(wharf.store_event(
        NULL, p_provider, p_source, NULL, p_delivery_key, p_event_type, v_subject,
        'system:' || p_provider || ':' || p_source, p_payload, v_headers));
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

    -- 4. Activity: the source itself must be ACTIVE; then per workspace.
    IF v_locked->>'source_state' <> 'ACTIVE' THEN
      v_drop := 'source-inactive';
    ELSIF jsonb_array_length(v_locked->'recipients') = 0 THEN
      v_drop := 'no-subscriber';
    ELSE
      FOR v_ws IN
        SELECT (r->>'workspace_id')::bigint AS workspace_id,
               bool_or(r->>'workspace_state' = 'ACTIVE') AS workspace_active,
               min((r->>'id')::bigint) FILTER (WHERE r->>'state' = 'ACTIVE') AS active_connection_id
          FROM jsonb_array_elements(v_locked->'recipients') r
         GROUP BY 1 ORDER BY 1
      LOOP
        IF v_ws.workspace_active AND v_ws.active_connection_id IS NOT NULL THEN
          -- 5. Insert: one row per admitted workspace, due at once.
          v_events := v_events || wharf.store_event(
            v_ws.workspace_id, p_provider, p_source, v_ws.active_connection_id, p_delivery_key,
            p_event_type, v_subject, v_ws.workspace_id || ':' || p_provider || ':' || v_subject,
            p_payload, v_headers);
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
END $$;

-- What admission decides from, read in one statement: the source connection's
-- state, the recipients (connections of the same provider and source
-- subscribed to any of the subjects, with their workspace's state; for a
-- connection-signed delivery, the source connection alone, when it
-- subscribes), and the id and generation of every connection involved, in
-- id order, so that two reads compare equal exactly when no connection
-- changed in between.
CREATE OR REPLACE FUNCTION wharf.admission_snapshot(
  p_source_id bigint, p_provider text, p_source text, p_subjects text[], p_connection_signed boolean)
RETURNS jsonb
-- plpgsql, not sql: its plan is cached per session instead of made per call.
LANGUAGE plpgsql STABLE AS $$
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
END $$;

REVOKE ALL ON FUNCTION wharf.admit(text, text, text, text, jsonb, text[], jsonb, jsonb) FROM PUBLIC;

-- ======== sql/90-erasure.sql ========

-- The places where each provider's payloads name a person, as jsonpath
-- queries and whether they hold an id or a login. All are at any depth but
-- GitHub's and Forgejo's push paths, commits[] and head_commit
-- author/committer.username (logins), which are at the payload's root.
CREATE OR REPLACE FUNCTION wharf.person_paths(p_provider text)
RETURNS TABLE (path jsonpath, holds text)
LANGUAGE sql IMMUTABLE AS $$
  SELECT ('lax $.**.' || k.key || '.' || f.field)::jsonpath, f.holds
    FROM unnest(ARRAY['sender', 'user', 'author', 'committer', 'assignee', 'member']) AS k(key),
         (VALUES ('id', 'id'), ('login', 'login')) AS f(field, holds)
   WHERE p_provider IN ('github', 'forgejo')
  UNION ALL
  -- Push events: a commit's author and committer carry the login as username.
  -- Anchored at the root, where push payloads hold them: one walk over the
  -- commits, not another over the whole payload.
  SELECT p.path::jsonpath, 'login'
    FROM (VALUES ('lax $.commits[*].author.username'), ('lax $.commits[*].committer.username'),
                 ('lax $.head_commit.author.username'), ('lax $.head_commit.committer.username'))
         AS p(path)
   WHERE p_provider IN ('github', 'forgejo')
  UNION ALL
  SELECT p.path::jsonpath, p.holds
    FROM (VALUES ('gitlab', 'lax $.**.user.id', 'id'), ('gitlab', 'lax $.**.user.username', 'login'),
                 ('gitlab', 'lax $.**.author.id', 'id'), ('gitlab', 'lax $.**.author.username', 'login'),
                 ('gitlab', 'lax $.**.user_id', 'id'), ('gitlab', 'lax $.**.user_username', 'login'),
                 ('slack', 'lax $.**.user', 'id'), ('slack', 'lax $.**.user.id', 'id'),
                 ('outline', 'lax $.**.actorId', 'id'), ('outline', 'lax $.**.user', 'id'),
                 ('outline', 'lax $.**.user.id', 'id'))
         AS p(provider, path, holds)
   WHERE p.provider = p_provider
$$;

-- ======== sql/95-operator.sql ========

-- A page of workspace p_workspace_id's events (see event_page); P0002 for an
-- unknown workspace, 22023 for an unknown state or a limit outside 1..500.
CREATE OR REPLACE FUNCTION wharf.list_events(
  p_workspace_id bigint, p_state text DEFAULT NULL, p_subject text DEFAULT NULL,
  p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN wharf.event_page(p_workspace_id, p_state, p_subject, p_limit, p_before_id);
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

-- Instance admin only: a page of installation rows (NULL workspace).
CREATE OR REPLACE FUNCTION wharf.list_installation_events(
  p_state text DEFAULT NULL, p_subject text DEFAULT NULL, p_limit integer DEFAULT 50,
  p_before_id bigint DEFAULT NULL)
RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.event_page(NULL, p_state, p_subject, p_limit, p_before_id)
$$;

-- Instance admin only: the dead installation rows, newest first.
CREATE OR REPLACE FUNCTION wharf.list_installation_dead(
  p_subject text DEFAULT NULL, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL)
RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.event_page(NULL, 'DEAD', p_subject, p_limit, p_before_id)
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

REVOKE ALL ON FUNCTION wharf.list_events(bigint, text, text, integer, bigint),
  wharf.list_dead(bigint, text, integer, bigint),
  wharf.list_installation_events(text, text, integer, bigint),
  wharf.list_installation_dead(text, integer, bigint),
  wharf.show_event(bigint, bigint),
  wharf.show_installation_event(bigint),
  wharf.show_workspace(bigint),
  wharf.list_workspaces(),
  wharf.show_connection(bigint),
  wharf.list_connections(bigint),
  wharf.create_token(bigint, text, bytea),
  wharf.verify_token(bytea),
  wharf.list_tokens(bigint),
  wharf.revoke_token(bigint, bigint) FROM PUBLIC;

-- Down Migration

-- The released text of everything the up changed.

DROP FUNCTION wharf.admission_snapshot(bigint,text,text,text[],boolean);

DROP FUNCTION wharf.check_lease(bigint,bigint,uuid,boolean);

DROP FUNCTION wharf.fence(bigint,bigint,uuid);

DROP FUNCTION wharf.queue_stats();

DROP FUNCTION wharf.record_step(bigint,bigint,text,uuid,boolean);

DROP FUNCTION wharf.replace_signing_key_ciphertext(bigint,text,text);

DROP FUNCTION wharf.set_connection_secret(bigint,text,boolean);

DROP FUNCTION wharf.step(bigint,bigint,text,uuid);

DROP FUNCTION wharf.stored_signing_keys();

DROP FUNCTION wharf.validate_encrypted_secrets();

DROP FUNCTION wharf.worker_settings();

DROP FUNCTION wharf.connection_endpoint(bigint);

CREATE OR REPLACE FUNCTION wharf.admit(p_provider text, p_source text, p_delivery_key text, p_event_type text, p_route jsonb, p_subjects text[], p_payload jsonb, p_headers jsonb)
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
  v_subject := v_subjects[1];

  -- Held to commit: a claimer going idle (mark_idle) waits for this
  -- admission, so that the claim it makes next sees the row (see rule 6).
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;

  -- 1. Control events: one installation row in the provider's system scope.
  IF v_route->'control' = 'true' THEN
    IF p_provider = 'github'
       AND p_event_type IN ('installation', 'installation_repositories', 'installation_target')
       AND v_route->>'installation_id' IS NOT NULL
       AND p_payload->'installation'->>'id' = v_route->>'installation_id'
       AND coalesce(p_payload->>'action', '') <> '' THEN
      v_events := jsonb_build_array(wharf.store_event(
        NULL, p_provider, p_source, NULL, p_delivery_key, p_event_type, v_subject,
        'system:' || p_provider || ':' || p_source, p_payload, v_headers));
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
    -- 3. Lifecycle lock: read the recipients, lock source, connections (id
    -- order) and workspaces (id order) in shared mode, read them again.
    v_first := wharf.admission_snapshot(v_source.id, p_provider, p_source, v_subjects);
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
    v_locked := wharf.admission_snapshot(v_source.id, p_provider, p_source, v_subjects);
    IF v_locked->'connections' IS DISTINCT FROM v_first->'connections' THEN
      RAISE EXCEPTION 'wharf.admit: the route of % changed during admission; retry', p_source
        USING ERRCODE = 'WH409';
    END IF;

    -- 4. Activity: the source itself must be ACTIVE; then per workspace.
    IF v_locked->>'source_state' <> 'ACTIVE' THEN
      v_drop := 'source-inactive';
    ELSIF jsonb_array_length(v_locked->'recipients') = 0 THEN
      v_drop := 'no-subscriber';
    ELSE
      FOR v_ws IN
        SELECT (r->>'workspace_id')::bigint AS workspace_id,
               bool_or(r->>'workspace_state' = 'ACTIVE') AS workspace_active,
               min((r->>'id')::bigint) FILTER (WHERE r->>'state' = 'ACTIVE') AS active_connection_id
          FROM jsonb_array_elements(v_locked->'recipients') r
         GROUP BY 1 ORDER BY 1
      LOOP
        IF v_ws.workspace_active AND v_ws.active_connection_id IS NOT NULL THEN
          -- 5. Insert: one row per admitted workspace, due at once.
          v_events := v_events || wharf.store_event(
            v_ws.workspace_id, p_provider, p_source, v_ws.active_connection_id, p_delivery_key,
            p_event_type, v_subject, v_ws.workspace_id || ':' || p_provider || ':' || v_subject,
            p_payload, v_headers);
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
REVOKE ALL ON FUNCTION wharf.admit(text,text,text,text,jsonb,text[],jsonb,jsonb) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.claim(p_worker text, p_max integer DEFAULT 1)
 RETURNS SETOF wharf.provider_event
 LANGUAGE plpgsql
 SET enable_seqscan TO 'off'
 SET enable_mergejoin TO 'off'
 SET enable_hashjoin TO 'off'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
  v_now   timestamptz := clock_timestamp();
  v_lease interval := wharf.setting_interval('lease');
BEGIN
  IF p_worker IS NULL OR p_worker = '' THEN
    RAISE EXCEPTION 'wharf.claim: worker must be named' USING ERRCODE = '22004';
  END IF;
  IF p_max IS NULL THEN
    RAISE EXCEPTION 'wharf.claim: max is required' USING ERRCODE = '22004';
  END IF;
  IF p_max < 0 THEN
    RAISE EXCEPTION 'wharf.claim: max must be zero or more, not %', p_max USING ERRCODE = '22023';
  END IF;

  RETURN QUERY
  WITH due_heads AS (
    SELECT e.id
      FROM wharf.scope s
      JOIN wharf.provider_event e ON e.id = s.head_id
     WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
       AND s.ready_at <= v_now  -- never earlier than head_due_at: the head is due
       AND e.state = 'QUEUED'
     ORDER BY s.ready_at, s.head_id
     LIMIT p_max
     -- NO KEY UPDATE: a claimer that locks a head another claimer has just
     -- leased (its snapshot was older) must not make the winner's fence
     -- (FOR KEY SHARE NOWAIT) fail as busy; the reaper, lock_scope, purge and
     -- erasure take FOR UPDATE and still conflict.
     FOR NO KEY UPDATE OF s, e SKIP LOCKED
  )
  UPDATE wharf.provider_event e
     SET state        = 'LEASED',
         attempt      = e.attempt + 1,
         lease_epoch  = e.lease_epoch + 1,
         leased_until = v_now + v_lease,
         leased_by    = p_worker
    FROM due_heads
   WHERE e.id = due_heads.id
  RETURNING e.*;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.claim(text,integer) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.complete(p_id bigint, p_epoch bigint, p_outcome text DEFAULT 'handled'::text)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL OR p_outcome IS NULL OR p_outcome = '' THEN
    RAISE EXCEPTION 'wharf.complete: id, epoch and outcome are required' USING ERRCODE = '22004';
  END IF;
  UPDATE wharf.provider_event
     SET state = 'DONE', outcome = p_outcome, handled_at = clock_timestamp(), leased_until = NULL
   WHERE id = p_id AND lease_epoch = p_epoch AND state = 'LEASED';
  RETURN FOUND;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.complete(bigint,bigint,text) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.connection_endpoint(p_connection_id bigint)
 RETURNS TABLE(provider text, source text, route jsonb, token_sha256 text, signing_key text)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
  RETURN QUERY
  SELECT c.provider, c.source, c.route, encode(s.token_sha256, 'hex'), s.signing_key
    FROM wharf.connection c
    LEFT JOIN wharf.connection_secret s ON s.connection_id = c.id
   WHERE c.id = p_connection_id;
END $function$;
REVOKE ALL ON FUNCTION wharf.connection_endpoint(bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.create_token(p_workspace_id bigint, p_name text, p_token_hash bytea)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
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
END $function$;
GRANT EXECUTE ON FUNCTION wharf.create_token(bigint,text,bytea) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.fail(p_id bigint, p_epoch bigint, p_kind text, p_error_class text)
 RETURNS text
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_now   timestamptz := clock_timestamp();
  v_row   record;
  v_dead  boolean;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL OR p_kind IS NULL OR p_error_class IS NULL THEN
    RAISE EXCEPTION 'wharf.fail: id, epoch, kind and error_class are required' USING ERRCODE = '22004';
  END IF;
  IF p_kind NOT IN ('transient', 'unknown', 'permanent', 'uncertain') THEN
    RAISE EXCEPTION 'wharf.fail: unknown failure kind %', quote_literal(p_kind) USING ERRCODE = '22023';
  END IF;
  IF p_error_class !~ '^[A-Za-z_$][A-Za-z0-9_$.:-]{0,127}$' THEN
    RAISE EXCEPTION 'wharf.fail: error_class must be a class name, not free text' USING ERRCODE = '22023';
  END IF;

  SELECT attempt, failures INTO v_row
    FROM wharf.provider_event
   WHERE id = p_id AND lease_epoch = p_epoch AND state = 'LEASED'
   FOR NO KEY UPDATE;  -- the lock the UPDATE below takes anyway
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;

  v_dead := p_kind IN ('permanent', 'uncertain')
            OR (p_kind = 'unknown' AND v_row.failures + 1 >= wharf.setting_integer('max_attempts'));

  UPDATE wharf.provider_event
     SET failures        = failures + CASE WHEN p_kind = 'unknown' THEN 1 ELSE 0 END,
         error_class     = p_error_class,
         leased_until    = NULL,
         state           = CASE WHEN v_dead THEN 'DEAD' ELSE 'QUEUED' END,
         outcome         = CASE WHEN p_kind = 'uncertain' THEN 'uncertain' END,
         dead_at         = CASE WHEN v_dead THEN v_now END,
         next_attempt_at = CASE WHEN v_dead THEN next_attempt_at
                                ELSE v_now + wharf.retry_delay(v_row.attempt) END
   WHERE id = p_id;
  RETURN CASE WHEN v_dead THEN 'DEAD' ELSE 'QUEUED' END;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.fail(bigint,bigint,text,text) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.fence(p_id bigint, p_epoch bigint)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_state text;
  v_epoch bigint;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL THEN
    RAISE EXCEPTION 'wharf.fence: id and epoch are required' USING ERRCODE = '22004';
  END IF;
  SELECT state, lease_epoch INTO v_state, v_epoch
    FROM wharf.provider_event WHERE id = p_id
     FOR KEY SHARE NOWAIT;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: event % is gone', p_id USING ERRCODE = 'WH410';
  END IF;
  IF v_state <> 'LEASED' OR v_epoch <> p_epoch THEN
    RAISE EXCEPTION 'wharf: lease % of event % is no longer held', p_epoch, p_id USING ERRCODE = 'WH412';
  END IF;
END $function$;
REVOKE ALL ON FUNCTION wharf.fence(bigint,bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.list_connections(p_workspace_id bigint DEFAULT NULL::bigint)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
AS $function$
BEGIN
  IF p_workspace_id IS NOT NULL THEN
    PERFORM wharf.require_workspace(p_workspace_id);
  END IF;
  RETURN (SELECT coalesce(jsonb_agg(wharf.show_connection(id) ORDER BY id), '[]')
            FROM wharf.connection
           WHERE p_workspace_id IS NULL OR workspace_id = p_workspace_id);
END $function$;
GRANT EXECUTE ON FUNCTION wharf.list_connections(bigint) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.list_dead(p_workspace_id bigint, p_subject text DEFAULT NULL::text, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL::bigint)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
  SELECT wharf.list_events(p_workspace_id, 'DEAD', p_subject, p_limit, p_before_id)
$function$;
GRANT EXECUTE ON FUNCTION wharf.list_dead(bigint,text,integer,bigint) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.list_events(p_workspace_id bigint, p_state text DEFAULT NULL::text, p_subject text DEFAULT NULL::text, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL::bigint)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
AS $function$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN wharf.event_page(p_workspace_id, p_state, p_subject, p_limit, p_before_id);
END $function$;
GRANT EXECUTE ON FUNCTION wharf.list_events(bigint,text,text,integer,bigint) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.list_installation_dead(p_subject text DEFAULT NULL::text, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL::bigint)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
  SELECT wharf.event_page(NULL, 'DEAD', p_subject, p_limit, p_before_id)
$function$;
GRANT EXECUTE ON FUNCTION wharf.list_installation_dead(text,integer,bigint) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.list_installation_events(p_state text DEFAULT NULL::text, p_subject text DEFAULT NULL::text, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL::bigint)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
  SELECT wharf.event_page(NULL, p_state, p_subject, p_limit, p_before_id)
$function$;
GRANT EXECUTE ON FUNCTION wharf.list_installation_events(text,text,integer,bigint) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.list_tokens(p_workspace_id bigint)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
AS $function$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', t.id, 'workspace_id', t.workspace_id, 'name', t.name,
                   'created_at', t.created_at, 'last_used_at', t.last_used_at,
                   'revoked_at', t.revoked_at) ORDER BY t.id), '[]')
            FROM wharf.api_token t WHERE t.workspace_id = p_workspace_id);
END $function$;
GRANT EXECUTE ON FUNCTION wharf.list_tokens(bigint) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.list_workspaces()
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
  SELECT coalesce(jsonb_agg(wharf.show_workspace(id) ORDER BY id), '[]') FROM wharf.workspace
$function$;
GRANT EXECUTE ON FUNCTION wharf.list_workspaces() TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.mark_busy(p_listener text)
 RETURNS void
 LANGUAGE sql
AS $function$
  DELETE FROM wharf.idle_listener WHERE listener = p_listener
$function$;
GRANT EXECUTE ON FUNCTION wharf.mark_busy(text) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.mark_idle(p_listener text)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
BEGIN
  IF p_listener IS NULL OR p_listener = '' THEN
    RAISE EXCEPTION 'wharf.mark_idle: listener must be named' USING ERRCODE = '22004';
  END IF;
  BEGIN
    LOCK TABLE wharf.idle_listener IN SHARE ROW EXCLUSIVE MODE NOWAIT;
  EXCEPTION WHEN lock_not_available THEN
    RETURN false;
  END;
  INSERT INTO wharf.idle_listener (listener, backend_pid) VALUES (p_listener, pg_backend_pid())
  ON CONFLICT (listener) DO UPDATE SET backend_pid = excluded.backend_pid, since = now();
  RETURN true;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.mark_idle(text) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.person_paths(p_provider text)
 RETURNS TABLE(path jsonpath, holds text)
 LANGUAGE sql
 IMMUTABLE
AS $function$
  SELECT ('lax $.**.' || k.key || '.' || f.field)::jsonpath, f.holds
    FROM unnest(ARRAY['sender', 'user', 'author', 'committer', 'assignee', 'member']) AS k(key),
         (VALUES ('id', 'id'), ('login', 'login')) AS f(field, holds)
   WHERE p_provider IN ('github', 'forgejo')
  UNION ALL
  SELECT p.path::jsonpath, p.holds
    FROM (VALUES ('gitlab', 'lax $.**.user.id', 'id'), ('gitlab', 'lax $.**.user.username', 'login'),
                 ('gitlab', 'lax $.**.author.id', 'id'), ('gitlab', 'lax $.**.author.username', 'login'),
                 ('gitlab', 'lax $.**.user_id', 'id'), ('gitlab', 'lax $.**.user_username', 'login'),
                 ('slack', 'lax $.**.user', 'id'), ('slack', 'lax $.**.user.id', 'id'),
                 ('outline', 'lax $.**.actorId', 'id'), ('outline', 'lax $.**.user', 'id'),
                 ('outline', 'lax $.**.user.id', 'id'))
         AS p(provider, path, holds)
   WHERE p.provider = p_provider
$function$;
GRANT EXECUTE ON FUNCTION wharf.person_paths(text) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.purge(OUT done_deleted bigint, OUT dead_deleted bigint)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
BEGIN
  DELETE FROM wharf.provider_event
   WHERE state = 'DONE' AND handled_at < now() - wharf.setting_interval('replay_window');
  GET DIAGNOSTICS done_deleted = ROW_COUNT;

  DELETE FROM wharf.provider_event
   WHERE state = 'DEAD' AND dead_at < now() - wharf.setting_interval('dead_retention');
  GET DIAGNOSTICS dead_deleted = ROW_COUNT;

  -- A scope row being used right now is locked: pass over it.
  DELETE FROM wharf.scope s
   WHERE s.scope_key IN (SELECT scope_key FROM wharf.scope
                          WHERE head_id IS NULL AND leased_id IS NULL
                          FOR UPDATE SKIP LOCKED);
END $function$;
GRANT EXECUTE ON FUNCTION wharf.purge() TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.reap()
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_now          timestamptz := clock_timestamp();
  v_max_attempts integer := wharf.setting_integer('max_attempts');
  v_reaped       integer;
BEGIN
  -- The scope rows are locked here, skipping busy ones, rather than by the
  -- trigger in update order: an admission fanning out holds one scope and
  -- waits for the next, and must never wait for a reaper waiting for it.
  WITH expired AS (
    SELECT e.id
      FROM wharf.provider_event e
      JOIN wharf.scope s ON s.scope_key = e.scope_key
     WHERE e.state = 'LEASED' AND e.leased_until < v_now
     FOR UPDATE OF e, s SKIP LOCKED
  )
  UPDATE wharf.provider_event e
     SET failures        = e.failures + 1,
         error_class     = 'LeaseExpired',
         leased_until    = NULL,
         state           = CASE WHEN e.failures + 1 >= v_max_attempts THEN 'DEAD' ELSE 'QUEUED' END,
         dead_at         = CASE WHEN e.failures + 1 >= v_max_attempts THEN v_now END,
         next_attempt_at = CASE WHEN e.failures + 1 >= v_max_attempts THEN e.next_attempt_at
                                ELSE v_now + wharf.retry_delay(e.attempt) END
    FROM expired
   WHERE e.id = expired.id;
  GET DIAGNOSTICS v_reaped = ROW_COUNT;

  DELETE FROM wharf.idle_listener l
   WHERE NOT EXISTS (SELECT FROM pg_stat_activity a WHERE a.pid = l.backend_pid);
  RETURN v_reaped;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.reap() TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.release(p_id bigint, p_epoch bigint)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL THEN
    RAISE EXCEPTION 'wharf.release: id and epoch are required' USING ERRCODE = '22004';
  END IF;
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  UPDATE wharf.provider_event
     SET state = 'QUEUED', attempt = greatest(attempt - 1, 0), next_attempt_at = now(),
         leased_until = NULL
   WHERE id = p_id AND lease_epoch = p_epoch AND state = 'LEASED';
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM wharf.notify_idle_claimers();
  RETURN true;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.release(bigint,bigint) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.renew(p_id bigint, p_epoch bigint)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL THEN
    RAISE EXCEPTION 'wharf.renew: id and epoch are required' USING ERRCODE = '22004';
  END IF;
  UPDATE wharf.provider_event
     SET leased_until = clock_timestamp() + wharf.setting_interval('lease')
   WHERE id = p_id AND lease_epoch = p_epoch AND state = 'LEASED';
  RETURN FOUND;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.renew(bigint,bigint) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.replay(p_workspace_id bigint, p_id bigint, p_account text, p_force boolean DEFAULT false)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
BEGIN
  IF p_workspace_id IS NULL THEN
    RETURN false;
  END IF;
  RETURN wharf.requeue_dead(p_workspace_id, p_id, p_account, p_force);
END $function$;
GRANT EXECUTE ON FUNCTION wharf.replay(bigint,bigint,text,boolean) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.replay_installation(p_id bigint, p_account text, p_force boolean DEFAULT false)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
BEGIN
  IF NOT wharf.requeue_dead(NULL, p_id, p_account, p_force) THEN
    RETURN false;
  END IF;
  INSERT INTO wharf.replay_audit (event_id, account) VALUES (p_id, p_account);
  RETURN true;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.replay_installation(bigint,text,boolean) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.revoke_token(p_workspace_id bigint, p_id bigint)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
BEGIN
  UPDATE wharf.api_token SET revoked_at = now()
   WHERE id = p_id AND workspace_id = p_workspace_id AND revoked_at IS NULL;
  RETURN FOUND;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.revoke_token(bigint,bigint) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.set_connection_state(p_id bigint, p_state text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
  IF p_id IS NULL OR p_state IS NULL THEN
    RAISE EXCEPTION 'wharf.set_connection_state: id and state are required' USING ERRCODE = '22004';
  END IF;
  IF p_state NOT IN ('ACTIVE', 'SUSPENDED', 'REVOKED') THEN
    RAISE EXCEPTION 'wharf: unknown connection state %', quote_literal(p_state) USING ERRCODE = '22023';
  END IF;
  PERFORM wharf.lock_lifecycle('connection', p_id::text);
  UPDATE wharf.connection
     SET state = p_state, generation = generation + 1, updated_at = now()
   WHERE id = p_id AND state IS DISTINCT FROM p_state;
  IF NOT FOUND AND NOT EXISTS (SELECT FROM wharf.connection WHERE id = p_id) THEN
    RAISE EXCEPTION 'wharf: unknown connection %', p_id USING ERRCODE = 'P0002';
  END IF;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.set_connection_state(bigint,text) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.set_workspace_state(p_id bigint, p_state text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
  IF p_id IS NULL OR p_state IS NULL THEN
    RAISE EXCEPTION 'wharf.set_workspace_state: id and state are required' USING ERRCODE = '22004';
  END IF;
  IF p_state NOT IN ('ACTIVE', 'SUSPENDED', 'DELETING') THEN
    RAISE EXCEPTION 'wharf: unknown workspace state %', quote_literal(p_state) USING ERRCODE = '22023';
  END IF;
  PERFORM wharf.lock_lifecycle('workspace', p_id::text);
  UPDATE wharf.workspace SET state = p_state WHERE id = p_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: unknown workspace %', p_id USING ERRCODE = 'P0002';
  END IF;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.set_workspace_state(bigint,text) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.show_connection(p_id bigint)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
  SELECT jsonb_build_object(
           'id', c.id, 'workspace_id', c.workspace_id, 'provider', c.provider,
           'source', c.source, 'kind', c.kind, 'external_id', c.external_id, 'route', c.route,
           'state', c.state, 'generation', c.generation, 'created_at', c.created_at,
           'updated_at', c.updated_at,
           'subscriptions', (SELECT coalesce(jsonb_agg(s.subject ORDER BY s.subject), '[]')
                               FROM wharf.subscription s WHERE s.connection_id = c.id))
    FROM wharf.connection c WHERE c.id = p_id
$function$;
GRANT EXECUTE ON FUNCTION wharf.show_connection(bigint) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.show_event(p_workspace_id bigint, p_id bigint)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
AS $function$
BEGIN
  IF p_workspace_id IS NULL THEN
    RAISE EXCEPTION 'wharf.show_event: workspace is required (installation rows: show_installation_event)'
      USING ERRCODE = '22004';
  END IF;
  RETURN wharf.event_detail(p_workspace_id, p_id);
END $function$;
GRANT EXECUTE ON FUNCTION wharf.show_event(bigint,bigint) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.show_installation_event(p_id bigint)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
  SELECT wharf.event_detail(NULL, p_id)
$function$;
GRANT EXECUTE ON FUNCTION wharf.show_installation_event(bigint) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.show_workspace(p_id bigint)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
  SELECT jsonb_build_object('id', w.id, 'state', w.state, 'created_at', w.created_at,
           'connections', (SELECT count(*) FROM wharf.connection c WHERE c.workspace_id = w.id))
    FROM wharf.workspace w WHERE w.id = p_id
$function$;
GRANT EXECUTE ON FUNCTION wharf.show_workspace(bigint) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.step(p_id bigint, p_epoch bigint, p_step_name text)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL OR p_step_name IS NULL THEN
    RAISE EXCEPTION 'wharf.step: id, epoch and step name are required' USING ERRCODE = '22004';
  END IF;
  IF p_step_name = '' OR length(p_step_name) > 200 THEN
    RAISE EXCEPTION 'wharf.step: step name must be 1 to 200 characters' USING ERRCODE = '22023';
  END IF;
  PERFORM wharf.fence(p_id, p_epoch);
  INSERT INTO wharf.provider_event_step (event_id, step_name) VALUES (p_id, p_step_name)
  ON CONFLICT DO NOTHING;
  RETURN FOUND;
END $function$;
REVOKE ALL ON FUNCTION wharf.step(bigint,bigint,text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.subscribe(p_connection_id bigint, p_subject text)
 RETURNS boolean
 LANGUAGE plpgsql
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
GRANT EXECUTE ON FUNCTION wharf.subscribe(bigint,text) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.unsubscribe(p_connection_id bigint, p_subject text)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
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
END $function$;
GRANT EXECUTE ON FUNCTION wharf.unsubscribe(bigint,text) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.upsert_connection(p_workspace_id bigint, p_provider text, p_source text, p_kind text, p_external_id text, p_route jsonb DEFAULT '{}'::jsonb)
 RETURNS bigint
 LANGUAGE plpgsql
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
GRANT EXECUTE ON FUNCTION wharf.upsert_connection(bigint,text,text,text,text,jsonb) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.upsert_workspace(p_id bigint)
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
BEGIN
  IF p_id IS NULL THEN
    RAISE EXCEPTION 'wharf.upsert_workspace: id is required' USING ERRCODE = '22004';
  END IF;
  INSERT INTO wharf.workspace (id) VALUES (p_id) ON CONFLICT (id) DO NOTHING;
  RETURN p_id;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.upsert_workspace(bigint) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.verify_token(p_token_hash bytea)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
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
END $function$;
GRANT EXECUTE ON FUNCTION wharf.verify_token(bytea) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.admission_snapshot(p_source_id bigint, p_provider text, p_source text, p_subjects text[])
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
GRANT EXECUTE ON FUNCTION wharf.admission_snapshot(bigint,text,text,text[]) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.set_connection_secret(p_connection_id bigint, p_secret text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_provider text;
BEGIN
  IF p_connection_id IS NULL OR p_secret IS NULL OR p_secret = '' THEN
    RAISE EXCEPTION 'wharf.set_connection_secret: connection and secret are required'
      USING ERRCODE = '22004';
  END IF;
  SELECT provider INTO v_provider FROM wharf.connection WHERE id = p_connection_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: unknown connection %', p_connection_id USING ERRCODE = 'P0002';
  END IF;
  IF v_provider IN ('github', 'slack') THEN
    RAISE EXCEPTION 'wharf.set_connection_secret: % secrets belong to the app, not the connection',
      v_provider USING ERRCODE = '22023';
  END IF;
  IF v_provider = 'generic' AND p_secret !~ '^whsec_[A-Za-z0-9+/]+={0,2}$' THEN
    RAISE EXCEPTION 'wharf.set_connection_secret: a Standard Webhooks key is whsec_<base64>'
      USING ERRCODE = '22023';
  END IF;

  -- A secret is part of the connection's configuration: same lock, same
  -- generation bump as every other change (sql/70-connections.sql).
  PERFORM wharf.lock_lifecycle('connection', p_connection_id::text);
  INSERT INTO wharf.connection_secret (connection_id, token_sha256, signing_key)
  SELECT p_connection_id,
         CASE WHEN v_provider = 'gitlab' THEN sha256(convert_to(p_secret, 'UTF8')) END,
         CASE WHEN v_provider <> 'gitlab' THEN p_secret END
  ON CONFLICT (connection_id) DO UPDATE
     SET token_sha256 = EXCLUDED.token_sha256, signing_key = EXCLUDED.signing_key, updated_at = now();
  UPDATE wharf.connection SET generation = generation + 1, updated_at = now() WHERE id = p_connection_id;
END $function$;
REVOKE ALL ON FUNCTION wharf.set_connection_secret(bigint,text) FROM PUBLIC;
