-- Up Migration

-- Release 0.2.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   changed  function wharf.admission_snapshot(bigint,text,text,text[],boolean)
--   changed  function wharf.reap()

-- ======== sql/30-claim-lease.sql ========

-- Takes back every lease past leased_until: QUEUED after the retry delay with
-- failures + 1 and error_class 'LeaseExpired', or DEAD once failures reach
-- max_attempts; each lease stays in the attempt history as 'expired'. Skips
-- rows under a fenced write or in a scope busy elsewhere (the next run takes
-- them). Returns how many it reaped.
-- Also forgets idle listeners whose session has ended.
--
-- The leases are read from uq_provider_event_leased_scope, which holds every
-- LEASED row and nothing else (an index of their own would cost every claim
-- an entry); the plan stays on it whatever the inbox's size when planned.
CREATE OR REPLACE FUNCTION wharf.reap() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET enable_seqscan = off AS $$
DECLARE
  v_now          timestamptz := clock_timestamp();
  v_max_attempts integer := wharf.setting_integer('max_attempts');
  v_reaped       integer;
BEGIN
  -- The scope rows are locked here, skipping busy ones, rather than by the
  -- trigger in update order: an admission fanning out holds one scope and
  -- waits for the next, and must never wait for a reaper waiting for it.
  WITH expired AS (
    SELECT e.id
      FROM wharf.provider_event e
      JOIN wharf.scope s ON s.scope_key = e.scope_key
     WHERE e.state = 'LEASED' AND e.leased_until < v_now
     FOR UPDATE OF e, s SKIP LOCKED
  ), reaped AS (
    UPDATE wharf.provider_event e
       SET failures        = e.failures + 1,
           error_class     = 'LeaseExpired',
           leased_until    = NULL,
           state           = CASE WHEN e.failures + 1 >= v_max_attempts THEN 'DEAD' ELSE 'QUEUED' END,
           dead_at         = CASE WHEN e.failures + 1 >= v_max_attempts THEN v_now END,
           next_attempt_at = CASE WHEN e.failures + 1 >= v_max_attempts THEN e.next_attempt_at
                                  ELSE v_now + wharf.retry_delay(e.attempt) END
      FROM expired
     WHERE e.id = expired.id
    RETURNING e.id, e.lease_epoch, e.attempt, e.leased_by, e.leased_at
  )
  INSERT INTO wharf.event_attempt (event_id, lease_epoch, attempt, worker, started_at, ended_at, ended, error_class)
  SELECT id, lease_epoch, attempt, leased_by, leased_at, v_now, 'expired', 'LeaseExpired' FROM reaped;
  GET DIAGNOSTICS v_reaped = ROW_COUNT;

  DELETE FROM wharf.idle_listener l
   WHERE NOT EXISTS (SELECT FROM pg_stat_activity a WHERE a.pid = l.backend_pid);
  RETURN v_reaped;
END $$;

REVOKE ALL ON FUNCTION wharf.claim(text, integer, text[]), wharf.renew(bigint, bigint),
  wharf.complete(bigint, bigint, text), wharf.complete_many(bigint[], bigint[], text[]), wharf.release(bigint, bigint), wharf.reap(),
  wharf.mark_idle(text), wharf.mark_busy(text), wharf.next_due_at(), wharf.queue_stats() FROM PUBLIC;

-- ======== sql/80-admission.sql ========

-- What admission decides from, read in one statement: the source connection's
-- state and generation, and the recipients (connections of the same provider
-- and source subscribed to any of the subjects; for a connection-signed
-- delivery, the source connection alone, when it subscribes) as parallel
-- arrays in id order: id, generation, state, workspace and its state. Two
-- reads compare equal in the source's generation and the recipients' ids and
-- generations exactly when no connection involved changed in between.
-- Arrays, not jsonb: building and reading jsonb, and the plan nodes it
-- took, cost more than the rows read.
--
-- The plan is pinned to one shape, whatever the statistics: the routed
-- subjects' subscriptions (ix_subscription_recipients, one descent per
-- subject), then each subscriber's connection and workspace by primary key,
-- in the order written (join_collapse_limit). Left to choose, the planner walked every
-- subscription of the connection (subscription_pkey) for want of
-- statistics, which a GitHub App installation with many repositories pays on
-- every delivery, twice; with statistics it planned each call afresh, which
-- cost more than the read. Admission ran half as many instructions again
-- without statistics, twice as many with them (bench/RESULTS.md). Led by the
-- subjects, the read also grows with a subject's subscribers rather than with
-- every connection of the source.
CREATE OR REPLACE FUNCTION wharf.admission_snapshot(
  p_source_id bigint, p_provider text, p_source text, p_subjects text[], p_connection_signed boolean,
  OUT source_state text, OUT source_generation bigint,
  OUT recipient_ids bigint[], OUT recipient_generations bigint[], OUT recipient_states text[],
  OUT recipient_workspace_ids bigint[], OUT recipient_workspace_states text[])
