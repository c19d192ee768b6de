-- Stuck scopes: an ordering scope whose head has been failing, or due and
-- waiting for a claimer, longer than a threshold holds every later event of
-- the scope behind it (what "stuck" means, and what it does not, is
-- wharf.scopes_stuck_since in sql/30, which queue_stats' gauge and the
-- stuck_scope alert rule read too). The operator sees them from wharf.scope
-- and the head's event row, and unblocks one by retrying its head now,
-- moving its head to the dead letters (its successors then run; the head
-- can be replayed later) or pausing the head's connection (a paused
-- connection's scopes are held on purpose, no longer stuck). Every action
-- is recorded in wharf.scope_action, as a replay is recorded: who, when,
-- which scope, which head.

-- Whether an operator moved event p_id to the dead letters while its lease
-- under p_epoch ran: that lease, if it fails, leaves it DEAD. One probe of
-- ix_scope_action_after_lease. Internal: fail's and reap's.
CREATE OR REPLACE FUNCTION wharf.dead_letter_after_lease(p_id bigint, p_epoch bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT FROM wharf.scope_action a WHERE a.event_id = p_id AND a.after_lease_epoch = p_epoch)
$$;

-- The scopes of workspace p_workspace_id stuck for more than p_older_than
-- (scopes_stuck_since), longest stuck first, at most p_limit, each as
-- {scope_key, subject, reason, waiting_since, waiting_seconds, behind,
-- head: {...}, connection: {id, state}}. waiting_since: since when it is
-- stuck. reason: 'leased' (it failed before and a handler retries it now),
-- 'failing' (it failed before and waits for its retry or its next claim),
-- else 'waiting' (due, never failed, unclaimed). behind: the QUEUED events
-- after the head, counted up to 10000 (behind_capped says so). Internal:
-- callers use list_stuck_scopes.
CREATE OR REPLACE FUNCTION wharf.stuck_scope_list(p_workspace_id bigint, p_older_than interval, p_limit integer)
RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT coalesce(jsonb_agg(jsonb_build_object(
           'scope_key', t.scope_key, 'subject', h.subject,
           'reason', CASE WHEN h.state = 'LEASED' THEN 'leased'
                          WHEN s.failing_since IS NOT NULL THEN 'failing'
                          ELSE 'waiting' END,
           'waiting_since', t.since,
           'waiting_seconds', floor(extract(epoch FROM now() - t.since)),
           'behind', b.n, 'behind_capped', b.n >= 10000,
           'head', wharf.event_summary(h) || jsonb_build_object('leased_by', h.leased_by,
                                                                'leased_until', h.leased_until,
                                                                'dead_letter_pending', h.state = 'LEASED'
                                                                  AND wharf.dead_letter_after_lease(h.id, h.lease_epoch)),
           'connection', jsonb_build_object('id', c.id, 'state', c.state)) ORDER BY t.since, t.scope_key), '[]')
    FROM wharf.scopes_stuck_since(now() - p_older_than, p_workspace_id, p_limit) t
    JOIN wharf.scope s ON s.scope_key = t.scope_key
    JOIN wharf.provider_event h ON h.id = t.head_id
    LEFT JOIN wharf.connection c ON c.id = h.connection_id
    CROSS JOIN LATERAL (SELECT count(*) AS n
                          FROM (SELECT FROM wharf.provider_event e
                                 WHERE e.scope_key = t.scope_key AND e.id > h.id AND e.state = 'QUEUED'
                                 LIMIT 10000) q) b
$$;

-- The stuck scopes of workspace p_workspace_id (see stuck_scope_list),
-- older than p_older_than or, when NULL, the setting stuck_after. P0002 for
-- an unknown workspace, 22023 for a threshold below zero or a limit outside
-- 1..500. JIT off, as queue_stats (sql/30).
CREATE OR REPLACE FUNCTION wharf.list_stuck_scopes(
  p_workspace_id bigint, p_older_than interval DEFAULT NULL, p_limit integer DEFAULT 100)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off AS $$
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
-- like any dead letter. While a handler retries the head (it is LEASED),
-- the action waits for that lease: recorded with its epoch, it makes the
-- lease's failure a dead letter instead of another retry (fail, reap), and
-- leaves a success alone; the answer says so (after_lease: true).
CREATE OR REPLACE FUNCTION wharf.dead_letter_scope_head(p_workspace_id bigint, p_scope_key text, p_event_id bigint, p_account text)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_refusal text;
BEGIN
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  v_refusal := wharf.scope_head_refusal(p_workspace_id, p_scope_key, p_event_id, p_account);
  IF v_refusal = 'leased' THEN
    -- The event is locked (scope_head_refusal): its lease cannot end before this commits.
    INSERT INTO wharf.scope_action (workspace_id, scope_key, event_id, connection_id, action, account, after_lease_epoch)
    SELECT p_workspace_id, p_scope_key, p_event_id, e.connection_id, 'dead_letter_head', p_account, e.lease_epoch
      FROM wharf.provider_event e WHERE e.id = p_event_id;
    RETURN wharf.scope_action_result(p_event_id, NULL) || '{"after_lease": true}';
  END IF;
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
                   'action', a.action, 'account', a.account, 'at', a.at,
                   'after_lease', a.after_lease_epoch IS NOT NULL) ORDER BY a.id DESC), '[]')
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
