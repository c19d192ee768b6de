-- Up Migration

-- Release 0.3.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.event_page_matches(wharf.provider_event,bigint,text,text,text,timestamp with time zone,timestamp with time zone,bigint)
--   new      function wharf.free_scopes(bigint[],text[])
--   new      function wharf.keep_scope_heads()
--   new      function wharf.next_in_scope(text,bigint)
--   new      trigger provider_event_keep_scope_delete on wharf.provider_event
--   new      trigger provider_event_keep_scope_insert on wharf.provider_event
--   new      trigger provider_event_keep_scope_update on wharf.provider_event
--   changed  function wharf.bulk_replay_candidates(bigint,jsonb,boolean,timestamp with time zone,bigint)
--   changed  function wharf.claim(text,integer,text[])
--   changed  function wharf.complete(bigint,bigint,text)
--   changed  function wharf.complete_many(bigint[],bigint[],text[])
--   changed  function wharf.event_page(bigint,text,text,integer,bigint,text,text,timestamp with time zone,timestamp with time zone)
--   changed  function wharf.purge()
--   changed  function wharf.reap()
--   dropped  function wharf.head_scope_on_insert()
--   dropped  function wharf.sync_scope_head()
--   dropped  trigger provider_event_sync_scope_delete on wharf.provider_event
--   dropped  trigger provider_event_sync_scope_insert on wharf.provider_event
--   dropped  trigger provider_event_sync_scope_insert_leased on wharf.provider_event
--   dropped  trigger provider_event_sync_scope_update on wharf.provider_event

DROP TRIGGER provider_event_sync_scope_delete ON wharf.provider_event;

DROP TRIGGER provider_event_sync_scope_insert ON wharf.provider_event;

DROP TRIGGER provider_event_sync_scope_insert_leased ON wharf.provider_event;

DROP TRIGGER provider_event_sync_scope_update ON wharf.provider_event;

DROP FUNCTION wharf.head_scope_on_insert();

DROP FUNCTION wharf.sync_scope_head();

-- ======== sql/20-scope-heads.sql ========

-- The oldest QUEUED event of scope p_scope_key after event p_after_id, and
-- when it is due; no row when none waits. Read through
-- ix_provider_event_scope_order from p_after_id on: the rows of a scope after
-- its head are its queue (a replayed row may leave handled rows after it,
-- which this reads past once). A plain SQL set-returning function so that
-- the planner inlines it into its callers, under their plan settings.
CREATE OR REPLACE FUNCTION wharf.next_in_scope(p_scope_key text, p_after_id bigint)
RETURNS TABLE (id bigint, due_at timestamptz)
LANGUAGE sql STABLE AS $$
  SELECT e.id, e.next_attempt_at FROM wharf.provider_event e
   WHERE e.scope_key = p_scope_key AND e.id > p_after_id AND e.state = 'QUEUED'
   ORDER BY e.id
   LIMIT 1
$$;

-- Frees the scopes of leases that ended by the lease path (complete,
-- complete_many): ready when their head is due, or deleted when nothing is
-- queued in them (a delete costs less than writing the row empty, and
-- admission makes it again). Two statements, the delete first: the update's
-- fresh snapshot sees a head that an admission committed meanwhile, and the
-- delete rechecks the head of a row it waited for. Internal.
CREATE OR REPLACE FUNCTION wharf.free_scopes(p_ids bigint[], p_scope_keys text[]) RETURNS void
LANGUAGE plpgsql SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off AS $$
BEGIN
  DELETE FROM wharf.scope s
   USING unnest(p_ids, p_scope_keys) AS l(id, scope_key)
   WHERE s.scope_key = l.scope_key AND s.leased_id = l.id AND s.head_id IS NULL;
  UPDATE wharf.scope s
     SET leased_id = NULL, ready_at = greatest(s.head_due_at, clock_timestamp())
    FROM unnest(p_ids, p_scope_keys) AS l(id, scope_key)
   WHERE s.scope_key = l.scope_key AND s.leased_id = l.id;
END $$;

-- Trigger on provider_event, per row, for every write the lease path does
-- not make itself (see the top of this file): moves the head and the lease
-- mark of the row's scope. A row leaving the queue hands the head to the next
-- one; a lease ended frees its scope, ready when its head is due, or deletes
-- the scope when nothing is left in it; a row entering the queue (admitted,
-- retried, released, reaped, replayed) or rescheduled in it heads its scope
-- when it is older than the current head; a row taking a lease marks its
-- scope, and raises 23505 when the scope has a LEASED row already.
--
-- ready_at is when the scope last became claimable (never before its head is
-- due): claims serve scopes longest ready first, so a scope just served goes
-- to the back of the line. It also keeps ix_scope_claim healthy: its new
-- entries land at its end, while the dead entries of served heads stay at
-- its front, on pages no insert touches, where an index scan can mark them
-- dead.
--
-- The next head is read from provider_event, so whoever moves a head out of
-- the queue holds its scope row already (claim, erase, purge lock it first);
-- the other statements use only the scope row's own columns and stay exact
-- when they wait for its lock.
CREATE OR REPLACE FUNCTION wharf.keep_scope_heads() RETURNS trigger
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
  v_old_scope  text := CASE WHEN TG_OP <> 'INSERT' THEN OLD.scope_key END;
  v_new_scope  text := CASE WHEN TG_OP <> 'DELETE' THEN NEW.scope_key END;
  v_old_state  text := CASE WHEN TG_OP <> 'INSERT' THEN OLD.state END;
  v_new_state  text := CASE WHEN TG_OP <> 'DELETE' THEN NEW.state END;
  v_moved      boolean := v_old_scope IS DISTINCT FROM v_new_scope;
  v_next       record;
