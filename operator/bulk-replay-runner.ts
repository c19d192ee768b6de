// Runs a bulk replay's batches one after another until it is finished. Each
// batch is its own short transaction (wharf.continue_bulk_replay), so
// admissions and claims never wait behind a long replay; the progress is in
// the database, so any runner can carry on one that another left unfinished.
import type { Database } from '../db/database.js';
import {
  continueBulkReplay, startBulkReplay, type BulkReplay, type BulkReplayFilter,
} from './sql/bulk-replay.js';

export const defaultBulkReplayBatchSize = 100;

export interface BulkReplayRunOptions {
  batchSize?: number;
  /** Told the state after every batch. */
  onProgress?: (replay: BulkReplay) => void;
}

/** Replays batch after batch until the bulk replay is finished (or another runner holds it). */
export async function runBulkReplay(
  db: Database, workspaceId: string, id: string, options: BulkReplayRunOptions = {},
): Promise<BulkReplay | null> {
  const batchSize = options.batchSize ?? defaultBulkReplayBatchSize;
  for (;;) {
    const replay = await continueBulkReplay(db, workspaceId, id, batchSize);
    if (replay === null) return null;
    options.onProgress?.(replay);
    if (replay.state === 'finished') return replay;
  }
}

/**
 * Starts a bulk replay and runs it in the background: the answer is the
 * bulk replay as recorded, for the caller to follow (showBulkReplay). A
 * failure stops the run where it is; onError hears of it.
 */
export async function startBulkReplayInBackground(
  db: Database, workspaceId: string, filter: BulkReplayFilter, account: string,
  options: { force?: boolean; batchSize?: number; onError?: (error: unknown) => void } = {},
): Promise<BulkReplay> {
  const replay = await startBulkReplay(db, workspaceId, filter, account, options.force ?? false);
  runBulkReplay(db, workspaceId, String(replay.id), { batchSize: options.batchSize })
    .catch((error: unknown) => options.onError?.(error));
  return replay;
}
