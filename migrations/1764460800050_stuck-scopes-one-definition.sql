-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   new      function wharf.scopes_stuck_since(timestamp with time zone,bigint,integer)
--   changed  function wharf.evaluate_alert_rules(uuid)
--   changed  function wharf.queue_stats()
--   changed  function wharf.stuck_scope_list(bigint,interval,integer)

-- ======== sql/30-claim-lease.sql ========

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
-- inbox. Internal.
CREATE OR REPLACE FUNCTION wharf.scopes_stuck_since(p_before timestamptz, p_workspace_id bigint, p_limit integer)
RETURNS TABLE (scope_key text, workspace_id bigint, head_id bigint, since timestamptz)
LANGUAGE sql STABLE AS $$
  SELECT x.scope_key, x.workspace_id, x.head_id, x.since
    FROM (SELECT DISTINCT ON (y.scope_key) y.scope_key, y.workspace_id, y.head_id, y.since
            FROM ((SELECT s.scope_key, s.workspace_id, coalesce(s.leased_id, s.head_id) AS head_id, s.failing_since AS since
                     FROM wharf.scope s
                    WHERE s.failing_since < p_before
                      AND (p_workspace_id IS NULL OR s.workspace_id = p_workspace_id)
                      AND NOT EXISTS (SELECT FROM wharf.provider_event h JOIN wharf.connection c ON c.id = h.connection_id
                                       WHERE h.id = coalesce(s.leased_id, s.head_id) AND c.state = 'PAUSED')
                    ORDER BY s.failing_since LIMIT p_limit)
                  UNION ALL
                  (SELECT w.scope_key, w.workspace_id, w.head_id, w.ready_at
                     FROM wharf.claimable_kinds() k(kind)
                     CROSS JOIN LATERAL (SELECT s.scope_key, s.workspace_id, s.head_id, s.ready_at FROM wharf.scope s
                                          WHERE s.head_id IS NOT NULL AND s.leased_id IS NULL AND s.active
                                            AND s.head_kind = k.kind AND s.ready_at < p_before
                                            AND (p_workspace_id IS NULL OR s.workspace_id = p_workspace_id)
                                            AND NOT EXISTS (SELECT FROM wharf.provider_event h
                                                              JOIN wharf.connection c ON c.id = h.connection_id
                                                             WHERE h.id = s.head_id AND c.state = 'PAUSED')
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
CREATE OR REPLACE FUNCTION wharf.queue_stats(
  OUT depth_by_state jsonb, OUT oldest_due_age float8, OUT depth_estimated boolean,
  OUT stuck_scopes bigint, OUT oldest_stuck_age float8)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
-- when p_token does not hold the sender's lease.
CREATE OR REPLACE FUNCTION wharf.evaluate_alert_rules(p_token uuid) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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

DROP FUNCTION wharf.scopes_stuck_since(timestamp with time zone,bigint,integer);

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
