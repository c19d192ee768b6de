// Each workload runs in databases of its own on the shared server, created
// for one system and one repetition and dropped afterwards, so no run sees
// another's rows, bloat or statistics.
import { createScratchDatabase, type ScratchDatabase } from '../test/support/scratch-database.js';

export type BenchDatabase = ScratchDatabase;

export function createBenchDatabase(
  serverUrl: string,
  label: string,
  options: { wharf: boolean; poolSize?: number },
): Promise<BenchDatabase> {
  return createScratchDatabase(serverUrl, {
    prefix: `wharf_bench_${label}`,
    migrate: options.wharf,
    ...(options.poolSize !== undefined ? { poolSize: options.poolSize } : {}),
  });
}

/** Runs `work` in a fresh database and drops it whatever happens. */
export async function withBenchDatabase<T>(
  serverUrl: string,
  label: string,
  options: { wharf: boolean; poolSize?: number },
  work: (db: BenchDatabase) => Promise<T>,
): Promise<T> {
  const db = await createBenchDatabase(serverUrl, label, options);
  try {
    return await work(db);
  } finally {
    await db.drop();
  }
}
