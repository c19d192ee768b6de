-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.add_alert_rule(bigint,text,text,integer,integer,text,text,text,text)
--   new      function wharf.alert_rule_summary(wharf.alert_rule)
--   new      function wharf.bulk_replay_filter(jsonb)
--   new      function wharf.change_issue_status(bigint,bigint,text,text)
--   new      function wharf.claimable_kinds()
--   new      function wharf.count_bulk_replay(bigint,jsonb,boolean)
--   new      function wharf.count_failures_into_issues()
--   new      function wharf.create_alert_rule(bigint,text,text,integer,integer,text,text,text,text)
--   new      function wharf.create_instance_alert_rule(text,text,integer,integer,text,text,text,text)
--   new      function wharf.dead_letter_scope_head(bigint,text,bigint,text)
--   new      function wharf.delete_alert_rule(bigint,bigint)
--   new      function wharf.delivery_history(bigint,integer)
--   new      function wharf.due_alerts(uuid,integer)
--   new      function wharf.evaluate_alert_rules(uuid)
--   new      function wharf.failure_history(bigint,integer)
--   new      function wharf.held_alert_sender(uuid)
--   new      function wharf.issue_alert_facts(wharf.issue)
--   new      function wharf.issue_events(bigint,bigint,integer,bigint)
--   new      function wharf.issue_gauges()
--   new      function wharf.issue_list(bigint,text,integer)
--   new      function wharf.issue_summary(wharf.issue)
--   new      function wharf.list_alert_rules(bigint)
--   new      function wharf.list_alerts(bigint,integer)
--   new      function wharf.list_installation_issues(text,integer)
--   new      function wharf.list_instance_alert_rules()
--   new      function wharf.list_issues(bigint,text,integer)
--   new      function wharf.list_scope_actions(bigint,integer)
--   new      function wharf.list_stuck_scopes(bigint,interval,integer)
--   new      function wharf.lock_scopes(text[],bigint[],boolean[])
--   new      function wharf.pause_scope_connection(bigint,text,bigint,text)
--   new      function wharf.purge_alerts(integer)
--   new      function wharf.purge_issues(integer)
--   new      function wharf.purge_logs()
--   new      function wharf.purge_scope_actions(integer)
--   new      function wharf.record_alert_attempt(uuid,bigint,boolean,integer,text,interval)
--   new      function wharf.release_alert_sender(uuid)
--   new      function wharf.retry_scope_head(bigint,text,bigint,text)
--   new      function wharf.scope_action_result(bigint,text)
--   new      function wharf.scope_head_refusal(bigint,text,bigint,text)
--   new      function wharf.scope_workspace_active(bigint)
--   new      function wharf.search_events(bigint,jsonb,jsonb,text,text,integer,bigint,text,text,timestamp with time zone,timestamp with time zone)
--   new      function wharf.set_installation_issue_status(bigint,text,text)
--   new      function wharf.set_issue_status(bigint,bigint,text,text)
--   new      function wharf.show_issue(bigint,bigint)
--   new      function wharf.stuck_scope_list(bigint,interval,integer)
--   new      function wharf.take_alert_sender(text,interval,uuid)
--   new      trigger event_attempt_count_issues on wharf.event_attempt
--   changed  function wharf.admission_rule_broken(text,text,text,text,jsonb,jsonb,text)
--   changed  function wharf.admit_items(wharf.admission_item[])
--   changed  function wharf.bulk_replay_candidates(bigint,jsonb,boolean,timestamp with time zone,bigint)
--   changed  function wharf.check_provider(text)
--   changed  function wharf.claim(text,integer,text[])
--   changed  function wharf.complete(bigint,bigint,text)
--   changed  function wharf.complete_many(bigint[],bigint[],text[])
--   changed  function wharf.continue_bulk_replay(bigint,bigint,integer)
--   changed  function wharf.erase_person(text,jsonb)
--   changed  function wharf.fail(bigint,bigint,text,text)
--   changed  function wharf.free_scopes(bigint[],text[])
--   changed  function wharf.keep_scope_heads()
--   changed  function wharf.lock_scope(text,bigint)
--   changed  function wharf.next_due_at()
--   changed  function wharf.next_in_scope(text,bigint)
--   changed  function wharf.purge()
--   changed  function wharf.queue_stats()
--   changed  function wharf.release(bigint,bigint)
--   changed  function wharf.requeue_dead(bigint,bigint,text,boolean)
--   changed  function wharf.safe_headers(jsonb)
--   changed  function wharf.set_connection_secret(bigint,text,boolean)
--   changed  function wharf.set_connection_state(bigint,text)
--   changed  function wharf.set_workspace_state(bigint,text)
--   changed  function wharf.start_bulk_replay(bigint,jsonb,text,boolean)
--   changed  function wharf.store_event(wharf.admission_item,bigint,bigint,text)
--   changed  function wharf.sync_scope_activity()

-- The grants of the functions dropped below, given again to the functions of the same name created after them.
CREATE TEMP TABLE wharf_release_grants ON COMMIT DROP AS
  SELECT p.proname::text AS name, a.grantee::regrole::text AS grantee
    FROM pg_proc p CROSS JOIN LATERAL aclexplode(p.proacl) a
   WHERE p.oid IN ('wharf.next_in_scope(text,bigint)'::regprocedure, 'wharf.queue_stats()'::regprocedure)
     AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> p.proowner;

DROP FUNCTION wharf.next_in_scope(text,bigint);

DROP FUNCTION wharf.queue_stats();

-- ======== sql/20-scope-heads.sql ========

-- The oldest QUEUED event of scope p_scope_key after event p_after_id, when
-- it is due and its kind (provider:event_type); no row when none waits. Read through
-- ix_provider_event_scope_order from p_after_id on: the rows of a scope after
-- its head are its queue (a replayed row may leave handled rows after it,
-- which this reads past once). A plain SQL set-returning function so that
-- the planner inlines it into its callers, under their plan settings.
CREATE OR REPLACE FUNCTION wharf.next_in_scope(p_scope_key text, p_after_id bigint)
RETURNS TABLE (id bigint, due_at timestamptz, kind text)
LANGUAGE sql STABLE AS $$
  SELECT e.id, e.next_attempt_at, e.provider || ':' || e.event_type FROM wharf.provider_event e
   WHERE e.scope_key = p_scope_key AND e.id > p_after_id AND e.state = 'QUEUED'
   ORDER BY e.id
   LIMIT 1
$$;

