-- Up Migration

-- Alerts (written by hand; the functions come from sql/99-alerts.sql next)
-- and the per-minute failure counts they and the metrics read.

-- Failed or expired leases and dead letters per workspace (NULL: the
-- installation rows) and minute, counted by the issue trigger
-- (sql/97-issues.sql) as they happen, so that a rate over the last minutes
-- reads a few rows, never the inbox. Forgotten after a day by purge_issues.
CREATE TABLE wharf.failure_minute (
  workspace_id bigint REFERENCES wharf.workspace (id) ON DELETE CASCADE,
  minute       timestamptz NOT NULL,
  failed       bigint NOT NULL DEFAULT 0,
  dead         bigint NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX uq_failure_minute ON wharf.failure_minute (workspace_id, minute) NULLS NOT DISTINCT;
CREATE INDEX ix_failure_minute_minute ON wharf.failure_minute (minute);

-- What to tell whom, per workspace, or for the whole instance (NULL
-- workspace: every workspace and the installation rows).
--   kind              what fires it, with its parameters:
--     issue_opened      an issue opens
--     issue_reopened    a resolved issue reopens
--     dead_letter_rate  at least `threshold` dead letters within `window_seconds`
--     oldest_due_age    an event has been due, unclaimed, for `window_seconds`
--     stuck_scope       a scope's head has waited `window_seconds`
--   destination       'webhook' (signed with Standard Webhooks, `secret`) or
--                     'slack' (an incoming webhook's URL; no secret)
-- url is https, or http to a loopback address (a local relay); the secret is
-- the receiver's `whsec_…` key, readable only by the sender's functions.
CREATE TABLE wharf.alert_rule (
  id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  workspace_id   bigint REFERENCES wharf.workspace (id) ON DELETE CASCADE,
  name           text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9 _.:@-]{0,63}$'),
  kind           text NOT NULL
                 CHECK (kind IN ('issue_opened', 'issue_reopened', 'dead_letter_rate', 'oldest_due_age', 'stuck_scope')),
  threshold      integer CHECK (threshold > 0),
  window_seconds integer CHECK (window_seconds > 0),
  destination    text NOT NULL CHECK (destination IN ('webhook', 'slack')),
  url            text NOT NULL
                 CHECK (url ~ '^https://[^/?#@\s]+' OR url ~ '^http://(127\.0\.0\.1|localhost|\[::1\])(:[0-9]+)?(/|$)'),
  secret         text CHECK (secret ~ '^whsec_[A-Za-z0-9+/]+=*$'),
  created_by     text NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now(),
  CHECK ((destination = 'webhook') = (secret IS NOT NULL)),
  CHECK ((kind = 'dead_letter_rate') = (threshold IS NOT NULL)),
  CHECK ((kind IN ('dead_letter_rate', 'oldest_due_age', 'stuck_scope')) = (window_seconds IS NOT NULL))
);
CREATE INDEX ix_alert_rule_workspace ON wharf.alert_rule (workspace_id);

-- One alert per rule and what it is about (dedupe_key: an issue's opening,
-- a reopening, a window of a rate, a stuck head), and how its delivery went.
-- facts holds names, ids, counts and times: never a payload, a header or a
-- secret.
CREATE TABLE wharf.alert (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  rule_id         bigint NOT NULL REFERENCES wharf.alert_rule (id) ON DELETE CASCADE,
  workspace_id    bigint,
  dedupe_key      text NOT NULL,
  kind            text NOT NULL,
  facts           jsonb NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
  attempts        integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  last_attempt_at timestamptz,
  -- The receiver's HTTP status of the last attempt, or the class of the
  -- error that prevented one (never its message).
  last_status     integer,
  last_error      text,
  delivered_at    timestamptz,
  UNIQUE (rule_id, dedupe_key)
);
CREATE INDEX ix_alert_due ON wharf.alert (next_attempt_at) WHERE state = 'pending';
CREATE INDEX ix_alert_rule_recent ON wharf.alert (rule_id, id DESC);
CREATE INDEX ix_alert_created ON wharf.alert (created_at);

-- The one host that evaluates rules and sends alerts: a lease with a random
-- token, as the redelivery sweeper's (sql/85-redelivery.sql).
CREATE TABLE wharf.alert_sender (
  id           integer PRIMARY KEY CHECK (id = 1),
  leased_by    text,
  lease_token  uuid,
  leased_until timestamptz
);
INSERT INTO wharf.alert_sender (id) VALUES (1);

-- Down Migration

DROP TABLE wharf.alert_sender;
DROP TABLE wharf.alert;
DROP TABLE wharf.alert_rule;
DROP TABLE wharf.failure_minute;
