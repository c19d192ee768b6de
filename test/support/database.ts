// One fresh database per test file, migrated, dropped afterwards, on the
// server the global setup found or started.
import { inject } from 'vitest';
import { createScratchDatabase, type ScratchDatabase } from './scratch-database.js';

export type TestDatabase = ScratchDatabase;

export function createTestDatabase(options: { migrate?: boolean } = {}): Promise<TestDatabase> {
  return createScratchDatabase(inject('postgresUrl'), { prefix: 'wharf_test', ...options });
}
