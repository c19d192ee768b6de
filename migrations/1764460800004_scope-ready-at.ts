// Claims take scopes in the order they became ready (wharf.scope.ready_at),
// no longer by their head's due time: a scope that is served goes to the back
// of the line, and ix_scope_claim gains its new entries at its end, behind
// the dead ones its scans clean up (sql/20-scope-heads.sql says why). Then
// applies sql/ again, which also brings the scope lookups' enable_seqscan.
import type { MigrationBuilder } from 'node-pg-migrate';
import { applySqlSources } from '../worker/sql-sources.js';

export async function up(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
    -- Both tables up front, before re-creating triggers on provider_event:
    -- in flight, admit and complete hold locks on both (in opposite orders),
    -- so under load a deploy waits for them, and where it closes a cycle the
    -- deadlock detector cancels one side (an admission then answers 503 and
    -- the provider retries; a cancelled deploy can be run again).
    LOCK TABLE wharf.provider_event, wharf.scope IN ACCESS EXCLUSIVE MODE;
    -- IF NOT EXISTS: its down leaves the column (see there), so up may come again.
    ALTER TABLE wharf.scope ADD COLUMN IF NOT EXISTS ready_at timestamptz;
    UPDATE wharf.scope SET ready_at = head_due_at WHERE head_id IS NOT NULL AND ready_at IS NULL;
    DROP INDEX wharf.ix_scope_claim;
    -- claim: scopes with a head and no lease, longest ready first.
    CREATE INDEX ix_scope_claim ON wharf.scope (ready_at, head_id)
      WHERE head_id IS NOT NULL AND leased_id IS NULL AND active;
  `);
  await applySqlSources(pgm);
}

// Nothing to undo on its own: the functions this step applied from sql/ read
// and write ready_at, and no migration can bring back their older versions
// (0001's down drops them all), so dropping the column or the index here
// would break every admission and claim until then. Going further down
// removes both with the schema.
export async function down(): Promise<void> {}
