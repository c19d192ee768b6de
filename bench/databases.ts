// Each workload runs in databases of its own on the shared server, created
// for one system and one repetition and dropped afterwards, so no run sees
// another's rows, bloat or statistics.
import { createScratchDatabase, type ScratchDatabase } from '../cli/scratch-database.js';

export type BenchDatabase = ScratchDatabase;

export async function createBenchDatabase(
  serverUrl: string,
  label: string,
  options: { wharf: boolean; poolSize?: number },
): Promise<BenchDatabase> {
  const db = await createScratchDatabase(serverUrl, {
    prefix: `wharf_bench_${label}`,
    migrate: options.wharf,
    ...(options.poolSize !== undefined ? { poolSize: options.poolSize } : {}),
  });
  // CREATE DATABASE copies its template through the WAL: flush it now, so
  // that the checkpoint it brings on does not land inside a measurement.
  await db.pool.query('CHECKPOINT');
  return db;
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
