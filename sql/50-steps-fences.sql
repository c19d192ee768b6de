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
-- them, not write access to the inbox. A handler's role gets the overloads
-- that take the lease's token (drawn at random by claim): with only an event
-- id and an epoch, both small counting numbers, a role that may record steps
-- could record one in an event it was never given, and the genuine handler
-- would then skip that step's writes. The overloads without a token are for
-- the worker's own role and for DBAs.

-- Raises WH410 when the event is gone (erased), WH412 when it is no longer
-- LEASED under p_epoch (or, given a token, not under that lease's token),
-- 55P03 when another writer holds it; else returns. Internal: callers use
-- fence or step.
CREATE OR REPLACE FUNCTION wharf.check_lease(p_id bigint, p_epoch bigint, p_token uuid, p_token_given boolean)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_state text;
  v_epoch bigint;
  v_token uuid;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL THEN
    RAISE EXCEPTION 'wharf: a lease is named by its event id and epoch' USING ERRCODE = '22004';
  END IF;
  IF p_token_given AND p_token IS NULL THEN
    RAISE EXCEPTION 'wharf: the lease token is required' USING ERRCODE = '22004';
  END IF;
  SELECT state, lease_epoch, lease_token INTO v_state, v_epoch, v_token
    FROM wharf.provider_event WHERE id = p_id
     FOR KEY SHARE NOWAIT;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: event % is gone', p_id USING ERRCODE = 'WH410';
  END IF;
  IF v_state <> 'LEASED' OR v_epoch <> p_epoch OR (p_token_given AND v_token IS DISTINCT FROM p_token) THEN
    RAISE EXCEPTION 'wharf: lease % of event % is no longer held', p_epoch, p_id USING ERRCODE = 'WH412';
  END IF;
END $$;

-- The fence of a handler's business transaction (see check_lease), as the
-- worker's role calls it.
CREATE OR REPLACE FUNCTION wharf.fence(p_id bigint, p_epoch bigint) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.check_lease(p_id, p_epoch, NULL, false)
$$;

-- The same fence as a handler's role calls it: also under the lease's token.
CREATE OR REPLACE FUNCTION wharf.fence(p_id bigint, p_epoch bigint, p_lease_token uuid) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.check_lease(p_id, p_epoch, p_lease_token, true)
$$;

-- Fences the event (raising like fence, never false for a lost lease), then
-- claims step p_step_name: true when the caller must run its writes, false
-- when it committed earlier. Internal: callers use step.
CREATE OR REPLACE FUNCTION wharf.record_step(p_id bigint, p_epoch bigint, p_step_name text, p_token uuid, p_token_given boolean)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  IF p_step_name IS NULL THEN
    RAISE EXCEPTION 'wharf.step: id, epoch and step name are required' USING ERRCODE = '22004';
  END IF;
  IF p_step_name = '' OR length(p_step_name) > 200 THEN
    RAISE EXCEPTION 'wharf.step: step name must be 1 to 200 characters' USING ERRCODE = '22023';
  END IF;
  PERFORM wharf.check_lease(p_id, p_epoch, p_token, p_token_given);
  INSERT INTO wharf.provider_event_step (event_id, step_name) VALUES (p_id, p_step_name)
  ON CONFLICT DO NOTHING;
  RETURN FOUND;
END $$;

-- A step (see record_step), as the worker's role calls it.
CREATE OR REPLACE FUNCTION wharf.step(p_id bigint, p_epoch bigint, p_step_name text) RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.record_step(p_id, p_epoch, p_step_name, NULL, false)
$$;

-- The same step as a handler's role calls it: also under the lease's token.
CREATE OR REPLACE FUNCTION wharf.step(p_id bigint, p_epoch bigint, p_step_name text, p_lease_token uuid)
RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT wharf.record_step(p_id, p_epoch, p_step_name, p_lease_token, true)
$$;

REVOKE ALL ON FUNCTION wharf.fence(bigint, bigint), wharf.fence(bigint, bigint, uuid),
  wharf.step(bigint, bigint, text), wharf.step(bigint, bigint, text, uuid) FROM PUBLIC;
