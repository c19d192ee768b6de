-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.admission_outcome(text)
--   new      function wharf.cancel_bulk_replay(bigint,bigint,text)
--   new      function wharf.delivery_gauges(timestamp with time zone,integer)
--   new      function wharf.scopes_stuck_since(timestamp with time zone,bigint,integer)
--   changed  function wharf.bulk_replay_summary(wharf.bulk_replay)
--   changed  function wharf.complete(bigint,bigint,text)
--   changed  function wharf.complete_many(bigint[],bigint[],text[])
--   changed  function wharf.delivery_history(bigint,integer)
--   changed  function wharf.evaluate_alert_rules(uuid)
--   changed  function wharf.list_stuck_scopes(bigint,interval,integer)
--   changed  function wharf.queue_history(bigint,integer)
--   changed  function wharf.queue_stats()
--   changed  function wharf.set_workspace_state(bigint,text)
--   changed  function wharf.stuck_scope_list(bigint,interval,integer)

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

-- What a stuck scope is: the one definition that queue_stats' gauge below,
-- the stuck-scopes list (stuck_scope_list, sql/98) and the stuck_scope alert
-- rule (evaluate_alert_rules, sql/99) all read, so that the gauge counts
-- exactly the scopes the list shows. A scope is stuck since the earlier of
--   failing_since  when its head first failed (a lease of it failed or
--                  expired) with no event of the scope handled since: kept
--                  through the head's retries, leased or waiting out their
--                  delay, cleared when a lease of the scope ends handled or
--                  dead (sql/20);
--   ready_at       when its head, due and unleased, joined the claim line
--                  (ix_scope_claim): it waits there for a claimer, because
--                  no host handles its kind or none keeps up;
-- and stuck when that is before p_before (now minus stuck_after, or an
-- alert rule's window). Neither clock starts at the head's arrival: a
-- backlog served in order is not stuck, however old its rows. Not stuck:
-- a head whose connection is PAUSED, failing or not (held on purpose; it is
-- stuck again, from the same time, when the connection resumes), a scope
-- whose lease is held and has not failed (a long handler is the reaper's
-- business), a scope parked out of the claim line (active false), a head
-- not yet due that never failed.
-- Returns the stuck scopes of workspace p_workspace_id (NULL: every
-- workspace and the installation scopes), longest stuck first, at most
-- p_limit (NULL: all), each with its head (the leased event, else the
-- queued one) and since when. Read through ix_scope_failing and, kind by
-- kind, ix_scope_claim: the cost follows the stuck scopes read, not the
-- inbox. A head's connection is looked up (by primary keys) only while
-- some connection is PAUSED, and as a scalar subquery, not NOT EXISTS: the
-- planner keeps the index scans in order under their LIMIT instead of
-- turning it into an anti join over the whole inbox. Internal.
CREATE OR REPLACE FUNCTION wharf.scopes_stuck_since(p_before timestamptz, p_workspace_id bigint, p_limit integer)
RETURNS TABLE (scope_key text, workspace_id bigint, head_id bigint, since timestamptz)
LANGUAGE sql STABLE AS $$
  SELECT x.scope_key, x.workspace_id, x.head_id, x.since
    FROM (SELECT DISTINCT ON (y.scope_key) y.scope_key, y.workspace_id, y.head_id, y.since
            FROM ((SELECT s.scope_key, s.workspace_id, coalesce(s.leased_id, s.head_id) AS head_id, s.failing_since AS since
                     FROM wharf.scope s
                    WHERE s.failing_since < p_before
                      AND (p_workspace_id IS NULL OR s.workspace_id = p_workspace_id)
                      AND (NOT EXISTS (SELECT FROM wharf.connection p WHERE p.state = 'PAUSED')
                           OR (SELECT c.state FROM wharf.provider_event h JOIN wharf.connection c ON c.id = h.connection_id
                                WHERE h.id = coalesce(s.leased_id, s.head_id)) IS DISTINCT FROM 'PAUSED')
                    ORDER BY s.failing_since LIMIT p_limit)
                  UNION ALL
                  (SELECT w.scope_key, w.workspace_id, w.head_id, w.ready_at
                     FROM wharf.claimable_kinds() k(kind)
                     CROSS JOIN LATERAL (SELECT s.scope_key, s.workspace_id, s.head_id, s.ready_at FROM wharf.scope s
                                          WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
                                            AND s.head_kind = k.kind AND s.ready_at < p_before
                                            AND (p_workspace_id IS NULL OR s.workspace_id = p_workspace_id)
                                            AND (NOT EXISTS (SELECT FROM wharf.connection p WHERE p.state = 'PAUSED')
                                                 OR (SELECT c.state FROM wharf.provider_event h
                                                       JOIN wharf.connection c ON c.id = h.connection_id
                                                      WHERE h.id = s.head_id) IS DISTINCT FROM 'PAUSED')
                                          ORDER BY s.ready_at LIMIT p_limit) w
                    ORDER BY w.ready_at LIMIT p_limit)) y
           ORDER BY y.scope_key, y.since) x
   ORDER BY x.since, x.scope_key
   LIMIT p_limit
$$;

-- The worker's gauges, at a cost that does not grow with the inbox:
--   depth_by_state   rows by state: counted while the inbox heap is at most
--                    1,024 pages (8 MB), else estimated from the planner's
--                    statistics (the row estimate scaled to the heap's size
--                    now, times each state's frequency in pg_stats), as
--                    depth_estimated says
--   oldest_due_age   seconds the scope first in the claim line has waited
--                    since it became claimable (0 when none is): the first
--                    entry of ix_scope_claim, the claims' own order
--   stuck_scopes     scopes stuck for longer than stuck_after
--                    (scopes_stuck_since, above: the stuck-scopes list's
--                    rule), counted up to 10,000
--   oldest_stuck_age seconds the longest-stuck of them has been so (0: none)
-- JIT off: the planner prices the per-kind scans under their LIMIT as if
-- every kind held 10,000 stuck heads, and compiling that plan costs
-- hundreds of ms on every scrape, for a query that runs in a few.
CREATE OR REPLACE FUNCTION wharf.queue_stats(
  OUT depth_by_state jsonb, OUT oldest_due_age float8, OUT depth_estimated boolean,
  OUT stuck_scopes bigint, OUT oldest_stuck_age float8)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off AS $$
DECLARE
  v_now         timestamptz := clock_timestamp();
  v_stuck_since timestamptz := clock_timestamp() - wharf.setting_interval('stuck_after');
  v_pages       bigint := pg_relation_size('wharf.provider_event') / current_setting('block_size')::bigint;
BEGIN
  depth_estimated := v_pages > 1024;
  IF NOT depth_estimated THEN
    SELECT coalesce(jsonb_object_agg(state, n), '{}') INTO depth_by_state
      FROM (SELECT state, count(*) AS n FROM wharf.provider_event GROUP BY state) s;
  ELSE
    SELECT coalesce(jsonb_object_agg(f.state, round(t.rows * f.freq)::bigint), '{}') INTO depth_by_state
      FROM (SELECT CASE WHEN c.relpages > 0 THEN c.reltuples / c.relpages * v_pages ELSE 0 END AS rows
              FROM pg_class c WHERE c.oid = 'wharf.provider_event'::regclass) t,
           LATERAL (SELECT v.state, v.freq
                      FROM pg_stats st,
                           unnest(st.most_common_vals::text::text[], st.most_common_freqs) AS v(state, freq)
                     WHERE st.schemaname = 'wharf' AND st.tablename = 'provider_event' AND st.attname = 'state') f;
  END IF;

  SELECT coalesce(extract(epoch FROM v_now - min(o.ready_at))::float8, 0) INTO oldest_due_age
    FROM wharf.claimable_kinds() k(kind)
    CROSS JOIN LATERAL (SELECT s.ready_at FROM wharf.scope s
                         WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
                           AND s.head_kind = k.kind AND s.ready_at <= v_now
                         ORDER BY s.ready_at LIMIT 1) o;

  SELECT count(*), coalesce(extract(epoch FROM v_now - min(x.since))::float8, 0)
    INTO stuck_scopes, oldest_stuck_age
    FROM wharf.scopes_stuck_since(v_stuck_since, NULL, 10000) x;
END $$;

REVOKE ALL ON FUNCTION wharf.claim(text, integer, text[]), wharf.renew(bigint, bigint),
  wharf.complete(bigint, bigint, text), wharf.complete_many(bigint[], bigint[], text[]), wharf.release(bigint, bigint), wharf.reap(),
  wharf.mark_idle(text), wharf.mark_busy(text), wharf.next_due_at(), wharf.queue_stats() FROM PUBLIC;

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

-- ======== sql/70-connections.sql ========

-- Sets a workspace ACTIVE, PAUSED (deliveries stored, nothing claimed until
-- ACTIVE again), SUSPENDED or DELETING (no admission, no claim). Back to
-- ACTIVE, idle claimers are woken. P0002 for an unknown workspace, 22023 for
-- an unknown state.
CREATE OR REPLACE FUNCTION wharf.set_workspace_state(p_id bigint, p_state text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_id IS NULL OR p_state IS NULL THEN
    RAISE EXCEPTION 'wharf.set_workspace_state: id and state are required' USING ERRCODE = '22004';
  END IF;
  IF p_state NOT IN ('ACTIVE', 'PAUSED', 'SUSPENDED', 'DELETING') THEN
    RAISE EXCEPTION 'wharf: unknown workspace state %', quote_literal(p_state) USING ERRCODE = '22023';
  END IF;
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  PERFORM wharf.lock_lifecycle('workspace', p_id::text);
  UPDATE wharf.workspace SET state = p_state WHERE id = p_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: unknown workspace %', p_id USING ERRCODE = 'P0002';
  END IF;
  -- The workspace's scopes follow its state by the workspace trigger (sql/20).
  IF p_state = 'ACTIVE' THEN
    PERFORM wharf.notify_idle_claimers();
  END IF;
END $$;

REVOKE ALL ON FUNCTION wharf.upsert_workspace(bigint),
  wharf.set_workspace_state(bigint, text),
  wharf.upsert_connection(bigint, text, text, text, text, jsonb),
  wharf.set_connection_state(bigint, text),
  wharf.subscribe(bigint, text),
  wharf.unsubscribe(bigint, text) FROM PUBLIC;

-- ======== sql/92-delivery-history.sql ========

-- What an admission log entry of reason p_reason is: 'refused' when a
-- recipient would not take the delivery (its connection or workspace not
-- ACTIVE: the delivery was for it), else 'dropped' (no recipient at all: an
-- unknown or inactive source, no subscriber, a route that does not match, a
-- malformed control event). The reasons are the fixed set admission writes
-- (sql/80), so a label made of them is bounded.
CREATE OR REPLACE FUNCTION wharf.admission_outcome(p_reason text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p_reason IN ('connection-inactive', 'workspace-inactive') THEN 'refused' ELSE 'dropped' END
$$;

-- The last p_hours (1..24) hours of workspace p_workspace_id: one {at,
-- connection_id, accepted, refused: {reason: count}, dropped: {reason:
-- count}} per minute and connection that saw a delivery, oldest first
-- (refused and dropped: admission_outcome). Accepted are the
-- workspace's events by arrival; refused and dropped are the admission log's
-- entries that concern it (naming it, or naming one of its connections).
-- Cost: the events received within the window (by arrival, or the
-- workspace's rows, as the planner finds cheaper) and a scan of the admission
-- log, which has no index but its key and is bounded by its retention.
-- Events purged since are not counted. P0002 for an unknown workspace, 22023
-- for hours outside 1..24.
CREATE OR REPLACE FUNCTION wharf.delivery_history(p_workspace_id bigint, p_hours integer) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_since timestamptz;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF p_hours IS NULL OR p_hours < 1 OR p_hours > 24 THEN
    RAISE EXCEPTION 'wharf.delivery_history: hours must be between 1 and 24' USING ERRCODE = '22023';
  END IF;
  v_since := date_trunc('minute', now()) - make_interval(mins => p_hours * 60 - 1);
  RETURN (
    WITH accepted AS (
      SELECT e.id, e.received_at, e.connection_id
        FROM wharf.provider_event e
       WHERE e.workspace_id = p_workspace_id AND e.received_at >= v_since
    ), connections AS (
      SELECT c.id FROM wharf.connection c WHERE c.workspace_id = p_workspace_id
    ), refused AS (
      SELECT a.at, a.connection_id, a.reason
        FROM wharf.admission_log a
       WHERE a.at >= v_since
         AND (a.workspace_id = p_workspace_id
              OR (a.workspace_id IS NULL AND a.connection_id IN (SELECT id FROM connections)))
    ), per_minute AS (
      SELECT date_trunc('minute', received_at) AS at, connection_id, count(*) AS accepted, NULL::text AS reason, 0::bigint AS refused
        FROM accepted GROUP BY 1, 2
      UNION ALL
      SELECT date_trunc('minute', at), connection_id, 0, reason, count(*)
        FROM refused GROUP BY 1, 2, 4
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object('at', m.at, 'connection_id', m.connection_id, 'accepted', m.accepted,
                                                 'refused', m.refused, 'dropped', m.dropped)
                              ORDER BY m.at, m.connection_id NULLS FIRST), '[]')
      FROM (SELECT p.at, p.connection_id, sum(p.accepted) AS accepted,
                   coalesce(jsonb_object_agg(p.reason, p.refused)
                              FILTER (WHERE p.reason IS NOT NULL AND wharf.admission_outcome(p.reason) = 'refused'), '{}') AS refused,
                   coalesce(jsonb_object_agg(p.reason, p.refused)
                              FILTER (WHERE p.reason IS NOT NULL AND wharf.admission_outcome(p.reason) = 'dropped'), '{}') AS dropped
              FROM per_minute p
             GROUP BY p.at, p.connection_id) m
  );
END $$;

-- The deliveries of the instance in minute p_minute (truncated to the
-- minute; NULL: the last complete one), for the worker's gauges:
-- {minute, deliveries: [{connection, outcome, reason, count}]}. outcome:
-- 'accepted' (events stored; reason ''), 'refused' or 'dropped' (by reason,
-- admission_outcome). connection: the connection's id for the p_top
-- connections (1..100) with the most deliveries in the minute, 'other' for
-- every other connection together, 'none' for a drop that names no
-- connection (an unknown source): so a label made of it has at most p_top +
-- 2 values, whatever the number of connections. Cost: the minute's events
-- (ix_provider_event_received) and admission log entries (its index on at).
-- 22023 for p_top outside 1..100.
CREATE OR REPLACE FUNCTION wharf.delivery_gauges(p_minute timestamptz, p_top integer) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_at timestamptz := date_trunc('minute', coalesce(p_minute, now() - interval '1 minute'));
BEGIN
  IF p_top IS NULL OR p_top < 1 OR p_top > 100 THEN
    RAISE EXCEPTION 'wharf.delivery_gauges: top must be between 1 and 100' USING ERRCODE = '22023';
  END IF;
  RETURN (
    WITH counted AS (
      SELECT e.connection_id, 'accepted' AS outcome, '' AS reason, count(*) AS n
        FROM wharf.provider_event e
       WHERE e.received_at >= v_at AND e.received_at < v_at + interval '1 minute'
       GROUP BY e.connection_id
      UNION ALL
      SELECT a.connection_id, wharf.admission_outcome(a.reason), a.reason, count(*)
        FROM wharf.admission_log a
       WHERE a.at >= v_at AND a.at < v_at + interval '1 minute'
       GROUP BY a.connection_id, a.reason
    ), top AS (
      SELECT c.connection_id FROM counted c WHERE c.connection_id IS NOT NULL
       GROUP BY c.connection_id ORDER BY sum(c.n) DESC, c.connection_id LIMIT p_top
    )
    SELECT jsonb_build_object('minute', v_at, 'deliveries', coalesce(jsonb_agg(jsonb_build_object(
             'connection', g.connection, 'outcome', g.outcome, 'reason', g.reason, 'count', g.n)
             ORDER BY g.connection, g.outcome, g.reason), '[]'))
      FROM (SELECT CASE WHEN c.connection_id IS NULL THEN 'none'
                        WHEN c.connection_id IN (SELECT t.connection_id FROM top t) THEN c.connection_id::text
                        ELSE 'other' END AS connection,
                   c.outcome, c.reason, sum(c.n) AS n
              FROM counted c GROUP BY 1, 2, 3) g
  );
END $$;

REVOKE ALL ON FUNCTION wharf.delivery_history(bigint, integer), wharf.delivery_gauges(timestamptz, integer) FROM PUBLIC;

-- ======== sql/96-queue-history.sql ========

-- The last p_hours (1..24) hours of workspace p_workspace_id, one
-- {at, admitted, handled, attempts, dead, depth, oldest_age_seconds} per
-- minute, oldest first. attempts: the attempts the events handled in the
-- minute took, all told (attempts / handled is the attempts per handled
-- event; an event replayed counts the attempts since its replay). depth counts events waiting at the minute's end (received, or
-- replayed, and neither DONE nor DEAD then: retries not yet due and held
-- events included); oldest_age_seconds is how long the oldest of them had
-- waited (0 when none). It reads the workspace's own rows
-- (ix_provider_event_workspace_recent), never another tenant's: its cost is
-- the workspace's traffic within the retention, whatever the others send.
-- Events purged since are not counted. P0002 for an unknown workspace, 22023 for hours
-- outside 1..24.
CREATE OR REPLACE FUNCTION wharf.queue_history(p_workspace_id bigint, p_hours integer) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_now   timestamptz := clock_timestamp();
  v_since timestamptz;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF p_hours IS NULL OR p_hours < 1 OR p_hours > 24 THEN
    RAISE EXCEPTION 'wharf.queue_history: hours must be between 1 and 24' USING ERRCODE = '22023';
  END IF;
  v_since := date_trunc('minute', v_now) - make_interval(mins => p_hours * 60 - 1);

  RETURN (
    WITH events AS (
      -- A replayed event waits from its replay, not from its arrival: it was
      -- DEAD in between.
      SELECT e.received_at, e.state, e.attempt, greatest(e.received_at, e.replayed_at) AS waiting_since,
             CASE e.state WHEN 'DONE' THEN e.handled_at WHEN 'DEAD' THEN e.dead_at END AS ended_at
        FROM wharf.provider_event e
       WHERE e.workspace_id = p_workspace_id
         AND (e.state IN ('QUEUED', 'LEASED')
              OR (e.state = 'DONE' AND e.handled_at >= v_since)
              OR (e.state = 'DEAD' AND e.dead_at >= v_since))
    ),
    minutes AS (
      SELECT m AS at, m + interval '1 minute' AS ends
        FROM generate_series(v_since, date_trunc('minute', v_now), interval '1 minute') m
    ),
    arrivals AS (
      SELECT date_trunc('minute', received_at) AS at, count(*) AS admitted
        FROM events WHERE received_at >= v_since GROUP BY 1
    ),
    entries AS (
      SELECT date_trunc('minute', waiting_since) AS at, count(*) AS entered
        FROM events WHERE waiting_since >= v_since GROUP BY 1
    ),
    endings AS (
      SELECT date_trunc('minute', ended_at) AS at,
             count(*) FILTER (WHERE state = 'DONE') AS handled,
             coalesce(sum(attempt) FILTER (WHERE state = 'DONE'), 0) AS attempts,
             count(*) FILTER (WHERE state = 'DEAD') AS dead,
             min(waiting_since) AS earliest_waiting
        FROM events WHERE ended_at IS NOT NULL GROUP BY 1
    ),
    still_waiting AS (
      SELECT min(waiting_since) AS earliest_waiting FROM events WHERE ended_at IS NULL
    ),
    before_window AS (
      SELECT count(*) AS waiting FROM events WHERE waiting_since < v_since
    ),
    per_minute AS (
      SELECT m.at, m.ends,
             coalesce(a.admitted, 0) AS admitted, coalesce(x.handled, 0) AS handled,
             coalesce(x.attempts, 0) AS attempts,
             coalesce(x.dead, 0) AS dead,
             -- Depth at the minute's end: every event waiting since before
             -- it (those before the window too) less every event ended before it.
             b.waiting + sum(coalesce(n.entered, 0)) OVER (ORDER BY m.at)
               - sum(coalesce(x.handled, 0) + coalesce(x.dead, 0)) OVER (ORDER BY m.at) AS depth,
             -- The oldest event waiting at the minute's end is the one
             -- waiting longest of those that end after that minute, or
             -- never: a running minimum over the later minutes. It is
             -- waiting then only when it was waiting before the minute's end.
             least(w.earliest_waiting,
                   min(x.earliest_waiting) OVER (ORDER BY m.at DESC
                                                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)) AS oldest
        FROM minutes m
        LEFT JOIN arrivals a ON a.at = m.at
        LEFT JOIN entries n ON n.at = m.at
        LEFT JOIN endings x ON x.at = m.at
        CROSS JOIN still_waiting w
        CROSS JOIN before_window b
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
             'at', x.at, 'admitted', x.admitted, 'handled', x.handled, 'attempts', x.attempts, 'dead', x.dead,
             'depth', greatest(x.depth, 0),
             'oldest_age_seconds',
               CASE WHEN x.oldest < least(x.ends, v_now)
                    THEN round(extract(epoch FROM least(x.ends, v_now) - x.oldest)::numeric, 3)
                    ELSE 0 END)
             ORDER BY x.at), '[]')
      FROM per_minute x
  );
END $$;

REVOKE ALL ON FUNCTION wharf.queue_history(bigint, integer) FROM PUBLIC;

-- ======== sql/98-stuck-scopes.sql ========

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
                                                                'leased_until', h.leased_until),
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

