-- Scope heads: wharf.scope holds, per ordering scope, its oldest QUEUED event
-- (head_id, when it is due, when the scope became claimable) and its LEASED
-- event (leased_id), so that claim reads one small index instead of scanning
-- the backlog, and so that the rule "one LEASED row per scope" has one place
-- to live: a scope row holds one leased_id. A scope whose last lease ends
-- with nothing queued is deleted, and admission makes it again: the table
-- holds the scopes in use, not every scope ever seen.
--
-- The event row keeps the record (state, attempt, epoch, outcome, times) and
-- no index of wharf.provider_event names a column that claim, renew or
-- complete writes, so those updates are heap-only (HOT): the moving parts of
-- the queue change here, in a row a few dozen bytes wide. The lease path
-- (claim, complete, complete_many in sql/30) and admission (sql/80) move
-- their scope rows themselves, in set-based statements; every other write of an event row (fail, release,
-- reap, replay, erasure, a DBA's UPDATE) is followed by the row trigger
-- below, which keeps the scope rows exact and refuses a second LEASED row in
-- a scope, whoever writes it. The lease path tells the trigger that it keeps
-- the scopes itself with the transaction-local setting wharf.keeping_scopes,
-- set only for its own statement: only the table's owner can write event rows
-- directly, and an owner can drop the trigger as well.

-- wharf.scope is small but hot: every event updates its scope row twice, and
-- those updates cannot be HOT (they change ix_scope_claim's columns), so
-- between two vacuums the heap fills with dead versions (its autovacuum
-- settings are in the migration that made it so, 0035). PL/pgSQL caches a
-- generic plan for each statement after five calls; for the lookups by
-- scope_key below, planned while the table was a few pages, that plan is a
-- sequential scan, which then reads every dead version on every call. The
-- functions that look up scope rows by key therefore run with enable_seqscan
-- off: their plans stay on the primary key whatever size the table had when
-- they were planned.

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
-- ACTIVE, or the scope is an installation scope (no workspace). plpgsql
-- for the plan it keeps per session (see wharf.provider_known): each
-- admission calls it twice.
CREATE OR REPLACE FUNCTION wharf.scope_workspace_active(p_workspace_id bigint) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN coalesce((SELECT w.state = 'ACTIVE' FROM wharf.workspace w WHERE w.id = p_workspace_id), true);
END $$;

-- claimable_kinds() of the heads that became ready at p_floor or later: the
-- index entries before p_floor are passed over in the index, without a
-- visit of the table each (wharf.claim's floor says why).
CREATE OR REPLACE FUNCTION wharf.claimable_kinds_since(p_floor timestamptz) RETURNS SETOF text
LANGUAGE sql STABLE AS $$
  WITH RECURSIVE k(kind) AS (
    (SELECT s.head_kind FROM wharf.scope s
      WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active AND s.ready_at >= p_floor
      ORDER BY s.head_kind LIMIT 1)
    UNION ALL
    SELECT (SELECT s.head_kind FROM wharf.scope s
             WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active AND s.head_kind > k.kind AND s.ready_at >= p_floor
             ORDER BY s.head_kind LIMIT 1)
      FROM k WHERE k.kind IS NOT NULL
  )
  SELECT kind FROM k WHERE kind IS NOT NULL
$$;

-- The kinds (provider:event_type) of the heads of claimable scopes, in
-- order, read by a skip scan of ix_scope_claim: one index descent per kind,
-- whatever number of heads each has. What claim, next_due_at and
-- queue_stats walk instead of every claimable head.
CREATE OR REPLACE FUNCTION wharf.claimable_kinds() RETURNS SETOF text
LANGUAGE sql STABLE AS $$
  SELECT kind FROM wharf.claimable_kinds_since('-infinity') k(kind)
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

-- Admission keeps the heads of the rows it inserts itself (sql/80).
DROP TRIGGER IF EXISTS provider_event_keep_scope_insert ON wharf.provider_event;
CREATE TRIGGER provider_event_keep_scope_insert
  AFTER INSERT ON wharf.provider_event
  FOR EACH ROW WHEN (NEW.state IN ('QUEUED', 'LEASED')
                     AND current_setting('wharf.keeping_scopes', true) IS DISTINCT FROM 'on')
  EXECUTE FUNCTION wharf.keep_scope_heads();

-- Fires for a change of state, of scope, or of a queued row's due time,
-- except inside the lease path's own statements (top of this file).
DROP TRIGGER IF EXISTS provider_event_keep_scope_update ON wharf.provider_event;
CREATE TRIGGER provider_event_keep_scope_update
  AFTER UPDATE ON wharf.provider_event
  FOR EACH ROW WHEN ((OLD.state IS DISTINCT FROM NEW.state
                      OR OLD.scope_key IS DISTINCT FROM NEW.scope_key
                      OR (NEW.state = 'QUEUED' AND OLD.next_attempt_at IS DISTINCT FROM NEW.next_attempt_at))
                     AND current_setting('wharf.keeping_scopes', true) IS DISTINCT FROM 'on')
  EXECUTE FUNCTION wharf.keep_scope_heads();

-- Only QUEUED and LEASED rows hold a scope: purge, which deletes DONE and DEAD
-- rows by the million, runs no trigger.
DROP TRIGGER IF EXISTS provider_event_keep_scope_delete ON wharf.provider_event;
CREATE TRIGGER provider_event_keep_scope_delete
  AFTER DELETE ON wharf.provider_event
  FOR EACH ROW WHEN (OLD.state IN ('QUEUED', 'LEASED'))
  EXECUTE FUNCTION wharf.keep_scope_heads();

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
  -- Claimable again with the ready_at they had, below any claim's floor.
  IF FOUND AND NEW.state = 'ACTIVE' THEN
    PERFORM wharf.reset_claim_lines();
  END IF;
  RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS workspace_sync_scope_activity ON wharf.workspace;
CREATE TRIGGER workspace_sync_scope_activity
  AFTER UPDATE OF state ON wharf.workspace
  FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
  EXECUTE FUNCTION wharf.sync_scope_activity();
