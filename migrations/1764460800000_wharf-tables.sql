-- Up Migration

-- Tables and indexes of the inbox. Functions come from sql/ (next migration);
-- this file holds only what stores rows.

CREATE SCHEMA wharf;

-- Policy knobs, as PostgreSQL literals. `type` says how set_setting validates
-- a new value; functions read them through wharf.setting_interval/integer.
CREATE TABLE wharf.setting (
  key   text PRIMARY KEY,
  value text NOT NULL,
  type  text NOT NULL CHECK (type IN ('interval', 'integer'))
);

INSERT INTO wharf.setting (key, value, type) VALUES
  ('lease',           '2 minutes',  'interval'),
  ('renew_every',     '30 seconds', 'interval'),
  ('handler_timeout', '30 minutes', 'interval'),
  ('max_attempts',    '10',         'integer'),
  ('base_delay',      '2 seconds',  'interval'),
  ('max_delay',       '5 minutes',  'interval'),
  ('replay_window',   '3 days',     'interval'),
  ('dead_retention',  '30 days',    'interval'),
  ('poll_every',      '5 seconds',  'interval');

CREATE TABLE wharf.workspace (
  id         bigint PRIMARY KEY,
  state      text NOT NULL DEFAULT 'ACTIVE'
             CHECK (state IN ('ACTIVE', 'SUSPENDED', 'DELETING')),
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE wharf.connection (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  workspace_id bigint NOT NULL REFERENCES wharf.workspace (id) ON DELETE CASCADE,
  provider     text NOT NULL
               CHECK (provider IN ('github', 'gitlab', 'slack', 'outline', 'forgejo', 'generic')),
  source       text NOT NULL,
  kind         text NOT NULL,
  external_id  text,
  route        jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(route) = 'object'),
  state        text NOT NULL DEFAULT 'ACTIVE'
               CHECK (state IN ('ACTIVE', 'SUSPENDED', 'REVOKED')),
  generation   bigint NOT NULL DEFAULT 1,
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now()
);

-- upsert_connection's natural key.
CREATE UNIQUE INDEX uq_connection_natural_key ON wharf.connection
  (workspace_id, provider, source, kind, external_id) NULLS NOT DISTINCT;

-- An App installation or a Slack team belongs to one workspace: admission
-- finds the source connection of `route.installation_id` / `route.team_id` here.
CREATE UNIQUE INDEX uq_connection_installation ON wharf.connection
  (provider, source, kind, external_id)
  WHERE kind IN ('app_installation', 'slack_team');

CREATE INDEX ix_connection_workspace ON wharf.connection (workspace_id);

CREATE TABLE wharf.subscription (
  connection_id bigint NOT NULL REFERENCES wharf.connection (id) ON DELETE CASCADE,
  subject       text NOT NULL CHECK (subject <> ''),
  PRIMARY KEY (connection_id, subject)
);

-- admit: recipients are the subscriptions whose subject is one of the event's.
CREATE INDEX ix_subscription_recipients ON wharf.subscription (subject, connection_id);

-- One row per ordering scope: the claim reads heads here instead of scanning
-- the backlog. Kept in step with provider_event by a trigger (sql/scope-heads.sql).
--   head_id     the oldest QUEUED event of the scope (NULL: none)
--   head_due_at its next_attempt_at
--   leased_id   the LEASED event of the scope (NULL: none)
--   active      false while the workspace is not ACTIVE
CREATE TABLE wharf.scope (
  scope_key    text PRIMARY KEY,
  workspace_id bigint REFERENCES wharf.workspace (id) ON DELETE CASCADE,
  head_id      bigint,
  head_due_at  timestamptz,
  leased_id    bigint,
  active       boolean NOT NULL DEFAULT true
);

-- claim: the due heads of scopes that hold no lease, oldest due first.
CREATE INDEX ix_scope_claim ON wharf.scope (head_due_at, head_id)
  WHERE head_id IS NOT NULL AND leased_id IS NULL AND active;

-- set_workspace_state: flip `active` on every scope of a workspace.
CREATE INDEX ix_scope_workspace ON wharf.scope (workspace_id);