REVOKE ALL ON FUNCTION wharf.list_stuck_scopes(bigint, interval, integer),
  wharf.retry_scope_head(bigint, text, bigint, text),
  wharf.dead_letter_scope_head(bigint, text, bigint, text),
  wharf.pause_scope_connection(bigint, text, bigint, text),
  wharf.list_scope_actions(bigint, integer),
  wharf.purge_scope_actions(integer) FROM PUBLIC;

-- ======== sql/99-alerts.sql ========

-- Evaluates every rule and records an alert for each thing it fires on
-- that has none yet (rule and dedupe key); returns how many it recorded.
--   issue_opened      an issue first seen since the rule exists (and within a
--                     day), not ignored: one alert per issue
--   issue_reopened    an open issue reopened since then: one per reopening
--   dead_letter_rate  dead letters in the minutes covering the last
--                     window_seconds at least threshold: one per window
--   oldest_due_age    a scope head due and unclaimed for window_seconds:
--                     one per window while it lasts
--   stuck_scope       a scope stuck for window_seconds (scopes_stuck_since,
--                     the stuck-scopes list's rule): one per head, at most
--                     1000 per evaluation
-- An instance rule covers every workspace and the installation rows. WH412
-- when p_token does not hold the sender's lease. JIT off, as queue_stats
-- (sql/30): the stuck scopes' scans are priced far above what they read.
CREATE OR REPLACE FUNCTION wharf.evaluate_alert_rules(p_token uuid) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off AS $$
DECLARE
  v_now   timestamptz := now();
  v_count integer;
  v_total integer := 0;
BEGIN
  PERFORM wharf.held_alert_sender(p_token);

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, i.workspace_id, 'issue-opened:' || i.id, r.kind, wharf.issue_alert_facts(i)
    FROM wharf.alert_rule r
    JOIN wharf.issue i ON (r.workspace_id IS NULL OR i.workspace_id = r.workspace_id)
   WHERE r.kind = 'issue_opened' AND i.status <> 'ignored'
     AND i.last_seen_at >= greatest(r.created_at, v_now - interval '1 day')
     AND i.first_seen_at >= greatest(r.created_at, v_now - interval '1 day')
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  v_total := v_total + v_count;

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, i.workspace_id, 'issue-reopened:' || i.id || ':' || i.reopened, r.kind, wharf.issue_alert_facts(i)
    FROM wharf.alert_rule r
    JOIN wharf.issue i ON (r.workspace_id IS NULL OR i.workspace_id = r.workspace_id)
   WHERE r.kind = 'issue_reopened' AND i.status = 'open'
     AND i.last_seen_at >= greatest(r.created_at, v_now - interval '1 day')
     AND i.reopened_at >= greatest(r.created_at, v_now - interval '1 day')
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  v_total := v_total + v_count;

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, r.workspace_id, 'dead-rate:' || floor(extract(epoch FROM v_now) / r.window_seconds)::bigint, r.kind,
         jsonb_build_object('dead', c.dead, 'threshold', r.threshold, 'window_seconds', r.window_seconds)
    FROM wharf.alert_rule r
    CROSS JOIN LATERAL (SELECT coalesce(sum(m.dead), 0) AS dead FROM wharf.failure_minute m
                         WHERE (r.workspace_id IS NULL OR m.workspace_id = r.workspace_id)
                           AND m.minute >= date_trunc('minute', v_now - make_interval(secs => r.window_seconds))) c
   WHERE r.kind = 'dead_letter_rate' AND c.dead >= r.threshold
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  v_total := v_total + v_count;

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, r.workspace_id, 'oldest-due:' || floor(extract(epoch FROM v_now) / r.window_seconds)::bigint, r.kind,
         jsonb_build_object('oldest_due_at', o.due, 'age_seconds', floor(extract(epoch FROM v_now - o.due)),
                            'window_seconds', r.window_seconds)
    FROM wharf.alert_rule r
    CROSS JOIN LATERAL (SELECT min(s.head_due_at) AS due FROM wharf.scope s
                         WHERE (r.workspace_id IS NULL OR s.workspace_id = r.workspace_id)
                           AND s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active) o
   WHERE r.kind = 'oldest_due_age' AND o.due < v_now - make_interval(secs => r.window_seconds)
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  v_total := v_total + v_count;

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, t.workspace_id, 'stuck:' || t.scope_key || ':' || h.id, r.kind,
         jsonb_build_object('scope_key', t.scope_key, 'subject', h.subject, 'waiting_since', t.since,
                            'head', jsonb_build_object('id', h.id, 'provider', h.provider, 'event_type', h.event_type,
                                                       'state', h.state, 'attempt', h.attempt,
                                                       'error_class', h.error_class))
    FROM wharf.alert_rule r
    CROSS JOIN LATERAL wharf.scopes_stuck_since(v_now - make_interval(secs => r.window_seconds), r.workspace_id, 1000) t
    JOIN wharf.provider_event h ON h.id = t.head_id
   WHERE r.kind = 'stuck_scope'
   LIMIT 1000
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  RETURN v_total + v_count;
END $$;

REVOKE ALL ON FUNCTION wharf.create_alert_rule(bigint, text, text, integer, integer, text, text, text, text),
  wharf.create_instance_alert_rule(text, text, integer, integer, text, text, text, text),
  wharf.list_alert_rules(bigint),
  wharf.list_instance_alert_rules(),
  wharf.delete_alert_rule(bigint, bigint),
  wharf.list_alerts(bigint, integer),
  wharf.take_alert_sender(text, interval, uuid),
  wharf.release_alert_sender(uuid),
  wharf.evaluate_alert_rules(uuid),
  wharf.due_alerts(uuid, integer),
  wharf.record_alert_attempt(uuid, bigint, boolean, integer, text, interval),
  wharf.purge_alerts(integer) FROM PUBLIC;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

DROP FUNCTION wharf.admission_outcome(text);

DROP FUNCTION wharf.cancel_bulk_replay(bigint,bigint,text);

DROP FUNCTION wharf.delivery_gauges(timestamp with time zone,integer);

DROP FUNCTION wharf.scopes_stuck_since(timestamp with time zone,bigint,integer);

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

CREATE OR REPLACE FUNCTION wharf.delivery_history(p_workspace_id bigint, p_hours integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_since timestamptz;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF p_hours IS NULL OR p_hours < 1 OR p_hours > 24 THEN
    RAISE EXCEPTION 'wharf.delivery_history: hours must be between 1 and 24' USING ERRCODE = '22023';
  END IF;
  v_since := date_trunc('minute', now()) - make_interval(mins => p_hours * 60 - 1);
  RETURN (
    WITH accepted AS (
      SELECT e.id, e.received_at, e.connection_id
        FROM wharf.provider_event e
       WHERE e.workspace_id = p_workspace_id AND e.received_at >= v_since
    ), connections AS (
      SELECT c.id FROM wharf.connection c WHERE c.workspace_id = p_workspace_id
    ), refused AS (
      SELECT a.at, a.connection_id, a.reason
        FROM wharf.admission_log a
       WHERE a.at >= v_since
         AND (a.workspace_id = p_workspace_id
              OR (a.workspace_id IS NULL AND a.connection_id IN (SELECT id FROM connections)))
    ), per_minute AS (
      SELECT date_trunc('minute', received_at) AS at, connection_id, count(*) AS accepted, NULL::text AS reason, 0::bigint AS refused
        FROM accepted GROUP BY 1, 2
      UNION ALL
      SELECT date_trunc('minute', at), connection_id, 0, reason, count(*)
        FROM refused GROUP BY 1, 2, 4
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object('at', m.at, 'connection_id', m.connection_id, 'accepted', m.accepted,
                                                 'refused', m.refused) ORDER BY m.at, m.connection_id NULLS FIRST), '[]')
      FROM (SELECT p.at, p.connection_id, sum(p.accepted) AS accepted,
                   coalesce(jsonb_object_agg(p.reason, p.refused) FILTER (WHERE p.reason IS NOT NULL), '{}') AS refused
              FROM per_minute p
             GROUP BY p.at, p.connection_id) m
  );
END $function$;
REVOKE ALL ON FUNCTION wharf.delivery_history(bigint,integer) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.evaluate_alert_rules(p_token uuid)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_now   timestamptz := now();
  v_count integer;
  v_total integer := 0;
BEGIN
  PERFORM wharf.held_alert_sender(p_token);

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, i.workspace_id, 'issue-opened:' || i.id, r.kind, wharf.issue_alert_facts(i)
    FROM wharf.alert_rule r
    JOIN wharf.issue i ON (r.workspace_id IS NULL OR i.workspace_id = r.workspace_id)
   WHERE r.kind = 'issue_opened' AND i.status <> 'ignored'
     AND i.last_seen_at >= greatest(r.created_at, v_now - interval '1 day')
     AND i.first_seen_at >= greatest(r.created_at, v_now - interval '1 day')
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  v_total := v_total + v_count;

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, i.workspace_id, 'issue-reopened:' || i.id || ':' || i.reopened, r.kind, wharf.issue_alert_facts(i)
    FROM wharf.alert_rule r
    JOIN wharf.issue i ON (r.workspace_id IS NULL OR i.workspace_id = r.workspace_id)
   WHERE r.kind = 'issue_reopened' AND i.status = 'open'
     AND i.last_seen_at >= greatest(r.created_at, v_now - interval '1 day')
     AND i.reopened_at >= greatest(r.created_at, v_now - interval '1 day')
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  v_total := v_total + v_count;

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, r.workspace_id, 'dead-rate:' || floor(extract(epoch FROM v_now) / r.window_seconds)::bigint, r.kind,
         jsonb_build_object('dead', c.dead, 'threshold', r.threshold, 'window_seconds', r.window_seconds)
    FROM wharf.alert_rule r
    CROSS JOIN LATERAL (SELECT coalesce(sum(m.dead), 0) AS dead FROM wharf.failure_minute m
                         WHERE (r.workspace_id IS NULL OR m.workspace_id = r.workspace_id)
                           AND m.minute >= date_trunc('minute', v_now - make_interval(secs => r.window_seconds))) c
   WHERE r.kind = 'dead_letter_rate' AND c.dead >= r.threshold
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  v_total := v_total + v_count;

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, r.workspace_id, 'oldest-due:' || floor(extract(epoch FROM v_now) / r.window_seconds)::bigint, r.kind,
         jsonb_build_object('oldest_due_at', o.due, 'age_seconds', floor(extract(epoch FROM v_now - o.due)),
                            'window_seconds', r.window_seconds)
    FROM wharf.alert_rule r
    CROSS JOIN LATERAL (SELECT min(s.head_due_at) AS due FROM wharf.scope s
                         WHERE (r.workspace_id IS NULL OR s.workspace_id = r.workspace_id)
                           AND s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active) o
   WHERE r.kind = 'oldest_due_age' AND o.due < v_now - make_interval(secs => r.window_seconds)
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  v_total := v_total + v_count;

  INSERT INTO wharf.alert (rule_id, workspace_id, dedupe_key, kind, facts)
  SELECT r.id, s.workspace_id, 'stuck:' || s.scope_key || ':' || h.id, r.kind,
         jsonb_build_object('scope_key', s.scope_key, 'subject', h.subject,
                            'waiting_since', greatest(h.received_at, h.replayed_at),
                            'head', jsonb_build_object('id', h.id, 'provider', h.provider, 'event_type', h.event_type,
                                                       'state', h.state, 'attempt', h.attempt,
                                                       'error_class', h.error_class))
    FROM wharf.alert_rule r
    JOIN wharf.scope s ON (r.workspace_id IS NULL OR s.workspace_id = r.workspace_id)
    JOIN wharf.provider_event h ON h.id = coalesce(s.leased_id, s.head_id)
   WHERE r.kind = 'stuck_scope'
     AND greatest(h.received_at, h.replayed_at) < v_now - make_interval(secs => r.window_seconds)
   LIMIT 1000
  ON CONFLICT (rule_id, dedupe_key) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  RETURN v_total + v_count;
END $function$;
REVOKE ALL ON FUNCTION wharf.evaluate_alert_rules(uuid) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.list_stuck_scopes(p_workspace_id bigint, p_older_than interval DEFAULT NULL::interval, p_limit integer DEFAULT 100)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF p_older_than < interval '0' THEN
    RAISE EXCEPTION 'wharf: the threshold must not be negative' USING ERRCODE = '22023';
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
    RAISE EXCEPTION 'wharf: limit must be between 1 and 500' USING ERRCODE = '22023';
  END IF;
  RETURN wharf.stuck_scope_list(p_workspace_id, coalesce(p_older_than, wharf.setting_interval('stuck_after')), p_limit);
END $function$;
REVOKE ALL ON FUNCTION wharf.list_stuck_scopes(bigint,interval,integer) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.queue_history(p_workspace_id bigint, p_hours integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_now   timestamptz := clock_timestamp();
  v_since timestamptz;
BEGIN
  PERFORM wharf.require_workspace(p_workspace_id);
  IF p_hours IS NULL OR p_hours < 1 OR p_hours > 24 THEN
    RAISE EXCEPTION 'wharf.queue_history: hours must be between 1 and 24' USING ERRCODE = '22023';
  END IF;
  v_since := date_trunc('minute', v_now) - make_interval(mins => p_hours * 60 - 1);

  RETURN (
    WITH events AS (
      -- A replayed event waits from its replay, not from its arrival: it was
      -- DEAD in between.
      SELECT e.received_at, e.state, greatest(e.received_at, e.replayed_at) AS waiting_since,
             CASE e.state WHEN 'DONE' THEN e.handled_at WHEN 'DEAD' THEN e.dead_at END AS ended_at
        FROM wharf.provider_event e
       WHERE e.workspace_id = p_workspace_id
         AND (e.state IN ('QUEUED', 'LEASED')
              OR (e.state = 'DONE' AND e.handled_at >= v_since)
              OR (e.state = 'DEAD' AND e.dead_at >= v_since))
    ),
    minutes AS (
      SELECT m AS at, m + interval '1 minute' AS ends
        FROM generate_series(v_since, date_trunc('minute', v_now), interval '1 minute') m
    ),
    arrivals AS (
      SELECT date_trunc('minute', received_at) AS at, count(*) AS admitted
        FROM events WHERE received_at >= v_since GROUP BY 1
    ),
    entries AS (
      SELECT date_trunc('minute', waiting_since) AS at, count(*) AS entered
        FROM events WHERE waiting_since >= v_since GROUP BY 1
    ),
    endings AS (
      SELECT date_trunc('minute', ended_at) AS at,
             count(*) FILTER (WHERE state = 'DONE') AS handled,
             count(*) FILTER (WHERE state = 'DEAD') AS dead,
             min(waiting_since) AS earliest_waiting
        FROM events WHERE ended_at IS NOT NULL GROUP BY 1
    ),
    still_waiting AS (
      SELECT min(waiting_since) AS earliest_waiting FROM events WHERE ended_at IS NULL
    ),
    before_window AS (
      SELECT count(*) AS waiting FROM events WHERE waiting_since < v_since
    ),
    per_minute AS (
      SELECT m.at, m.ends,
             coalesce(a.admitted, 0) AS admitted, coalesce(x.handled, 0) AS handled,
             coalesce(x.dead, 0) AS dead,
             -- Depth at the minute's end: every event waiting since before
             -- it (those before the window too) less every event ended before it.
             b.waiting + sum(coalesce(n.entered, 0)) OVER (ORDER BY m.at)
               - sum(coalesce(x.handled, 0) + coalesce(x.dead, 0)) OVER (ORDER BY m.at) AS depth,
             -- The oldest event waiting at the minute's end is the one
             -- waiting longest of those that end after that minute, or
             -- never: a running minimum over the later minutes. It is
             -- waiting then only when it was waiting before the minute's end.
             least(w.earliest_waiting,
                   min(x.earliest_waiting) OVER (ORDER BY m.at DESC
                                                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)) AS oldest
        FROM minutes m
        LEFT JOIN arrivals a ON a.at = m.at
        LEFT JOIN entries n ON n.at = m.at
        LEFT JOIN endings x ON x.at = m.at
        CROSS JOIN still_waiting w
        CROSS JOIN before_window b
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
             'at', x.at, 'admitted', x.admitted, 'handled', x.handled, 'dead', x.dead,
             'depth', greatest(x.depth, 0),
             'oldest_age_seconds',
               CASE WHEN x.oldest < least(x.ends, v_now)
                    THEN round(extract(epoch FROM least(x.ends, v_now) - x.oldest)::numeric, 3)
                    ELSE 0 END)
             ORDER BY x.at), '[]')
      FROM per_minute x
  );
