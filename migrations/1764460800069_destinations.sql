-- Up Migration

-- Destinations (contract v6): Wharf forwards a workspace's events to HTTP
-- endpoints of the team's own application. The event row stays the record
-- and the state of the workspace's own handlers; each destination an event
-- is routed to gets a narrow row of its own (destination_delivery) with its
-- own state, attempts, lease, dead letter and replay, so that a failing
-- destination holds back only its own later deliveries.

-- A destination of a workspace. Its signing secret and credentials arrive
-- sealed (AES-256-GCM under WHARF_SECRET_KEYS, which the database never
-- sees); a destination without a signing secret is never claimed. tokens and
-- tokens_at are its rate limit's bucket, claimed_at its turn among
-- destinations; consecutive_failures, failing_since and probe_at its circuit
-- breaker. None of them is indexed: the claim's writes to this row are HOT.
CREATE TABLE wharf.destination (
  id                      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  workspace_id            bigint NOT NULL REFERENCES wharf.workspace (id) ON DELETE CASCADE,
  name                    text NOT NULL,
  url                     text NOT NULL,
  signing_secret          text,
  previous_signing_secret text,
  previous_valid_until    timestamptz,
  credentials             text,
  credentials_type        text CHECK (credentials_type IN ('bearer', 'basic', 'header')),
  timeout_ms              integer NOT NULL DEFAULT 10000 CHECK (timeout_ms BETWEEN 100 AND 60000),
  rate_limit              integer CHECK (rate_limit > 0),
  rate_period             text NOT NULL DEFAULT 'second' CHECK (rate_period IN ('second', 'minute')),
  max_in_flight           integer NOT NULL DEFAULT 10 CHECK (max_in_flight BETWEEN 1 AND 1000),
  ordered                 boolean NOT NULL DEFAULT true,
  headers                 jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(headers) = 'object'),
  breaker_failures        integer NOT NULL DEFAULT 20 CHECK (breaker_failures > 0),
  breaker_minutes         integer NOT NULL DEFAULT 10 CHECK (breaker_minutes > 0),
  state                   text NOT NULL DEFAULT 'ACTIVE' CHECK (state IN ('ACTIVE', 'PAUSED', 'BREAKER_OPEN')),
  paused_reason           text CHECK (paused_reason IN ('operator', 'gone', 'breaker')),
  paused_by               text,
  consecutive_failures    integer NOT NULL DEFAULT 0,
  failing_since           timestamptz,
  probe_at                timestamptz,
  tokens                  double precision,
  tokens_at               timestamptz,
  claimed_at              timestamptz,
  created_at              timestamptz NOT NULL DEFAULT now(),
  updated_at              timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT uq_destination_name UNIQUE (workspace_id, name)
);

-- A rule routes the workspace's events that match every criterion it gives
-- to one destination; forward_only keeps them from the workspace's handlers.
CREATE TABLE wharf.destination_rule (
  id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  workspace_id   bigint NOT NULL REFERENCES wharf.workspace (id) ON DELETE CASCADE,
  destination_id bigint NOT NULL REFERENCES wharf.destination (id) ON DELETE CASCADE,
  connection_id  bigint REFERENCES wharf.connection (id) ON DELETE CASCADE,
  provider       text,
  event_types    text[],
  subject_prefix text,
  filter         jsonb,
  forward_only   boolean NOT NULL DEFAULT false,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now()
);
-- Admission: does this workspace route at all, and its rules.
CREATE INDEX ix_destination_rule_workspace ON wharf.destination_rule (workspace_id);
CREATE INDEX ix_destination_rule_destination ON wharf.destination_rule (destination_id);
CREATE INDEX ix_destination_rule_connection ON wharf.destination_rule (connection_id) WHERE connection_id IS NOT NULL;

