// The call of sql/10-settings.sql a worker makes.
import type { Database } from '../../db/database.js';

export interface StoredWorkerSettings {
  renewEvery: number;
  handlerTimeout: number;
  pollEvery: number;
}

/** The worker-side settings of wharf.setting, in milliseconds (wharf.worker_settings). */
export async function readWorkerSettings(db: Database): Promise<StoredWorkerSettings> {
  const { rows } = await db.query<{ renew_every: number; handler_timeout: number; poll_every: number }>(
    'SELECT renew_every, handler_timeout, poll_every FROM wharf.worker_settings()');
  const row = rows[0];
  if (!row) throw new Error('wharf.worker_settings() returned nothing');
  return { renewEvery: row.renew_every, handlerTimeout: row.handler_timeout, pollEvery: row.poll_every };
}
