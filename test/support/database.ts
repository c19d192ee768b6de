// One fresh database per test file, dropped afterwards, on the server the
// global setup found or started: a copy of the migrated template that the
// global setup made once, or an empty one.
import { inject } from 'vitest';
import { createScratchDatabase, type ScratchDatabase } from '../../cli/scratch-database.js';

export type TestDatabase = ScratchDatabase;

export function createTestDatabase(options: { migrate?: boolean } = {}): Promise<TestDatabase> {
  const migrated = options.migrate ?? true;
  return createScratchDatabase(inject('postgresUrl'), {
    prefix: 'wharf_test',
    migrate: migrated,
    ...(migrated ? { template: inject('templateDatabase') } : {}),
  });
}
