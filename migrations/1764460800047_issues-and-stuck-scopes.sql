-- Up Migration

-- Issues and stuck-scope actions (written by hand; the functions come from
-- sql/97-issues.sql and sql/98-stuck-scopes.sql next).

-- The policy knobs of the operator surface's grouping (docs/operating.md).
-- stuck_after is shared with the month-two migration, which may have made it.
INSERT INTO wharf.setting (key, value, type) VALUES
  ('issue_retention', '30 days',    'interval'),
  ('issue_limit',     '1000',       'integer'),
  ('stuck_after',     '15 minutes', 'interval')
ON CONFLICT (key) DO NOTHING;

-- Failures grouped by what an operator fixes once: per workspace (NULL: the
-- installation rows), provider, event type and error class. Kept by a
-- trigger on wharf.event_attempt as leases fail or expire; holds names and
-- counts, never a payload or a message. event_type '*' gathers a
-- workspace's failures past issue_limit distinct groups.
CREATE TABLE wharf.issue (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  workspace_id    bigint REFERENCES wharf.workspace (id) ON DELETE CASCADE,
  provider        text NOT NULL,
  event_type      text NOT NULL,
  error_class     text NOT NULL,
  status          text NOT NULL DEFAULT 'open'
                  CHECK (status IN ('open', 'acknowledged', 'resolved', 'ignored')),
  -- Who set the status and when; NULL status_by: Wharf itself (opened or reopened).
  status_by       text,
  status_at       timestamptz NOT NULL DEFAULT now(),
  first_seen_at   timestamptz NOT NULL,
  last_seen_at    timestamptz NOT NULL,
  -- Failed or expired leases counted, and how many of them left their event DEAD.
  failures        bigint NOT NULL DEFAULT 0,
  dead            bigint NOT NULL DEFAULT 0,
  -- The event of the latest failure (no foreign key: events are purged first).
  sample_event_id bigint NOT NULL,
  reopened        integer NOT NULL DEFAULT 0,
  reopened_at     timestamptz
);

-- The grouping key; the trigger's upsert infers it.
CREATE UNIQUE INDEX uq_issue_key ON wharf.issue (workspace_id, provider, event_type, error_class) NULLS NOT DISTINCT;

-- list_issues: a workspace's issues, latest seen first; purge: the oldest seen.
CREATE INDEX ix_issue_workspace_seen ON wharf.issue (workspace_id, last_seen_at DESC);
CREATE INDEX ix_issue_seen ON wharf.issue (last_seen_at);

-- Every action an operator took on a stuck scope, like replay_audit for a
-- replay: who, when, what, on which head. No payload.
CREATE TABLE wharf.scope_action (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  workspace_id  bigint NOT NULL REFERENCES wharf.workspace (id) ON DELETE CASCADE,
  scope_key     text NOT NULL,
  event_id      bigint,
  connection_id bigint,
  action        text NOT NULL CHECK (action IN ('retry_head', 'dead_letter_head', 'pause_connection')),
  account       text NOT NULL,
  at            timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX ix_scope_action_workspace ON wharf.scope_action (workspace_id, id DESC);
CREATE INDEX ix_scope_action_at ON wharf.scope_action (at);

-- Down Migration

DROP TABLE wharf.scope_action;
DROP TABLE wharf.issue;
-- stuck_after stays: the month-two migration owns it too.
DELETE FROM wharf.setting WHERE key IN ('issue_retention', 'issue_limit');
