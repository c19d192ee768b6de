// Runs a bulk replay's batches one after another until it is finished. Each
// batch is its own short transaction (wharf.continue_bulk_replay), so
// admissions and claims never wait behind a long replay; the progress is in
// the database, so any runner can carry on one that another left unfinished
// (followBulkReplay does, when a running one has stopped moving).
import { backoff, sleep } from '../db/backoff.js';
import type { Database } from '../db/database.js';
import { ApiError } from './api/errors.js';
import {
  continueBulkReplay, showBulkReplay, startBulkReplay, type BulkReplay, type BulkReplayFilter,
} from './sql/bulk-replay.js';

export const defaultBulkReplayBatchSize = 100;

/** A running bulk replay whose last batch is older than this has lost its runner. */
export const staleAfterMs = 15_000;

/** How often a batch the database could not run now (503: gone, deadlock, serialization) is tried again. */
const retries = 8;

export interface BulkReplayRunOptions {
  batchSize?: number;
  /** Told the state after every batch. */
  onProgress?: (replay: BulkReplay) => void;
}

/** One batch, tried again with backoff while the database cannot run it now. */
async function nextBatch(db: Database, workspaceId: string, id: string, batchSize: number): Promise<BulkReplay | null> {
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await continueBulkReplay(db, workspaceId, id, batchSize);
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 503) || attempt >= retries) throw error;
      await sleep(backoff(attempt, 50, 2_000));
    }
  }
}

/** Replays batch after batch until the bulk replay is finished or cancelled (or another runner, or a cancel, holds it: null). */
export async function runBulkReplay(
  db: Database, workspaceId: string, id: string, options: BulkReplayRunOptions = {},
): Promise<BulkReplay | null> {
  const batchSize = options.batchSize ?? defaultBulkReplayBatchSize;
  for (;;) {
    const replay = await nextBatch(db, workspaceId, id, batchSize);
    if (replay === null) return null;
    options.onProgress?.(replay);
    if (replay.state !== 'running') return replay; // finished, or cancelled
  }
}

export interface BackgroundOptions {
  batchSize?: number;
  /** Told when a run stops on an error; a later followBulkReplay carries it on. */
  onError?: (error: unknown) => void;
}

function runInBackground(db: Database, workspaceId: string, id: string, options: BackgroundOptions): void {
  runBulkReplay(db, workspaceId, id, { batchSize: options.batchSize })
    .catch((error: unknown) => options.onError?.(error));
}

/**
 * Starts a bulk replay and runs it in the background: the answer is the
 * bulk replay as recorded, for the caller to follow (followBulkReplay).
 */
export async function startBulkReplayInBackground(
  db: Database, workspaceId: string, filter: BulkReplayFilter, account: string,
  options: BackgroundOptions & { force?: boolean } = {},
): Promise<BulkReplay> {
  const replay = await startBulkReplay(db, workspaceId, filter, account, options.force ?? false);
  runInBackground(db, workspaceId, String(replay.id), options);
  return replay;
}

/**
 * A bulk replay as it is now, or null when the workspace has none with that
 * id. One still running whose runner has stopped (its process ended, or its
 * batches kept failing) is carried on in the background from where it is.
 */
export async function followBulkReplay(
  db: Database, workspaceId: string, id: string, options: BackgroundOptions = {},
): Promise<BulkReplay | null> {
  const replay = await showBulkReplay(db, workspaceId, id);
  if (replay?.state === 'running' && Date.now() - Date.parse(replay.updated_at) > staleAfterMs) {
    runInBackground(db, workspaceId, id, options);
  }
  return replay;
}
