import type { Database } from '../../db/database.js';

export interface StoredWorkerSettings {
  renewEvery: number;
  handlerTimeout: number;
  pollEvery: number;
}

/** The worker-side settings of wharf.setting, in milliseconds. */
export async function readWorkerSettings(db: Database): Promise<StoredWorkerSettings> {
  const { rows } = await db.query<{ renew_every: number; handler_timeout: number; poll_every: number }>(`
    SELECT extract(epoch FROM wharf.setting_interval('renew_every'))::float8 * 1000 AS renew_every,
           extract(epoch FROM wharf.setting_interval('handler_timeout'))::float8 * 1000 AS handler_timeout,
           extract(epoch FROM wharf.setting_interval('poll_every'))::float8 * 1000 AS poll_every`);
  const row = rows[0];
  if (!row) throw new Error('wharf.setting returned nothing');
  return { renewEvery: row.renew_every, handlerTimeout: row.handler_timeout, pollEvery: row.poll_every };
}