CREATE TABLE wharf.provider_event (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  workspace_id    bigint REFERENCES wharf.workspace (id) ON DELETE CASCADE,
  provider        text NOT NULL,
  delivery_key    text NOT NULL,
  event_type      text NOT NULL,
  subject         text,
  scope_key       text NOT NULL,
  source          text NOT NULL,
  connection_id   bigint,
  payload         jsonb NOT NULL,
  headers         jsonb NOT NULL DEFAULT '{}',
  received_at     timestamptz NOT NULL DEFAULT now(),
  state           text NOT NULL DEFAULT 'QUEUED'
                  CHECK (state IN ('QUEUED', 'LEASED', 'DONE', 'DEAD')),
  attempt         integer NOT NULL DEFAULT 0,
  failures        integer NOT NULL DEFAULT 0,
  lease_epoch     bigint NOT NULL DEFAULT 0,
  leased_until    timestamptz,
  leased_by       text,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  error_class     text,
  outcome         text,
  handled_at      timestamptz,
  dead_at         timestamptz,
  replayed_by     text,
  replayed_at     timestamptz
);

-- Payloads (and headers) go to TOAST from a small size on: every state change
-- writes a new row version, and it should copy an 18-byte TOAST pointer, not
-- kilobytes of payload, into the heap and the WAL.
ALTER TABLE wharf.provider_event SET (toast_tuple_target = 128);

-- A provider's retry or redelivery adds no row; NULL workspace (installation
-- rows) deduplicates too.
CREATE UNIQUE INDEX uq_provider_event_delivery ON wharf.provider_event
  (workspace_id, provider, delivery_key) NULLS NOT DISTINCT;

-- Backstop for the claim's rule: never two leased rows in one scope.
CREATE UNIQUE INDEX uq_provider_event_leased_scope ON wharf.provider_event (scope_key)
  WHERE state = 'LEASED';

-- Scope head maintenance: the oldest QUEUED row of a scope.
CREATE INDEX ix_provider_event_scope_queue ON wharf.provider_event (scope_key, id)
  WHERE state = 'QUEUED';

-- reap: leases past their end.
CREATE INDEX ix_provider_event_reap ON wharf.provider_event (leased_until)
  WHERE state = 'LEASED';

-- purge: DONE rows past the replay window, DEAD rows past retention.
CREATE INDEX ix_provider_event_purge_done ON wharf.provider_event (handled_at)
  WHERE state = 'DONE';
CREATE INDEX ix_provider_event_purge_dead ON wharf.provider_event (dead_at)
  WHERE state = 'DEAD';

-- Operator listings: a workspace's events by state, newest first.
CREATE INDEX ix_provider_event_workspace_list ON wharf.provider_event
  (workspace_id, state, id DESC);

-- No index on source: erase_person reads every event of a source, which is
-- most of the inbox for the usual single-source install, and each index costs
-- every state change (none of them is HOT: state is in the partial indexes).

CREATE TABLE wharf.provider_event_step (
  event_id     bigint NOT NULL REFERENCES wharf.provider_event (id) ON DELETE CASCADE,
  step_name    text NOT NULL CHECK (step_name <> ''),
  committed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (event_id, step_name)
);

-- Every refusal and drop; never a payload, header or credential.
CREATE TABLE wharf.admission_log (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at            timestamptz NOT NULL DEFAULT now(),
  provider      text,
  source        text,
  delivery_key  text,
  connection_id bigint,
  workspace_id  bigint,
  reason        text NOT NULL
);

CREATE INDEX ix_admission_log_at ON wharf.admission_log (at);

CREATE TABLE wharf.replay_audit (
  id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  event_id bigint NOT NULL,
  account  text NOT NULL,
  at       timestamptz NOT NULL DEFAULT now()
);

-- Claimers that found nothing to do and wait on LISTEN wharf_event. admit
-- notifies only while this table has a row, so a busy inbox pays no
-- pg_notify. `backend_pid` lets reap() forget listeners whose session died.
-- UNLOGGED: a mark is a hint for live sessions, and a transaction that writes
-- only here commits without waiting for a WAL flush (mark_idle holds its
-- table lock for microseconds, not an fsync).
CREATE UNLOGGED TABLE wharf.idle_listener (
  listener    text PRIMARY KEY,
  backend_pid integer NOT NULL,
  since       timestamptz NOT NULL DEFAULT now()
);

-- Both tables churn (rows inserted and deleted, or updated, many times a
-- second) and stay small. Truncating their empty tail would make autovacuum
-- take an ACCESS EXCLUSIVE lock that stalls every admission and claim.
ALTER TABLE wharf.idle_listener SET (vacuum_truncate = false);
ALTER TABLE wharf.scope SET (vacuum_truncate = false);

-- Down Migration

DROP SCHEMA wharf CASCADE;
