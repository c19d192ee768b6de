-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   changed  function wharf.complete(bigint,bigint,text)
--   changed  function wharf.complete_many(bigint[],bigint[],text[])

-- ======== sql/30-claim-lease.sql ========

-- Ends a lease with success: DONE with p_outcome ('handled', 'ignored', ...).
-- False when the row is not LEASED under p_epoch. The update is HOT (no
-- index names a column it writes); the scope is freed by free_scopes (sql/20).
--
-- Idempotent under its epoch: also true, writing nothing, when the row is
-- already DONE under p_epoch with p_outcome. Only complete and complete_many
-- write DONE, each only under the epoch that holds the lease, and an epoch
-- is drawn by one claim: such a row is this lease's own completion, which
-- committed while its reply was lost (a connection cut after COMMIT, a
-- failover), and the worker's retry learns that it took. A row finished by
-- anyone else (reaped and leased again, failed, released, erased, DONE
-- under another epoch) still answers false.
CREATE OR REPLACE FUNCTION wharf.complete(p_id bigint, p_epoch bigint, p_outcome text DEFAULT 'handled')
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
  v_scope_key text;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL OR p_outcome IS NULL OR p_outcome = '' THEN
    RAISE EXCEPTION 'wharf.complete: id, epoch and outcome are required' USING ERRCODE = '22004';
  END IF;
  PERFORM FROM wharf.provider_event WHERE id = p_id FOR UPDATE;  -- after its fenced writes (top of sql/30)
  PERFORM set_config('wharf.keeping_scopes', 'on', true);
  UPDATE wharf.provider_event
     SET state = 'DONE', outcome = p_outcome, handled_at = clock_timestamp(), leased_until = NULL
   WHERE id = p_id AND lease_epoch = p_epoch AND state COLLATE "C" = 'LEASED'  -- by primary key (top of sql/30)
  RETURNING scope_key INTO v_scope_key;
  PERFORM set_config('wharf.keeping_scopes', 'off', true);
  IF v_scope_key IS NULL THEN
    -- Read after the row lock: a first try still in flight has committed or rolled back.
    RETURN EXISTS (SELECT FROM wharf.provider_event
                    WHERE id = p_id AND lease_epoch = p_epoch AND state COLLATE "C" = 'DONE' AND outcome = p_outcome);
  END IF;
  PERFORM wharf.free_scopes(ARRAY[p_id], ARRAY[v_scope_key]);
  RETURN true;
END $$;

-- Ends many leases with success, as complete does each: the ids of the rows
-- that were LEASED under their epoch and are now DONE with their outcome, and
-- of those already DONE under their epoch with their outcome (a retry of a
-- batch whose commit was not confirmed: see complete). One
-- update of the events and one of their scopes: a busy host pays one commit
-- and one scope write per scope for a batch, its scope rows locked in the
-- one lock order (free_scopes, lock_scopes in sql/20), whatever order the
-- caller passes the leases in. The arrays must be of one
-- length (22023) with no NULL or empty element (22004).
--
-- Pinned to the primary key like claim: a generic plan for a batch of
-- unknown size must never scan the inbox.
CREATE OR REPLACE FUNCTION wharf.complete_many(p_ids bigint[], p_epochs bigint[], p_outcomes text[])
RETURNS SETOF bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_mergejoin = off SET enable_hashjoin = off SET lock_timeout = '5s' AS $$
DECLARE
  v_ids    bigint[];
  v_scopes text[];
  v_taken  bigint[];
BEGIN
  IF p_ids IS NULL OR p_epochs IS NULL OR p_outcomes IS NULL THEN
    RAISE EXCEPTION 'wharf.complete_many: ids, epochs and outcomes are required' USING ERRCODE = '22004';
  END IF;
  IF cardinality(p_epochs) <> cardinality(p_ids) OR cardinality(p_outcomes) <> cardinality(p_ids) THEN
    RAISE EXCEPTION 'wharf.complete_many: % ids, % epochs and % outcomes: one of each per lease',
      cardinality(p_ids), cardinality(p_epochs), cardinality(p_outcomes) USING ERRCODE = '22023';
  END IF;
  IF EXISTS (SELECT FROM unnest(p_ids, p_epochs, p_outcomes) AS c(id, epoch, outcome)
              WHERE c.id IS NULL OR c.epoch IS NULL OR c.outcome IS NULL OR c.outcome = '') THEN
    RAISE EXCEPTION 'wharf.complete_many: every id, epoch and outcome is required' USING ERRCODE = '22004';
  END IF;
  PERFORM FROM wharf.provider_event WHERE id = ANY (p_ids) ORDER BY id FOR UPDATE;  -- top of sql/30
  -- Completed under their epoch by an earlier try of this batch (read after
  -- the row locks, so a try still in flight has committed or rolled back).
  SELECT array_agg(e.id) INTO v_taken
    FROM unnest(p_ids, p_epochs, p_outcomes) AS c(id, epoch, outcome)
    JOIN wharf.provider_event e ON e.id = c.id
   WHERE e.lease_epoch = c.epoch AND e.state COLLATE "C" = 'DONE' AND e.outcome = c.outcome;  -- by primary key
  RETURN QUERY SELECT unnest(v_taken);
  PERFORM set_config('wharf.keeping_scopes', 'on', true);
  WITH done AS (
    UPDATE wharf.provider_event e
       SET state = 'DONE', outcome = c.outcome, handled_at = clock_timestamp(), leased_until = NULL
      FROM unnest(p_ids, p_epochs, p_outcomes) WITH ORDINALITY AS c(id, epoch, outcome, n)
     WHERE e.id = c.id AND e.lease_epoch = c.epoch AND e.state COLLATE "C" = 'LEASED'  -- by primary key (top of sql/30)
    RETURNING e.id, e.scope_key, c.n
  )
  SELECT array_agg(id ORDER BY n), array_agg(scope_key ORDER BY n) INTO v_ids, v_scopes FROM done;
  PERFORM set_config('wharf.keeping_scopes', 'off', true);
  IF v_ids IS NULL THEN
    RETURN;
  END IF;
  PERFORM wharf.free_scopes(v_ids, v_scopes);
  RETURN QUERY SELECT unnest(v_ids);
