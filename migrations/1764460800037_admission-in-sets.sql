-- Up Migration

-- The shapes set-based admission passes between its statements (written by
-- hand; wharf.admit_many and the admit built on it come from sql/ next).
-- admit and admit_many admit arrays of deliveries: one statement per step of
-- the rules for the whole array, not a PL/pgSQL loop of statements per
-- delivery (sql/80-admission.sql).

-- One delivery, as admit's arguments, numbered by its place in the array;
-- error_code and error_message say why admit would reject it (NULL: it is
-- admitted).
CREATE TYPE wharf.admission_item AS (
  provider      text,
  source        text,
  delivery_key  text,
  event_type    text,
  route         jsonb,
  subjects      text[],
  payload       jsonb,
  headers       jsonb,
  body_sha256   bytea,
  error_code    text,
  error_message text
);

-- What the rules before the lifecycle lock decided of item n: the rows a
-- body stored before answers with (rule 0), a control event (rule 1), a drop,
-- or the source connection whose recipients are read next.
CREATE TYPE wharf.admission_route AS (
  n                 integer,
  provider          text,
  source            text,
  subjects          text[],
  connection_signed boolean,
  body_events       jsonb,
  control           boolean,
  drop_reason       text,
  source_id         bigint
);

-- One row of a read of item n's lifecycle objects: its source connection
-- (is_source) or a recipient connection, with its generation and state and
-- its workspace's.
CREATE TYPE wharf.admission_recipient AS (
  n               integer,
  is_source       boolean,
  connection_id   bigint,
  generation      bigint,
  state           text,
  workspace_id    bigint,
  workspace_state text
);

-- One event row to store: item n into workspace_id (NULL: an installation
-- row) in scope_key, admitted by connection_id.
CREATE TYPE wharf.admission_row AS (
  n             integer,
  workspace_id  bigint,
  connection_id bigint,
  scope_key     text,
  scope_active  boolean
);

-- The statement-level scope trigger that used it went in 0036.
DROP TYPE wharf.scope_move;

-- Down Migration

CREATE TYPE wharf.scope_move AS (
  id bigint, scope_key text, workspace_id bigint, due_at timestamptz,
  left_queue boolean, took_lease boolean, ended_lease boolean, queued boolean
);
DROP TYPE wharf.admission_row;
DROP TYPE wharf.admission_recipient;
DROP TYPE wharf.admission_route;
DROP TYPE wharf.admission_item;
