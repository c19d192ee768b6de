-- Scope heads: wharf.scope holds, per ordering scope, its oldest QUEUED event
-- and its LEASED event, so that claim reads one small index instead of
-- scanning the backlog. Triggers keep it exact on every state change, whoever
-- makes it (a function, an erasure, a cascade or a DBA's UPDATE).

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

-- Trigger on provider_event: moves the scope's head and lease marks to follow
-- one event's state change. A row entering the queue heads its scope when it
-- is older than the current head; a head leaving it hands over to the next.
--
-- ready_at is when the scope last became claimable (never before its head is
-- due): claims serve scopes longest ready first, so a scope just served goes
-- to the back of the line. It also keeps ix_scope_claim healthy: its new
-- entries land at its end, while the dead entries of served heads stay at
-- its front, on pages no insert touches, where an index scan can mark them
-- dead. Keyed by the head's due time instead, a backlog's next heads would
-- land among those dead entries, the changing pages would keep scans from
-- marking them, and each claim would re-read every one.
CREATE OR REPLACE FUNCTION wharf.sync_scope_head() RETURNS trigger
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
  v_old_state text := CASE WHEN TG_OP = 'INSERT' THEN NULL ELSE OLD.state END;
  v_new_state text := CASE WHEN TG_OP = 'DELETE' THEN NULL ELSE NEW.state END;
  v_row wharf.provider_event := CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
  v_next_id  bigint;
  v_next_due timestamptz;
BEGIN
  IF v_old_state = 'QUEUED' AND v_new_state IS DISTINCT FROM 'QUEUED' THEN
    -- The row left the queue (claimed, or deleted): the next queued row heads.
    SELECT e.id, e.next_attempt_at INTO v_next_id, v_next_due
      FROM wharf.provider_event e
     WHERE e.scope_key = v_row.scope_key AND e.state = 'QUEUED'
     ORDER BY e.id
     LIMIT 1;
    UPDATE wharf.scope
       SET head_id     = CASE WHEN head_id = v_row.id THEN v_next_id ELSE head_id END,
           head_due_at = CASE WHEN head_id = v_row.id THEN v_next_due ELSE head_due_at END,
           ready_at    = CASE WHEN head_id = v_row.id THEN greatest(v_next_due, clock_timestamp()) ELSE ready_at END,
           leased_id   = CASE WHEN v_new_state = 'LEASED' THEN v_row.id ELSE leased_id END
     WHERE scope_key = v_row.scope_key;
    RETURN NULL;
  END IF;

  IF v_old_state = 'LEASED' AND v_new_state IS DISTINCT FROM 'LEASED' THEN
    UPDATE wharf.scope SET leased_id = NULL, ready_at = greatest(head_due_at, clock_timestamp())
     WHERE scope_key = v_row.scope_key AND leased_id = v_row.id;
  END IF;

  IF v_new_state = 'QUEUED' THEN
    -- Entering the queue (admitted, retried, released, reaped, replayed), or
    -- a queued row rescheduled: it heads its scope when it is the oldest.
    INSERT INTO wharf.scope AS s (scope_key, workspace_id, head_id, head_due_at, ready_at, active)
    VALUES (v_row.scope_key, v_row.workspace_id, v_row.id, v_row.next_attempt_at,
            greatest(v_row.next_attempt_at, clock_timestamp()),
            coalesce((SELECT w.state = 'ACTIVE' FROM wharf.workspace w WHERE w.id = v_row.workspace_id), true))
    ON CONFLICT (scope_key) DO UPDATE
       SET head_id = excluded.head_id, head_due_at = excluded.head_due_at, ready_at = excluded.ready_at
     WHERE s.head_id IS NULL OR excluded.head_id <= s.head_id;
  ELSIF v_new_state = 'LEASED' AND v_old_state IS DISTINCT FROM 'LEASED' THEN
    UPDATE wharf.scope SET leased_id = v_row.id WHERE scope_key = v_row.scope_key;
  END IF;
  RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS provider_event_sync_scope_insert ON wharf.provider_event;
CREATE TRIGGER provider_event_sync_scope_insert
  AFTER INSERT ON wharf.provider_event
  FOR EACH ROW WHEN (NEW.state IN ('QUEUED', 'LEASED'))
  EXECUTE FUNCTION wharf.sync_scope_head();

DROP TRIGGER IF EXISTS provider_event_sync_scope_update ON wharf.provider_event;
CREATE TRIGGER provider_event_sync_scope_update
  AFTER UPDATE OF state, next_attempt_at ON wharf.provider_event
  FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state
                     OR (NEW.state = 'QUEUED' AND OLD.next_attempt_at IS DISTINCT FROM NEW.next_attempt_at))
  EXECUTE FUNCTION wharf.sync_scope_head();

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
