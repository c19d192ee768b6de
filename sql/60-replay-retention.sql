-- Replay and retention: an operator sends a DEAD row back to the queue; purge
-- forgets DONE rows after the replay window and DEAD rows after retention.

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