-- plpgsql, not sql: its plan is cached per session instead of made per call.
LANGUAGE plpgsql STABLE
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off
SET join_collapse_limit = 1 SET plan_cache_mode = force_generic_plan AS $$
BEGIN
  SELECT s.state, s.generation,
         coalesce(r.ids, '{}'), coalesce(r.generations, '{}'), coalesce(r.states, '{}'),
         coalesce(r.workspace_ids, '{}'), coalesce(r.workspace_states, '{}')
    INTO source_state, source_generation,
         recipient_ids, recipient_generations, recipient_states, recipient_workspace_ids, recipient_workspace_states
    FROM (SELECT array_agg(c.id ORDER BY c.id) AS ids, array_agg(c.generation ORDER BY c.id) AS generations,
                 array_agg(c.state ORDER BY c.id) AS states,
                 array_agg(c.workspace_id ORDER BY c.id) AS workspace_ids,
                 array_agg(w.state ORDER BY c.id) AS workspace_states
            FROM (SELECT DISTINCT sub.connection_id FROM wharf.subscription sub
                   WHERE sub.subject = ANY (p_subjects)) subscribed
            -- LIMIT: a subquery of its own, which only the primary key can
            -- serve; joined plainly, the conditions below let the planner
            -- walk every connection of the source for each subscriber.
            CROSS JOIN LATERAL (SELECT c.id, c.provider, c.source, c.state, c.generation, c.workspace_id
                                  FROM wharf.connection c WHERE c.id = subscribed.connection_id LIMIT 1) c
            JOIN wharf.workspace w ON w.id = c.workspace_id
           WHERE c.provider = p_provider AND c.source = p_source
             AND (c.id = p_source_id OR NOT p_connection_signed)) r
    LEFT JOIN wharf.connection s ON s.id = p_source_id;
END $$;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

CREATE OR REPLACE FUNCTION wharf.admission_snapshot(p_source_id bigint, p_provider text, p_source text, p_subjects text[], p_connection_signed boolean, OUT source_state text, OUT source_generation bigint, OUT recipient_ids bigint[], OUT recipient_generations bigint[], OUT recipient_states text[], OUT recipient_workspace_ids bigint[], OUT recipient_workspace_states text[])
 RETURNS record
 LANGUAGE plpgsql
 STABLE
AS $function$
BEGIN
  SELECT s.state, s.generation,
         coalesce(r.ids, '{}'), coalesce(r.generations, '{}'), coalesce(r.states, '{}'),
         coalesce(r.workspace_ids, '{}'), coalesce(r.workspace_states, '{}')
    INTO source_state, source_generation,
         recipient_ids, recipient_generations, recipient_states, recipient_workspace_ids, recipient_workspace_states
    FROM (SELECT array_agg(c.id ORDER BY c.id) AS ids, array_agg(c.generation ORDER BY c.id) AS generations,
                 array_agg(c.state ORDER BY c.id) AS states,
                 array_agg(c.workspace_id ORDER BY c.id) AS workspace_ids,
                 array_agg(w.state ORDER BY c.id) AS workspace_states
            FROM wharf.connection c
            JOIN wharf.workspace w ON w.id = c.workspace_id
           WHERE c.provider = p_provider AND c.source = p_source
             AND (c.id = p_source_id OR NOT p_connection_signed)
             AND EXISTS (SELECT FROM wharf.subscription s
                          WHERE s.connection_id = c.id AND s.subject = ANY (p_subjects))) r
    LEFT JOIN wharf.connection s ON s.id = p_source_id;
END $function$;
GRANT EXECUTE ON FUNCTION wharf.admission_snapshot(bigint,text,text,text[],boolean) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.reap()
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_now          timestamptz := clock_timestamp();
  v_max_attempts integer := wharf.setting_integer('max_attempts');
  v_reaped       integer;
BEGIN
  -- The scope rows are locked here, skipping busy ones, rather than by the
  -- trigger in update order: an admission fanning out holds one scope and
  -- waits for the next, and must never wait for a reaper waiting for it.
  WITH expired AS (
    SELECT e.id
      FROM wharf.provider_event e
      JOIN wharf.scope s ON s.scope_key = e.scope_key
     WHERE e.state = 'LEASED' AND e.leased_until < v_now
     FOR UPDATE OF e, s SKIP LOCKED
  ), reaped AS (
    UPDATE wharf.provider_event e
       SET failures        = e.failures + 1,
           error_class     = 'LeaseExpired',
           leased_until    = NULL,
           state           = CASE WHEN e.failures + 1 >= v_max_attempts THEN 'DEAD' ELSE 'QUEUED' END,
           dead_at         = CASE WHEN e.failures + 1 >= v_max_attempts THEN v_now END,
           next_attempt_at = CASE WHEN e.failures + 1 >= v_max_attempts THEN e.next_attempt_at
                                  ELSE v_now + wharf.retry_delay(e.attempt) END
      FROM expired
     WHERE e.id = expired.id
    RETURNING e.id, e.lease_epoch, e.attempt, e.leased_by, e.leased_at
  )
  INSERT INTO wharf.event_attempt (event_id, lease_epoch, attempt, worker, started_at, ended_at, ended, error_class)
  SELECT id, lease_epoch, attempt, leased_by, leased_at, v_now, 'expired', 'LeaseExpired' FROM reaped;
  GET DIAGNOSTICS v_reaped = ROW_COUNT;

  DELETE FROM wharf.idle_listener l
   WHERE NOT EXISTS (SELECT FROM pg_stat_activity a WHERE a.pid = l.backend_pid);
  RETURN v_reaped;
END $function$;
REVOKE ALL ON FUNCTION wharf.reap() FROM PUBLIC;
