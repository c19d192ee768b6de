-- Up Migration

-- Release 0.2.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   changed  function wharf.sync_scope_head()

-- ======== sql/20-scope-heads.sql ========

-- Trigger on provider_event: moves the heads and lease marks of the scopes
-- whose rows a statement moved. A row entering the queue heads its scope
-- when it is older than the current head; a head leaving it hands over to
-- the next; a lease taken or ended marks or frees its scope. Updates run it
-- once per statement: a claim or a batch of completions moves many scopes at
-- once, and the three statements below move them together (per row, the
-- PL/pgSQL call and the statements it ran cost a claim more than its own
-- update). Inserts and deletes run it per row, and only for QUEUED and
-- LEASED rows: an admission inserts one row, and purge, which deletes DONE
-- and DEAD rows by the million, must not copy them into a transition table.
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
END $$;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

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
  ELSIF TG_OP = 'DELETE' THEN
    v_moves := ARRAY[(OLD.id, OLD.scope_key, OLD.workspace_id, OLD.next_attempt_at,
                      OLD.state = 'QUEUED', false, OLD.state = 'LEASED', false)::wharf.scope_move];
  ELSE
    SELECT array_agg((n.id, n.scope_key, n.workspace_id, n.next_attempt_at,
                      o.state = 'QUEUED' AND n.state <> 'QUEUED',
                      n.state = 'LEASED' AND o.state <> 'LEASED',
                      o.state = 'LEASED' AND n.state <> 'LEASED',
                      n.state = 'QUEUED')::wharf.scope_move)
      INTO v_moves
      FROM old_rows o
      JOIN new_rows n ON n.id = o.id
     WHERE o.state <> n.state
        OR (n.state = 'QUEUED' AND o.next_attempt_at IS DISTINCT FROM n.next_attempt_at);
  END IF;
  -- Each statement below runs only when some row needs it: a claim, a
  -- completion or an admission pays for one.
  SELECT bool_or(m.ended_lease), bool_or(m.left_queue OR m.took_lease), bool_or(m.queued)
    INTO v_ended, v_moved, v_queued
    FROM unnest(v_moves) m;

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
