// Claims take scopes in the order they became ready (wharf.scope.ready_at),
// no longer by their head's due time: a scope that is served goes to the back
// of the line, and ix_scope_claim gains its new entries at its end, behind
// the dead ones its scans clean up (sql/20-scope-heads.sql says why). Then
// applies sql/ again, which also brings the scope lookups' enable_seqscan.
import type { MigrationBuilder } from 'node-pg-migrate';
import { readSqlSources } from '../worker/sql-sources.js';

export async function up(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
    ALTER TABLE wharf.scope ADD COLUMN ready_at timestamptz;
    UPDATE wharf.scope SET ready_at = head_due_at WHERE head_id IS NOT NULL;
    DROP INDEX wharf.ix_scope_claim;
    -- claim: scopes with a head and no lease, longest ready first.
    CREATE INDEX ix_scope_claim ON wharf.scope (ready_at, head_id)
      WHERE head_id IS NOT NULL AND leased_id IS NULL AND active;
  `);
  for (const source of await readSqlSources()) pgm.sql(source.text);
}

// The functions stay as sql/ has them: going down a step means deploying the
// code of that step too, which applies its own sql/.
export async function down(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
    DROP INDEX wharf.ix_scope_claim;
    CREATE INDEX ix_scope_claim ON wharf.scope (head_due_at, head_id)
      WHERE head_id IS NOT NULL AND leased_id IS NULL AND active;
    ALTER TABLE wharf.scope DROP COLUMN ready_at;
  `);
}
