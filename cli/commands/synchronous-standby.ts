// The start-time check of `wharf start`, `serve` and `worker` against a
// configured database (db/synchronous-standby.ts): with
// WHARF_REQUIRE_SYNC_STANDBY=yes the start waits for its answer and fails
// without a synchronous standby; by default it runs beside the start and
// warns, so an unreachable database delays nothing.
import type { Logger } from 'pino';
import { connectClient } from '../../db/pool.js';
import { checkSynchronousStandby, readSynchronousStandbyPolicy } from '../../db/synchronous-standby.js';

export async function checkStartDurability(databaseUrl: string, logger: Logger): Promise<void> {
  const policy = readSynchronousStandbyPolicy(process.env.WHARF_REQUIRE_SYNC_STANDBY);
  if (policy === 'skip') return;
  const check = async (): Promise<void> => {
    const client = await connectClient(databaseUrl, { connectionTimeoutMillis: 10_000 });
    try {
      await checkSynchronousStandby(client, policy, logger);
    } finally {
      await client.end().catch(() => {});
    }
  };
  if (policy === 'yes') return check();
  void check().catch((error: unknown) =>
    logger.warn({ error_class: (error as Error)?.name ?? 'Error' }, 'could not check whether the primary has a synchronous standby'));
}
