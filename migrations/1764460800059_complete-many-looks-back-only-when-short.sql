-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   changed  function wharf.complete_many(bigint[],bigint[],text[])

-- ======== sql/30-claim-lease.sql ========

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
  -- Completed under their epoch by an earlier try of this batch (the row
  -- locks above waited for a try still in flight): DONE with the same epoch
  -- and outcome, and not by the update above. Looked up only when the
  -- update missed some: a lookup per lease that nearly every call would pay
  -- for nothing.
  IF coalesce(cardinality(v_ids), 0) < cardinality(p_ids) THEN
    RETURN QUERY
    SELECT e.id
      FROM unnest(p_ids, p_epochs, p_outcomes) AS c(id, epoch, outcome)
      JOIN wharf.provider_event e ON e.id = c.id
     WHERE e.lease_epoch = c.epoch AND e.state COLLATE "C" = 'DONE' AND e.outcome = c.outcome  -- by primary key
       AND NOT e.id = ANY (coalesce(v_ids, '{}'));
  END IF;
  IF v_ids IS NULL THEN
    RETURN;
  END IF;
  PERFORM wharf.free_scopes(v_ids, v_scopes);
  RETURN QUERY SELECT unnest(v_ids);
END $$;

REVOKE ALL ON FUNCTION wharf.claim(text, integer, text[]), wharf.renew(bigint, bigint),
  wharf.complete(bigint, bigint, text), wharf.complete_many(bigint[], bigint[], text[]), wharf.release(bigint, bigint), wharf.reap(),
  wharf.mark_idle(text), wharf.mark_busy(text), wharf.next_due_at(), wharf.queue_stats(), wharf.reset_claim_lines() FROM PUBLIC;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

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
END $function$;
REVOKE ALL ON FUNCTION wharf.complete_many(bigint[],bigint[],text[]) FROM PUBLIC;
