-- Up Migration

-- Release 0.4.0, written by `npm run sql:release` from the difference
-- between sql/ and the migrations before it. Frozen: never edit it.
--   changed  function wharf.count_into_failure_minute(bigint,timestamp with time zone,bigint,bigint)
--   changed  function wharf.count_into_issue(bigint,text,text,text,text,text[],timestamp with time zone,timestamp with time zone,bigint,bigint,bigint)

-- ======== sql/97-issues.sql ========

-- Counts p_failures failures (p_dead of them dead, the latest at
-- p_last_seen_at) of one group into its issue: opened when new, reopened
-- when resolved; an acknowledged or ignored issue keeps its status. The one
-- upsert of wharf.issue: the handlers' attempts (below) and the
-- destinations' deliveries (count_delivery_issue, below) count through it.
-- PL/pgSQL for the plan it keeps per session: the trigger calls it once per
-- group. Internal.
CREATE OR REPLACE FUNCTION wharf.count_into_issue(
  p_workspace_id bigint, p_provider text, p_event_type text, p_error_class text, p_fingerprint text, p_frames text[],
  p_first_seen_at timestamptz, p_last_seen_at timestamptz, p_failures bigint, p_dead bigint, p_sample_event_id bigint)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO wharf.issue AS i (workspace_id, provider, event_type, error_class, fingerprint, frames,
                                first_seen_at, last_seen_at, failures, dead, sample_event_id, status_at)
  VALUES (p_workspace_id, p_provider, p_event_type, p_error_class, p_fingerprint, p_frames,
          p_first_seen_at, p_last_seen_at, p_failures, p_dead, p_sample_event_id, p_first_seen_at)
  ON CONFLICT (workspace_id, provider, event_type, error_class, fingerprint) DO UPDATE
     SET last_seen_at    = greatest(i.last_seen_at, excluded.last_seen_at),
         failures        = i.failures + excluded.failures,
         dead            = i.dead + excluded.dead,
         sample_event_id = excluded.sample_event_id,
         status          = CASE WHEN i.status = 'resolved' THEN 'open' ELSE i.status END,
         status_by       = CASE WHEN i.status = 'resolved' THEN NULL ELSE i.status_by END,
         status_at       = CASE WHEN i.status = 'resolved' THEN excluded.last_seen_at ELSE i.status_at END,
         reopened        = i.reopened + CASE WHEN i.status = 'resolved' THEN 1 ELSE 0 END,
         reopened_at     = CASE WHEN i.status = 'resolved' THEN excluded.last_seen_at ELSE i.reopened_at END;
END $$;

-- Counts p_failed failures, p_dead of them dead letters, into workspace
-- p_workspace_id's minute p_minute (wharf.failure_minute: the dead-letter
-- rate's alerts, the failure chart, the metrics): a handler's failed or
-- expired lease (below) and a failed delivery to a destination (sql/88)
-- alike. Internal.
CREATE OR REPLACE FUNCTION wharf.count_into_failure_minute(
  p_workspace_id bigint, p_minute timestamptz, p_failed bigint, p_dead bigint)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO wharf.failure_minute AS m (workspace_id, minute, failed, dead)
  VALUES (p_workspace_id, p_minute, p_failed, p_dead)
  ON CONFLICT (workspace_id, minute) DO UPDATE
     SET failed = m.failed + excluded.failed, dead = m.dead + excluded.dead;
END $$;

-- Down Migration

-- The released text of everything the up changed.

SET LOCAL check_function_bodies = off;

CREATE OR REPLACE FUNCTION wharf.count_into_failure_minute(p_workspace_id bigint, p_minute timestamp with time zone, p_failed bigint, p_dead bigint)
 RETURNS void
 LANGUAGE sql
AS $function$
  INSERT INTO wharf.failure_minute AS m (workspace_id, minute, failed, dead)
  VALUES (p_workspace_id, p_minute, p_failed, p_dead)
  ON CONFLICT (workspace_id, minute) DO UPDATE
     SET failed = m.failed + excluded.failed, dead = m.dead + excluded.dead
$function$;
GRANT EXECUTE ON FUNCTION wharf.count_into_failure_minute(bigint,timestamp with time zone,bigint,bigint) TO PUBLIC;

CREATE OR REPLACE FUNCTION wharf.count_into_issue(p_workspace_id bigint, p_provider text, p_event_type text, p_error_class text, p_fingerprint text, p_frames text[], p_first_seen_at timestamp with time zone, p_last_seen_at timestamp with time zone, p_failures bigint, p_dead bigint, p_sample_event_id bigint)
 RETURNS void
 LANGUAGE sql
AS $function$
  INSERT INTO wharf.issue AS i (workspace_id, provider, event_type, error_class, fingerprint, frames,
                                first_seen_at, last_seen_at, failures, dead, sample_event_id, status_at)
  VALUES (p_workspace_id, p_provider, p_event_type, p_error_class, p_fingerprint, p_frames,
          p_first_seen_at, p_last_seen_at, p_failures, p_dead, p_sample_event_id, p_first_seen_at)
  ON CONFLICT (workspace_id, provider, event_type, error_class, fingerprint) DO UPDATE
     SET last_seen_at    = greatest(i.last_seen_at, excluded.last_seen_at),
         failures        = i.failures + excluded.failures,
         dead            = i.dead + excluded.dead,
         sample_event_id = excluded.sample_event_id,
         status          = CASE WHEN i.status = 'resolved' THEN 'open' ELSE i.status END,
         status_by       = CASE WHEN i.status = 'resolved' THEN NULL ELSE i.status_by END,
         status_at       = CASE WHEN i.status = 'resolved' THEN excluded.last_seen_at ELSE i.status_at END,
         reopened        = i.reopened + CASE WHEN i.status = 'resolved' THEN 1 ELSE 0 END,
         reopened_at     = CASE WHEN i.status = 'resolved' THEN excluded.last_seen_at ELSE i.reopened_at END
$function$;
GRANT EXECUTE ON FUNCTION wharf.count_into_issue(bigint,text,text,text,text,text[],timestamp with time zone,timestamp with time zone,bigint,bigint,bigint) TO PUBLIC;
