-- Up Migration

-- Release 0.2.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   changed  function wharf.claim(text,integer,text[])

-- ======== sql/30-claim-lease.sql ========

-- Leases up to p_max rows, each the oldest QUEUED row of its scope, due now,
-- in a scope with no LEASED row and an ACTIVE (or no) workspace, admitted by a
-- connection that is not PAUSED; scopes are served longest ready first
-- (wharf.scope.ready_at). Increments attempt and lease_epoch, draws the
-- lease's random lease_token, which the handler's step and fence present
-- (sql/50-steps-fences.sql), and records when the lease began (leased_at,
-- the start of its attempt history entry). Concurrent claimers pass over
-- each other. With p_handles (`provider:event_type` and `provider:*`
-- keys), only heads this host has a handler for: another head keeps its scope
-- waiting, in order, for a host that handles it.
--
-- The plan is pinned to its one good shape: walk ix_scope_claim in order and
-- fetch each head by primary key, stopping after p_max. PL/pgSQL caches a
-- generic plan after five calls, and for a small scope table the planner's
-- generic choice is a sequential scan of wharf.scope merge-joined with the
-- whole provider_event primary key, which reads the backlog on every claim.
-- Turning off the other scan and join methods leaves it the index path alone
-- (bitmap scans too: a bitmap scan of ix_scope_claim loses its order, and the
-- claim sorted every ready scope to serve p_max of them).
-- The head is tested with `state COLLATE "C" = 'QUEUED'` (top of this file):
-- autovacuum often analyzes the inbox while its queue is empty, and with the
-- plain test the generic plan then drove the join from
-- ix_provider_event_scope_queue, which looks empty, and read every queued row
-- on each claim; under sustained load the drain stalled until the next
-- analyze (test/sql/claim-plan.test.ts).
--
-- That plan is also forced generic: left to choose, the plan cache finds the
-- custom plans (LIMIT p_max known) cheaper and plans every call afresh, which
-- costs a claim a quarter of its time. The figures are in bench/RESULTS.md
-- and the commits that pinned both.
--
-- The claim's transaction commits without waiting for its WAL to reach disk
-- (synchronous_commit off, for the rest of the caller's transaction too: a
-- worker calls claim on its own). A database crash may forget a claim of
-- its last moments: the row is QUEUED again and is claimed again, as after
-- a worker's crash. Nothing a handler commits can outlive the claim it ran
-- under: a step, a fenced transaction or a completion flushes the WAL up to
-- its own commit, past the claim. An idle worker's wake-up no longer waits
-- for a disk flush before its handler starts.
CREATE OR REPLACE FUNCTION wharf.claim(p_worker text, p_max integer DEFAULT 1, p_handles text[] DEFAULT NULL)
RETURNS SETOF wharf.provider_event
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_mergejoin = off SET enable_hashjoin = off
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_now   timestamptz := clock_timestamp();
  v_lease interval := wharf.setting_interval('lease');
BEGIN
  IF p_worker IS NULL OR p_worker = '' THEN
    RAISE EXCEPTION 'wharf.claim: worker must be named' USING ERRCODE = '22004';
  END IF;
  IF p_max IS NULL THEN
    RAISE EXCEPTION 'wharf.claim: max is required' USING ERRCODE = '22004';
  END IF;
  IF p_max < 0 THEN
    RAISE EXCEPTION 'wharf.claim: max must be zero or more, not %', p_max USING ERRCODE = '22023';
  END IF;
  PERFORM set_config('synchronous_commit', 'off', true);

  RETURN QUERY
  WITH due_heads AS (
    SELECT e.id
      FROM wharf.scope s
      JOIN wharf.provider_event e ON e.id = s.head_id
     WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
       AND s.ready_at <= v_now  -- never earlier than head_due_at: the head is due
       AND e.state COLLATE "C" = 'QUEUED'  -- by primary key, never from the queue's partial index
       -- A paused connection's rows wait, holding their scopes, until it resumes.
       AND (e.connection_id IS NULL
            OR NOT EXISTS (SELECT FROM wharf.connection c WHERE c.id = e.connection_id AND c.state = 'PAUSED'))
       AND (p_handles IS NULL
            OR e.provider || ':' || e.event_type = ANY (p_handles)
            OR e.provider || ':*' = ANY (p_handles))
     ORDER BY s.ready_at, s.head_id
     LIMIT p_max
     -- NO KEY UPDATE: a claimer that locks a head another claimer has just
     -- leased (its snapshot was older) must not make the winner's fence
     -- (FOR KEY SHARE NOWAIT) fail as busy; the reaper, lock_scope, purge and
     -- erasure take FOR UPDATE and still conflict.
     FOR NO KEY UPDATE OF s, e SKIP LOCKED
  )
  UPDATE wharf.provider_event e
     SET state        = 'LEASED',
         attempt      = e.attempt + 1,
         lease_epoch  = e.lease_epoch + 1,
         leased_until = v_now + v_lease,
         leased_by    = p_worker,
         leased_at    = v_now,
         lease_token  = gen_random_uuid()
    FROM due_heads
   WHERE e.id = due_heads.id
  RETURNING e.*;