BEGIN
  -- Left the queue (claimed by hand, ended, deleted, moved): the next row heads.
  IF v_old_state = 'QUEUED' AND (v_moved OR v_new_state IS DISTINCT FROM 'QUEUED') THEN
    SELECT * INTO v_next FROM wharf.next_in_scope(v_old_scope, OLD.id);
    UPDATE wharf.scope
       SET head_id = v_next.id, head_due_at = v_next.due_at,
           ready_at = greatest(v_next.due_at, clock_timestamp())
     WHERE scope_key = v_old_scope AND head_id = OLD.id;
  END IF;

  -- A lease ended: its scope is free, ready when its head is due.
  IF v_old_state = 'LEASED' AND (v_moved OR v_new_state IS DISTINCT FROM 'LEASED') THEN
    UPDATE wharf.scope
       SET leased_id = NULL, ready_at = greatest(head_due_at, clock_timestamp())
     WHERE scope_key = v_old_scope AND leased_id = OLD.id;
  END IF;

  -- A lease taken: the scope's one lease, or an error.
  IF v_new_state = 'LEASED' AND (v_moved OR v_old_state IS DISTINCT FROM 'LEASED') THEN
    INSERT INTO wharf.scope AS s (scope_key, workspace_id, leased_id, active)
    VALUES (NEW.scope_key, NEW.workspace_id, NEW.id,
            coalesce((SELECT w.state = 'ACTIVE' FROM wharf.workspace w WHERE w.id = NEW.workspace_id), true))
    ON CONFLICT (scope_key) DO UPDATE SET leased_id = excluded.leased_id
     WHERE s.leased_id IS NULL OR s.leased_id = excluded.leased_id;
    IF NOT FOUND THEN
      RAISE EXCEPTION 'wharf: scope % already has a LEASED event; event % cannot be leased too',
        NEW.scope_key, NEW.id
        USING ERRCODE = '23505', TABLE = 'provider_event', CONSTRAINT = 'scope_one_lease';
    END IF;
  END IF;

  -- Entered the queue or rescheduled in it: it heads its scope when older
  -- than the head (equal: the head's due time changed).
  IF v_new_state = 'QUEUED' THEN
    INSERT INTO wharf.scope AS s (scope_key, workspace_id, head_id, head_due_at, ready_at, active)
    VALUES (NEW.scope_key, NEW.workspace_id, NEW.id, NEW.next_attempt_at,
            greatest(NEW.next_attempt_at, clock_timestamp()),
            coalesce((SELECT w.state = 'ACTIVE' FROM wharf.workspace w WHERE w.id = NEW.workspace_id), true))
    ON CONFLICT (scope_key) DO UPDATE
       SET head_id = excluded.head_id, head_due_at = excluded.head_due_at, ready_at = excluded.ready_at
     WHERE s.head_id IS NULL OR excluded.head_id <= s.head_id;
  END IF;

  -- A scope left with nothing queued or leased goes (admission makes it again).
  IF v_old_state IN ('QUEUED', 'LEASED') AND (v_moved OR v_new_state NOT IN ('QUEUED', 'LEASED') OR TG_OP = 'DELETE') THEN
    DELETE FROM wharf.scope
     WHERE scope_key = v_old_scope AND head_id IS NULL AND leased_id IS NULL;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER provider_event_keep_scope_insert
  AFTER INSERT ON wharf.provider_event
  FOR EACH ROW WHEN (NEW.state IN ('QUEUED', 'LEASED'))
  EXECUTE FUNCTION wharf.keep_scope_heads();

CREATE TRIGGER provider_event_keep_scope_update
  AFTER UPDATE ON wharf.provider_event
  FOR EACH ROW WHEN ((OLD.state IS DISTINCT FROM NEW.state
                      OR OLD.scope_key IS DISTINCT FROM NEW.scope_key
                      OR (NEW.state = 'QUEUED' AND OLD.next_attempt_at IS DISTINCT FROM NEW.next_attempt_at))
                     AND current_setting('wharf.keeping_scopes', true) IS DISTINCT FROM 'on')
  EXECUTE FUNCTION wharf.keep_scope_heads();

CREATE TRIGGER provider_event_keep_scope_delete
  AFTER DELETE ON wharf.provider_event
  FOR EACH ROW WHEN (OLD.state IN ('QUEUED', 'LEASED'))
  EXECUTE FUNCTION wharf.keep_scope_heads();

-- ======== sql/30-claim-lease.sql ========

-- Leases up to p_max rows, each the oldest QUEUED row of its scope, due now,
-- in a scope with no LEASED row and an ACTIVE (or no) workspace, admitted by a
-- connection that is not PAUSED; scopes are served longest ready first
-- (wharf.scope.ready_at). Increments attempt and lease_epoch, draws the
-- lease's random lease_token, which the handler's step and fence present
-- (sql/50-steps-fences.sql), and records when the lease began (leased_at,
-- the start of its attempt history entry). Concurrent claimers pass over
-- each other. With p_handles (`provider:event_type` and `provider:*`
-- keys), only heads this host has a handler for: another head keeps its scope
-- waiting, in order, for a host that handles it.
--
-- Three statements. The first finds the due heads and locks them with their
-- scope rows. The second marks each scope leased and heads it with its next
-- queued row; it is a statement of its own so that its snapshot, taken after
-- the locks, sees every row admitted into those scopes (an admission locks
-- the scope row before it inserts, so none is in flight now). The third
-- leases the events: it writes no indexed column, so every row version stays
-- on its page (HOT) and no index gets an entry; the scope trigger is told
-- (wharf.keeping_scopes) that the scopes are kept already (sql/20).
--
-- The plan is pinned to its one good shape: walk ix_scope_claim in order and
-- fetch each head by primary key, stopping after p_max. PL/pgSQL caches a
-- generic plan after five calls, and for a small scope table the planner's
-- generic choice is a sequential scan of wharf.scope merge-joined with the
-- whole provider_event primary key, which reads the backlog on every claim.
-- Turning off the other scan and join methods leaves it the index path alone
-- (bitmap scans too: a bitmap scan of ix_scope_claim loses its order, and the
-- claim sorted every ready scope to serve p_max of them). The head is tested
-- with `state COLLATE "C" = 'QUEUED'` (top of this file), by primary key.
--
-- That plan is also forced generic: left to choose, the plan cache finds the
-- custom plans (LIMIT p_max known) cheaper and plans every call afresh, which
-- costs a claim a quarter of its time. The figures are in bench/RESULTS.md
-- and the commits that pinned both.
--
-- The claim's transaction commits without waiting for its WAL to reach disk
-- (synchronous_commit off, for the rest of the caller's transaction too: a
-- worker calls claim on its own). A database crash may forget a claim of
-- its last moments: the row is QUEUED again and is claimed again, as after
-- a worker's crash. Nothing a handler commits can outlive the claim it ran
-- under: a step, a fenced transaction or a completion flushes the WAL up to
-- its own commit, past the claim. An idle worker's wake-up no longer waits
-- for a disk flush before its handler starts.
CREATE OR REPLACE FUNCTION wharf.claim(p_worker text, p_max integer DEFAULT 1, p_handles text[] DEFAULT NULL)
RETURNS SETOF wharf.provider_event
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_mergejoin = off SET enable_hashjoin = off
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_now    timestamptz := clock_timestamp();
  v_lease  interval := wharf.setting_interval('lease');
  v_ids    bigint[];
  v_scopes text[];
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
  PERFORM set_config('synchronous_commit', 'off', true);

  SELECT array_agg(h.id), array_agg(h.scope_key) INTO v_ids, v_scopes
    FROM (SELECT e.id, s.scope_key
            FROM wharf.scope s
            JOIN wharf.provider_event e ON e.id = s.head_id
           WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
             AND s.ready_at <= v_now  -- never earlier than head_due_at: the head is due
             AND e.state COLLATE "C" = 'QUEUED'  -- by primary key
             -- A paused connection's rows wait, holding their scopes, until it resumes.
             AND (e.connection_id IS NULL
                  OR NOT EXISTS (SELECT FROM wharf.connection c WHERE c.id = e.connection_id AND c.state = 'PAUSED'))
             AND (p_handles IS NULL
                  OR e.provider || ':' || e.event_type = ANY (p_handles)
                  OR e.provider || ':*' = ANY (p_handles))
           ORDER BY s.ready_at, s.head_id
           LIMIT p_max
           -- NO KEY UPDATE: a claimer that locks a head another claimer has just
           -- leased (its snapshot was older) must not make the winner's fence
           -- (FOR KEY SHARE NOWAIT) fail as busy; the reaper, lock_scope, purge and
           -- erasure take FOR UPDATE and still conflict.
             FOR NO KEY UPDATE OF s, e SKIP LOCKED) h;
  IF v_ids IS NULL THEN
    RETURN;
  END IF;

  UPDATE wharf.scope s
     SET leased_id = h.id, head_id = n.id, head_due_at = n.due_at
    FROM unnest(v_ids, v_scopes) AS h(id, scope_key)
    LEFT JOIN LATERAL wharf.next_in_scope(h.scope_key, h.id) n ON true
   WHERE s.scope_key = h.scope_key;

  PERFORM set_config('wharf.keeping_scopes', 'on', true);
  RETURN QUERY
  UPDATE wharf.provider_event e
     SET state        = 'LEASED',
         attempt      = e.attempt + 1,
         lease_epoch  = e.lease_epoch + 1,
         leased_until = v_now + v_lease,
         leased_by    = p_worker,
         leased_at    = v_now,
         lease_token  = gen_random_uuid()
    FROM unnest(v_ids) AS h(id)
   WHERE e.id = h.id
  RETURNING e.*;
  PERFORM set_config('wharf.keeping_scopes', 'off', true);
END $$;

-- Ends a lease with success: DONE with p_outcome ('handled', 'ignored', ...).
-- False when the row is not LEASED under p_epoch. The update is HOT (no
-- index names a column it writes); the scope is freed by free_scopes (sql/20).
CREATE OR REPLACE FUNCTION wharf.complete(p_id bigint, p_epoch bigint, p_outcome text DEFAULT 'handled')
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_scope_key text;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL OR p_outcome IS NULL OR p_outcome = '' THEN
    RAISE EXCEPTION 'wharf.complete: id, epoch and outcome are required' USING ERRCODE = '22004';
  END IF;
  PERFORM set_config('wharf.keeping_scopes', 'on', true);
  UPDATE wharf.provider_event
     SET state = 'DONE', outcome = p_outcome, handled_at = clock_timestamp(), leased_until = NULL
   WHERE id = p_id AND lease_epoch = p_epoch AND state COLLATE "C" = 'LEASED'  -- by primary key (top of sql/30)
  RETURNING scope_key INTO v_scope_key;
  PERFORM set_config('wharf.keeping_scopes', 'off', true);
  IF v_scope_key IS NULL THEN
    RETURN false;
  END IF;
  PERFORM wharf.free_scopes(ARRAY[p_id], ARRAY[v_scope_key]);
  RETURN true;
END $$;

-- Ends many leases with success, as complete does each: the ids of the rows
-- that were LEASED under their epoch and are now DONE with their outcome. One
-- update of the events and one of their scopes: a busy host pays one commit
-- and one scope write per scope for a batch. Callers pass them in
-- admission's lock order (workspace, then scope), so that the scope rows
-- they lock cannot form a cycle with an admission. The arrays must be of one
-- length (22023) with no NULL or empty element (22004).
--
-- Pinned to the primary key like claim: a generic plan for a batch of
-- unknown size must never scan the inbox.
CREATE OR REPLACE FUNCTION wharf.complete_many(p_ids bigint[], p_epochs bigint[], p_outcomes text[])
RETURNS SETOF bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_mergejoin = off SET enable_hashjoin = off AS $$
DECLARE
  v_ids    bigint[];
  v_scopes text[];
BEGIN
  IF p_ids IS NULL OR p_epochs IS NULL OR p_outcomes IS NULL THEN
    RAISE EXCEPTION 'wharf.complete_many: ids, epochs and outcomes are required' USING ERRCODE = '22004';
  END IF;
  IF cardinality(p_epochs) <> cardinality(p_ids) OR cardinality(p_outcomes) <> cardinality(p_ids) THEN
    RAISE EXCEPTION 'wharf.complete_many: % ids, % epochs and % outcomes: one of each per lease',
      cardinality(p_ids), cardinality(p_epochs), cardinality(p_outcomes) USING ERRCODE = '22023';
  END IF;
  IF EXISTS (SELECT FROM unnest(p_ids, p_epochs, p_outcomes) AS c(id, epoch, outcome)
              WHERE c.id IS NULL OR c.epoch IS NULL OR c.outcome IS NULL OR c.outcome = '') THEN
    RAISE EXCEPTION 'wharf.complete_many: every id, epoch and outcome is required' USING ERRCODE = '22004';
  END IF;
  PERFORM set_config('wharf.keeping_scopes', 'on', true);
  WITH done AS (
    UPDATE wharf.provider_event e
       SET state = 'DONE', outcome = c.outcome, handled_at = clock_timestamp(), leased_until = NULL
      FROM unnest(p_ids, p_epochs, p_outcomes) WITH ORDINALITY AS c(id, epoch, outcome, n)
     WHERE e.id = c.id AND e.lease_epoch = c.epoch AND e.state COLLATE "C" = 'LEASED'  -- by primary key (top of sql/30)
    RETURNING e.id, e.scope_key, c.n
  )
  SELECT array_agg(id ORDER BY n), array_agg(scope_key ORDER BY n) INTO v_ids, v_scopes FROM done;
  PERFORM set_config('wharf.keeping_scopes', 'off', true);
  IF v_ids IS NULL THEN
    RETURN;
  END IF;
  PERFORM wharf.free_scopes(v_ids, v_scopes);
  RETURN QUERY SELECT unnest(v_ids);
END $$;

-- Takes back every lease past leased_until: QUEUED after the retry delay with
-- failures + 1 and error_class 'LeaseExpired', or DEAD once failures reach
-- max_attempts; each lease stays in the attempt history as 'expired'. Skips
-- rows under a fenced write or in a scope busy elsewhere (the next run takes
-- them). Returns how many it reaped.
-- Also forgets idle listeners whose session has ended.
--
-- The leases are read from the scope rows (leased_id): the event table has
-- no index of its leases, which every claim would pay an entry for. That is
-- a scan of wharf.scope, the scopes in use, every 30 s or so per host, and
-- each lease's event by primary key: never a hash join over the inbox.
CREATE OR REPLACE FUNCTION wharf.reap() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_hashjoin = off SET enable_mergejoin = off AS $$
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
      FROM wharf.scope s
      JOIN wharf.provider_event e ON e.id = s.leased_id
     WHERE s.leased_id IS NOT NULL AND e.state = 'LEASED' AND e.leased_until < v_now
     FOR UPDATE OF e, s SKIP LOCKED
  ), reaped AS (
    UPDATE wharf.provider_event e
       SET failures        = e.failures + 1,
           error_class     = 'LeaseExpired',
           leased_until    = NULL,
           state           = CASE WHEN e.failures + 1 >= v_max_attempts THEN 'DEAD' ELSE 'QUEUED' END,
           dead_at         = CASE WHEN e.failures + 1 >= v_max_attempts THEN v_now END,
           next_attempt_at = CASE WHEN e.failures + 1 >= v_max_attempts THEN e.next_attempt_at
                                  ELSE v_now + wharf.retry_delay(e.attempt) END
      FROM expired
     WHERE e.id = expired.id
    RETURNING e.id, e.lease_epoch, e.attempt, e.leased_by, e.leased_at
  )
  INSERT INTO wharf.event_attempt (event_id, lease_epoch, attempt, worker, started_at, ended_at, ended, error_class)
  SELECT id, lease_epoch, attempt, leased_by, leased_at, v_now, 'expired', 'LeaseExpired' FROM reaped;
  GET DIAGNOSTICS v_reaped = ROW_COUNT;

  DELETE FROM wharf.idle_listener l
   WHERE NOT EXISTS (SELECT FROM pg_stat_activity a WHERE a.pid = l.backend_pid);
  RETURN v_reaped;
