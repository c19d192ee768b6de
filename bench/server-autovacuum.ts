// The sustained-load measurement judges bloat, which only means something
// with autovacuum running, as it does on a default PostgreSQL. Some servers
// (this workplace's CI configuration among them) turn it off: for that phase
// the benchmark turns it on with ALTER SYSTEM, and puts it back afterwards.
import pg from 'pg';

async function onServer<T>(serverUrl: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** Runs `work` with autovacuum on; `report` hears it when that took a change. */
export async function withAutovacuum<T>(serverUrl: string, report: (message: string) => void, work: () => Promise<T>): Promise<T> {
  const before = await onServer(serverUrl, async (client) => {
    const { rows } = await client.query<{ setting: string; sourcefile: string | null }>(
      `SELECT setting, sourcefile FROM pg_settings WHERE name = 'autovacuum'`);
    return rows[0]!;
  });
  if (before.setting === 'on') return work();
  // Set in postgresql.auto.conf already: restore that value; else remove ours.
  const restore = before.sourcefile?.endsWith('postgresql.auto.conf')
    ? `ALTER SYSTEM SET autovacuum = ${before.setting}` : 'ALTER SYSTEM RESET autovacuum';
  try {
    await onServer(serverUrl, async (client) => {
      await client.query('ALTER SYSTEM SET autovacuum = on');
      await client.query('SELECT pg_reload_conf()');
    });
  } catch {
    // Not a superuser: measure anyway, and say the sizes mean little.
    report('autovacuum is off on this server and the benchmark could not turn it on: the sizes below show bloat nothing vacuumed');
    return work();
  }
  report('autovacuum is off on this server: the benchmark turned it on (ALTER SYSTEM) for the sustained phase and restored it after');
  try {
    return await work();
  } finally {
    await onServer(serverUrl, async (client) => {
      await client.query(restore);
      await client.query('SELECT pg_reload_conf()');
    });
  }
}
