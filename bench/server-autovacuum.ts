// The sustained-load measurement judges bloat, which only means something
// with autovacuum running, as it does on a default PostgreSQL. Some servers
// (this workplace's CI configuration among them) turn it off: for that phase
// the benchmark turns it on with ALTER SYSTEM, and puts it back afterwards.
import { onServer } from '../cli/scratch-database.js';

async function autovacuumSetting(serverUrl: string): Promise<{ setting: string; sourcefile: string | null }> {
  return onServer(serverUrl, async (client) => {
    const { rows } = await client.query<{ setting: string; sourcefile: string | null }>(
      `SELECT setting, sourcefile FROM pg_settings WHERE name = 'autovacuum'`);
    return rows[0]!;
  });
}

/** Runs `work` with autovacuum on where it can; `report` hears what it found and did. */
export async function withAutovacuum<T>(serverUrl: string, report: (message: string) => void, work: () => Promise<T>): Promise<T> {
  const before = await autovacuumSetting(serverUrl);
  if (before.setting === 'on') return work();
  // Set in postgresql.auto.conf already: restore that value; else remove ours.
  const restore = before.sourcefile?.endsWith('postgresql.auto.conf')
    ? `ALTER SYSTEM SET autovacuum = ${before.setting}` : 'ALTER SYSTEM RESET autovacuum';
  let changed = false;
  try {
    await onServer(serverUrl, async (client) => {
      await client.query('ALTER SYSTEM SET autovacuum = on');
      changed = true;
      await client.query('SELECT pg_reload_conf()');
    });
    // The reload is a signal: wait until a new session sees it take effect
    // (it never does where a command-line -c autovacuum=off wins).
    for (let tries = 0; tries < 20 && (await autovacuumSetting(serverUrl)).setting !== 'on'; tries += 1) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } catch {
    // Not allowed (not a superuser): measured anyway, said below.
  }
  const effective = (await autovacuumSetting(serverUrl)).setting;
  report(effective === 'on'
    ? 'autovacuum is off on this server: the benchmark turned it on (ALTER SYSTEM) for the sustained phase and restored it after'
    : 'autovacuum is off on this server and the benchmark could not turn it on: the sizes below show bloat nothing vacuumed');
  try {
    return await work();
  } finally {
    if (changed) {
      try {
        await onServer(serverUrl, async (client) => {
          await client.query(restore);
          await client.query('SELECT pg_reload_conf()');
        });
      } catch {
        report(`could not restore autovacuum: run "${restore}" and reload the server`);
      }
    }
  }
}