END $$;

REVOKE ALL ON FUNCTION wharf.claim(text, integer, text[]), wharf.renew(bigint, bigint),
  wharf.complete(bigint, bigint, text), wharf.complete_many(bigint[], bigint[], text[]), wharf.release(bigint, bigint), wharf.reap(),
  wharf.mark_idle(text), wharf.mark_busy(text), wharf.next_due_at(), wharf.queue_stats() FROM PUBLIC;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

CREATE OR REPLACE FUNCTION wharf.complete(p_id bigint, p_epoch bigint, p_outcome text DEFAULT 'handled'::text)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET lock_timeout TO '5s'
AS $function$
DECLARE
  v_scope_key text;
BEGIN
  IF p_id IS NULL OR p_epoch IS NULL OR p_outcome IS NULL OR p_outcome = '' THEN
    RAISE EXCEPTION 'wharf.complete: id, epoch and outcome are required' USING ERRCODE = '22004';
  END IF;
  PERFORM FROM wharf.provider_event WHERE id = p_id FOR UPDATE;  -- after its fenced writes (top of sql/30)
  PERFORM set_config('wharf.keeping_scopes', 'on', true);
  UPDATE wharf.provider_event
     SET state = 'DONE', outcome = p_outcome, handled_at = clock_timestamp(), leased_until = NULL
   WHERE id = p_id AND lease_epoch = p_epoch AND state COLLATE "C" = 'LEASED'  -- by primary key (top of sql/30)
  RETURNING scope_key INTO v_scope_key;
  PERFORM set_config('wharf.keeping_scopes', 'off', true);
  IF v_scope_key IS NULL THEN
    RETURN false;
  END IF;
  PERFORM wharf.free_scopes(ARRAY[p_id], ARRAY[v_scope_key]);
  RETURN true;
END $function$;
REVOKE ALL ON FUNCTION wharf.complete(bigint,bigint,text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.complete_many(p_ids bigint[], p_epochs bigint[], p_outcomes text[])
 RETURNS SETOF bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_mergejoin TO 'off'
 SET enable_hashjoin TO 'off'
 SET lock_timeout TO '5s'
AS $function$
DECLARE
  v_ids    bigint[];
  v_scopes text[];
BEGIN
  IF p_ids IS NULL OR p_epochs IS NULL OR p_outcomes IS NULL THEN
    RAISE EXCEPTION 'wharf.complete_many: ids, epochs and outcomes are required' USING ERRCODE = '22004';
  END IF;
  IF cardinality(p_epochs) <> cardinality(p_ids) OR cardinality(p_outcomes) <> cardinality(p_ids) THEN
    RAISE EXCEPTION 'wharf.complete_many: % ids, % epochs and % outcomes: one of each per lease',
      cardinality(p_ids), cardinality(p_epochs), cardinality(p_outcomes) USING ERRCODE = '22023';
  END IF;
  IF EXISTS (SELECT FROM unnest(p_ids, p_epochs, p_outcomes) AS c(id, epoch, outcome)
              WHERE c.id IS NULL OR c.epoch IS NULL OR c.outcome IS NULL OR c.outcome = '') THEN
    RAISE EXCEPTION 'wharf.complete_many: every id, epoch and outcome is required' USING ERRCODE = '22004';
  END IF;
  PERFORM FROM wharf.provider_event WHERE id = ANY (p_ids) ORDER BY id FOR UPDATE;  -- top of sql/30
  PERFORM set_config('wharf.keeping_scopes', 'on', true);
  WITH done AS (
    UPDATE wharf.provider_event e
       SET state = 'DONE', outcome = c.outcome, handled_at = clock_timestamp(), leased_until = NULL
      FROM unnest(p_ids, p_epochs, p_outcomes) WITH ORDINALITY AS c(id, epoch, outcome, n)
     WHERE e.id = c.id AND e.lease_epoch = c.epoch AND e.state COLLATE "C" = 'LEASED'  -- by primary key (top of sql/30)
    RETURNING e.id, e.scope_key, c.n
  )
  SELECT array_agg(id ORDER BY n), array_agg(scope_key ORDER BY n) INTO v_ids, v_scopes FROM done;
  PERFORM set_config('wharf.keeping_scopes', 'off', true);
  IF v_ids IS NULL THEN
    RETURN;
  END IF;
  PERFORM wharf.free_scopes(v_ids, v_scopes);
  RETURN QUERY SELECT unnest(v_ids);
END $function$;
REVOKE ALL ON FUNCTION wharf.complete_many(bigint[],bigint[],text[]) FROM PUBLIC;