END $$;

REVOKE ALL ON FUNCTION wharf.claim(text, integer, text[]), wharf.renew(bigint, bigint),
  wharf.complete(bigint, bigint, text), wharf.complete_many(bigint[], bigint[], text[]), wharf.release(bigint, bigint), wharf.reap(),
  wharf.mark_idle(text), wharf.mark_busy(text), wharf.next_due_at(), wharf.queue_stats() FROM PUBLIC;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

CREATE OR REPLACE FUNCTION wharf.claim(p_worker text, p_max integer DEFAULT 1, p_handles text[] DEFAULT NULL::text[])
 RETURNS SETOF wharf.provider_event
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_mergejoin TO 'off'
 SET enable_hashjoin TO 'off'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
  v_now   timestamptz := clock_timestamp();
  v_lease interval := wharf.setting_interval('lease');
BEGIN
  IF p_worker IS NULL OR p_worker = '' THEN
    RAISE EXCEPTION 'wharf.claim: worker must be named' USING ERRCODE = '22004';
  END IF;
  IF p_max IS NULL THEN
    RAISE EXCEPTION 'wharf.claim: max is required' USING ERRCODE = '22004';
  END IF;
  IF p_max < 0 THEN
    RAISE EXCEPTION 'wharf.claim: max must be zero or more, not %', p_max USING ERRCODE = '22023';
  END IF;
  PERFORM set_config('synchronous_commit', 'off', true);

  RETURN QUERY
  WITH due_heads AS (
    SELECT e.id
      FROM wharf.scope s
      JOIN wharf.provider_event e ON e.id = s.head_id
     WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
       AND s.ready_at <= v_now  -- never earlier than head_due_at: the head is due
       AND e.state = 'QUEUED'
       -- A paused connection's rows wait, holding their scopes, until it resumes.
       AND (e.connection_id IS NULL
            OR NOT EXISTS (SELECT FROM wharf.connection c WHERE c.id = e.connection_id AND c.state = 'PAUSED'))
       AND (p_handles IS NULL
            OR e.provider || ':' || e.event_type = ANY (p_handles)
            OR e.provider || ':*' = ANY (p_handles))
     ORDER BY s.ready_at, s.head_id
     LIMIT p_max
     -- NO KEY UPDATE: a claimer that locks a head another claimer has just
     -- leased (its snapshot was older) must not make the winner's fence
     -- (FOR KEY SHARE NOWAIT) fail as busy; the reaper, lock_scope, purge and
     -- erasure take FOR UPDATE and still conflict.
     FOR NO KEY UPDATE OF s, e SKIP LOCKED
  )
  UPDATE wharf.provider_event e
     SET state        = 'LEASED',
         attempt      = e.attempt + 1,
         lease_epoch  = e.lease_epoch + 1,
         leased_until = v_now + v_lease,
         leased_by    = p_worker,
         leased_at    = v_now,
         lease_token  = gen_random_uuid()
    FROM due_heads
   WHERE e.id = due_heads.id
  RETURNING e.*;
END $function$;
REVOKE ALL ON FUNCTION wharf.claim(text,integer,text[]) FROM PUBLIC;
