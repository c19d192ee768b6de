// Applies sql/ again for claim's plan_cache_mode = force_generic_plan: left
// to choose, the plan cache planned claim's statement on every call, a
// quarter of its time (sql/30-claim-lease.sql says why).
import type { MigrationBuilder } from 'node-pg-migrate';
import { applySqlSources } from '../worker/sql-sources.js';

export async function up(pgm: MigrationBuilder): Promise<void> {
  await applySqlSources(pgm);
}

// The setting is the only change: without it claim is as 0004 left it.
export async function down(pgm: MigrationBuilder): Promise<void> {
  pgm.sql('ALTER FUNCTION wharf.claim(text, integer) RESET plan_cache_mode');
}
