-- Scope heads: wharf.scope holds, per ordering scope, its oldest QUEUED event
-- and its LEASED event, so that claim reads one small index instead of
-- scanning the backlog. Triggers keep it exact on every state change, whoever
-- makes it (a function, an erasure, a cascade or a DBA's UPDATE). A scope
-- whose last lease ends with nothing queued is deleted, and admission makes
-- it again: the table holds the scopes in use, not every scope ever seen.

-- wharf.scope is small but hot: every event updates its scope row twice, and
-- those updates cannot be HOT (they change indexed columns), so between two
-- vacuums the heap fills with dead versions. PL/pgSQL caches a generic plan
-- for each statement after five calls; for the lookups by scope_key below,
-- planned while the table was a few pages, that plan is a sequential scan,
-- which then reads every dead version on every call. The functions that look
-- up scope rows by key therefore run with enable_seqscan off: their plans
-- stay on the primary key whatever size the table had when they were planned.

-- Locks the scope row of `p_scope_key`, creating it when missing. admit calls
-- it before inserting, so that within a scope ids are assigned and committed
-- in the same order and a claim never passes over a row still being inserted.
CREATE OR REPLACE FUNCTION wharf.lock_scope(p_scope_key text, p_workspace_id bigint) RETURNS void
LANGUAGE plpgsql SET enable_seqscan = off AS $$
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
END $$;

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

DROP TRIGGER IF EXISTS provider_event_sync_scope_insert_leased ON wharf.provider_event;
CREATE TRIGGER provider_event_sync_scope_insert_leased
  AFTER INSERT ON wharf.provider_event
  FOR EACH ROW WHEN (NEW.state = 'LEASED')
  EXECUTE FUNCTION wharf.sync_scope_head();

DROP TRIGGER IF EXISTS provider_event_sync_scope_update ON wharf.provider_event;
CREATE TRIGGER provider_event_sync_scope_update
  AFTER UPDATE ON wharf.provider_event
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION wharf.sync_scope_head();

DROP TRIGGER IF EXISTS provider_event_sync_scope_delete ON wharf.provider_event;
CREATE TRIGGER provider_event_sync_scope_delete
  AFTER DELETE ON wharf.provider_event
  FOR EACH ROW WHEN (OLD.state IN ('QUEUED', 'LEASED'))
  EXECUTE FUNCTION wharf.sync_scope_head();

-- Trigger on workspace: a workspace that is not ACTIVE has its scopes left out
-- of claims (installation scopes, with no workspace, are always active).
CREATE OR REPLACE FUNCTION wharf.sync_scope_activity() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE wharf.scope SET active = (NEW.state = 'ACTIVE')
   WHERE workspace_id = NEW.id AND active IS DISTINCT FROM (NEW.state = 'ACTIVE');
  RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS workspace_sync_scope_activity ON wharf.workspace;
CREATE TRIGGER workspace_sync_scope_activity
  AFTER UPDATE OF state ON wharf.workspace
  FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
  EXECUTE FUNCTION wharf.sync_scope_activity();
