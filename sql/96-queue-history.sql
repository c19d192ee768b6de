-- Queue history: the console's charts, computed from the inbox itself (no
-- metrics store). Per minute of the last hours: events admitted, handled and
-- dead, and at the minute's end the queue depth and the age of the oldest
-- waiting event.

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
