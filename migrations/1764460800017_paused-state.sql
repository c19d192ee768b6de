-- Up Migration

-- PAUSED for workspaces and connections: deliveries are admitted and stored
-- as for ACTIVE, and nothing is claimed until it is ACTIVE again, then in
-- the usual order (written by hand; the functions come from sql/ next).
ALTER TABLE wharf.workspace DROP CONSTRAINT workspace_state_check,
  ADD CONSTRAINT workspace_state_check CHECK (state IN ('ACTIVE', 'PAUSED', 'SUSPENDED', 'DELETING'));
ALTER TABLE wharf.connection DROP CONSTRAINT connection_state_check,
  ADD CONSTRAINT connection_state_check CHECK (state IN ('ACTIVE', 'PAUSED', 'SUSPENDED', 'REVOKED'));

-- Down Migration

-- A paused workspace or connection was holding; before PAUSED, the nearest is SUSPENDED.
UPDATE wharf.workspace SET state = 'SUSPENDED' WHERE state = 'PAUSED';
UPDATE wharf.connection SET state = 'SUSPENDED' WHERE state = 'PAUSED';
ALTER TABLE wharf.workspace DROP CONSTRAINT workspace_state_check,
  ADD CONSTRAINT workspace_state_check CHECK (state IN ('ACTIVE', 'SUSPENDED', 'DELETING'));
ALTER TABLE wharf.connection DROP CONSTRAINT connection_state_check,
  ADD CONSTRAINT connection_state_check CHECK (state IN ('ACTIVE', 'SUSPENDED', 'REVOKED'));
