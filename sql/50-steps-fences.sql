-- Steps and fences: the handler's business transaction proves it still holds
-- the lease before it commits, and records each committed step so that a
-- retry or replay resumes the unfinished ones.
--
-- FOR KEY SHARE NOWAIT: the lock lasts until the business transaction
-- commits, yet renewals (plain UPDATEs) stay possible; the reaper's FOR UPDATE
-- SKIP LOCKED passes over the row, so it never takes the lease back mid-commit;
-- and a row busy under a reaper's or an erasure's lock raises 55P03 at once,
-- so the worker rolls back and retries that transaction in order.
--
-- Both are SECURITY DEFINER: a handler's own database role needs EXECUTE on
-- them, not write access to the inbox.

-- Raises WH410 when the event is gone (erased), WH412 when it is no longer
-- LEASED under p_epoch, 55P03 when another writer holds it; else returns.
CREATE OR REPLACE FUNCTION wharf.fence(p_id bigint, p_epoch bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_state text;
  v_epoch bigint;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL THEN
    RAISE EXCEPTION 'wharf.fence: id and epoch are required' USING ERRCODE = '22004';
  END IF;
  SELECT state, lease_epoch INTO v_state, v_epoch
    FROM wharf.provider_event WHERE id = p_id
     FOR KEY SHARE NOWAIT;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: event % is gone', p_id USING ERRCODE = 'WH410';
  END IF;
  IF v_state <> 'LEASED' OR v_epoch <> p_epoch THEN
    RAISE EXCEPTION 'wharf: lease % of event % is no longer held', p_epoch, p_id USING ERRCODE = 'WH412';
  END IF;
END $$;

-- Fences the event (raising like fence, never false for a lost lease), then claims
-- step p_step_name: true when the caller must run its writes, false when it committed earlier.
CREATE OR REPLACE FUNCTION wharf.step(p_id bigint, p_epoch bigint, p_step_name text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL OR p_step_name IS NULL THEN
    RAISE EXCEPTION 'wharf.step: id, epoch and step name are required' USING ERRCODE = '22004';
  END IF;
  IF p_step_name = '' OR length(p_step_name) > 200 THEN
    RAISE EXCEPTION 'wharf.step: step name must be 1 to 200 characters' USING ERRCODE = '22023';
  END IF;
  PERFORM wharf.fence(p_id, p_epoch);
  INSERT INTO wharf.provider_event_step (event_id, step_name) VALUES (p_id, p_step_name)
  ON CONFLICT DO NOTHING;
  RETURN FOUND;
END $$;

REVOKE ALL ON FUNCTION wharf.fence(bigint, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION wharf.step(bigint, bigint, text) FROM PUBLIC;
