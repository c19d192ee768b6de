import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Suites race real connections against one PostgreSQL: keep the 2-core
    // machine from running them all at once.
    maxWorkers: 2,
    fileParallelism: true,
  },
});
