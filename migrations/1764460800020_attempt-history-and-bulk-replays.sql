-- Up Migration

-- Attempt history and bulk replays (written by hand; the functions come from
-- sql/ next).

-- When the current lease began. With leased_by, attempt and lease_epoch it
-- describes the lease in progress, or the one that completed the row: a
-- completion, the common end of a lease, writes no history row.
ALTER TABLE wharf.provider_event ADD COLUMN leased_at timestamptz;

-- Every lease that ended other than by completion: failed (by kind),
-- released or expired. Kept with its event until the event is purged or
-- erased; holds a worker name and an error class, never a message.
CREATE TABLE wharf.event_attempt (
  event_id    bigint NOT NULL REFERENCES wharf.provider_event (id) ON DELETE CASCADE,
  lease_epoch bigint NOT NULL,
  attempt     integer NOT NULL,
  worker      text NOT NULL,
  started_at  timestamptz,
  ended_at    timestamptz NOT NULL,
  ended       text NOT NULL
              CHECK (ended IN ('transient', 'unknown', 'permanent', 'uncertain', 'released', 'expired')),
  error_class text,
  PRIMARY KEY (event_id, lease_epoch)
);

-- A replay of every DEAD event of a workspace that matches a filter, run in
-- batches: its progress, and the keyset cursor where the next batch starts.
CREATE TABLE wharf.bulk_replay (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  workspace_id bigint NOT NULL REFERENCES wharf.workspace (id) ON DELETE CASCADE,
  filter       jsonb NOT NULL,
  force        boolean NOT NULL,
  requested_by text NOT NULL,
  matched      bigint NOT NULL,
  replayed     bigint NOT NULL DEFAULT 0,
  after_id     bigint NOT NULL DEFAULT 0,
  started_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  finished_at  timestamptz
);

-- list_bulk_replays: a workspace's newest first.
CREATE INDEX ix_bulk_replay_workspace ON wharf.bulk_replay (workspace_id, id DESC);

-- Down Migration

DROP TABLE wharf.bulk_replay;
DROP TABLE wharf.event_attempt;
ALTER TABLE wharf.provider_event DROP COLUMN leased_at;
