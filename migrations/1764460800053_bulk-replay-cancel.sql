-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.cancel_bulk_replay(bigint,bigint,text)
--   changed  function wharf.bulk_replay_summary(wharf.bulk_replay)

-- ======== sql/62-bulk-replay.sql ========

-- A bulk replay as the operator surface shows it. state: running,
-- finished, or cancelled (by cancelled_by at cancelled_at: it replayed no
-- batch after). skipped: matched events it did not replay (replayed, purged
-- or erased meanwhile), known at the end; a cancelled replay skipped none,
-- it stopped.
CREATE OR REPLACE FUNCTION wharf.bulk_replay_summary(r wharf.bulk_replay) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', r.id, 'workspace_id', r.workspace_id, 'filter', r.filter, 'force', r.force,
    'requested_by', r.requested_by,
    'state', CASE WHEN r.cancelled_at IS NOT NULL THEN 'cancelled'
                  WHEN r.finished_at IS NULL THEN 'running' ELSE 'finished' END,
    'matched', r.matched, 'replayed', r.replayed,
    'skipped', CASE WHEN r.finished_at IS NULL OR r.cancelled_at IS NOT NULL THEN 0
                    ELSE greatest(r.matched - r.replayed, 0) END,
    'started_at', r.started_at, 'updated_at', r.updated_at, 'finished_at', r.finished_at,
    'cancelled_by', r.cancelled_by, 'cancelled_at', r.cancelled_at)
$$;

-- Cancels bulk replay p_id of workspace p_workspace_id as p_account: no
-- batch of it runs after this one commits (a batch running now finishes
-- first: this waits for its row lock, so what it replayed is counted). The
-- events replayed before stay replayed. Returns the bulk replay as it is
-- after, with "cancelled": whether this call cancelled it (false when it had
-- finished, or was cancelled, before). P0002 when the workspace has no such
-- bulk replay, 22004 for a NULL argument or an empty account.
CREATE OR REPLACE FUNCTION wharf.cancel_bulk_replay(p_workspace_id bigint, p_id bigint, p_account text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
END $$;

REVOKE ALL ON FUNCTION wharf.start_bulk_replay(bigint, jsonb, text, boolean),
  wharf.count_bulk_replay(bigint, jsonb, boolean),
  wharf.continue_bulk_replay(bigint, bigint, integer), wharf.cancel_bulk_replay(bigint, bigint, text),
  wharf.show_bulk_replay(bigint, bigint),
  wharf.list_bulk_replays(bigint) FROM PUBLIC;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

DROP FUNCTION wharf.cancel_bulk_replay(bigint,bigint,text);

CREATE OR REPLACE FUNCTION wharf.bulk_replay_summary(r wharf.bulk_replay)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
  SELECT jsonb_build_object(
    'id', r.id, 'workspace_id', r.workspace_id, 'filter', r.filter, 'force', r.force,
    'requested_by', r.requested_by,
    'state', CASE WHEN r.finished_at IS NULL THEN 'running' ELSE 'finished' END,
    'matched', r.matched, 'replayed', r.replayed,
    'skipped', CASE WHEN r.finished_at IS NULL THEN 0 ELSE greatest(r.matched - r.replayed, 0) END,
    'started_at', r.started_at, 'updated_at', r.updated_at, 'finished_at', r.finished_at)
$function$;
GRANT EXECUTE ON FUNCTION wharf.bulk_replay_summary(wharf.bulk_replay) TO PUBLIC;