END $function$;
REVOKE ALL ON FUNCTION wharf.queue_history(bigint,integer) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.queue_stats(OUT depth_by_state jsonb, OUT oldest_due_age double precision, OUT depth_estimated boolean, OUT stuck_scopes bigint, OUT oldest_stuck_age double precision)
 RETURNS record
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
  v_now         timestamptz := clock_timestamp();
  v_stuck_since timestamptz := clock_timestamp() - wharf.setting_interval('stuck_after');
  v_pages       bigint := pg_relation_size('wharf.provider_event') / current_setting('block_size')::bigint;
BEGIN
  depth_estimated := v_pages > 1024;
  IF NOT depth_estimated THEN
    SELECT coalesce(jsonb_object_agg(state, n), '{}') INTO depth_by_state
      FROM (SELECT state, count(*) AS n FROM wharf.provider_event GROUP BY state) s;
  ELSE
    SELECT coalesce(jsonb_object_agg(f.state, round(t.rows * f.freq)::bigint), '{}') INTO depth_by_state
      FROM (SELECT CASE WHEN c.relpages > 0 THEN c.reltuples / c.relpages * v_pages ELSE 0 END AS rows
              FROM pg_class c WHERE c.oid = 'wharf.provider_event'::regclass) t,
           LATERAL (SELECT v.state, v.freq
                      FROM pg_stats st,
                           unnest(st.most_common_vals::text::text[], st.most_common_freqs) AS v(state, freq)
                     WHERE st.schemaname = 'wharf' AND st.tablename = 'provider_event' AND st.attname = 'state') f;
  END IF;

  SELECT coalesce(extract(epoch FROM v_now - min(o.ready_at))::float8, 0) INTO oldest_due_age
    FROM wharf.claimable_kinds() k(kind)
    CROSS JOIN LATERAL (SELECT s.ready_at FROM wharf.scope s
                         WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
                           AND s.head_kind = k.kind AND s.ready_at <= v_now
                         ORDER BY s.ready_at LIMIT 1) o;

  SELECT count(*), coalesce(extract(epoch FROM v_now - min(x.since))::float8, 0)
    INTO stuck_scopes, oldest_stuck_age
    FROM (SELECT DISTINCT ON (y.scope_key) y.scope_key, y.since
            FROM ((SELECT s.scope_key, s.failing_since AS since FROM wharf.scope s
                    WHERE s.failing_since < v_stuck_since
                    ORDER BY s.failing_since LIMIT 10000)
                  UNION ALL
                  (SELECT w.scope_key, w.ready_at
                     FROM wharf.claimable_kinds() k(kind)
                     CROSS JOIN LATERAL (SELECT s.scope_key, s.ready_at FROM wharf.scope s
                                          WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
                                            AND s.head_kind = k.kind AND s.ready_at < v_stuck_since
                                          ORDER BY s.ready_at LIMIT 10000) w
                    LIMIT 10000)) y
           ORDER BY y.scope_key, y.since
           LIMIT 10000) x;