-- One delivery of one event to one destination: the moving state of that
-- consumer. ordered is the destination's, copied so that the one-lease rule
-- per (destination, scope) can be a partial unique index.
CREATE TABLE wharf.destination_delivery (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  event_id        bigint NOT NULL REFERENCES wharf.provider_event (id) ON DELETE CASCADE,
  destination_id  bigint NOT NULL REFERENCES wharf.destination (id) ON DELETE CASCADE,
  workspace_id    bigint NOT NULL,
  scope_key       text NOT NULL,
  ordered         boolean NOT NULL,
  state           text NOT NULL DEFAULT 'QUEUED' CHECK (state IN ('QUEUED', 'LEASED', 'DONE', 'DEAD')),
  attempt         integer NOT NULL DEFAULT 0,
  failures        integer NOT NULL DEFAULT 0,
  lease_epoch     bigint NOT NULL DEFAULT 0,
  leased_until    timestamptz,
  leased_by       text,
  leased_at       timestamptz,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  transient_since timestamptz,
  error_class     text,
  outcome         text,
  last_status     integer,
  handled_at      timestamptz,
  dead_at         timestamptz,
  replayed_by     text,
  replayed_at     timestamptz,
  created_at      timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT uq_destination_delivery_event UNIQUE (event_id, destination_id)
);
-- claim_deliveries and next_delivery_at: a destination's due deliveries, longest due first. A
-- delivery waiting behind its (destination, scope)'s head is due at 'infinity' (sql/88), so an
-- ordered destination's due deliveries are its heads, whatever waits behind them.
CREATE INDEX ix_destination_delivery_due ON wharf.destination_delivery (destination_id, next_attempt_at)
  WHERE state = 'QUEUED';
-- claim_deliveries, ordered: what waits or runs ahead of a delivery in its (destination, scope).
CREATE INDEX ix_destination_delivery_scope_order ON wharf.destination_delivery (destination_id, scope_key, event_id)
  WHERE state IN ('QUEUED', 'LEASED') AND ordered;
-- One lease at a time per (destination, scope) of an ordered destination, whoever writes the row.
CREATE UNIQUE INDEX uq_destination_delivery_leased_scope ON wharf.destination_delivery (destination_id, scope_key)
  WHERE state = 'LEASED' AND ordered;
-- In-flight bound and reap_deliveries.
CREATE INDEX ix_destination_delivery_leased ON wharf.destination_delivery (destination_id, leased_until)
  WHERE state = 'LEASED';
-- list_deliveries and the dead letters of a destination, newest first.
CREATE INDEX ix_destination_delivery_listing ON wharf.destination_delivery (destination_id, state, id DESC);

-- Every lease of a delivery and how it ended, with the answer's status,
-- duration and at most 1 KB of its body.
CREATE TABLE wharf.delivery_attempt (
  delivery_id    bigint NOT NULL REFERENCES wharf.destination_delivery (id) ON DELETE CASCADE,
  lease_epoch    bigint NOT NULL,
  destination_id bigint NOT NULL,
  attempt        integer NOT NULL,
  worker         text NOT NULL,
  started_at     timestamptz,
  ended_at       timestamptz NOT NULL,
  ended          text NOT NULL CHECK (ended IN ('handled', 'transient', 'permanent', 'gone', 'released', 'expired')),
  left_state     text CHECK (left_state IN ('QUEUED', 'DONE', 'DEAD')),
  error_class    text,
  status         integer,
  duration_ms    integer,
  response       text CHECK (length(response) <= 1024),
  PRIMARY KEY (delivery_id, lease_epoch)
);
-- A destination's figures over the last hour (show_destination).
CREATE INDEX ix_delivery_attempt_destination ON wharf.delivery_attempt (destination_id, ended_at);

-- What a rule's filter left out, per rule and minute: counted, not lost.
CREATE TABLE wharf.rule_filtered_minute (
  rule_id  bigint NOT NULL REFERENCES wharf.destination_rule (id) ON DELETE CASCADE,
  minute   timestamptz NOT NULL,
  filtered bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (rule_id, minute)
);

-- Down Migration

DROP TABLE wharf.rule_filtered_minute;
DROP TABLE wharf.delivery_attempt;
DROP TABLE wharf.destination_delivery;
DROP TABLE wharf.destination_rule;
DROP TABLE wharf.destination;