-- Whether scopes of workspace p_workspace_id may be claimed from: it is
-- ACTIVE, or the scope is an installation scope (no workspace).
CREATE OR REPLACE FUNCTION wharf.scope_workspace_active(p_workspace_id bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT coalesce((SELECT w.state = 'ACTIVE' FROM wharf.workspace w WHERE w.id = p_workspace_id), true)
$$;

-- The kinds (provider:event_type) of the heads of claimable scopes, in
-- order, read by a skip scan of ix_scope_claim: one index descent per kind,
-- whatever number of heads each has. What claim, next_due_at and
-- queue_stats walk instead of every claimable head.
CREATE OR REPLACE FUNCTION wharf.claimable_kinds() RETURNS SETOF text
LANGUAGE sql STABLE AS $$
  WITH RECURSIVE k(kind) AS (
    (SELECT s.head_kind FROM wharf.scope s
      WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
      ORDER BY s.head_kind LIMIT 1)
    UNION ALL
    SELECT (SELECT s.head_kind FROM wharf.scope s
             WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active AND s.head_kind > k.kind
             ORDER BY s.head_kind LIMIT 1)
      FROM k WHERE k.kind IS NOT NULL
  )
  SELECT kind FROM k WHERE kind IS NOT NULL
$$;

-- The one lock order of scope rows: (workspace_id NULLS FIRST, scope_key),
-- scope_key compared by the database's collation, computed here and nowhere
-- else. Every statement that locks several scope rows calls this function
-- first, in one pass (admission, complete_many's free_scopes, bulk replay,
-- erasure); a statement that locks one scope (claim, fail, release, reap,
-- replay of one row) cannot close a cycle among them. Classes of locks come
-- in this order too: lifecycle locks (advisory, sql/70), then event rows in
-- id order, then scope rows here. With p_workspace_ids, missing scope rows
-- are made (ACTIVE when p_active says nothing: the workspace's state, or
-- true for installation scopes) and locked in the same pass: a conflict
-- locks the existing row without writing it (the WHERE is false). Without,
-- only existing rows are locked. Internal.
CREATE OR REPLACE FUNCTION wharf.lock_scopes(
  p_scope_keys text[], p_workspace_ids bigint[] DEFAULT NULL, p_active boolean[] DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql SET enable_seqscan = off AS $$
BEGIN
  IF p_workspace_ids IS NULL THEN
    PERFORM FROM wharf.scope s
     WHERE s.scope_key = ANY (p_scope_keys)
     ORDER BY s.workspace_id NULLS FIRST, s.scope_key
       FOR UPDATE;
    RETURN;
  END IF;
  INSERT INTO wharf.scope AS s (scope_key, workspace_id, active)
  SELECT DISTINCT ON (l.workspace_id, l.scope_key) l.scope_key, l.workspace_id,
         coalesce(l.active, wharf.scope_workspace_active(l.workspace_id))
    FROM unnest(p_scope_keys, p_workspace_ids, coalesce(p_active, '{}')) AS l(scope_key, workspace_id, active)
   WHERE l.scope_key IS NOT NULL
   ORDER BY l.workspace_id NULLS FIRST, l.scope_key
  ON CONFLICT (scope_key) DO UPDATE SET active = s.active WHERE false;
END $$;

-- Locks the scope row of `p_scope_key`, creating it when missing (one
-- scope of lock_scopes, below). admit calls it before inserting, so that
-- within a scope ids are assigned and committed in the same order and a
-- claim never passes over a row still being inserted; its fan-out calls it
-- per workspace in workspace-id order, which is the lock order.
CREATE OR REPLACE FUNCTION wharf.lock_scope(p_scope_key text, p_workspace_id bigint) RETURNS void
LANGUAGE sql AS $$
  SELECT wharf.lock_scopes(ARRAY[p_scope_key], ARRAY[p_workspace_id])
$$;

-- Frees the scopes of leases that ended by the lease path (complete,
-- complete_many): ready when their head is due, or deleted when nothing is
-- queued in them (a delete costs less than writing the row empty, and
-- admission makes it again). The rows are locked first, all of them in the
-- one lock order (lock_scopes): deleting some and updating others would lock
-- them in two passes, an order an admission fanning out to the same scopes
-- could cross. The statements after the lock see every head an admission
-- committed before it. Internal.
CREATE OR REPLACE FUNCTION wharf.free_scopes(p_ids bigint[], p_scope_keys text[]) RETURNS void
LANGUAGE plpgsql SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off AS $$
BEGIN
  PERFORM wharf.lock_scopes(p_scope_keys);
  -- `s.scope_key = ANY (…)` besides the join: a lookup by key whatever the
  -- statistics say (an empty scope table, analyzed, estimates one row, and
  -- a join that scans it all looks as cheap).
  DELETE FROM wharf.scope s
   USING unnest(p_ids, p_scope_keys) AS l(id, scope_key)
   WHERE s.scope_key = l.scope_key AND s.scope_key = ANY (p_scope_keys) AND s.leased_id = l.id AND s.head_id IS NULL;
  UPDATE wharf.scope s
     SET leased_id = NULL, ready_at = greatest(s.head_due_at, clock_timestamp()), failing_since = NULL
    FROM unnest(p_ids, p_scope_keys) AS l(id, scope_key)
   WHERE s.scope_key = l.scope_key AND s.scope_key = ANY (p_scope_keys) AND s.leased_id = l.id;
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
       SET head_id = v_next.id, head_due_at = v_next.due_at, head_kind = v_next.kind,
           ready_at = greatest(v_next.due_at, clock_timestamp()),
           active = active OR wharf.scope_workspace_active(workspace_id)  -- a new head is not parked
     WHERE scope_key = v_old_scope AND head_id = OLD.id;
  END IF;

  -- A lease ended: its scope is free, ready when its head is due. Handled,
  -- dead or gone, the row no longer fails its scope.
  IF v_old_state = 'LEASED' AND (v_moved OR v_new_state IS DISTINCT FROM 'LEASED') THEN
    UPDATE wharf.scope
       SET leased_id = NULL, ready_at = greatest(head_due_at, clock_timestamp()),
           failing_since = CASE WHEN v_moved OR v_new_state IS DISTINCT FROM 'QUEUED' THEN NULL ELSE failing_since END
     WHERE scope_key = v_old_scope AND leased_id = OLD.id;
  END IF;

  -- A lease taken: the scope's one lease, or an error.
  IF v_new_state = 'LEASED' AND (v_moved OR v_old_state IS DISTINCT FROM 'LEASED') THEN
    INSERT INTO wharf.scope AS s (scope_key, workspace_id, leased_id, active)
    VALUES (NEW.scope_key, NEW.workspace_id, NEW.id, wharf.scope_workspace_active(NEW.workspace_id))
    ON CONFLICT (scope_key) DO UPDATE SET leased_id = excluded.leased_id
     WHERE s.leased_id IS NULL OR s.leased_id = excluded.leased_id;
    IF NOT FOUND THEN
      RAISE EXCEPTION 'wharf: scope % already has a LEASED event; event % cannot be leased too',
        NEW.scope_key, NEW.id
        USING ERRCODE = '23505', TABLE = 'provider_event', CONSTRAINT = 'scope_one_lease';
    END IF;
  END IF;

  -- Entered the queue or rescheduled in it: it heads its scope when older
  -- than the head (equal: the head's due time changed). A lease of it that
  -- failed or expired (back to the queue with its attempt kept; a release
  -- gives its attempt back) marks its scope failing since then, unless it
  -- was failing already (the stuck scopes of queue_stats).
  IF v_new_state = 'QUEUED' THEN
    INSERT INTO wharf.scope AS s (scope_key, workspace_id, head_id, head_due_at, head_kind, ready_at, active, failing_since)
    VALUES (NEW.scope_key, NEW.workspace_id, NEW.id, NEW.next_attempt_at, NEW.provider || ':' || NEW.event_type,
            greatest(NEW.next_attempt_at, clock_timestamp()),
            wharf.scope_workspace_active(NEW.workspace_id),
            CASE WHEN v_old_state = 'LEASED' AND NOT v_moved AND NEW.attempt = OLD.attempt THEN clock_timestamp() END)
    ON CONFLICT (scope_key) DO UPDATE
       SET head_id = excluded.head_id, head_due_at = excluded.head_due_at, head_kind = excluded.head_kind,
           ready_at = excluded.ready_at,
           -- Parked for a paused connection's head (claim): a new head is not.
           active = s.active OR (s.head_id IS DISTINCT FROM excluded.head_id AND excluded.active),
           failing_since = CASE WHEN excluded.failing_since IS NULL THEN s.failing_since
                                ELSE coalesce(s.failing_since, excluded.failing_since) END
     WHERE s.head_id IS NULL OR excluded.head_id <= s.head_id;
  END IF;

  -- A scope left with nothing queued or leased goes (admission makes it again).
  IF v_old_state IN ('QUEUED', 'LEASED') AND (v_moved OR v_new_state NOT IN ('QUEUED', 'LEASED') OR TG_OP = 'DELETE') THEN
    DELETE FROM wharf.scope
     WHERE scope_key = v_old_scope AND head_id IS NULL AND leased_id IS NULL;
  END IF;
  RETURN NULL;
END $$;

-- Trigger on workspace: a workspace that is not ACTIVE has its scopes left out
-- of claims (installation scopes, with no workspace, are always active).
-- scope.active is also false for a scope parked because its head's
-- connection is PAUSED (claim, sql/30), until that connection leaves PAUSED
-- (set_connection_state) or the scope gets another head.
CREATE OR REPLACE FUNCTION wharf.sync_scope_activity() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  -- A scope parked for a paused connection's head is active again too; the
  -- next claim that meets its head parks it again if it is still held.
  UPDATE wharf.scope SET active = (NEW.state = 'ACTIVE')
   WHERE workspace_id = NEW.id AND active IS DISTINCT FROM (NEW.state = 'ACTIVE');
  RETURN NULL;
END $$;

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
-- The due heads are found kind by kind: wharf.claimable_kinds() lists the
-- kinds waiting (a skip scan of ix_scope_claim, which leads with head_kind),
-- those this host handles are kept, and for each the first v_window due
-- scopes in ready order are read; the longest ready of all of them win. So
-- a claim reads about the same whatever waits that it cannot take: heads of
-- kinds no host here handles cost one index descent per kind, and a head of
-- a PAUSED connection is read once and then parked (scope.active false,
-- out of ix_scope_claim) until its connection leaves PAUSED or its scope
-- gets another head.
--
-- Four statements. The first picks the candidates and locks the first
-- p_max it can take with their scope rows (SKIP LOCKED). The second parks
-- the scopes among the candidates whose head's connection is PAUSED,
-- passing over any row or connection another session holds (never
-- waiting: a claim holds scope rows and must not wait for a connection
-- change, which waits for scope rows). The third marks each leased scope
-- and heads it with its next queued row; it is a statement of its own so
-- that its snapshot, taken after the locks, sees every row admitted into
-- those scopes (an admission locks the scope row before it inserts, so none
-- is in flight now). The fourth leases the events: it writes no indexed
-- column, so every row version stays on its page (HOT) and no index gets an
-- entry; the scope trigger is told (wharf.keeping_scopes) that the scopes
-- are kept already (sql/20). When parking left the claim short, it looks
-- again, a few times at most.
--
-- The plan is pinned to its one good shape: walk ix_scope_claim per kind and
-- fetch each head by primary key. PL/pgSQL caches a generic plan after five
-- calls, and for a small scope table the planner's generic choice is a
-- sequential scan of wharf.scope merge-joined with the whole provider_event
-- primary key, which reads the backlog on every claim. Turning off the
-- other scan and join methods leaves it the index path alone (bitmap scans
-- too: a bitmap scan of ix_scope_claim loses its order). The head is tested
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
  v_now        timestamptz := clock_timestamp();
  v_lease      interval := wharf.setting_interval('lease');
  v_window     integer;
  v_candidates text[];
  v_parked     integer;
  v_ids        bigint[];
  v_scopes     text[];
  v_all_ids    bigint[] := ARRAY[]::bigint[];
  v_all_scopes text[] := ARRAY[]::text[];
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
  -- A claim is a write even when nothing is due: on a standby (or in a
  -- read-only transaction) it says so at once, as its locks would, so the
  -- worker waits for a primary instead of idling on a server it cannot use.
  IF current_setting('transaction_read_only') = 'on' THEN
    RAISE EXCEPTION 'wharf.claim: the database is read-only (a standby?)' USING ERRCODE = '25006';
  END IF;
  PERFORM set_config('synchronous_commit', 'off', true);
  -- Room for claimers on other hosts that lock some of the same candidates.
  v_window := p_max + 16;

  FOR v_round IN 1..4 LOOP
    SELECT array_agg(c.scope_key ORDER BY c.ready_at, c.head_id) INTO v_candidates
      FROM (SELECT c.scope_key, c.ready_at, c.head_id
              FROM wharf.claimable_kinds() k(kind)
              CROSS JOIN LATERAL (
                SELECT s.scope_key, s.ready_at, s.head_id FROM wharf.scope s
                 WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
                   AND s.head_kind = k.kind
                   AND s.ready_at <= v_now  -- never earlier than head_due_at: the head is due
                 ORDER BY s.ready_at, s.head_id
                 LIMIT v_window) c
             WHERE p_handles IS NULL OR k.kind = ANY (p_handles) OR split_part(k.kind, ':', 1) || ':*' = ANY (p_handles)
             ORDER BY c.ready_at, c.head_id
             LIMIT v_window) c;
    EXIT WHEN v_candidates IS NULL;

    -- Each candidate is looked up by its key in a subquery of its own (LIMIT 1
    -- keeps the planner from flattening it): a plan over stale statistics
    -- (an empty scope table analyzed) must never scan the scopes per
    -- candidate. The nested loop runs the candidates in their order and the
    -- LIMIT stops it after p_max locked heads, so no more rows are locked
    -- than are leased.
    SELECT array_agg(h.id ORDER BY h.n), array_agg(h.scope_key ORDER BY h.n) INTO v_ids, v_scopes
      FROM (SELECT l.id, l.scope_key, c.n
              FROM unnest(v_candidates) WITH ORDINALITY AS c(scope_key, n)
              CROSS JOIN LATERAL (
                SELECT e.id, s.scope_key
                  FROM wharf.scope s
                  JOIN wharf.provider_event e ON e.id = s.head_id
                 WHERE s.scope_key = c.scope_key
                   -- `IS NOT FALSE`: as in the parking below.
                   AND s.leased_id IS NULL AND s.active IS NOT FALSE AND s.ready_at <= v_now
                   AND NOT s.scope_key = ANY (v_all_scopes)  -- locked by an earlier round
                   AND e.state COLLATE "C" = 'QUEUED'  -- by primary key
                   -- The head may have changed since the candidates were read.
                   AND (p_handles IS NULL
                        OR e.provider || ':' || e.event_type = ANY (p_handles)
                        OR e.provider || ':*' = ANY (p_handles))
                   -- A paused connection's rows wait, holding their scopes, until it resumes.
                   AND (e.connection_id IS NULL
                        OR NOT EXISTS (SELECT FROM wharf.connection x WHERE x.id = e.connection_id AND x.state = 'PAUSED'))
                 LIMIT 1
                 -- NO KEY UPDATE: a claimer that locks a head another claimer has just
                 -- leased (its snapshot was older) must not make the winner's fence
                 -- (FOR KEY SHARE NOWAIT) fail as busy; the reaper, lock_scopes, purge and
                 -- erasure take FOR UPDATE and still conflict.
                   FOR NO KEY UPDATE OF s, e SKIP LOCKED) l
             LIMIT p_max - cardinality(v_all_ids)) h;

    -- Park the candidates held by a PAUSED connection (sql/20: sync_scope_activity).
    UPDATE wharf.scope s SET active = false
     WHERE s.scope_key = ANY (ARRAY(  -- found and locked once, before the update
             SELECT p.scope_key
               FROM unnest(v_candidates) AS c(scope_key)
               CROSS JOIN LATERAL (  -- by key, as above
                 SELECT p.scope_key
                   FROM wharf.scope p
                   JOIN wharf.provider_event e ON e.id = p.head_id
                   JOIN wharf.connection x ON x.id = e.connection_id
                  WHERE p.scope_key = c.scope_key AND NOT p.scope_key = ANY (v_all_scopes)
                    -- `IS NOT FALSE` (active is NOT NULL): ix_scope_claim's whole predicate
                    -- would offer the planner that index, which has no scope_key.
                    AND p.active IS NOT FALSE AND p.leased_id IS NULL AND x.state = 'PAUSED'
                  LIMIT 1
                    FOR UPDATE OF p SKIP LOCKED
                    -- SHARE conflicts with the connection's state change: a resume
                    -- either commits first (then this reads ACTIVE) or waits, and
                    -- unparks after this commits.
                    FOR SHARE OF x SKIP LOCKED) p));
    GET DIAGNOSTICS v_parked = ROW_COUNT;
    v_all_ids := v_all_ids || coalesce(v_ids, '{}');
    v_all_scopes := v_all_scopes || coalesce(v_scopes, '{}');
    -- Short because of what it parked: look again (what it locked stays locked).
    EXIT WHEN v_parked = 0 OR cardinality(v_all_ids) >= p_max;
  END LOOP;
  IF cardinality(v_all_ids) = 0 THEN
    RETURN;
  END IF;
  v_ids := v_all_ids;
  v_scopes := v_all_scopes;

  UPDATE wharf.scope s
     SET leased_id = h.id, head_id = n.id, head_due_at = n.due_at, head_kind = n.kind
    FROM unnest(v_ids, v_scopes) AS h(id, scope_key)
    LEFT JOIN LATERAL wharf.next_in_scope(h.scope_key, h.id) n ON true
   WHERE s.scope_key = h.scope_key
     AND s.scope_key = ANY (v_scopes);  -- by key, whatever the statistics say of wharf.scope

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
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
  v_scope_key text;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL OR p_outcome IS NULL OR p_outcome = '' THEN
    RAISE EXCEPTION 'wharf.complete: id, epoch and outcome are required' USING ERRCODE = '22004';
  END IF;
  PERFORM FROM wharf.provider_event WHERE id = p_id FOR UPDATE;  -- after its fenced writes (top of sql/30)
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
-- and one scope write per scope for a batch, its scope rows locked in the
-- one lock order (free_scopes, lock_scopes in sql/20), whatever order the
-- caller passes the leases in. The arrays must be of one
-- length (22023) with no NULL or empty element (22004).
--
-- Pinned to the primary key like claim: a generic plan for a batch of
-- unknown size must never scan the inbox.
CREATE OR REPLACE FUNCTION wharf.complete_many(p_ids bigint[], p_epochs bigint[], p_outcomes text[])
RETURNS SETOF bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_mergejoin = off SET enable_hashjoin = off SET lock_timeout = '5s' AS $$
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
  PERFORM FROM wharf.provider_event WHERE id = ANY (p_ids) ORDER BY id FOR UPDATE;  -- top of sql/30
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

-- A stopping worker gives the row back: QUEUED, due at once, attempt as it
-- was before the claim, the lease kept in the attempt history as
-- 'released', and idle claimers woken. False when the row is not LEASED
-- under p_epoch.
CREATE OR REPLACE FUNCTION wharf.release(p_id bigint, p_epoch bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
  v_row record;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL THEN
    RAISE EXCEPTION 'wharf.release: id and epoch are required' USING ERRCODE = '22004';
  END IF;
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  PERFORM FROM wharf.provider_event WHERE id = p_id FOR UPDATE;  -- after its fenced writes (top of sql/30)
  UPDATE wharf.provider_event
     SET state = 'QUEUED', attempt = greatest(attempt - 1, 0), next_attempt_at = now(), leased_until = NULL
   WHERE id = p_id AND lease_epoch = p_epoch AND state COLLATE "C" = 'LEASED'  -- by primary key (top of sql/30)
  RETURNING attempt + 1 AS attempt, leased_by, leased_at INTO v_row;  -- the lease's own attempt
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  INSERT INTO wharf.event_attempt (event_id, lease_epoch, attempt, worker, started_at, ended_at, ended)
  VALUES (p_id, p_epoch, v_row.attempt, v_row.leased_by, v_row.leased_at, clock_timestamp(), 'released');
  PERFORM wharf.notify_idle_claimers();
  RETURN true;
END $$;

-- The earliest time after now at which a scope head that no lease holds
-- falls due (a retry waiting out its delay); NULL when none waits. Read kind
-- by kind from ix_scope_claim: one descent per kind. A claimer
-- about to sleep wakes by itself then: a retry becomes due without any
-- commit that could notify it.
CREATE OR REPLACE FUNCTION wharf.next_due_at() RETURNS timestamptz
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT min(n.ready_at)
    FROM wharf.claimable_kinds() k(kind)
    CROSS JOIN LATERAL (SELECT s.ready_at FROM wharf.scope s
                         WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
                           AND s.head_kind = k.kind AND s.ready_at > clock_timestamp()
                         ORDER BY s.ready_at LIMIT 1) n
$$;

-- The worker's gauges, at a cost that does not grow with the inbox:
--   depth_by_state   rows by state: counted while the inbox heap is at most
--                    1,024 pages (8 MB), else estimated from the planner's
--                    statistics (the row estimate scaled to the heap's size
--                    now, times each state's frequency in pg_stats), as
--                    depth_estimated says
--   oldest_due_age   seconds the scope first in the claim line has waited
--                    since it became claimable (0 when none is): the first
--                    entry of ix_scope_claim, the claims' own order
--   stuck_scopes     scopes whose head has been failing (ix_scope_failing)
--                    or due and unclaimed (ix_scope_claim) for longer than
--                    stuck_after, counted up to 10,000
--   oldest_stuck_age seconds the longest-stuck of them has been so (0: none)
CREATE OR REPLACE FUNCTION wharf.queue_stats(
  OUT depth_by_state jsonb, OUT oldest_due_age float8, OUT depth_estimated boolean,
  OUT stuck_scopes bigint, OUT oldest_stuck_age float8)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_now         timestamptz := clock_timestamp();
  v_stuck_since timestamptz := clock_timestamp() - wharf.setting_interval('stuck_after');
  v_pages       bigint := pg_relation_size('wharf.provider_event') / current_setting('block_size')::bigint;
BEGIN
  depth_estimated := v_pages > 1024;
  IF NOT depth_estimated THEN
    SELECT coalesce(jsonb_object_agg(state, n), '{}') INTO depth_by_state
      FROM (SELECT state, count(*) AS n FROM wharf.provider_event GROUP BY state) s;
  ELSE
    SELECT coalesce(jsonb_object_agg(f.state, round(t.rows * f.freq)::bigint), '{}') INTO depth_by_state
      FROM (SELECT CASE WHEN c.relpages > 0 THEN c.reltuples / c.relpages * v_pages ELSE 0 END AS rows
              FROM pg_class c WHERE c.oid = 'wharf.provider_event'::regclass) t,
           LATERAL (SELECT v.state, v.freq
                      FROM pg_stats st,
                           unnest(st.most_common_vals::text::text[], st.most_common_freqs) AS v(state, freq)
                     WHERE st.schemaname = 'wharf' AND st.tablename = 'provider_event' AND st.attname = 'state') f;
  END IF;

  SELECT coalesce(extract(epoch FROM v_now - min(o.ready_at))::float8, 0) INTO oldest_due_age
    FROM wharf.claimable_kinds() k(kind)
    CROSS JOIN LATERAL (SELECT s.ready_at FROM wharf.scope s
                         WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
                           AND s.head_kind = k.kind AND s.ready_at <= v_now
                         ORDER BY s.ready_at LIMIT 1) o;

  SELECT count(*), coalesce(extract(epoch FROM v_now - min(x.since))::float8, 0)
    INTO stuck_scopes, oldest_stuck_age
    FROM (SELECT DISTINCT ON (y.scope_key) y.scope_key, y.since
            FROM ((SELECT s.scope_key, s.failing_since AS since FROM wharf.scope s
                    WHERE s.failing_since < v_stuck_since
                    ORDER BY s.failing_since LIMIT 10000)
                  UNION ALL
                  (SELECT w.scope_key, w.ready_at
                     FROM wharf.claimable_kinds() k(kind)
                     CROSS JOIN LATERAL (SELECT s.scope_key, s.ready_at FROM wharf.scope s
                                          WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
                                            AND s.head_kind = k.kind AND s.ready_at < v_stuck_since
                                          ORDER BY s.ready_at LIMIT 10000) w
                    LIMIT 10000)) y
           ORDER BY y.scope_key, y.since
           LIMIT 10000) x;
END $$;

REVOKE ALL ON FUNCTION wharf.claim(text, integer, text[]), wharf.renew(bigint, bigint),
  wharf.complete(bigint, bigint, text), wharf.complete_many(bigint[], bigint[], text[]), wharf.release(bigint, bigint), wharf.reap(),
  wharf.mark_idle(text), wharf.mark_busy(text), wharf.next_due_at(), wharf.queue_stats() FROM PUBLIC;

-- ======== sql/40-failure-dead-letters.sql ========

-- Records a failed attempt of a row LEASED under p_epoch, in the row and in
-- its attempt history, and returns its new state; NULL when the lease is
-- gone. Waits (5 s at most, then 55P03) for the lease's open fenced writes,
-- like every end of a lease (top of sql/30). p_kind:
--   transient  back to QUEUED after the delay; failures unchanged; but DEAD
--              once its transient failures have lasted longer than
--              transient_max_age (counted from the first of them,
--              transient_since), so that an upstream failing forever for one
--              payload cannot hold its scope forever
--   unknown    failures + 1; DEAD at max_attempts, else QUEUED after the delay
--   permanent  DEAD at once
--   uncertain  DEAD with outcome 'uncertain', never retried automatically
-- p_error_class is a class name (e.g. 'TypeError'), never a message: 22023
-- for anything else, 22023 for an unknown kind.
CREATE OR REPLACE FUNCTION wharf.fail(p_id bigint, p_epoch bigint, p_kind text, p_error_class text)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '5s' AS $$
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

  SELECT attempt, failures, leased_by, leased_at, transient_since INTO v_row
    FROM wharf.provider_event
   WHERE id = p_id AND lease_epoch = p_epoch AND state COLLATE "C" = 'LEASED'  -- by primary key (top of sql/30)
   FOR UPDATE;  -- after the lease's fenced writes (top of sql/30)
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;

  v_dead := p_kind IN ('permanent', 'uncertain')
            OR (p_kind = 'unknown' AND v_row.failures + 1 >= wharf.setting_integer('max_attempts'))
            OR (p_kind = 'transient' AND v_row.transient_since IS NOT NULL
                AND v_now - v_row.transient_since > wharf.setting_interval('transient_max_age'));

  UPDATE wharf.provider_event
     SET failures        = failures + CASE WHEN p_kind = 'unknown' THEN 1 ELSE 0 END,
         transient_since = CASE WHEN p_kind = 'transient' THEN coalesce(transient_since, v_now) ELSE transient_since END,
         error_class     = p_error_class,
         leased_until    = NULL,
         state           = CASE WHEN v_dead THEN 'DEAD' ELSE 'QUEUED' END,
         outcome         = CASE WHEN p_kind = 'uncertain' THEN 'uncertain' END,
         dead_at         = CASE WHEN v_dead THEN v_now END,
         next_attempt_at = CASE WHEN v_dead THEN next_attempt_at
                                ELSE v_now + wharf.retry_delay(v_row.attempt) END
   WHERE id = p_id;
  INSERT INTO wharf.event_attempt (event_id, lease_epoch, attempt, worker, started_at, ended_at, ended, error_class)
  VALUES (p_id, p_epoch, v_row.attempt, v_row.leased_by, v_row.leased_at, v_now, p_kind, p_error_class);
  RETURN CASE WHEN v_dead THEN 'DEAD' ELSE 'QUEUED' END;
END $$;

REVOKE ALL ON FUNCTION wharf.fail(bigint, bigint, text, text) FROM PUBLIC;

-- ======== sql/60-replay-retention.sql ========

-- Sends the DEAD row p_id whose workspace is p_workspace_id (NULL: an
-- installation row) back to QUEUED, due at once, with attempt and failures at
-- zero (and its transient failures forgotten), keeping its id, error_class
-- and committed steps. A row whose outcome is
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
     SET state = 'QUEUED', attempt = 0, failures = 0, outcome = NULL, dead_at = NULL, transient_since = NULL,
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
  RETURN v_total + wharf.purge_issues(v_batch) + wharf.purge_scope_actions(v_batch) + wharf.purge_alerts(v_batch);
END $$;

REVOKE ALL ON FUNCTION wharf.replay(bigint, bigint, text, boolean),
  wharf.replay_installation(bigint, text, boolean),
  wharf.purge(), wharf.purge_logs() FROM PUBLIC;

-- ======== sql/62-bulk-replay.sql ========

-- The DEAD events a bulk replay takes, in id order from after p_after_id: of
-- workspace p_workspace_id, dead by p_dead_by (the replay's start, so that an
-- event replayed and dead again meanwhile is not taken twice), not
-- 'uncertain' unless p_force, and matching every key of p_filter (provider,
-- event_type, subject, error_class exactly; dead_after and received_after
-- inclusive, dead_before and received_before exclusive; payload and headers
-- by JSON containment, as search_events). Internal.
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
     AND (NOT p_filter ? 'received_after' OR e.received_at >= (p_filter ->> 'received_after')::timestamptz)
     AND (NOT p_filter ? 'received_before' OR e.received_at < (p_filter ->> 'received_before')::timestamptz)
     AND (NOT p_filter ? 'payload' OR e.payload @> (p_filter -> 'payload'))
     AND (NOT p_filter ? 'headers' OR e.headers @> (p_filter -> 'headers'))
   ORDER BY e.id
$$;

-- Filter p_filter of a bulk replay, checked and as it is stored: times in
-- UTC, so that every batch reads them alike whatever its session's time zone
-- (a time written without one is read in the caller's). 22023 for a filter
-- that is not an object, an unknown key, a value that is not text (payload
-- and headers: not a JSON object); 22007 for a time that does not parse.
-- Internal.
CREATE OR REPLACE FUNCTION wharf.bulk_replay_filter(p_filter jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_key text;
BEGIN
  IF jsonb_typeof(p_filter) <> 'object' THEN
    RAISE EXCEPTION 'wharf.start_bulk_replay: the filter must be a JSON object' USING ERRCODE = '22023';
  END IF;
  FOR v_key IN SELECT jsonb_object_keys(p_filter) LOOP
    IF v_key NOT IN ('provider', 'event_type', 'subject', 'error_class', 'dead_after', 'dead_before',
                     'received_after', 'received_before', 'payload', 'headers') THEN
      RAISE EXCEPTION 'wharf.start_bulk_replay: unknown filter %', quote_literal(v_key) USING ERRCODE = '22023';
    END IF;
    IF v_key IN ('payload', 'headers') AND jsonb_typeof(p_filter -> v_key) <> 'object' THEN
      RAISE EXCEPTION 'wharf.start_bulk_replay: filter % must be a JSON object', v_key USING ERRCODE = '22023';
    END IF;
    IF v_key NOT IN ('payload', 'headers') AND jsonb_typeof(p_filter -> v_key) <> 'string' THEN
      RAISE EXCEPTION 'wharf.start_bulk_replay: filter % must be text', v_key USING ERRCODE = '22023';
    END IF;
  END LOOP;
  FOREACH v_key IN ARRAY ARRAY['dead_after', 'dead_before', 'received_after', 'received_before'] LOOP
    IF p_filter ? v_key THEN
      p_filter := jsonb_set(p_filter, ARRAY[v_key], to_jsonb(
        to_char((p_filter ->> v_key)::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')));
    END IF;
  END LOOP;
  RETURN p_filter;
END $$;

-- How many DEAD events of workspace p_workspace_id a bulk replay with
-- p_filter would take now (see bulk_replay_candidates): the count an
-- operator sees before starting one. Replays nothing. Errors as
-- start_bulk_replay's.
CREATE OR REPLACE FUNCTION wharf.count_bulk_replay(p_workspace_id bigint, p_filter jsonb, p_force boolean DEFAULT false)
RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_filter IS NULL OR p_force IS NULL THEN
    RAISE EXCEPTION 'wharf.count_bulk_replay: filter and force are required' USING ERRCODE = '22004';
  END IF;
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN (SELECT count(*) FROM wharf.bulk_replay_candidates(p_workspace_id, wharf.bulk_replay_filter(p_filter),
                                                            p_force, clock_timestamp(), 0));
END $$;

-- Records a bulk replay of workspace p_workspace_id's DEAD events matching
-- p_filter (see bulk_replay_candidates) and counts them; replays nothing
-- (continue_bulk_replay does). P0002 for an unknown workspace; filter errors
-- as bulk_replay_filter's.
CREATE OR REPLACE FUNCTION wharf.start_bulk_replay(
  p_workspace_id bigint, p_filter jsonb, p_account text, p_force boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_started timestamptz;
  v_replay  wharf.bulk_replay;
BEGIN
  IF p_filter IS NULL OR p_account IS NULL OR p_account = '' OR p_force IS NULL THEN
    RAISE EXCEPTION 'wharf.start_bulk_replay: filter, account and force are required' USING ERRCODE = '22004';
  END IF;
  PERFORM wharf.require_workspace(p_workspace_id);
  p_filter := wharf.bulk_replay_filter(p_filter);

  -- The clock, not the transaction's start: an event that died before this
  -- call, in the same transaction too, is taken.
  v_started := clock_timestamp();
  INSERT INTO wharf.bulk_replay (workspace_id, filter, force, requested_by, matched, started_at, updated_at)
  VALUES (p_workspace_id, p_filter, p_force, p_account,
          (SELECT count(*) FROM wharf.bulk_replay_candidates(p_workspace_id, p_filter, p_force, v_started, 0)),
          v_started, v_started)
  RETURNING * INTO v_replay;
  RETURN wharf.bulk_replay_summary(v_replay);
END $$;

-- Replays the next at most p_batch (1..1000) events of bulk replay p_id of
-- workspace p_workspace_id, in id order, in this one transaction, waking idle
-- claimers once; finished when fewer remain. Returns the bulk replay as it is
-- after; NULL when another transaction is running a batch of it. P0002 when
-- the workspace has no such bulk replay.
CREATE OR REPLACE FUNCTION wharf.continue_bulk_replay(p_workspace_id bigint, p_id bigint, p_batch integer)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_replay   wharf.bulk_replay;
  v_ids      bigint[];
  v_id       bigint;
  v_replayed integer := 0;
BEGIN
  IF p_batch IS NULL OR p_batch < 1 OR p_batch > 1000 THEN
    RAISE EXCEPTION 'wharf.continue_bulk_replay: batch must be between 1 and 1000' USING ERRCODE = '22023';
  END IF;
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  SELECT * INTO v_replay FROM wharf.bulk_replay
   WHERE id = p_id AND workspace_id = p_workspace_id
     FOR UPDATE SKIP LOCKED;
  IF NOT FOUND THEN
    IF EXISTS (SELECT FROM wharf.bulk_replay WHERE id = p_id AND workspace_id = p_workspace_id) THEN
      RETURN NULL;
    END IF;
    RAISE EXCEPTION 'wharf: workspace % has no bulk replay %', p_workspace_id, p_id USING ERRCODE = 'P0002';
  END IF;
  IF v_replay.finished_at IS NOT NULL THEN
    RETURN wharf.bulk_replay_summary(v_replay);
  END IF;

  -- Lock the events in id order, then their scopes in the lock order
  -- (lock_scopes, sql/20), then
  -- requeue: the order erase_person keeps. Left to the scope-head trigger,
  -- the scopes would be locked in event order, and two batches (or a batch
  -- and an erasure) whose events share scopes in another order would wait
  -- for each other in a cycle.
  SELECT array_agg(c.id ORDER BY c.id) INTO v_ids
    FROM (SELECT e.id
            FROM wharf.bulk_replay_candidates(p_workspace_id, v_replay.filter, v_replay.force,
                                              v_replay.started_at, v_replay.after_id) e
           ORDER BY e.id
           LIMIT p_batch) c;
  PERFORM FROM wharf.provider_event WHERE id = ANY (v_ids) ORDER BY id FOR UPDATE;
  PERFORM wharf.lock_scopes(ARRAY(SELECT e.scope_key FROM wharf.provider_event e WHERE e.id = ANY (v_ids)));

  FOREACH v_id IN ARRAY coalesce(v_ids, '{}') LOOP
    IF wharf.requeue_dead(p_workspace_id, v_id, v_replay.requested_by, v_replay.force) THEN
      v_replayed := v_replayed + 1;
    END IF;
  END LOOP;

  UPDATE wharf.bulk_replay
     SET replayed    = replayed + v_replayed,
         after_id    = coalesce(v_ids[cardinality(v_ids)], after_id),
         updated_at  = clock_timestamp(),
         finished_at = CASE WHEN coalesce(cardinality(v_ids), 0) < p_batch THEN clock_timestamp() END,
         -- An event that died just before the start but committed after the
         -- count is replayed too: the total is never below what was done.
         matched     = greatest(matched, replayed + v_replayed)
   WHERE id = p_id
  RETURNING * INTO v_replay;
  RETURN wharf.bulk_replay_summary(v_replay);
END $$;

REVOKE ALL ON FUNCTION wharf.start_bulk_replay(bigint, jsonb, text, boolean),
  wharf.count_bulk_replay(bigint, jsonb, boolean),
  wharf.continue_bulk_replay(bigint, bigint, integer), wharf.show_bulk_replay(bigint, bigint),
  wharf.list_bulk_replays(bigint) FROM PUBLIC;

-- ======== sql/70-connections.sql ========

-- Raises 22023 unless p_provider is one Wharf knows: a row of the registry
-- wharf.provider (its TypeScript twin is db/providers.ts).
CREATE OR REPLACE FUNCTION wharf.check_provider(p_provider text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF p_provider IS NULL OR NOT EXISTS (SELECT FROM wharf.provider WHERE name = p_provider) THEN
    RAISE EXCEPTION 'wharf: unknown provider %', coalesce(quote_literal(p_provider), 'NULL')
      USING ERRCODE = '22023';
  END IF;
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
  PERFORM wharf.lock_lifecycle('workspace', p_id::text);
  UPDATE wharf.workspace SET state = p_state WHERE id = p_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: unknown workspace %', p_id USING ERRCODE = 'P0002';
  END IF;
  -- Out of PAUSED: the scopes a claim parked for this connection's heads
  -- (sql/30) are claimable again, in their usual order.
  IF p_state <> 'PAUSED' THEN
    UPDATE wharf.scope s SET active = true
      FROM wharf.provider_event e
     WHERE NOT s.active AND e.id = s.head_id AND e.connection_id = p_id
       AND wharf.scope_workspace_active(s.workspace_id);
  END IF;
  IF p_state = 'ACTIVE' THEN
    PERFORM wharf.notify_idle_claimers();
  END IF;
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
  PERFORM wharf.lock_lifecycle('connection', p_id::text);
  UPDATE wharf.connection
     SET state = p_state, generation = generation + 1, updated_at = now()
   WHERE id = p_id AND state IS DISTINCT FROM p_state;
  IF NOT FOUND AND NOT EXISTS (SELECT FROM wharf.connection WHERE id = p_id) THEN
    RAISE EXCEPTION 'wharf: unknown connection %', p_id USING ERRCODE = 'P0002';
  END IF;
  -- Out of PAUSED: the scopes a claim parked for this connection's heads
  -- (sql/30) are claimable again, in their usual order.
  IF p_state <> 'PAUSED' THEN
    UPDATE wharf.scope s SET active = true
      FROM wharf.provider_event e
     WHERE NOT s.active AND e.id = s.head_id AND e.connection_id = p_id
       AND wharf.scope_workspace_active(s.workspace_id);
  END IF;
  IF p_state = 'ACTIVE' THEN
    PERFORM wharf.notify_idle_claimers();
  END IF;
END $$;

REVOKE ALL ON FUNCTION wharf.upsert_workspace(bigint),
  wharf.set_workspace_state(bigint, text),
  wharf.upsert_connection(bigint, text, text, text, text, jsonb),
  wharf.set_connection_state(bigint, text),
  wharf.subscribe(bigint, text),
  wharf.unsubscribe(bigint, text) FROM PUBLIC;

-- ======== sql/75-connection-secrets.sql ========

-- Sets or rotates the webhook secret of connection p_connection_id: a GitLab
-- token (a provider whose secret is a `token` in wharf.provider) is stored
-- as its SHA-256 only, and may arrive as that digest
-- already (`sha256:<64 hex>`), so that the token itself never reaches the
-- server (nor a statement log); other providers' keys arrive
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
  v_place    text;
BEGIN
  IF p_connection_id IS NULL OR p_secret IS NULL OR p_secret = '' OR p_keep_previous IS NULL THEN
    RAISE EXCEPTION 'wharf.set_connection_secret: connection and secret are required'
      USING ERRCODE = '22004';
  END IF;
  SELECT c.provider, p.secret INTO v_provider, v_place
    FROM wharf.connection c JOIN wharf.provider p ON p.name = c.provider
   WHERE c.id = p_connection_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: unknown connection %', p_connection_id USING ERRCODE = 'P0002';
  END IF;
  IF v_place = 'app' THEN
    RAISE EXCEPTION 'wharf.set_connection_secret: % secrets belong to the app, not the connection',
      v_provider USING ERRCODE = '22023';
  END IF;
  IF v_place = 'signing_key'
     AND p_secret !~ '^aes256gcm:[A-Za-z0-9_.-]{1,32}:[A-Za-z0-9+/]+={0,2}:[A-Za-z0-9+/]+={0,2}$' THEN
    RAISE EXCEPTION 'wharf.set_connection_secret: a signing key is stored encrypted with the key ring (WHARF_SECRET_KEYS)'
      USING ERRCODE = '22023';
  END IF;

  -- A secret is part of the connection's configuration: same lock, same
  -- generation bump as every other change (sql/70-connections.sql).
  PERFORM wharf.lock_lifecycle('connection', p_connection_id::text);
  INSERT INTO wharf.connection_secret (connection_id, token_sha256, signing_key)
  SELECT p_connection_id,
         CASE WHEN v_place <> 'token' THEN NULL
              WHEN p_secret ~ '^sha256:[0-9a-f]{64}$' THEN decode(substr(p_secret, 8), 'hex')
              ELSE sha256(convert_to(p_secret, 'UTF8')) END,
         CASE WHEN v_place <> 'token' THEN p_secret END
  ON CONFLICT (connection_id) DO UPDATE
     SET previous_token_sha256 = CASE WHEN p_keep_previous THEN connection_secret.token_sha256 END,
         previous_signing_key  = CASE WHEN p_keep_previous AND connection_secret.signing_key LIKE 'aes256gcm:%'
                                      THEN connection_secret.signing_key END,
         previous_valid_until  = CASE WHEN p_keep_previous THEN now() + wharf.setting_interval('secret_overlap') END,
         token_sha256 = EXCLUDED.token_sha256, signing_key = EXCLUDED.signing_key, updated_at = now();
  UPDATE wharf.connection SET generation = generation + 1, updated_at = now() WHERE id = p_connection_id;
END $$;

REVOKE ALL ON FUNCTION wharf.set_connection_secret(bigint, text, boolean) FROM PUBLIC;

-- ======== sql/80-admission.sql ========

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
-- Expressions without FROM, so that the planner inlines them; the provider
-- is looked up in the registry (wharf.provider) by a sub-select, which keeps
-- that so, and only when the other arguments are present.
CREATE OR REPLACE FUNCTION wharf.admission_rule_broken(
  p_provider text, p_source text, p_delivery_key text, p_event_type text,
  p_route jsonb, p_payload jsonb, p_body_sha256 text)
RETURNS integer
LANGUAGE sql STABLE AS $$
  SELECT CASE
    WHEN p_provider IS NULL OR p_source IS NULL OR p_source = '' OR p_delivery_key IS NULL
         OR p_delivery_key = '' OR p_event_type IS NULL OR p_event_type = '' OR p_payload IS NULL THEN 1
    WHEN NOT EXISTS (SELECT FROM wharf.provider WHERE name = p_provider) THEN 2
    WHEN jsonb_typeof(coalesce(p_route, '{}')) <> 'object' THEN 3
    WHEN p_body_sha256 !~ '^[0-9a-f]{64}$' THEN 4
    WHEN length(p_delivery_key) > 255 OR length(p_event_type) > 255 THEN 5
  END
$$;

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
CREATE OR REPLACE FUNCTION wharf.admit_items(p_items wharf.admission_item[]) RETURNS jsonb[]
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
SET plan_cache_mode = force_generic_plan SET jit = off AS $$
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
END $$;

-- Stores one event row in p_scope_key unless the delivery is already stored
-- for that workspace; returns the receipt entry {workspace_id, event_id,
-- outcome: stored|duplicate}. The row heads its scope through the scope
-- trigger (sql/20), after lock_scope has locked the scope: within a scope ids
-- are assigned and committed in the same order, and a claim never passes
-- over a row still being inserted. Internal: admit's.
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

-- ======== sql/90-erasure.sql ========

-- Deletes the events of p_source (installation rows included, every state,
-- LEASED too) whose payload names the person p_identities =
-- {"ids": [...], "logins": [...]} at its provider's person paths (for GitHub
-- and Forgejo push events, logins also match commits[] and head_commit
-- author/committer.username), with their steps. Returns how many.
-- Raises 22004 for a NULL argument, 22023 for malformed identities or none.
CREATE OR REPLACE FUNCTION wharf.erase_person(p_source text, p_identities jsonb) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_ids     text[];
  v_logins  text[];
  v_events  bigint[];
  v_deleted bigint;
BEGIN
  IF p_source IS NULL OR p_identities IS NULL THEN
    RAISE EXCEPTION 'wharf.erase_person: source and identities are required' USING ERRCODE = '22004';
  END IF;
  IF jsonb_typeof(p_identities) <> 'object'
     OR jsonb_typeof(coalesce(p_identities->'ids', '[]')) <> 'array'
     OR jsonb_typeof(coalesce(p_identities->'logins', '[]')) <> 'array' THEN
    RAISE EXCEPTION 'wharf.erase_person: identities must be {"ids": [...], "logins": [...]}'
      USING ERRCODE = '22023';
  END IF;
  SELECT coalesce(array_agg(v #>> '{}'), '{}') INTO v_ids
    FROM jsonb_array_elements(coalesce(p_identities->'ids', '[]')) v
   WHERE jsonb_typeof(v) IN ('string', 'number');
  SELECT coalesce(array_agg(v #>> '{}'), '{}') INTO v_logins
    FROM jsonb_array_elements(coalesce(p_identities->'logins', '[]')) v
   WHERE jsonb_typeof(v) IN ('string', 'number');
  IF cardinality(v_ids) + cardinality(v_logins) = 0 THEN
    RAISE EXCEPTION 'wharf.erase_person: name at least one id or login' USING ERRCODE = '22023';
  END IF;

  -- Lock the events, then their scopes, then delete: the same order as every
  -- state change (event row, then its scope through the trigger). Deleting at
  -- once would lock the scopes in scan order at the end of the DELETE, while
  -- a redelivery that holds one of them waits for the deleted row (ON
  -- CONFLICT): a deadlock. Locked but not yet deleted, a row is simply a
  -- duplicate to that redelivery.
  SELECT coalesce(array_agg(id), '{}') INTO v_events
    FROM (SELECT e.id FROM wharf.provider_event e
           WHERE e.source = p_source
             AND wharf.payload_names_person(e.provider, e.payload, v_ids, v_logins)
           ORDER BY e.id
             FOR UPDATE) matched;
  PERFORM wharf.lock_scopes(ARRAY(SELECT e.scope_key FROM wharf.provider_event e WHERE e.id = ANY (v_events)));

  DELETE FROM wharf.provider_event WHERE id = ANY (v_events);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  RETURN v_deleted;
END $$;

-- ======== sql/92-delivery-history.sql ========

-- The last p_hours (1..24) hours of workspace p_workspace_id: one {at,
-- connection_id, accepted, refused: {reason: count}} per minute and
-- connection that saw a delivery, oldest first. Accepted are the
-- workspace's events by arrival; refused and dropped are the admission log's
-- entries that concern it (naming it, or naming one of its connections).
-- Cost: the events received within the window (by arrival, or the
-- workspace's rows, as the planner finds cheaper) and a scan of the admission
-- log, which has no index but its key and is bounded by its retention.
-- Events purged since are not counted. P0002 for an unknown workspace, 22023
-- for hours outside 1..24.
CREATE OR REPLACE FUNCTION wharf.delivery_history(p_workspace_id bigint, p_hours integer) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_since timestamptz;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF p_hours IS NULL OR p_hours < 1 OR p_hours > 24 THEN
    RAISE EXCEPTION 'wharf.delivery_history: hours must be between 1 and 24' USING ERRCODE = '22023';
  END IF;
  v_since := date_trunc('minute', now()) - make_interval(mins => p_hours * 60 - 1);
  RETURN (
    WITH accepted AS (
      SELECT e.id, e.received_at, e.connection_id
        FROM wharf.provider_event e
       WHERE e.workspace_id = p_workspace_id AND e.received_at >= v_since
    ), connections AS (
      SELECT c.id FROM wharf.connection c WHERE c.workspace_id = p_workspace_id
    ), refused AS (
      SELECT a.at, a.connection_id, a.reason
        FROM wharf.admission_log a
       WHERE a.at >= v_since
         AND (a.workspace_id = p_workspace_id
              OR (a.workspace_id IS NULL AND a.connection_id IN (SELECT id FROM connections)))
    ), per_minute AS (
      SELECT date_trunc('minute', received_at) AS at, connection_id, count(*) AS accepted, NULL::text AS reason, 0::bigint AS refused
        FROM accepted GROUP BY 1, 2
      UNION ALL
      SELECT date_trunc('minute', at), connection_id, 0, reason, count(*)
        FROM refused GROUP BY 1, 2, 4
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object('at', m.at, 'connection_id', m.connection_id, 'accepted', m.accepted,
                                                 'refused', m.refused) ORDER BY m.at, m.connection_id NULLS FIRST), '[]')
      FROM (SELECT p.at, p.connection_id, sum(p.accepted) AS accepted,
                   coalesce(jsonb_object_agg(p.reason, p.refused) FILTER (WHERE p.reason IS NOT NULL), '{}') AS refused
              FROM per_minute p
             GROUP BY p.at, p.connection_id) m
  );
END $$;

REVOKE ALL ON FUNCTION wharf.delivery_history(bigint, integer) FROM PUBLIC;

-- ======== sql/93-event-search.sql ========

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

-- ======== sql/97-issues.sql ========

-- Trigger on wharf.event_attempt, per statement (reap inserts many rows at
-- once): upserts the issue of every failed or expired lease, in key order so
-- that two reapers counting into the same issues cannot deadlock.
CREATE OR REPLACE FUNCTION wharf.count_failures_into_issues() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  v_limit integer := wharf.setting_integer('issue_limit');
BEGIN
  WITH failed AS (
    SELECT e.workspace_id, e.provider, e.event_type, coalesce(a.error_class, a.ended) AS error_class,
           a.ended_at, e.id AS event_id, e.state
      FROM attempts_added a
      JOIN wharf.provider_event e ON e.id = a.event_id
     WHERE a.ended <> 'released'
  ), grouped AS (
    SELECT f.workspace_id, f.provider, f.event_type, f.error_class,
           min(f.ended_at) AS first_seen_at, max(f.ended_at) AS last_seen_at, count(*) AS failures,
           count(*) FILTER (WHERE f.state = 'DEAD') AS dead, max(f.event_id) AS sample_event_id
      FROM failed f
     GROUP BY f.workspace_id, f.provider, f.event_type, f.error_class
  ), keyed AS (
    -- A group with no issue yet gets its own while the workspace has fewer
    -- than issue_limit; otherwise it counts into '*'. Two new groups at once
    -- may both pass the count: the bound is issue_limit plus the concurrency.
    SELECT g.*,
           CASE WHEN EXISTS (SELECT FROM wharf.issue i
                              WHERE (i.workspace_id = g.workspace_id OR (g.workspace_id IS NULL AND i.workspace_id IS NULL))
                                AND i.provider = g.provider AND i.event_type = g.event_type
                                AND i.error_class = g.error_class)
                  OR (SELECT count(*) FROM (SELECT FROM wharf.issue i
                                             WHERE i.workspace_id = g.workspace_id
                                                OR (g.workspace_id IS NULL AND i.workspace_id IS NULL)
                                             LIMIT v_limit) n) < v_limit
                THEN g.event_type ELSE '*' END AS issue_type
      FROM grouped g
  )
  INSERT INTO wharf.issue AS i (workspace_id, provider, event_type, error_class, first_seen_at, last_seen_at,
                                failures, dead, sample_event_id, status_at)
  SELECT k.workspace_id, k.provider, k.issue_type, k.error_class, min(k.first_seen_at), max(k.last_seen_at),
         sum(k.failures), sum(k.dead), max(k.sample_event_id), min(k.first_seen_at)
    FROM keyed k
   GROUP BY k.workspace_id, k.provider, k.issue_type, k.error_class
   ORDER BY k.workspace_id, k.provider, k.issue_type, k.error_class
  ON CONFLICT (workspace_id, provider, event_type, error_class) DO UPDATE
     SET last_seen_at    = greatest(i.last_seen_at, excluded.last_seen_at),
         failures        = i.failures + excluded.failures,
         dead            = i.dead + excluded.dead,
         sample_event_id = excluded.sample_event_id,
         status          = CASE WHEN i.status = 'resolved' THEN 'open' ELSE i.status END,
         status_by       = CASE WHEN i.status = 'resolved' THEN NULL ELSE i.status_by END,
         status_at       = CASE WHEN i.status = 'resolved' THEN excluded.last_seen_at ELSE i.status_at END,
         reopened        = i.reopened + CASE WHEN i.status = 'resolved' THEN 1 ELSE 0 END,
         reopened_at     = CASE WHEN i.status = 'resolved' THEN excluded.last_seen_at ELSE i.reopened_at END;

  -- The same failures per workspace and minute (alert rates, metrics).
  INSERT INTO wharf.failure_minute AS m (workspace_id, minute, failed, dead)
  SELECT e.workspace_id, date_trunc('minute', a.ended_at), count(*), count(*) FILTER (WHERE e.state = 'DEAD')
    FROM attempts_added a
    JOIN wharf.provider_event e ON e.id = a.event_id
   WHERE a.ended <> 'released'
   GROUP BY 1, 2
   ORDER BY 1, 2
  ON CONFLICT (workspace_id, minute) DO UPDATE
     SET failed = m.failed + excluded.failed, dead = m.dead + excluded.dead;
  RETURN NULL;
END $$;

CREATE TRIGGER event_attempt_count_issues
  AFTER INSERT ON wharf.event_attempt
  REFERENCING NEW TABLE AS attempts_added
  FOR EACH STATEMENT EXECUTE FUNCTION wharf.count_failures_into_issues();

-- One issue as the operator surface shows it. Internal.
CREATE OR REPLACE FUNCTION wharf.issue_summary(i wharf.issue) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', i.id, 'workspace_id', i.workspace_id, 'provider', i.provider, 'event_type', i.event_type,
    'error_class', i.error_class, 'status', i.status, 'status_by', i.status_by, 'status_at', i.status_at,
    'first_seen_at', i.first_seen_at, 'last_seen_at', i.last_seen_at, 'failures', i.failures,
    'dead', i.dead, 'sample_event_id', i.sample_event_id, 'reopened', i.reopened,
    'reopened_at', i.reopened_at)
$$;

-- The issues whose workspace IS NOT DISTINCT FROM p_workspace_id (NULL:
-- installation rows), latest seen first, at most p_limit, of status p_status
-- when given. 22023 for an unknown status or a limit outside 1..1000.
-- Internal: callers use list_issues / list_installation_issues.
CREATE OR REPLACE FUNCTION wharf.issue_list(p_workspace_id bigint, p_status text, p_limit integer) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF p_status IS NOT NULL AND p_status NOT IN ('open', 'acknowledged', 'resolved', 'ignored') THEN
    RAISE EXCEPTION 'wharf: unknown issue status %', quote_literal(p_status) USING ERRCODE = '22023';
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 1000' USING ERRCODE = '22023';
  END IF;
  RETURN (SELECT coalesce(jsonb_agg(wharf.issue_summary(i) ORDER BY i.last_seen_at DESC, i.id DESC), '[]')
            FROM (SELECT * FROM wharf.issue x
                   WHERE (x.workspace_id = p_workspace_id OR (p_workspace_id IS NULL AND x.workspace_id IS NULL))
                     AND (p_status IS NULL OR x.status = p_status)
                   ORDER BY x.last_seen_at DESC, x.id DESC
                   LIMIT p_limit) i);
END $$;

-- The issues of workspace p_workspace_id (see issue_list). P0002 for an
-- unknown workspace.
CREATE OR REPLACE FUNCTION wharf.list_issues(p_workspace_id bigint, p_status text DEFAULT NULL, p_limit integer DEFAULT 100)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN wharf.issue_list(p_workspace_id, p_status, p_limit);
END $$;

-- Instance admin only: the issues of installation rows (see issue_list).
CREATE OR REPLACE FUNCTION wharf.list_installation_issues(p_status text DEFAULT NULL, p_limit integer DEFAULT 100)
RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.issue_list(NULL, p_status, p_limit)
$$;

-- Issue p_id of workspace p_workspace_id; NULL when it is not one of that
-- workspace's, whether or not it exists elsewhere. 22004 for a NULL workspace.
CREATE OR REPLACE FUNCTION wharf.show_issue(p_workspace_id bigint, p_id bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_workspace_id IS NULL THEN
    RAISE EXCEPTION 'wharf.show_issue: workspace is required' USING ERRCODE = '22004';
  END IF;
  RETURN (SELECT wharf.issue_summary(i) FROM wharf.issue i WHERE i.id = p_id AND i.workspace_id = p_workspace_id);
END $$;

-- Sets the status of issue p_id of workspace p_workspace_id (NULL: an
-- installation issue) to p_status, recording p_account and the time; the
-- issue as it is after, or NULL when there is no such issue there. Internal.
CREATE OR REPLACE FUNCTION wharf.change_issue_status(p_workspace_id bigint, p_id bigint, p_status text, p_account text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_issue wharf.issue;
BEGIN
  IF p_id IS NULL OR p_status IS NULL OR p_account IS NULL OR p_account = '' THEN
    RAISE EXCEPTION 'wharf: an issue status change needs an issue, a status and an account' USING ERRCODE = '22004';
  END IF;
  IF p_status NOT IN ('open', 'acknowledged', 'resolved', 'ignored') THEN
    RAISE EXCEPTION 'wharf: unknown issue status %', quote_literal(p_status) USING ERRCODE = '22023';
  END IF;
  UPDATE wharf.issue i
     SET status = p_status, status_by = p_account, status_at = now()
   WHERE i.id = p_id AND (i.workspace_id = p_workspace_id OR (p_workspace_id IS NULL AND i.workspace_id IS NULL))
  RETURNING * INTO v_issue;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  RETURN wharf.issue_summary(v_issue);
END $$;

-- Sets the status of issue p_id of workspace p_workspace_id (see
-- change_issue_status): 'open', 'acknowledged', 'resolved' or 'ignored'.
-- 22004 for a NULL argument, 22023 for an unknown status.
CREATE OR REPLACE FUNCTION wharf.set_issue_status(p_workspace_id bigint, p_id bigint, p_status text, p_account text)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_workspace_id IS NULL THEN
    RAISE EXCEPTION 'wharf.set_issue_status: workspace is required' USING ERRCODE = '22004';
  END IF;
  RETURN wharf.change_issue_status(p_workspace_id, p_id, p_status, p_account);
END $$;

-- Instance admin only: the same for an issue of installation rows.
CREATE OR REPLACE FUNCTION wharf.set_installation_issue_status(p_id bigint, p_status text, p_account text)
RETURNS jsonb
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.change_issue_status(NULL, p_id, p_status, p_account)
$$;

-- The events of issue p_id of workspace p_workspace_id that still carry its
-- error class as their last cause, newest first, as list_events pages them
-- ({events, next_cursor}, older than p_before_id when given). NULL when the
-- workspace has no such issue. An issue of event type '*' matches every
-- event type.
CREATE OR REPLACE FUNCTION wharf.issue_events(
  p_workspace_id bigint, p_id bigint, p_limit integer DEFAULT 50, p_before_id bigint DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_issue  wharf.issue;
  v_events jsonb;
  v_count  bigint;
BEGIN
  IF p_workspace_id IS NULL THEN
    RAISE EXCEPTION 'wharf.issue_events: workspace is required' USING ERRCODE = '22004';
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 500' USING ERRCODE = '22023';
  END IF;
  SELECT * INTO v_issue FROM wharf.issue WHERE id = p_id AND workspace_id = p_workspace_id;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  SELECT coalesce(jsonb_agg(wharf.event_summary(e) ORDER BY e.id DESC), '[]'), count(*) INTO v_events, v_count
    FROM (SELECT * FROM wharf.provider_event x
           WHERE x.workspace_id = p_workspace_id
             AND (p_before_id IS NULL OR x.id < p_before_id)
             AND x.provider = v_issue.provider
             AND (v_issue.event_type = '*' OR x.event_type = v_issue.event_type)
             AND x.error_class = v_issue.error_class
           ORDER BY x.id DESC
           LIMIT p_limit + 1) e;
  IF v_count <= p_limit THEN
    RETURN jsonb_build_object('events', v_events, 'next_cursor', NULL);
  END IF;
  v_events := v_events - p_limit;
  RETURN jsonb_build_object('events', v_events, 'next_cursor', v_events -> (p_limit - 1) -> 'id');
END $$;

-- Retention: deletes at most p_batch issues not seen for issue_retention,
-- whatever their status (a failure that returns later opens a new one),
-- then, within the same batch, per-minute failure counts older than a day,
-- and returns how many rows it deleted. One short transaction per call: the retention loop calls
-- it until it returns less than p_batch.
CREATE OR REPLACE FUNCTION wharf.purge_issues(p_batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_deleted bigint;
  v_count   bigint;
BEGIN
  IF p_batch IS NULL OR p_batch < 1 THEN
    RAISE EXCEPTION 'wharf: purge_issues needs a positive batch size' USING ERRCODE = '22023';
  END IF;
  DELETE FROM wharf.issue
   WHERE id IN (SELECT id FROM wharf.issue
                 WHERE last_seen_at < now() - wharf.setting_interval('issue_retention')
                 ORDER BY last_seen_at
                 LIMIT p_batch
                 FOR UPDATE SKIP LOCKED);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  IF v_deleted < p_batch THEN
    DELETE FROM wharf.failure_minute
     WHERE ctid IN (SELECT ctid FROM wharf.failure_minute
                     WHERE minute < now() - interval '1 day'
                     LIMIT p_batch - v_deleted);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    v_deleted := v_deleted + v_count;
  END IF;
  RETURN v_deleted;
END $$;

-- Failed or expired leases and dead letters per minute of the last p_hours
-- (1..24) hours of workspace p_workspace_id, oldest first, one {at, failed,
-- dead} per minute (zeros included), from wharf.failure_minute: a few rows,
-- never the inbox. P0002 for an unknown workspace, 22023 for hours outside 1..24.
CREATE OR REPLACE FUNCTION wharf.failure_history(p_workspace_id bigint, p_hours integer) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_since timestamptz;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF p_hours IS NULL OR p_hours < 1 OR p_hours > 24 THEN
    RAISE EXCEPTION 'wharf.failure_history: hours must be between 1 and 24' USING ERRCODE = '22023';
  END IF;
  v_since := date_trunc('minute', now()) - make_interval(mins => p_hours * 60 - 1);
  RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object('at', m.at, 'failed', coalesce(f.failed, 0), 'dead', coalesce(f.dead, 0))
                                    ORDER BY m.at), '[]')
            FROM generate_series(v_since, date_trunc('minute', now()), interval '1 minute') AS m(at)
            LEFT JOIN wharf.failure_minute f ON f.workspace_id = p_workspace_id AND f.minute = m.at);
END $$;

-- The instance's issues by status, for the worker's gauges: {"issues":
-- {status: count}}. Reads the issue table (bounded by issue_limit per
-- workspace), never the inbox.
CREATE OR REPLACE FUNCTION wharf.issue_gauges() RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT jsonb_build_object(
    'issues', (SELECT jsonb_object_agg(s.status, (SELECT count(*) FROM wharf.issue i WHERE i.status = s.status))
                 FROM unnest(ARRAY['open', 'acknowledged', 'resolved', 'ignored']) AS s(status)))
$$;

REVOKE ALL ON FUNCTION wharf.failure_history(bigint, integer), wharf.issue_gauges() FROM PUBLIC;

REVOKE ALL ON FUNCTION wharf.list_issues(bigint, text, integer),
  wharf.list_installation_issues(text, integer),
  wharf.show_issue(bigint, bigint),
  wharf.set_issue_status(bigint, bigint, text, text),
  wharf.set_installation_issue_status(bigint, text, text),
  wharf.issue_events(bigint, bigint, integer, bigint),
  wharf.purge_issues(integer) FROM PUBLIC;

-- ======== sql/98-stuck-scopes.sql ========

-- The scopes of workspace p_workspace_id whose head arrived (or was last
-- replayed) more than p_older_than ago, oldest first, at most p_limit, each
-- as {scope_key, subject, reason, waiting_since, waiting_seconds, behind,
-- head: {...}, connection: {id, state}}. reason: 'leased' (a handler holds
-- it), 'paused' (its connection is paused), 'failing' (it failed before and
-- waits for its retry or its next claim), else 'waiting'. behind: the QUEUED
-- events after the head, counted up to 10000 (behind_capped says so).
-- Internal: callers use list_stuck_scopes.
CREATE OR REPLACE FUNCTION wharf.stuck_scope_list(p_workspace_id bigint, p_older_than interval, p_limit integer)
RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT coalesce(jsonb_agg(x.scope ORDER BY x.since, x.scope_key), '[]')
    FROM (SELECT s.scope_key, greatest(h.received_at, h.replayed_at) AS since,
                 jsonb_build_object(
                   'scope_key', s.scope_key, 'subject', h.subject,
                   'reason', CASE WHEN h.state = 'LEASED' THEN 'leased'
                                  WHEN c.state = 'PAUSED' THEN 'paused'
                                  WHEN h.attempt > 0 OR h.error_class IS NOT NULL THEN 'failing'
                                  ELSE 'waiting' END,
                   'waiting_since', greatest(h.received_at, h.replayed_at),
                   'waiting_seconds', floor(extract(epoch FROM now() - greatest(h.received_at, h.replayed_at))),
                   'behind', b.n, 'behind_capped', b.n >= 10000,
                   'head', wharf.event_summary(h) || jsonb_build_object('leased_by', h.leased_by,
                                                                        'leased_until', h.leased_until),
                   'connection', jsonb_build_object('id', c.id, 'state', c.state)) AS scope
            FROM wharf.scope s
            JOIN wharf.provider_event h ON h.id = coalesce(s.leased_id, s.head_id)
            LEFT JOIN wharf.connection c ON c.id = h.connection_id
            CROSS JOIN LATERAL (SELECT count(*) AS n
                                  FROM (SELECT FROM wharf.provider_event e
                                         WHERE e.scope_key = s.scope_key AND e.id > h.id AND e.state = 'QUEUED'
                                         LIMIT 10000) q) b
           WHERE s.workspace_id = p_workspace_id
             AND (s.leased_id IS NOT NULL OR s.head_id IS NOT NULL)
             AND greatest(h.received_at, h.replayed_at) < now() - p_older_than
           ORDER BY greatest(h.received_at, h.replayed_at), s.scope_key
           LIMIT p_limit) x
$$;

-- The stuck scopes of workspace p_workspace_id (see stuck_scope_list),
-- older than p_older_than or, when NULL, the setting stuck_after. P0002 for
-- an unknown workspace, 22023 for a threshold below zero or a limit outside
-- 1..500.
CREATE OR REPLACE FUNCTION wharf.list_stuck_scopes(
  p_workspace_id bigint, p_older_than interval DEFAULT NULL, p_limit integer DEFAULT 100)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF p_older_than < interval '0' THEN
    RAISE EXCEPTION 'wharf: the threshold must not be negative' USING ERRCODE = '22023';
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 500' USING ERRCODE = '22023';
  END IF;
  RETURN wharf.stuck_scope_list(p_workspace_id, coalesce(p_older_than, wharf.setting_interval('stuck_after')), p_limit);
END $$;

-- Locks event p_event_id of scope p_scope_key of workspace p_workspace_id
-- and says why an action on it as the scope's head must be refused: NULL
-- when it is the scope's QUEUED head, 'leased' when a handler holds it (wait
-- for its lease to end, or for the reaper), 'not_head' when it no longer
-- heads the scope (the list the operator acted on is stale). P0002 when the
-- workspace has no such event in that scope, 22004 for a NULL argument or an
-- empty account. Internal.
CREATE OR REPLACE FUNCTION wharf.scope_head_refusal(p_workspace_id bigint, p_scope_key text, p_event_id bigint, p_account text)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_state text;
BEGIN
  IF p_workspace_id IS NULL OR p_scope_key IS NULL OR p_event_id IS NULL OR p_account IS NULL OR p_account = '' THEN
    RAISE EXCEPTION 'wharf: a scope action needs a workspace, a scope, its head event and an account'
      USING ERRCODE = '22004';
  END IF;
  -- The event first, then (through the trigger of sql/20) its scope row:
  -- the order fail and reap lock them in.
  SELECT state INTO v_state FROM wharf.provider_event
   WHERE id = p_event_id AND workspace_id = p_workspace_id AND scope_key = p_scope_key
   FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: workspace % has no event % in scope %', p_workspace_id, p_event_id, p_scope_key
      USING ERRCODE = 'P0002';
  END IF;
  IF v_state = 'LEASED' THEN
    RETURN 'leased';
  END IF;
  IF v_state <> 'QUEUED'
     OR NOT EXISTS (SELECT FROM wharf.scope s WHERE s.scope_key = p_scope_key AND s.head_id = p_event_id) THEN
    RETURN 'not_head';
  END IF;
  RETURN NULL;
END $$;

-- An action's answer: {"done": true, "event"} or {"done": false, "reason"
-- (see scope_head_refusal), "event"}, the event as it is now. Internal.
CREATE OR REPLACE FUNCTION wharf.scope_action_result(p_event_id bigint, p_refusal text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object('done', p_refusal IS NULL, 'reason', p_refusal, 'event', wharf.event_summary(e))
    FROM wharf.provider_event e WHERE e.id = p_event_id
$$;

-- Makes head p_event_id of scope p_scope_key due now, wakes idle claimers
-- and records the action (see scope_action_result, scope_head_refusal).
CREATE OR REPLACE FUNCTION wharf.retry_scope_head(p_workspace_id bigint, p_scope_key text, p_event_id bigint, p_account text)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_refusal text;
BEGIN
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  v_refusal := wharf.scope_head_refusal(p_workspace_id, p_scope_key, p_event_id, p_account);
  IF v_refusal IS NULL THEN
    UPDATE wharf.provider_event SET next_attempt_at = now() WHERE id = p_event_id AND next_attempt_at > now();
    INSERT INTO wharf.scope_action (workspace_id, scope_key, event_id, connection_id, action, account)
    SELECT p_workspace_id, p_scope_key, p_event_id, e.connection_id, 'retry_head', p_account
      FROM wharf.provider_event e WHERE e.id = p_event_id;
    PERFORM wharf.notify_idle_claimers();
  END IF;
  RETURN wharf.scope_action_result(p_event_id, v_refusal);
END $$;

-- Moves head p_event_id of scope p_scope_key to the dead letters (DEAD now,
-- its error class kept, 'MovedToDeadLetters' when it has none), so that the
-- next event of the scope runs; wakes idle claimers and records the action
-- (see scope_action_result, scope_head_refusal). The event can be replayed
-- like any dead letter.
CREATE OR REPLACE FUNCTION wharf.dead_letter_scope_head(p_workspace_id bigint, p_scope_key text, p_event_id bigint, p_account text)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_refusal text;
BEGIN
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  v_refusal := wharf.scope_head_refusal(p_workspace_id, p_scope_key, p_event_id, p_account);
  IF v_refusal IS NULL THEN
    UPDATE wharf.provider_event
       SET state = 'DEAD', dead_at = now(), error_class = coalesce(error_class, 'MovedToDeadLetters')
     WHERE id = p_event_id;
    INSERT INTO wharf.scope_action (workspace_id, scope_key, event_id, connection_id, action, account)
    SELECT p_workspace_id, p_scope_key, p_event_id, e.connection_id, 'dead_letter_head', p_account
      FROM wharf.provider_event e WHERE e.id = p_event_id;
    PERFORM wharf.notify_idle_claimers();
  END IF;
  RETURN wharf.scope_action_result(p_event_id, v_refusal);
END $$;

-- Pauses the connection that admitted head p_event_id of scope p_scope_key
-- (its deliveries are still stored, nothing of it is claimed) and records
-- the action; the connection as it is after (show_connection). The head may
-- be leased (its handler finishes). P0002 when the workspace has no such
-- event in that scope or it has no connection.
CREATE OR REPLACE FUNCTION wharf.pause_scope_connection(p_workspace_id bigint, p_scope_key text, p_event_id bigint, p_account text)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_connection_id bigint;
BEGIN
  IF p_workspace_id IS NULL OR p_scope_key IS NULL OR p_event_id IS NULL OR p_account IS NULL OR p_account = '' THEN
    RAISE EXCEPTION 'wharf: a scope action needs a workspace, a scope, its head event and an account'
      USING ERRCODE = '22004';
  END IF;
  SELECT connection_id INTO v_connection_id FROM wharf.provider_event
   WHERE id = p_event_id AND workspace_id = p_workspace_id AND scope_key = p_scope_key;
  IF v_connection_id IS NULL THEN
    RAISE EXCEPTION 'wharf: workspace % has no event % with a connection in scope %', p_workspace_id, p_event_id, p_scope_key
      USING ERRCODE = 'P0002';
  END IF;
  PERFORM wharf.set_connection_state(v_connection_id, 'PAUSED');
  INSERT INTO wharf.scope_action (workspace_id, scope_key, event_id, connection_id, action, account)
  VALUES (p_workspace_id, p_scope_key, p_event_id, v_connection_id, 'pause_connection', p_account);
  RETURN wharf.show_connection(v_connection_id);
END $$;

-- The newest actions on the scopes of workspace p_workspace_id, at most
-- p_limit, as {id, scope_key, event_id, connection_id, action, account, at}.
-- P0002 for an unknown workspace, 22023 for a limit outside 1..500.
CREATE OR REPLACE FUNCTION wharf.list_scope_actions(p_workspace_id bigint, p_limit integer DEFAULT 50) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 500' USING ERRCODE = '22023';
  END IF;
  RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', a.id, 'scope_key', a.scope_key, 'event_id', a.event_id, 'connection_id', a.connection_id,
                   'action', a.action, 'account', a.account, 'at', a.at) ORDER BY a.id DESC), '[]')
            FROM (SELECT * FROM wharf.scope_action x WHERE x.workspace_id = p_workspace_id
                   ORDER BY x.id DESC LIMIT p_limit) a);
END $$;

-- Retention: deletes at most p_batch scope actions older than
-- issue_retention and returns how many; the retention loop calls it until it
-- returns less than p_batch.
CREATE OR REPLACE FUNCTION wharf.purge_scope_actions(p_batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_deleted bigint;
BEGIN
  IF p_batch IS NULL OR p_batch < 1 THEN
    RAISE EXCEPTION 'wharf: purge_scope_actions needs a positive batch size' USING ERRCODE = '22023';
  END IF;
  DELETE FROM wharf.scope_action
   WHERE id IN (SELECT id FROM wharf.scope_action
                 WHERE at < now() - wharf.setting_interval('issue_retention')
                 ORDER BY at LIMIT p_batch);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  RETURN v_deleted;
END $$;

REVOKE ALL ON FUNCTION wharf.list_stuck_scopes(bigint, interval, integer),
  wharf.retry_scope_head(bigint, text, bigint, text),
  wharf.dead_letter_scope_head(bigint, text, bigint, text),
  wharf.pause_scope_connection(bigint, text, bigint, text),
  wharf.list_scope_actions(bigint, integer),
  wharf.purge_scope_actions(integer) FROM PUBLIC;

-- ======== sql/99-alerts.sql ========

-- A rule as the operator surface shows it: its destination's host, never
-- its URL (a Slack webhook's URL is its credential) or its secret. Internal.
CREATE OR REPLACE FUNCTION wharf.alert_rule_summary(r wharf.alert_rule) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', r.id, 'workspace_id', r.workspace_id, 'name', r.name, 'kind', r.kind, 'threshold', r.threshold,
    'window_seconds', r.window_seconds, 'destination', r.destination,
    'destination_host', substring(r.url FROM '^https?://([^/?#]+)'),
    'created_by', r.created_by, 'created_at', r.created_at)
$$;

-- Records a rule of workspace p_workspace_id (NULL: the instance) and
-- returns it (alert_rule_summary). 22004 for a missing argument, 22023 for a
-- bad one: an unknown kind or destination, a parameter the kind does not
-- take or lacks, a URL that is neither https nor http to a loopback
-- address, a webhook without a `whsec_` secret or a Slack rule with one.
-- Internal: callers use create_alert_rule / create_instance_alert_rule.
CREATE OR REPLACE FUNCTION wharf.add_alert_rule(
  p_workspace_id bigint, p_name text, p_kind text, p_threshold integer, p_window_seconds integer,
  p_destination text, p_url text, p_secret text, p_account text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_rule wharf.alert_rule;
BEGIN
  IF p_name IS NULL OR p_kind IS NULL OR p_destination IS NULL OR p_url IS NULL OR p_account IS NULL OR p_account = '' THEN
    RAISE EXCEPTION 'wharf: an alert rule needs a name, a kind, a destination, a URL and an account' USING ERRCODE = '22004';
  END IF;
  IF p_name !~ '^[A-Za-z0-9][A-Za-z0-9 _.:@-]{0,63}$' THEN
    RAISE EXCEPTION 'wharf: a rule name is 1 to 64 letters, digits, spaces or _.:@-' USING ERRCODE = '22023';
  END IF;
  IF p_kind NOT IN ('issue_opened', 'issue_reopened', 'dead_letter_rate', 'oldest_due_age', 'stuck_scope') THEN
    RAISE EXCEPTION 'wharf: unknown alert kind %', quote_literal(p_kind) USING ERRCODE = '22023';
  END IF;
  IF (p_kind = 'dead_letter_rate') <> (p_threshold IS NOT NULL) OR p_threshold <= 0 THEN
    RAISE EXCEPTION 'wharf: a positive threshold is required for dead_letter_rate, and taken by no other kind'
      USING ERRCODE = '22023';
  END IF;
  IF (p_kind IN ('dead_letter_rate', 'oldest_due_age', 'stuck_scope')) <> (p_window_seconds IS NOT NULL)
     OR p_window_seconds <= 0 THEN
    RAISE EXCEPTION 'wharf: a positive window_seconds is required for dead_letter_rate, oldest_due_age and stuck_scope, and taken by no other kind'
      USING ERRCODE = '22023';
  END IF;
  IF p_destination NOT IN ('webhook', 'slack') THEN
    RAISE EXCEPTION 'wharf: unknown alert destination %', quote_literal(p_destination) USING ERRCODE = '22023';
  END IF;
  IF length(p_url) > 2000
     OR NOT (p_url ~ '^https://[^/?#@\s]+' OR p_url ~ '^http://(127\.0\.0\.1|localhost|\[::1\])(:[0-9]+)?(/|$)') THEN
    RAISE EXCEPTION 'wharf: an alert URL is https:// (or http:// to a loopback address)' USING ERRCODE = '22023';
  END IF;
  IF p_destination = 'webhook' AND (p_secret IS NULL OR p_secret !~ '^whsec_[A-Za-z0-9+/]+=*$') THEN
    RAISE EXCEPTION 'wharf: a webhook destination needs a Standard Webhooks secret (whsec_ and base64)' USING ERRCODE = '22023';
  END IF;
  IF p_destination = 'slack' AND p_secret IS NOT NULL THEN
    RAISE EXCEPTION 'wharf: a Slack destination takes no secret (its URL is one)' USING ERRCODE = '22023';
  END IF;
  INSERT INTO wharf.alert_rule (workspace_id, name, kind, threshold, window_seconds, destination, url, secret, created_by)
  VALUES (p_workspace_id, p_name, p_kind, p_threshold, p_window_seconds, p_destination, p_url, p_secret, p_account)
  RETURNING * INTO v_rule;
  RETURN wharf.alert_rule_summary(v_rule);
END $$;

-- A rule of workspace p_workspace_id (see add_alert_rule); P0002 for an unknown workspace.
CREATE OR REPLACE FUNCTION wharf.create_alert_rule(
  p_workspace_id bigint, p_name text, p_kind text, p_threshold integer, p_window_seconds integer,
  p_destination text, p_url text, p_secret text, p_account text)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN wharf.add_alert_rule(p_workspace_id, p_name, p_kind, p_threshold, p_window_seconds,
                              p_destination, p_url, p_secret, p_account);
END $$;

-- Instance admin only: a rule over every workspace and the installation rows.
CREATE OR REPLACE FUNCTION wharf.create_instance_alert_rule(
  p_name text, p_kind text, p_threshold integer, p_window_seconds integer,
  p_destination text, p_url text, p_secret text, p_account text)
RETURNS jsonb
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.add_alert_rule(NULL, p_name, p_kind, p_threshold, p_window_seconds,
                              p_destination, p_url, p_secret, p_account)
$$;

-- The rules of workspace p_workspace_id, by id; P0002 for an unknown workspace.
CREATE OR REPLACE FUNCTION wharf.list_alert_rules(p_workspace_id bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  RETURN (SELECT coalesce(jsonb_agg(wharf.alert_rule_summary(r) ORDER BY r.id), '[]')
            FROM wharf.alert_rule r WHERE r.workspace_id = p_workspace_id);
END $$;

-- Instance admin only: the instance's rules, by id.
CREATE OR REPLACE FUNCTION wharf.list_instance_alert_rules() RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT coalesce(jsonb_agg(wharf.alert_rule_summary(r) ORDER BY r.id), '[]')
    FROM wharf.alert_rule r WHERE r.workspace_id IS NULL
$$;

-- Deletes rule p_id of workspace p_workspace_id (NULL: an instance rule)
-- with its alerts; true when it did.
CREATE OR REPLACE FUNCTION wharf.delete_alert_rule(p_workspace_id bigint, p_id bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  DELETE FROM wharf.alert_rule
   WHERE id = p_id AND (workspace_id = p_workspace_id OR (p_workspace_id IS NULL AND workspace_id IS NULL));
  RETURN FOUND;
END $$;

-- The newest alerts of the rules of workspace p_workspace_id (NULL: of the
-- instance's rules), at most p_limit, with how their delivery went. P0002 for
-- an unknown workspace, 22023 for a limit outside 1..500.
CREATE OR REPLACE FUNCTION wharf.list_alerts(p_workspace_id bigint, p_limit integer DEFAULT 50) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_workspace_id IS NOT NULL THEN
    PERFORM wharf.require_workspace(p_workspace_id);
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 500' USING ERRCODE = '22023';
  END IF;
  RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', a.id, 'rule_id', a.rule_id, 'rule_name', a.rule_name, 'workspace_id', a.workspace_id,
                   'kind', a.kind, 'facts', a.facts, 'created_at', a.created_at, 'state', a.state,
                   'attempts', a.attempts, 'last_attempt_at', a.last_attempt_at, 'last_status', a.last_status,
                   'last_error', a.last_error, 'delivered_at', a.delivered_at) ORDER BY a.id DESC), '[]')
            FROM (SELECT x.*, r.name AS rule_name
                    FROM wharf.alert_rule r
                    JOIN wharf.alert x ON x.rule_id = r.id
                   WHERE r.workspace_id = p_workspace_id OR (p_workspace_id IS NULL AND r.workspace_id IS NULL)
                   ORDER BY x.id DESC
                   LIMIT p_limit) a);
END $$;

-- Takes or extends the sender's lease for p_lease: with p_token, the lease
-- it names when still held by it; without, a free or expired lease. The
-- token, or NULL when another host holds the lease. 22004/22023 for a
-- missing or non-positive lease.
CREATE OR REPLACE FUNCTION wharf.take_alert_sender(p_holder text, p_lease interval, p_token uuid DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_token uuid;
BEGIN
  IF p_holder IS NULL OR p_holder = '' OR p_lease IS NULL THEN
    RAISE EXCEPTION 'wharf: take_alert_sender needs a holder and a lease' USING ERRCODE = '22004';
  END IF;
  IF p_lease <= interval '0' THEN
    RAISE EXCEPTION 'wharf: the lease must be positive' USING ERRCODE = '22023';
  END IF;
  UPDATE wharf.alert_sender
     SET leased_by = p_holder,
         lease_token = CASE WHEN p_token IS NOT NULL AND lease_token = p_token THEN p_token ELSE gen_random_uuid() END,
         leased_until = clock_timestamp() + p_lease
   WHERE id = 1
     AND ((p_token IS NOT NULL AND lease_token = p_token)
          OR lease_token IS NULL OR leased_until < clock_timestamp())
  RETURNING lease_token INTO v_token;
  RETURN v_token;
END $$;

-- Gives the sender's lease of p_token back; true when it held it.
CREATE OR REPLACE FUNCTION wharf.release_alert_sender(p_token uuid) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  UPDATE wharf.alert_sender SET leased_by = NULL, lease_token = NULL, leased_until = NULL
   WHERE id = 1 AND lease_token = p_token;
  RETURN FOUND;
END $$;

-- Raises WH412 unless p_token holds the sender's lease (an expired lease
-- that nobody took over still holds), locking the lease row until the
-- caller's commit so that a take-over waits for it. Internal.
CREATE OR REPLACE FUNCTION wharf.held_alert_sender(p_token uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM FROM wharf.alert_sender WHERE id = 1 AND lease_token = p_token FOR UPDATE;
  IF p_token IS NULL OR NOT FOUND THEN
    RAISE EXCEPTION 'wharf: the alert sender lease is no longer held with this token' USING ERRCODE = 'WH412';
  END IF;
END $$;

-- What an issue alert says: names, counts and times of the issue. Internal.
CREATE OR REPLACE FUNCTION wharf.issue_alert_facts(i wharf.issue) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object('issue', jsonb_build_object(
    'id', i.id, 'workspace_id', i.workspace_id, 'provider', i.provider, 'event_type', i.event_type,
    'error_class', i.error_class, 'status', i.status, 'failures', i.failures, 'dead', i.dead,
    'first_seen_at', i.first_seen_at, 'last_seen_at', i.last_seen_at, 'reopened', i.reopened,
    'reopened_at', i.reopened_at))
$$;

-- Evaluates every rule and records an alert for each thing it fires on
-- that has none yet (rule and dedupe key); returns how many it recorded.
--   issue_opened      an issue first seen since the rule exists (and within a
--                     day), not ignored: one alert per issue
--   issue_reopened    an open issue reopened since then: one per reopening
--   dead_letter_rate  dead letters in the minutes covering the last
--                     window_seconds at least threshold: one per window
--   oldest_due_age    a scope head due and unclaimed for window_seconds:
--                     one per window while it lasts
--   stuck_scope       a scope head waiting window_seconds (stuck_scope_list's
--                     rule): one per head, at most 1000 per evaluation
-- An instance rule covers every workspace and the installation rows. WH412
-- when p_token does not hold the sender's lease.
CREATE OR REPLACE FUNCTION wharf.evaluate_alert_rules(p_token uuid) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_now   timestamptz := now();
  v_count integer;
  v_total integer := 0;
BEGIN
  PERFORM wharf.held_alert_sender(p_token);

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, i.workspace_id, 'issue-opened:' || i.id, r.kind, wharf.issue_alert_facts(i)
    FROM wharf.alert_rule r
    JOIN wharf.issue i ON (r.workspace_id IS NULL OR i.workspace_id = r.workspace_id)
   WHERE r.kind = 'issue_opened' AND i.status <> 'ignored'
     AND i.last_seen_at >= greatest(r.created_at, v_now - interval '1 day')
     AND i.first_seen_at >= greatest(r.created_at, v_now - interval '1 day')
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  v_total := v_total + v_count;

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, i.workspace_id, 'issue-reopened:' || i.id || ':' || i.reopened, r.kind, wharf.issue_alert_facts(i)
    FROM wharf.alert_rule r
    JOIN wharf.issue i ON (r.workspace_id IS NULL OR i.workspace_id = r.workspace_id)
   WHERE r.kind = 'issue_reopened' AND i.status = 'open'
     AND i.last_seen_at >= greatest(r.created_at, v_now - interval '1 day')
     AND i.reopened_at >= greatest(r.created_at, v_now - interval '1 day')
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  v_total := v_total + v_count;

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, r.workspace_id, 'dead-rate:' || floor(extract(epoch FROM v_now) / r.window_seconds)::bigint, r.kind,
         jsonb_build_object('dead', c.dead, 'threshold', r.threshold, 'window_seconds', r.window_seconds)
    FROM wharf.alert_rule r
    CROSS JOIN LATERAL (SELECT coalesce(sum(m.dead), 0) AS dead FROM wharf.failure_minute m
                         WHERE (r.workspace_id IS NULL OR m.workspace_id = r.workspace_id)
                           AND m.minute >= date_trunc('minute', v_now - make_interval(secs => r.window_seconds))) c
   WHERE r.kind = 'dead_letter_rate' AND c.dead >= r.threshold
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  v_total := v_total + v_count;

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, r.workspace_id, 'oldest-due:' || floor(extract(epoch FROM v_now) / r.window_seconds)::bigint, r.kind,
         jsonb_build_object('oldest_due_at', o.due, 'age_seconds', floor(extract(epoch FROM v_now - o.due)),
                            'window_seconds', r.window_seconds)
    FROM wharf.alert_rule r
    CROSS JOIN LATERAL (SELECT min(s.head_due_at) AS due FROM wharf.scope s
                         WHERE (r.workspace_id IS NULL OR s.workspace_id = r.workspace_id)
                           AND s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active) o
   WHERE r.kind = 'oldest_due_age' AND o.due < v_now - make_interval(secs => r.window_seconds)
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  v_total := v_total + v_count;

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, s.workspace_id, 'stuck:' || s.scope_key || ':' || h.id, r.kind,
         jsonb_build_object('scope_key', s.scope_key, 'subject', h.subject,
                            'waiting_since', greatest(h.received_at, h.replayed_at),
                            'head', jsonb_build_object('id', h.id, 'provider', h.provider, 'event_type', h.event_type,
                                                       'state', h.state, 'attempt', h.attempt,
                                                       'error_class', h.error_class))
    FROM wharf.alert_rule r
    JOIN wharf.scope s ON (r.workspace_id IS NULL OR s.workspace_id = r.workspace_id)
    JOIN wharf.provider_event h ON h.id = coalesce(s.leased_id, s.head_id)
   WHERE r.kind = 'stuck_scope'
     AND greatest(h.received_at, h.replayed_at) < v_now - make_interval(secs => r.window_seconds)
   LIMIT 1000
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  RETURN v_total + v_count;
END $$;

-- The alerts due for delivery, oldest due first, at most p_limit, each with
-- what the sender needs: {id, rule_id, rule_name, workspace_id, kind, facts,
-- created_at, attempts, destination, url, secret}. The only function that
-- returns a rule's URL and secret: the sender's. WH412 when p_token does not
-- hold the sender's lease.
CREATE OR REPLACE FUNCTION wharf.due_alerts(p_token uuid, p_limit integer) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM wharf.held_alert_sender(p_token);
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 1000' USING ERRCODE = '22023';
  END IF;
  RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', a.id, 'rule_id', r.id, 'rule_name', r.name, 'workspace_id', a.workspace_id, 'kind', a.kind,
                   'facts', a.facts, 'created_at', a.created_at, 'attempts', a.attempts,
                   'destination', r.destination, 'url', r.url, 'secret', r.secret) ORDER BY a.next_attempt_at, a.id), '[]')
            FROM (SELECT * FROM wharf.alert x
                   WHERE x.state = 'pending' AND x.next_attempt_at <= clock_timestamp()
                   ORDER BY x.next_attempt_at, x.id
                   LIMIT p_limit) a
            JOIN wharf.alert_rule r ON r.id = a.rule_id);
END $$;

-- Records an attempt to deliver alert p_id: delivered (p_delivered), or
-- failed with the receiver's status p_status or the class of the error that
-- prevented an answer (p_error, a class name, never a message), then pending
-- again after a bounded exponential delay from p_base_delay (up to an hour,
-- equal jitter) or, after 8 attempts, failed for good. Returns the alert's
-- state after; NULL when it is not pending (delivered or failed already, or
-- gone with its rule). WH412 when p_token does not hold the sender's lease.
CREATE OR REPLACE FUNCTION wharf.record_alert_attempt(
  p_token uuid, p_id bigint, p_delivered boolean, p_status integer, p_error text, p_base_delay interval)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_state text;
BEGIN
  PERFORM wharf.held_alert_sender(p_token);
  IF p_id IS NULL OR p_delivered IS NULL OR p_base_delay IS NULL THEN
    RAISE EXCEPTION 'wharf: record_alert_attempt needs an alert, whether it was delivered, and a base delay'
      USING ERRCODE = '22004';
  END IF;
  IF p_error IS NOT NULL AND p_error !~ '^[A-Za-z_$][A-Za-z0-9_$.:-]{0,127}$' THEN
    RAISE EXCEPTION 'wharf: an alert error is a class name, not free text' USING ERRCODE = '22023';
  END IF;
  UPDATE wharf.alert a
     SET attempts = a.attempts + 1,
         last_attempt_at = clock_timestamp(),
         last_status = p_status,
         last_error = p_error,
         delivered_at = CASE WHEN p_delivered THEN clock_timestamp() END,
         state = CASE WHEN p_delivered THEN 'delivered' WHEN a.attempts + 1 >= 8 THEN 'failed' ELSE 'pending' END,
         next_attempt_at = CASE WHEN p_delivered OR a.attempts + 1 >= 8 THEN a.next_attempt_at
                                ELSE clock_timestamp() + d.delay / 2 + random() * (d.delay / 2) END
    FROM (SELECT least(interval '1 hour', p_base_delay * power(2, least(x.attempts, 20))) AS delay
            FROM wharf.alert x WHERE x.id = p_id) d
   WHERE a.id = p_id AND a.state = 'pending'
  RETURNING a.state INTO v_state;
  RETURN v_state;
END $$;

-- Retention: deletes at most p_batch alerts delivered or failed longer than
-- issue_retention ago and returns how many; the retention loop calls it
-- until it returns less than p_batch.
CREATE OR REPLACE FUNCTION wharf.purge_alerts(p_batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_deleted bigint;
BEGIN
  IF p_batch IS NULL OR p_batch < 1 THEN
    RAISE EXCEPTION 'wharf: purge_alerts needs a positive batch size' USING ERRCODE = '22023';
  END IF;
  DELETE FROM wharf.alert
   WHERE id IN (SELECT id FROM wharf.alert
                 WHERE created_at < now() - wharf.setting_interval('issue_retention') AND state <> 'pending'
                 ORDER BY created_at LIMIT p_batch);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  RETURN v_deleted;
END $$;

REVOKE ALL ON FUNCTION wharf.create_alert_rule(bigint, text, text, integer, integer, text, text, text, text),
  wharf.create_instance_alert_rule(text, text, integer, integer, text, text, text, text),
  wharf.list_alert_rules(bigint),
  wharf.list_instance_alert_rules(),
  wharf.delete_alert_rule(bigint, bigint),
  wharf.list_alerts(bigint, integer),
  wharf.take_alert_sender(text, interval, uuid),
  wharf.release_alert_sender(uuid),
  wharf.evaluate_alert_rules(uuid),
  wharf.due_alerts(uuid, integer),
  wharf.record_alert_attempt(uuid, bigint, boolean, integer, text, interval),
  wharf.purge_alerts(integer) FROM PUBLIC;

DO $$
DECLARE g record;
BEGIN
  FOR g IN SELECT * FROM wharf_release_grants LOOP
    IF g.name = 'next_in_scope' THEN EXECUTE format('GRANT EXECUTE ON FUNCTION wharf.next_in_scope(text,bigint) TO %s', g.grantee); END IF;
    IF g.name = 'queue_stats' THEN EXECUTE format('GRANT EXECUTE ON FUNCTION wharf.queue_stats() TO %s', g.grantee); END IF;
  END LOOP;
END $$;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

DROP TRIGGER event_attempt_count_issues ON wharf.event_attempt;

DROP FUNCTION wharf.add_alert_rule(bigint,text,text,integer,integer,text,text,text,text);

DROP FUNCTION wharf.alert_rule_summary(wharf.alert_rule);

DROP FUNCTION wharf.bulk_replay_filter(jsonb);

DROP FUNCTION wharf.change_issue_status(bigint,bigint,text,text);

DROP FUNCTION wharf.claimable_kinds();

DROP FUNCTION wharf.count_bulk_replay(bigint,jsonb,boolean);

DROP FUNCTION wharf.count_failures_into_issues();

DROP FUNCTION wharf.create_alert_rule(bigint,text,text,integer,integer,text,text,text,text);

DROP FUNCTION wharf.create_instance_alert_rule(text,text,integer,integer,text,text,text,text);

DROP FUNCTION wharf.dead_letter_scope_head(bigint,text,bigint,text);

DROP FUNCTION wharf.delete_alert_rule(bigint,bigint);

DROP FUNCTION wharf.delivery_history(bigint,integer);

DROP FUNCTION wharf.due_alerts(uuid,integer);

DROP FUNCTION wharf.evaluate_alert_rules(uuid);

DROP FUNCTION wharf.failure_history(bigint,integer);

DROP FUNCTION wharf.held_alert_sender(uuid);

DROP FUNCTION wharf.issue_alert_facts(wharf.issue);

DROP FUNCTION wharf.issue_events(bigint,bigint,integer,bigint);

DROP FUNCTION wharf.issue_gauges();

DROP FUNCTION wharf.issue_list(bigint,text,integer);

DROP FUNCTION wharf.issue_summary(wharf.issue);

DROP FUNCTION wharf.list_alert_rules(bigint);

DROP FUNCTION wharf.list_alerts(bigint,integer);

DROP FUNCTION wharf.list_installation_issues(text,integer);

DROP FUNCTION wharf.list_instance_alert_rules();

DROP FUNCTION wharf.list_issues(bigint,text,integer);

DROP FUNCTION wharf.list_scope_actions(bigint,integer);

DROP FUNCTION wharf.list_stuck_scopes(bigint,interval,integer);

DROP FUNCTION wharf.lock_scopes(text[],bigint[],boolean[]);

DROP FUNCTION wharf.pause_scope_connection(bigint,text,bigint,text);

DROP FUNCTION wharf.purge_alerts(integer);

DROP FUNCTION wharf.purge_issues(integer);

DROP FUNCTION wharf.purge_logs();

DROP FUNCTION wharf.purge_scope_actions(integer);

DROP FUNCTION wharf.record_alert_attempt(uuid,bigint,boolean,integer,text,interval);

DROP FUNCTION wharf.release_alert_sender(uuid);

DROP FUNCTION wharf.retry_scope_head(bigint,text,bigint,text);

DROP FUNCTION wharf.scope_action_result(bigint,text);

DROP FUNCTION wharf.scope_head_refusal(bigint,text,bigint,text);

DROP FUNCTION wharf.scope_workspace_active(bigint);

DROP FUNCTION wharf.search_events(bigint,jsonb,jsonb,text,text,integer,bigint,text,text,timestamp with time zone,timestamp with time zone);

DROP FUNCTION wharf.set_installation_issue_status(bigint,text,text);

DROP FUNCTION wharf.set_issue_status(bigint,bigint,text,text);

DROP FUNCTION wharf.show_issue(bigint,bigint);

DROP FUNCTION wharf.stuck_scope_list(bigint,interval,integer);

DROP FUNCTION wharf.take_alert_sender(text,interval,uuid);

DROP FUNCTION wharf.next_in_scope(text,bigint);

DROP FUNCTION wharf.queue_stats();

CREATE OR REPLACE FUNCTION wharf.admission_rule_broken(p_provider text, p_source text, p_delivery_key text, p_event_type text, p_route jsonb, p_payload jsonb, p_body_sha256 text)
 RETURNS integer
 LANGUAGE sql
 IMMUTABLE
AS $function$
  SELECT CASE
    WHEN p_provider IS NULL OR p_source IS NULL OR p_source = '' OR p_delivery_key IS NULL
         OR p_delivery_key = '' OR p_event_type IS NULL OR p_event_type = '' OR p_payload IS NULL THEN 1
    WHEN p_provider NOT IN ('github', 'gitlab', 'slack', 'outline', 'forgejo', 'generic') THEN 2
    WHEN jsonb_typeof(coalesce(p_route, '{}')) <> 'object' THEN 3
    WHEN p_body_sha256 !~ '^[0-9a-f]{64}$' THEN 4
    WHEN length(p_delivery_key) > 255 OR length(p_event_type) > 255 THEN 5
  END
$function$;
GRANT EXECUTE ON FUNCTION wharf.admission_rule_broken(text,text,text,text,jsonb,jsonb,text) TO PUBLIC;

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

  -- The scope of every row to store, made when missing and locked, in
  -- (workspace, scope) order: the third class of locks, the order every
  -- writer of several scopes keeps. Locked (FOR UPDATE) before the rows are
  -- inserted, so that within a scope ids are assigned and committed in the
  -- same order and a claim never passes over a row still being inserted. A
  -- conflict locks the row without writing it (the WHERE is false).
  INSERT INTO wharf.scope AS s (scope_key, workspace_id, active)
  SELECT DISTINCT ON (r.workspace_id, r.scope_key) r.scope_key, r.workspace_id, r.scope_active
    FROM unnest(v_rows) r
   ORDER BY r.workspace_id NULLS FIRST, r.scope_key
  ON CONFLICT (scope_key) DO UPDATE SET active = s.active WHERE false;

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
    RETURNING id, scope_key, next_attempt_at,
              coalesce(workspace_id::text, '') || ' ' || provider || ' ' || delivery_key AS dedupe_key
  ), heads AS (
    UPDATE wharf.scope s
       SET head_id = h.id, head_due_at = h.due_at, ready_at = greatest(h.due_at, clock_timestamp())
      FROM (SELECT DISTINCT ON (x.scope_key) x.scope_key, x.id, x.next_attempt_at AS due_at
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

CREATE OR REPLACE FUNCTION wharf.bulk_replay_candidates(p_workspace_id bigint, p_filter jsonb, p_force boolean, p_dead_by timestamp with time zone, p_after_id bigint)
 RETURNS SETOF wharf.provider_event
 LANGUAGE sql
 STABLE
AS $function$
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
$function$;
GRANT EXECUTE ON FUNCTION wharf.bulk_replay_candidates(bigint,jsonb,boolean,timestamp with time zone,bigint) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.check_provider(p_provider text)
 RETURNS void
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
BEGIN
  IF p_provider IS NULL OR p_provider NOT IN ('github', 'gitlab', 'slack', 'outline', 'forgejo', 'generic') THEN
    RAISE EXCEPTION 'wharf: unknown provider %', coalesce(quote_literal(p_provider), 'NULL')
      USING ERRCODE = '22023';
  END IF;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.check_provider(text) TO PUBLIC;

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
END $function$;
REVOKE ALL ON FUNCTION wharf.claim(text,integer,text[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.complete(p_id bigint, p_epoch bigint, p_outcome text DEFAULT 'handled'::text)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
END $function$;
REVOKE ALL ON FUNCTION wharf.complete_many(bigint[],bigint[],text[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.continue_bulk_replay(p_workspace_id bigint, p_id bigint, p_batch integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_replay   wharf.bulk_replay;
  v_ids      bigint[];
  v_id       bigint;
  v_replayed integer := 0;
BEGIN
  IF p_batch IS NULL OR p_batch < 1 OR p_batch > 1000 THEN
    RAISE EXCEPTION 'wharf.continue_bulk_replay: batch must be between 1 and 1000' USING ERRCODE = '22023';
  END IF;
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  SELECT * INTO v_replay FROM wharf.bulk_replay
   WHERE id = p_id AND workspace_id = p_workspace_id
     FOR UPDATE SKIP LOCKED;
  IF NOT FOUND THEN
    IF EXISTS (SELECT FROM wharf.bulk_replay WHERE id = p_id AND workspace_id = p_workspace_id) THEN
      RETURN NULL;
    END IF;
    RAISE EXCEPTION 'wharf: workspace % has no bulk replay %', p_workspace_id, p_id USING ERRCODE = 'P0002';
  END IF;
  IF v_replay.finished_at IS NOT NULL THEN
    RETURN wharf.bulk_replay_summary(v_replay);
  END IF;

  -- Lock the events in id order, then their scopes in key order, then
  -- requeue: the order erase_person keeps. Left to the scope-head trigger,
  -- the scopes would be locked in event order, and two batches (or a batch
  -- and an erasure) whose events share scopes in another order would wait
  -- for each other in a cycle.
  SELECT array_agg(c.id ORDER BY c.id) INTO v_ids
    FROM (SELECT e.id
            FROM wharf.bulk_replay_candidates(p_workspace_id, v_replay.filter, v_replay.force,
                                              v_replay.started_at, v_replay.after_id) e
           ORDER BY e.id
           LIMIT p_batch) c;
  PERFORM FROM wharf.provider_event WHERE id = ANY (v_ids) ORDER BY id FOR UPDATE;
  PERFORM FROM wharf.scope s
   WHERE s.scope_key IN (SELECT e.scope_key FROM wharf.provider_event e WHERE e.id = ANY (v_ids))
   ORDER BY s.workspace_id NULLS FIRST, s.scope_key
     FOR UPDATE;

  FOREACH v_id IN ARRAY coalesce(v_ids, '{}') LOOP
    IF wharf.requeue_dead(p_workspace_id, v_id, v_replay.requested_by, v_replay.force) THEN
      v_replayed := v_replayed + 1;
    END IF;
  END LOOP;

  UPDATE wharf.bulk_replay
     SET replayed    = replayed + v_replayed,
         after_id    = coalesce(v_ids[cardinality(v_ids)], after_id),
         updated_at  = clock_timestamp(),
         finished_at = CASE WHEN coalesce(cardinality(v_ids), 0) < p_batch THEN clock_timestamp() END,
         -- An event that died just before the start but committed after the
         -- count is replayed too: the total is never below what was done.
         matched     = greatest(matched, replayed + v_replayed)
   WHERE id = p_id
  RETURNING * INTO v_replay;
  RETURN wharf.bulk_replay_summary(v_replay);
END $function$;
REVOKE ALL ON FUNCTION wharf.continue_bulk_replay(bigint,bigint,integer) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.erase_person(p_source text, p_identities jsonb)
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_ids     text[];
  v_logins  text[];
  v_events  bigint[];
  v_deleted bigint;
BEGIN
  IF p_source IS NULL OR p_identities IS NULL THEN
    RAISE EXCEPTION 'wharf.erase_person: source and identities are required' USING ERRCODE = '22004';
  END IF;
  IF jsonb_typeof(p_identities) <> 'object'
     OR jsonb_typeof(coalesce(p_identities->'ids', '[]')) <> 'array'
     OR jsonb_typeof(coalesce(p_identities->'logins', '[]')) <> 'array' THEN
    RAISE EXCEPTION 'wharf.erase_person: identities must be {"ids": [...], "logins": [...]}'
      USING ERRCODE = '22023';
  END IF;
  SELECT coalesce(array_agg(v #>> '{}'), '{}') INTO v_ids
    FROM jsonb_array_elements(coalesce(p_identities->'ids', '[]')) v
   WHERE jsonb_typeof(v) IN ('string', 'number');
  SELECT coalesce(array_agg(v #>> '{}'), '{}') INTO v_logins
    FROM jsonb_array_elements(coalesce(p_identities->'logins', '[]')) v
   WHERE jsonb_typeof(v) IN ('string', 'number');
  IF cardinality(v_ids) + cardinality(v_logins) = 0 THEN
    RAISE EXCEPTION 'wharf.erase_person: name at least one id or login' USING ERRCODE = '22023';
  END IF;

  -- Lock the events, then their scopes, then delete: the same order as every
  -- state change (event row, then its scope through the trigger). Deleting at
  -- once would lock the scopes in scan order at the end of the DELETE, while
  -- a redelivery that holds one of them waits for the deleted row (ON
  -- CONFLICT): a deadlock. Locked but not yet deleted, a row is simply a
  -- duplicate to that redelivery.
  SELECT coalesce(array_agg(id), '{}') INTO v_events
    FROM (SELECT e.id FROM wharf.provider_event e
           WHERE e.source = p_source
             AND wharf.payload_names_person(e.provider, e.payload, v_ids, v_logins)
           ORDER BY e.id
             FOR UPDATE) matched;
  PERFORM FROM wharf.scope s
   WHERE s.scope_key IN (SELECT e.scope_key FROM wharf.provider_event e WHERE e.id = ANY (v_events))
   ORDER BY s.workspace_id NULLS FIRST, s.scope_key
     FOR UPDATE;

  DELETE FROM wharf.provider_event WHERE id = ANY (v_events);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  RETURN v_deleted;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.erase_person(text,jsonb) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.fail(p_id bigint, p_epoch bigint, p_kind text, p_error_class text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
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

  SELECT attempt, failures, leased_by, leased_at INTO v_row
    FROM wharf.provider_event
   WHERE id = p_id AND lease_epoch = p_epoch AND state COLLATE "C" = 'LEASED'  -- by primary key (top of sql/30)
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
  INSERT INTO wharf.event_attempt (event_id, lease_epoch, attempt, worker, started_at, ended_at, ended, error_class)
  VALUES (p_id, p_epoch, v_row.attempt, v_row.leased_by, v_row.leased_at, v_now, p_kind, p_error_class);
  RETURN CASE WHEN v_dead THEN 'DEAD' ELSE 'QUEUED' END;
END $function$;
REVOKE ALL ON FUNCTION wharf.fail(bigint,bigint,text,text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.free_scopes(p_ids bigint[], p_scope_keys text[])
 RETURNS void
 LANGUAGE plpgsql
 SET enable_seqscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
AS $function$
BEGIN
  DELETE FROM wharf.scope s
   USING unnest(p_ids, p_scope_keys) AS l(id, scope_key)
   WHERE s.scope_key = l.scope_key AND s.leased_id = l.id AND s.head_id IS NULL;
  UPDATE wharf.scope s
     SET leased_id = NULL, ready_at = greatest(s.head_due_at, clock_timestamp())
    FROM unnest(p_ids, p_scope_keys) AS l(id, scope_key)
   WHERE s.scope_key = l.scope_key AND s.leased_id = l.id;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.free_scopes(bigint[],text[]) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.keep_scope_heads()
 RETURNS trigger
 LANGUAGE plpgsql
 SET enable_seqscan TO 'off'
AS $function$
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
END $function$;
GRANT EXECUTE ON FUNCTION wharf.keep_scope_heads() TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.lock_scope(p_scope_key text, p_workspace_id bigint)
 RETURNS void
 LANGUAGE plpgsql
 SET enable_seqscan TO 'off'
AS $function$
BEGIN
  PERFORM FROM wharf.scope WHERE scope_key = p_scope_key FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO wharf.scope (scope_key, workspace_id, active)
    VALUES (p_scope_key, p_workspace_id,
            coalesce((SELECT w.state = 'ACTIVE' FROM wharf.workspace w WHERE w.id = p_workspace_id), true))
    ON CONFLICT (scope_key) DO NOTHING;
    -- A concurrent admitter may have created it first: wait for its row.
    PERFORM FROM wharf.scope WHERE scope_key = p_scope_key FOR UPDATE;
  END IF;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.lock_scope(text,bigint) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.next_due_at()
 RETURNS timestamp with time zone
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
  SELECT min(ready_at) FROM wharf.scope
   WHERE head_id IS NOT NULL AND leased_id IS NULL AND active AND ready_at > clock_timestamp()
$function$;
REVOKE ALL ON FUNCTION wharf.next_due_at() FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.next_in_scope(p_scope_key text, p_after_id bigint)
 RETURNS TABLE(id bigint, due_at timestamp with time zone)
 LANGUAGE sql
 STABLE
AS $function$
  SELECT e.id, e.next_attempt_at FROM wharf.provider_event e
   WHERE e.scope_key = p_scope_key AND e.id > p_after_id AND e.state = 'QUEUED'
   ORDER BY e.id
   LIMIT 1
$function$;
GRANT EXECUTE ON FUNCTION wharf.next_in_scope(text,bigint) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.purge(OUT done_deleted bigint, OUT dead_deleted bigint)
 RETURNS record
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
END $function$;
REVOKE ALL ON FUNCTION wharf.purge() FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.queue_stats(OUT depth_by_state jsonb, OUT oldest_due_age double precision)
 RETURNS record
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
  SELECT (SELECT coalesce(jsonb_object_agg(state, n), '{}')
            FROM (SELECT state, count(*) AS n FROM wharf.provider_event GROUP BY state) s),
         coalesce((SELECT extract(epoch FROM clock_timestamp() - min(head_due_at))::float8
                     FROM wharf.scope
                    WHERE head_id IS NOT NULL AND leased_id IS NULL AND active
                      AND head_due_at <= clock_timestamp()), 0)
$function$;
REVOKE ALL ON FUNCTION wharf.queue_stats() FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.release(p_id bigint, p_epoch bigint)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_row record;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL THEN
    RAISE EXCEPTION 'wharf.release: id and epoch are required' USING ERRCODE = '22004';
  END IF;
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  UPDATE wharf.provider_event
     SET state = 'QUEUED', attempt = greatest(attempt - 1, 0), next_attempt_at = now(), leased_until = NULL
   WHERE id = p_id AND lease_epoch = p_epoch AND state COLLATE "C" = 'LEASED'  -- by primary key (top of sql/30)
  RETURNING attempt + 1 AS attempt, leased_by, leased_at INTO v_row;  -- the lease's own attempt
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  INSERT INTO wharf.event_attempt (event_id, lease_epoch, attempt, worker, started_at, ended_at, ended)
  VALUES (p_id, p_epoch, v_row.attempt, v_row.leased_by, v_row.leased_at, clock_timestamp(), 'released');
  PERFORM wharf.notify_idle_claimers();
  RETURN true;
END $function$;
REVOKE ALL ON FUNCTION wharf.release(bigint,bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.requeue_dead(p_workspace_id bigint, p_id bigint, p_account text, p_force boolean)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
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
END $function$;
GRANT EXECUTE ON FUNCTION wharf.requeue_dead(bigint,bigint,text,boolean) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.safe_headers(p_headers jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
DECLARE
  c_credentials CONSTANT text[] := ARRAY['authorization', 'proxy-authorization', 'cookie', 'set-cookie',
                                         'x-gitlab-token'];
BEGIN
  -- Names already lower-case and none a signature (what the edge sends: Web
  -- Headers lower-case them, and it keeps no signature): drop the credentials
  -- by name in one expression. The query below costs three times as much,
  -- on every admission.
  IF jsonb_typeof(p_headers) = 'object'
     AND NOT jsonb_path_exists(p_headers, '$.keyvalue() ? (@.key like_regex "[^a-z0-9_-]|signature")') THEN
    RETURN p_headers - c_credentials;
  END IF;
  RETURN (
    SELECT coalesce(jsonb_object_agg(lower(h.key), h.value), '{}')
      FROM jsonb_each(CASE WHEN jsonb_typeof(p_headers) = 'object' THEN p_headers ELSE '{}' END) h
     WHERE lower(h.key) <> ALL (c_credentials)
       AND lower(h.key) NOT LIKE '%signature%');
END $function$;
GRANT EXECUTE ON FUNCTION wharf.safe_headers(jsonb) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.set_connection_secret(p_connection_id bigint, p_secret text, p_keep_previous boolean DEFAULT true)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
         CASE WHEN v_provider <> 'gitlab' THEN NULL
              WHEN p_secret ~ '^sha256:[0-9a-f]{64}$' THEN decode(substr(p_secret, 8), 'hex')
              ELSE sha256(convert_to(p_secret, 'UTF8')) END,
         CASE WHEN v_provider <> 'gitlab' THEN p_secret END
  ON CONFLICT (connection_id) DO UPDATE
     SET previous_token_sha256 = CASE WHEN p_keep_previous THEN connection_secret.token_sha256 END,
         previous_signing_key  = CASE WHEN p_keep_previous AND connection_secret.signing_key LIKE 'aes256gcm:%'
                                      THEN connection_secret.signing_key END,
         previous_valid_until  = CASE WHEN p_keep_previous THEN now() + wharf.setting_interval('secret_overlap') END,
         token_sha256 = EXCLUDED.token_sha256, signing_key = EXCLUDED.signing_key, updated_at = now();
  UPDATE wharf.connection SET generation = generation + 1, updated_at = now() WHERE id = p_connection_id;
END $function$;
REVOKE ALL ON FUNCTION wharf.set_connection_secret(bigint,text,boolean) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.set_connection_state(p_id bigint, p_state text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
  IF p_id IS NULL OR p_state IS NULL THEN
    RAISE EXCEPTION 'wharf.set_connection_state: id and state are required' USING ERRCODE = '22004';
  END IF;
  IF p_state NOT IN ('ACTIVE', 'PAUSED', 'SUSPENDED', 'REVOKED') THEN
    RAISE EXCEPTION 'wharf: unknown connection state %', quote_literal(p_state) USING ERRCODE = '22023';
  END IF;
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  PERFORM wharf.lock_lifecycle('connection', p_id::text);
  UPDATE wharf.connection
     SET state = p_state, generation = generation + 1, updated_at = now()
   WHERE id = p_id AND state IS DISTINCT FROM p_state;
  IF NOT FOUND AND NOT EXISTS (SELECT FROM wharf.connection WHERE id = p_id) THEN
    RAISE EXCEPTION 'wharf: unknown connection %', p_id USING ERRCODE = 'P0002';
  END IF;
  IF p_state = 'ACTIVE' THEN
    PERFORM wharf.notify_idle_claimers();
  END IF;
END $function$;
REVOKE ALL ON FUNCTION wharf.set_connection_state(bigint,text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.set_workspace_state(p_id bigint, p_state text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
  IF p_id IS NULL OR p_state IS NULL THEN
    RAISE EXCEPTION 'wharf.set_workspace_state: id and state are required' USING ERRCODE = '22004';
  END IF;
  IF p_state NOT IN ('ACTIVE', 'PAUSED', 'SUSPENDED', 'DELETING') THEN
    RAISE EXCEPTION 'wharf: unknown workspace state %', quote_literal(p_state) USING ERRCODE = '22023';
  END IF;
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  PERFORM wharf.lock_lifecycle('workspace', p_id::text);
  UPDATE wharf.workspace SET state = p_state WHERE id = p_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: unknown workspace %', p_id USING ERRCODE = 'P0002';
  END IF;
  IF p_state = 'ACTIVE' THEN
    PERFORM wharf.notify_idle_claimers();
  END IF;
END $function$;
REVOKE ALL ON FUNCTION wharf.set_workspace_state(bigint,text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.start_bulk_replay(p_workspace_id bigint, p_filter jsonb, p_account text, p_force boolean DEFAULT false)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_key     text;
  v_started timestamptz;
  v_replay  wharf.bulk_replay;
BEGIN
  IF p_filter IS NULL OR p_account IS NULL OR p_account = '' OR p_force IS NULL THEN
    RAISE EXCEPTION 'wharf.start_bulk_replay: filter, account and force are required' USING ERRCODE = '22004';
  END IF;
  PERFORM wharf.require_workspace(p_workspace_id);
  IF jsonb_typeof(p_filter) <> 'object' THEN
    RAISE EXCEPTION 'wharf.start_bulk_replay: the filter must be a JSON object' USING ERRCODE = '22023';
  END IF;
  FOR v_key IN SELECT jsonb_object_keys(p_filter) LOOP
    IF v_key NOT IN ('provider', 'event_type', 'subject', 'error_class', 'dead_after', 'dead_before') THEN
      RAISE EXCEPTION 'wharf.start_bulk_replay: unknown filter %', quote_literal(v_key) USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(p_filter -> v_key) <> 'string' THEN
      RAISE EXCEPTION 'wharf.start_bulk_replay: filter % must be text', v_key USING ERRCODE = '22023';
    END IF;
  END LOOP;
  -- Times are kept in UTC, so that every batch reads them alike whatever
  -- its session's time zone (a time written without one is read in the
  -- caller's).
  FOREACH v_key IN ARRAY ARRAY['dead_after', 'dead_before'] LOOP
    IF p_filter ? v_key THEN
      p_filter := jsonb_set(p_filter, ARRAY[v_key], to_jsonb(
        to_char((p_filter ->> v_key)::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')));
    END IF;
  END LOOP;

  -- The clock, not the transaction's start: an event that died before this
  -- call, in the same transaction too, is taken.
  v_started := clock_timestamp();
  INSERT INTO wharf.bulk_replay (workspace_id, filter, force, requested_by, matched, started_at, updated_at)
  VALUES (p_workspace_id, p_filter, p_force, p_account,
          (SELECT count(*) FROM wharf.bulk_replay_candidates(p_workspace_id, p_filter, p_force, v_started, 0)),
          v_started, v_started)
  RETURNING * INTO v_replay;
  RETURN wharf.bulk_replay_summary(v_replay);
END $function$;
REVOKE ALL ON FUNCTION wharf.start_bulk_replay(bigint,jsonb,text,boolean) FROM PUBLIC;

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
  SELECT id INTO v_id FROM wharf.provider_event
   WHERE workspace_id IS NOT DISTINCT FROM p_workspace_id AND provider = p_item.provider
     AND delivery_key = p_item.delivery_key;
  RETURN jsonb_build_object('workspace_id', p_workspace_id, 'event_id', v_id, 'outcome', 'duplicate');
END $function$;
GRANT EXECUTE ON FUNCTION wharf.store_event(wharf.admission_item,bigint,bigint,text) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.sync_scope_activity()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
  UPDATE wharf.scope SET active = (NEW.state = 'ACTIVE')
   WHERE workspace_id = NEW.id AND active IS DISTINCT FROM (NEW.state = 'ACTIVE');
  RETURN NULL;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.sync_scope_activity() TO PUBLIC;