END $$;

REVOKE ALL ON FUNCTION wharf.claim(text, integer, text[]), wharf.renew(bigint, bigint),
  wharf.complete(bigint, bigint, text), wharf.complete_many(bigint[], bigint[], text[]), wharf.release(bigint, bigint), wharf.reap(),
  wharf.mark_idle(text), wharf.mark_busy(text), wharf.next_due_at(), wharf.queue_stats() FROM PUBLIC;

-- ======== sql/60-replay-retention.sql ========

-- Deletes DONE rows handled longer ago than replay_window and DEAD rows dead
-- longer than dead_retention (never a QUEUED or LEASED row), then the scope
-- rows left with nothing queued or leased.
--
-- The candidates are found by arrival (ix_provider_event_received): a row
-- handled or dead before a time arrived before it. handled_at and state are
-- in no index, so that completing a row stays a heap-only update; what purge
-- reads besides what it deletes is the older rows it keeps (dead letters
-- within their retention, rows held by a paused workspace).
CREATE OR REPLACE FUNCTION wharf.purge(OUT done_deleted bigint, OUT dead_deleted bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_done_before timestamptz := now() - wharf.setting_interval('replay_window');
  v_dead_before timestamptz := now() - wharf.setting_interval('dead_retention');
BEGIN
  DELETE FROM wharf.provider_event
   WHERE received_at < v_done_before AND state = 'DONE' AND handled_at < v_done_before;
  GET DIAGNOSTICS done_deleted = ROW_COUNT;

  DELETE FROM wharf.provider_event
   WHERE received_at < v_dead_before AND state = 'DEAD' AND dead_at < v_dead_before;
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

-- ======== sql/62-bulk-replay.sql ========

-- The DEAD events a bulk replay takes, in id order from after p_after_id: of
-- workspace p_workspace_id, dead by p_dead_by (the replay's start, so that an
-- event replayed and dead again meanwhile is not taken twice), not
-- 'uncertain' unless p_force, and matching every key of p_filter (provider,
-- event_type, subject, error_class exactly; dead_after inclusive, dead_before
-- exclusive). Internal.
CREATE OR REPLACE FUNCTION wharf.bulk_replay_candidates(
  p_workspace_id bigint, p_filter jsonb, p_force boolean, p_dead_by timestamptz, p_after_id bigint)
RETURNS SETOF wharf.provider_event
LANGUAGE sql STABLE AS $$
  SELECT *
    FROM wharf.provider_event e
   WHERE e.workspace_id = p_workspace_id AND e.state = 'DEAD' AND e.id > p_after_id
     AND e.dead_at IS NOT NULL  -- ix_provider_event_dead's predicate: DEAD is exactly that
     AND e.dead_at <= p_dead_by
     AND (p_force OR e.outcome IS DISTINCT FROM 'uncertain')
     AND (NOT p_filter ? 'provider' OR e.provider = p_filter ->> 'provider')
     AND (NOT p_filter ? 'event_type' OR e.event_type = p_filter ->> 'event_type')
     AND (NOT p_filter ? 'subject' OR e.subject = p_filter ->> 'subject')
     AND (NOT p_filter ? 'error_class' OR e.error_class = p_filter ->> 'error_class')
     AND (NOT p_filter ? 'dead_after' OR e.dead_at >= (p_filter ->> 'dead_after')::timestamptz)
     AND (NOT p_filter ? 'dead_before' OR e.dead_at < (p_filter ->> 'dead_before')::timestamptz)
   ORDER BY e.id
$$;

-- ======== sql/95-operator.sql ========

-- Whether event e is in workspace p_workspace_id (NULL: an installation row)
-- and passes every filter given (see event_page). An expression the planner
-- inlines into event_page's queries.
CREATE OR REPLACE FUNCTION wharf.event_page_matches(
  e wharf.provider_event, p_workspace_id bigint, p_subject text, p_provider text, p_event_type text,
  p_received_after timestamptz, p_received_before timestamptz, p_before_id bigint)
RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT (e.workspace_id = p_workspace_id OR (p_workspace_id IS NULL AND e.workspace_id IS NULL))
     AND (p_subject IS NULL OR e.subject = p_subject)
     AND (p_provider IS NULL OR e.provider = p_provider)
     AND (p_event_type IS NULL OR e.event_type = p_event_type)
     AND (p_received_after IS NULL OR e.received_at >= p_received_after)
     AND (p_received_before IS NULL OR e.received_at < p_received_before)
     AND (p_before_id IS NULL OR e.id < p_before_id)
$$;

-- A page of the events whose workspace IS NOT DISTINCT FROM p_workspace_id
-- (NULL: installation rows), newest first, older than p_before_id when given,
-- narrowed by every filter given: state, subject, provider, event type, and
-- received at or after p_received_after and before p_received_before.
-- {events, next_cursor}: next_cursor is the id to pass as p_before_id for the
-- next page, NULL on the last. Ids only grow, so rows inserted between pages
-- land before the first page and never shift a later one. Internal: callers
-- use the bound list_* functions below.
CREATE OR REPLACE FUNCTION wharf.event_page(
  p_workspace_id bigint, p_state text, p_subject text, p_limit integer, p_before_id bigint,
  p_provider text, p_event_type text, p_received_after timestamptz, p_received_before timestamptz)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_events jsonb;
  v_count  bigint;
BEGIN
  IF p_state IS NOT NULL AND p_state NOT IN ('QUEUED', 'LEASED', 'DONE', 'DEAD') THEN
    RAISE EXCEPTION 'wharf: unknown event state %', quote_literal(p_state) USING ERRCODE = '22023';
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 500' USING ERRCODE = '22023';
  END IF;
  IF p_before_id IS NOT NULL AND p_before_id < 1 THEN
    RAISE EXCEPTION 'wharf: cursor must be a positive event id' USING ERRCODE = '22023';
  END IF;

  -- One row more than asked says whether another page follows. Dead letters
  -- are read from ix_provider_event_dead (DEAD is exactly dead_at IS NOT
  -- NULL, a CHECK of the table), the rest from the workspace's rows newest
  -- first (ix_provider_event_workspace_recent): neither index names a column
  -- that claim or complete writes.
  IF p_state = 'DEAD' THEN
    SELECT coalesce(jsonb_agg(wharf.event_summary(e) ORDER BY e.id DESC), '[]'), count(*)
      INTO v_events, v_count
      FROM (SELECT *
              FROM wharf.provider_event x
             WHERE x.dead_at IS NOT NULL
               AND wharf.event_page_matches(x, p_workspace_id, p_subject, p_provider, p_event_type,
                                            p_received_after, p_received_before, p_before_id)
             ORDER BY x.id DESC
             LIMIT p_limit + 1) e;
  ELSE
    SELECT coalesce(jsonb_agg(wharf.event_summary(e) ORDER BY e.id DESC), '[]'), count(*)
      INTO v_events, v_count
      FROM (SELECT *
              FROM wharf.provider_event x
             WHERE (p_state IS NULL OR x.state = p_state)
               AND wharf.event_page_matches(x, p_workspace_id, p_subject, p_provider, p_event_type,
                                            p_received_after, p_received_before, p_before_id)
             ORDER BY x.id DESC
             LIMIT p_limit + 1) e;
  END IF;

  IF v_count <= p_limit THEN
    RETURN jsonb_build_object('events', v_events, 'next_cursor', NULL);
  END IF;
  v_events := v_events - p_limit;
  RETURN jsonb_build_object('events', v_events, 'next_cursor', v_events -> (p_limit - 1) -> 'id');
END $$;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

DROP TRIGGER provider_event_keep_scope_delete ON wharf.provider_event;

DROP TRIGGER provider_event_keep_scope_insert ON wharf.provider_event;

DROP TRIGGER provider_event_keep_scope_update ON wharf.provider_event;

DROP FUNCTION wharf.event_page_matches(wharf.provider_event,bigint,text,text,text,timestamp with time zone,timestamp with time zone,bigint);

DROP FUNCTION wharf.free_scopes(bigint[],text[]);

DROP FUNCTION wharf.keep_scope_heads();

DROP FUNCTION wharf.next_in_scope(text,bigint);

CREATE OR REPLACE FUNCTION wharf.bulk_replay_candidates(p_workspace_id bigint, p_filter jsonb, p_force boolean, p_dead_by timestamp with time zone, p_after_id bigint)
 RETURNS SETOF wharf.provider_event
 LANGUAGE sql
 STABLE
AS $function$
  SELECT *
    FROM wharf.provider_event e
   WHERE e.workspace_id = p_workspace_id AND e.state = 'DEAD' AND e.id > p_after_id
     AND e.dead_at <= p_dead_by
     AND (p_force OR e.outcome IS DISTINCT FROM 'uncertain')
     AND (NOT p_filter ? 'provider' OR e.provider = p_filter ->> 'provider')
     AND (NOT p_filter ? 'event_type' OR e.event_type = p_filter ->> 'event_type')
     AND (NOT p_filter ? 'subject' OR e.subject = p_filter ->> 'subject')
     AND (NOT p_filter ? 'error_class' OR e.error_class = p_filter ->> 'error_class')
     AND (NOT p_filter ? 'dead_after' OR e.dead_at >= (p_filter ->> 'dead_after')::timestamptz)
     AND (NOT p_filter ? 'dead_before' OR e.dead_at < (p_filter ->> 'dead_before')::timestamptz)
   ORDER BY e.id
$function$;
GRANT EXECUTE ON FUNCTION wharf.bulk_replay_candidates(bigint,jsonb,boolean,timestamp with time zone,bigint) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.claim(p_worker text, p_max integer DEFAULT 1, p_handles text[] DEFAULT NULL::text[])
 RETURNS SETOF wharf.provider_event
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
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
  PERFORM set_config('synchronous_commit', 'off', true);

  RETURN QUERY
  WITH due_heads AS (
    SELECT e.id
      FROM wharf.scope s
      JOIN wharf.provider_event e ON e.id = s.head_id
     WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
       AND s.ready_at <= v_now  -- never earlier than head_due_at: the head is due
       AND e.state COLLATE "C" = 'QUEUED'  -- by primary key, never from the queue's partial index
       -- A paused connection's rows wait, holding their scopes, until it resumes.
       AND (e.connection_id IS NULL
            OR NOT EXISTS (SELECT FROM wharf.connection c WHERE c.id = e.connection_id AND c.state = 'PAUSED'))
       AND (p_handles IS NULL
            OR e.provider || ':' || e.event_type = ANY (p_handles)
            OR e.provider || ':*' = ANY (p_handles))
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
         leased_at    = v_now,
         lease_token  = gen_random_uuid()
    FROM due_heads
   WHERE e.id = due_heads.id
  RETURNING e.*;
END $function$;
REVOKE ALL ON FUNCTION wharf.claim(text,integer,text[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.complete(p_id bigint, p_epoch bigint, p_outcome text DEFAULT 'handled'::text)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL OR p_outcome IS NULL OR p_outcome = '' THEN
    RAISE EXCEPTION 'wharf.complete: id, epoch and outcome are required' USING ERRCODE = '22004';
  END IF;
  UPDATE wharf.provider_event
     SET state = 'DONE', outcome = p_outcome, handled_at = clock_timestamp(), leased_until = NULL
   WHERE id = p_id AND lease_epoch = p_epoch AND state COLLATE "C" = 'LEASED';  -- by primary key (top of sql/30)
  RETURN FOUND;
END $function$;
REVOKE ALL ON FUNCTION wharf.complete(bigint,bigint,text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.complete_many(p_ids bigint[], p_epochs bigint[], p_outcomes text[])
 RETURNS SETOF bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_mergejoin TO 'off'
 SET enable_hashjoin TO 'off'
AS $function$
BEGIN
  IF p_ids IS NULL OR p_epochs IS NULL OR p_outcomes IS NULL THEN
    RAISE EXCEPTION 'wharf.complete_many: ids, epochs and outcomes are required' USING ERRCODE = '22004';
  END IF;
  IF cardinality(p_epochs) <> cardinality(p_ids) OR cardinality(p_outcomes) <> cardinality(p_ids) THEN
    RAISE EXCEPTION 'wharf.complete_many: % ids, % epochs and % outcomes: one of each per lease',
      cardinality(p_ids), cardinality(p_epochs), cardinality(p_outcomes) USING ERRCODE = '22023';
  END IF;
  IF EXISTS (SELECT FROM unnest(p_ids, p_epochs, p_outcomes) AS c(id, epoch, outcome)
              WHERE c.id IS NULL OR c.epoch IS NULL OR c.outcome IS NULL OR c.outcome = '') THEN
    RAISE EXCEPTION 'wharf.complete_many: every id, epoch and outcome is required' USING ERRCODE = '22004';
  END IF;
  RETURN QUERY
  UPDATE wharf.provider_event e
     SET state = 'DONE', outcome = c.outcome, handled_at = clock_timestamp(), leased_until = NULL
    FROM unnest(p_ids, p_epochs, p_outcomes) AS c(id, epoch, outcome)
   WHERE e.id = c.id AND e.lease_epoch = c.epoch AND e.state COLLATE "C" = 'LEASED'  -- by primary key (top of sql/30)
  RETURNING e.id;
END $function$;
REVOKE ALL ON FUNCTION wharf.complete_many(bigint[],bigint[],text[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.event_page(p_workspace_id bigint, p_state text, p_subject text, p_limit integer, p_before_id bigint, p_provider text, p_event_type text, p_received_after timestamp with time zone, p_received_before timestamp with time zone)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
AS $function$
DECLARE
  v_events jsonb;
  v_count  bigint;
BEGIN
  IF p_state IS NOT NULL AND p_state NOT IN ('QUEUED', 'LEASED', 'DONE', 'DEAD') THEN
    RAISE EXCEPTION 'wharf: unknown event state %', quote_literal(p_state) USING ERRCODE = '22023';
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 500' USING ERRCODE = '22023';
  END IF;
  IF p_before_id IS NOT NULL AND p_before_id < 1 THEN
    RAISE EXCEPTION 'wharf: cursor must be a positive event id' USING ERRCODE = '22023';
  END IF;

  -- One row more than asked says whether another page follows.
  SELECT coalesce(jsonb_agg(wharf.event_summary(e) ORDER BY e.id DESC), '[]'), count(*)
    INTO v_events, v_count
    FROM (SELECT *
            FROM wharf.provider_event
           WHERE workspace_id IS NOT DISTINCT FROM p_workspace_id
             AND (p_state IS NULL OR state = p_state)
             AND (p_subject IS NULL OR subject = p_subject)
             AND (p_provider IS NULL OR provider = p_provider)
             AND (p_event_type IS NULL OR event_type = p_event_type)
             AND (p_received_after IS NULL OR received_at >= p_received_after)
             AND (p_received_before IS NULL OR received_at < p_received_before)
             AND (p_before_id IS NULL OR id < p_before_id)
           ORDER BY id DESC
           LIMIT p_limit + 1) e;

  IF v_count <= p_limit THEN
    RETURN jsonb_build_object('events', v_events, 'next_cursor', NULL);
  END IF;
  v_events := v_events - p_limit;
  RETURN jsonb_build_object('events', v_events, 'next_cursor', v_events -> (p_limit - 1) -> 'id');
END $function$;
GRANT EXECUTE ON FUNCTION wharf.event_page(bigint,text,text,integer,bigint,text,text,timestamp with time zone,timestamp with time zone) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.purge(OUT done_deleted bigint, OUT dead_deleted bigint)
 RETURNS record
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
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
REVOKE ALL ON FUNCTION wharf.purge() FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.reap()
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
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
  ), reaped AS (
    UPDATE wharf.provider_event e
       SET failures        = e.failures + 1,
           error_class     = 'LeaseExpired',
           leased_until    = NULL,
           state           = CASE WHEN e.failures + 1 >= v_max_attempts THEN 'DEAD' ELSE 'QUEUED' END,
           dead_at         = CASE WHEN e.failures + 1 >= v_max_attempts THEN v_now END,
           next_attempt_at = CASE WHEN e.failures + 1 >= v_max_attempts THEN e.next_attempt_at
                                  ELSE v_now + wharf.retry_delay(e.attempt) END
      FROM expired
     WHERE e.id = expired.id
    RETURNING e.id, e.lease_epoch, e.attempt, e.leased_by, e.leased_at
  )
  INSERT INTO wharf.event_attempt (event_id, lease_epoch, attempt, worker, started_at, ended_at, ended, error_class)
  SELECT id, lease_epoch, attempt, leased_by, leased_at, v_now, 'expired', 'LeaseExpired' FROM reaped;
  GET DIAGNOSTICS v_reaped = ROW_COUNT;

  DELETE FROM wharf.idle_listener l
   WHERE NOT EXISTS (SELECT FROM pg_stat_activity a WHERE a.pid = l.backend_pid);
  RETURN v_reaped;
END $function$;
REVOKE ALL ON FUNCTION wharf.reap() FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.head_scope_on_insert()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
  INSERT INTO wharf.scope AS s (scope_key, workspace_id, head_id, head_due_at, ready_at, active)
  VALUES (NEW.scope_key, NEW.workspace_id, NEW.id, NEW.next_attempt_at,
          greatest(NEW.next_attempt_at, clock_timestamp()),
          coalesce((SELECT w.state = 'ACTIVE' FROM wharf.workspace w WHERE w.id = NEW.workspace_id), true))
  ON CONFLICT (scope_key) DO UPDATE
     SET head_id = excluded.head_id, head_due_at = excluded.head_due_at, ready_at = excluded.ready_at
   WHERE s.head_id IS NULL OR excluded.head_id <= s.head_id;
  RETURN NULL;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.head_scope_on_insert() TO PUBLIC;

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
END $function$;
GRANT EXECUTE ON FUNCTION wharf.sync_scope_head() TO PUBLIC;

CREATE TRIGGER provider_event_sync_scope_delete AFTER DELETE ON wharf.provider_event FOR EACH ROW WHEN ((old.state = ANY (ARRAY['QUEUED'::text, 'LEASED'::text]))) EXECUTE FUNCTION wharf.sync_scope_head();

CREATE TRIGGER provider_event_sync_scope_insert AFTER INSERT ON wharf.provider_event FOR EACH ROW WHEN ((new.state = 'QUEUED'::text)) EXECUTE FUNCTION wharf.head_scope_on_insert();

CREATE TRIGGER provider_event_sync_scope_insert_leased AFTER INSERT ON wharf.provider_event FOR EACH ROW WHEN ((new.state = 'LEASED'::text)) EXECUTE FUNCTION wharf.sync_scope_head();

CREATE TRIGGER provider_event_sync_scope_update AFTER UPDATE ON wharf.provider_event REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION wharf.sync_scope_head();
