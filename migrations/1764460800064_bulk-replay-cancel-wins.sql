-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   changed  function wharf.cancel_bulk_replay(bigint,bigint,text)
--   changed  function wharf.continue_bulk_replay(bigint,bigint,integer)

-- ======== sql/62-bulk-replay.sql ========

-- Replays the next at most p_batch (1..1000) events of bulk replay p_id of
-- workspace p_workspace_id, in id order, in this one transaction, waking idle
-- claimers once; finished when fewer remain. Returns the bulk replay as it is
-- after; NULL, replaying nothing, when another transaction is running a batch
-- of it or cancelling it (cancel_bulk_replay asked: it stops here). P0002
-- when the workspace has no such bulk replay.
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
  -- A cancel holds the lock exclusive, or waits for it behind the batch in
  -- flight: this batch is after the cancel and leaves the row to it. Held
  -- shared to the end, so that a cancel asked now waits for this batch.
  IF NOT pg_try_advisory_xact_lock_shared(wharf.lifecycle_key('bulk_replay', p_id::text)) THEN
    RETURN NULL;
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

-- Cancels bulk replay p_id of workspace p_workspace_id as p_account: no
-- batch of it replays anything after this call asked (a batch running now
-- finishes first: this waits for it, so what it replayed is counted). The
-- events replayed before stay replayed. Returns the bulk replay as it is
-- after, with "cancelled": whether this call cancelled it, true whenever it
-- was running when asked (even if the batch waited for was its last), false
-- when it had finished, or was cancelled, before. P0002 when the workspace
-- has no such bulk replay, 22004 for a NULL argument or an empty account.
CREATE OR REPLACE FUNCTION wharf.cancel_bulk_replay(p_workspace_id bigint, p_id bigint, p_account text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_replay  wharf.bulk_replay;
  v_running boolean;
  v_now     timestamptz;
BEGIN
  IF p_workspace_id IS NULL OR p_id IS NULL OR p_account IS NULL OR p_account = '' THEN
    RAISE EXCEPTION 'wharf.cancel_bulk_replay: workspace, id and account are required' USING ERRCODE = '22004';
  END IF;
  -- As it is when asked, before the wait: the batch in flight may finish it.
  SELECT finished_at IS NULL INTO v_running FROM wharf.bulk_replay WHERE id = p_id AND workspace_id = p_workspace_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: workspace % has no bulk replay %', p_workspace_id, p_id USING ERRCODE = 'P0002';
  END IF;
  -- Exclusive: from here no batch starts (see the top of this file); the one
  -- in flight holds it shared, and this waits for it to commit.
  PERFORM pg_advisory_xact_lock(wharf.lifecycle_key('bulk_replay', p_id::text));
  SELECT * INTO v_replay FROM wharf.bulk_replay WHERE id = p_id AND workspace_id = p_workspace_id FOR UPDATE;
  IF NOT FOUND THEN  -- finished and purged meanwhile
    RAISE EXCEPTION 'wharf: workspace % has no bulk replay %', p_workspace_id, p_id USING ERRCODE = 'P0002';
  END IF;
  -- Cancelled by another call that got the lock first: that one says true.
  IF NOT v_running OR v_replay.cancelled_at IS NOT NULL THEN
    RETURN wharf.bulk_replay_summary(v_replay) || '{"cancelled": false}';
  END IF;
  v_now := clock_timestamp();
  UPDATE wharf.bulk_replay
     SET finished_at = coalesce(finished_at, v_now), cancelled_at = v_now, cancelled_by = p_account, updated_at = v_now
   WHERE id = p_id
  RETURNING * INTO v_replay;
  RETURN wharf.bulk_replay_summary(v_replay) || '{"cancelled": true}';
END $$;

REVOKE ALL ON FUNCTION wharf.start_bulk_replay(bigint, jsonb, text, boolean),
  wharf.count_bulk_replay(bigint, jsonb, boolean),
  wharf.continue_bulk_replay(bigint, bigint, integer), wharf.cancel_bulk_replay(bigint, bigint, text),
  wharf.show_bulk_replay(bigint, bigint),
  wharf.list_bulk_replays(bigint) FROM PUBLIC;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

CREATE OR REPLACE FUNCTION wharf.cancel_bulk_replay(p_workspace_id bigint, p_id bigint, p_account text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_replay wharf.bulk_replay;
  v_now    timestamptz;
BEGIN
  IF p_workspace_id IS NULL OR p_id IS NULL OR p_account IS NULL OR p_account = '' THEN
    RAISE EXCEPTION 'wharf.cancel_bulk_replay: workspace, id and account are required' USING ERRCODE = '22004';
  END IF;
  SELECT * INTO v_replay FROM wharf.bulk_replay WHERE id = p_id AND workspace_id = p_workspace_id FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: workspace % has no bulk replay %', p_workspace_id, p_id USING ERRCODE = 'P0002';
  END IF;
  IF v_replay.finished_at IS NOT NULL THEN
    RETURN wharf.bulk_replay_summary(v_replay) || '{"cancelled": false}';
  END IF;
  v_now := clock_timestamp();
  UPDATE wharf.bulk_replay
     SET finished_at = v_now, cancelled_at = v_now, cancelled_by = p_account, updated_at = v_now
   WHERE id = p_id
  RETURNING * INTO v_replay;
  RETURN wharf.bulk_replay_summary(v_replay) || '{"cancelled": true}';
END $function$;
REVOKE ALL ON FUNCTION wharf.cancel_bulk_replay(bigint,bigint,text) FROM PUBLIC;

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
END $function$;
REVOKE ALL ON FUNCTION wharf.continue_bulk_replay(bigint,bigint,integer) FROM PUBLIC;