END $function$;
REVOKE ALL ON FUNCTION wharf.queue_stats() FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.set_workspace_state(p_id bigint, p_state text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
  IF p_id IS NULL OR p_state IS NULL THEN
    RAISE EXCEPTION 'wharf.set_workspace_state: id and state are required' USING ERRCODE = '22004';
  END IF;
  IF p_state NOT IN ('ACTIVE', 'PAUSED', 'SUSPENDED', 'DELETING') THEN
    RAISE EXCEPTION 'wharf: unknown workspace state %', quote_literal(p_state) USING ERRCODE = '22023';
  END IF;
  LOCK TABLE wharf.idle_listener IN ROW EXCLUSIVE MODE;  -- see notify_idle_claimers
  PERFORM wharf.lock_lifecycle('workspace', p_id::text);
  UPDATE wharf.workspace SET state = p_state WHERE id = p_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: unknown workspace %', p_id USING ERRCODE = 'P0002';
  END IF;
  -- Out of PAUSED: the scopes a claim parked for this connection's heads
  -- (sql/30) are claimable again, in their usual order.
  IF p_state <> 'PAUSED' THEN
    UPDATE wharf.scope s SET active = true
      FROM wharf.provider_event e
     WHERE NOT s.active AND e.id = s.head_id AND e.connection_id = p_id
       AND wharf.scope_workspace_active(s.workspace_id);
  END IF;
  IF p_state = 'ACTIVE' THEN
    PERFORM wharf.notify_idle_claimers();
  END IF;
END $function$;
REVOKE ALL ON FUNCTION wharf.set_workspace_state(bigint,text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wharf.stuck_scope_list(p_workspace_id bigint, p_older_than interval, p_limit integer)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
  SELECT coalesce(jsonb_agg(x.scope ORDER BY x.since, x.scope_key), '[]')
    FROM (SELECT s.scope_key, greatest(h.received_at, h.replayed_at) AS since,
                 jsonb_build_object(
                   'scope_key', s.scope_key, 'subject', h.subject,
                   'reason', CASE WHEN h.state = 'LEASED' THEN 'leased'
                                  WHEN c.state = 'PAUSED' THEN 'paused'
                                  WHEN h.attempt > 0 OR h.error_class IS NOT NULL THEN 'failing'
                                  ELSE 'waiting' END,
                   'waiting_since', greatest(h.received_at, h.replayed_at),
                   'waiting_seconds', floor(extract(epoch FROM now() - greatest(h.received_at, h.replayed_at))),
                   'behind', b.n, 'behind_capped', b.n >= 10000,
                   'head', wharf.event_summary(h) || jsonb_build_object('leased_by', h.leased_by,
                                                                        'leased_until', h.leased_until),
                   'connection', jsonb_build_object('id', c.id, 'state', c.state)) AS scope
            FROM wharf.scope s
            JOIN wharf.provider_event h ON h.id = coalesce(s.leased_id, s.head_id)
            LEFT JOIN wharf.connection c ON c.id = h.connection_id
            CROSS JOIN LATERAL (SELECT count(*) AS n
                                  FROM (SELECT FROM wharf.provider_event e
                                         WHERE e.scope_key = s.scope_key AND e.id > h.id AND e.state = 'QUEUED'
                                         LIMIT 10000) q) b
           WHERE s.workspace_id = p_workspace_id
             AND (s.leased_id IS NOT NULL OR s.head_id IS NOT NULL)
             AND greatest(h.received_at, h.replayed_at) < now() - p_older_than
           ORDER BY greatest(h.received_at, h.replayed_at), s.scope_key
           LIMIT p_limit) x
$function$;
GRANT EXECUTE ON FUNCTION wharf.stuck_scope_list(bigint,interval,integer) TO PUBLIC;
