-- Up Migration

-- Scope heads follow each statement, not each row (written by hand; the
-- trigger comes from sql/20-scope-heads.sql next). A claim or a batch of
-- completions moves many scopes at once; the statement trigger collects the
-- rows that moved as one array of this type and updates their scopes in
-- three set-based statements instead of calling PL/pgSQL once per row.

-- One provider_event row that a statement inserted, updated or deleted, as
-- its scope sees it: whether it left the queue (claimed, ended, deleted),
-- took a lease, ended one, or is QUEUED now (entered, or rescheduled), and
-- when it falls due.
CREATE TYPE wharf.scope_move AS (
  id           bigint,
  scope_key    text,
  workspace_id bigint,
  due_at       timestamptz,
  left_queue   boolean,
  took_lease   boolean,
  ended_lease  boolean,
  queued       boolean
);

-- Down Migration

DROP TYPE wharf.scope_move;
