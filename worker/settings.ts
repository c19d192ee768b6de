// The worker's timings, in milliseconds. renew_every, handler_timeout and
// poll_every come from wharf.setting (an operator changes them without a
// deploy; the worker reads them again at every reaper run) unless the options
// override them; the rest are host-side.
import type { Database } from '../db/database.js';
import { readWorkerSettings } from './sql/settings.js';

export interface WorkerSettings {
  renewEvery: number;
  handlerTimeout: number;
  pollEvery: number;
  /** How often this host runs wharf.reap(). */
  reapEvery: number;
  /** How often this host tries retention (one host at a time purges). */
  retentionEvery: number;
  /** How long stop() lets running handlers finish before releasing their rows. */
  drainTimeout: number;
}

export const hostSettingDefaults = {
  reapEvery: 30_000,
  retentionEvery: 3_600_000,
  drainTimeout: 10_000,
} as const;

/** setTimeout fires at once past 2^31 - 1 ms (24.8 days): longer settings wait that long. */
const longestTimer = 2 ** 31 - 1;

export async function resolveSettings(db: Database, overrides: Partial<WorkerSettings>): Promise<WorkerSettings> {
  const stored = await readWorkerSettings(db);
  const defined = Object.fromEntries(Object.entries(overrides).filter(([, value]) => value !== undefined));
  const settings: WorkerSettings = { ...hostSettingDefaults, ...stored, ...defined };
  return Object.fromEntries(
    Object.entries(settings).map(([key, value]) => [key, Math.min(value, longestTimer)]),
  ) as unknown as WorkerSettings;
}
