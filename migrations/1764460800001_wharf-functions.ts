// Applies the procedure sources in sql/, in file-name order, so that a
// database migrated from empty holds exactly what sql/ says (test/migrations
// proves it). A later change to a function ships as a new migration that
// applies the changed source again.
import type { MigrationBuilder } from 'node-pg-migrate';
import { applySqlSources } from '../worker/sql-sources.js';

export async function up(pgm: MigrationBuilder): Promise<void> {
  await applySqlSources(pgm);
}

export async function down(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
    DO $$
    DECLARE f regprocedure;
    BEGIN
      FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
               WHERE p.pronamespace = 'wharf'::regnamespace
      LOOP
        EXECUTE format('DROP FUNCTION %s CASCADE', f);
      END LOOP;
    END $$;
  `);
}
