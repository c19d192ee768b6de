// The failover scenarios' servers and faults. Each cell gets a pair of its
// own, as test/db/switchover.test.ts does: a primary and a streaming standby
// made from it with pg_basebackup -R (test/support/own-postgres.ts, Debian's
// PostgreSQL 15), synchronous (synchronous_standby_names = '*' on the
// primary, synchronous_commit on), so that every commit the primary reports
// is on the standby. A failover leaves the pair changed for good, so no two
// cells share one.
//
// How each system reaches the primary that moves:
// - Wharf is given libpq's multi-host URL, both hosts, the old primary first,
//   target_session_attrs=read-write (db/pool.ts).
// - graphile-worker takes one host (node-postgres reads one): it is given a
//   TCP proxy in front of the pair, which the scenario points at the new
//   primary the moment the promotion ends, as HAProxy with a primary check
//   (Patroni's /primary) does at its best; connections open through it to the
//   old primary break when that server goes.
// The rig's own sessions (scratch database, monitor, checks) go through the
// same proxy.
import pg from 'pg';
import { startDelayProxy, type DelayProxy } from '../../test/support/delay-proxy.js';
import { createOwnPostgres, type OwnPostgres } from '../../test/support/own-postgres.js';
import { appNames, withApplicationName, type Fault } from './faults.js';
import { sleep } from './load.js';

export interface FailoverPair {
  primary: OwnPostgres;
  standby: OwnPostgres;
  /** The maintenance database (superuser) through the proxy that follows the primary. */
  serverUrl: string;
  /** Database `name` on both hosts, the primary first, target_session_attrs=read-write. */
  multiHostUrl(name: string): string;
  /** Points the proxy at the standby (promoted). */
  follow(server: OwnPostgres): void;
  stop(): Promise<void>;
}

export async function startFailoverPair(): Promise<FailoverPair> {
  const primary = await createOwnPostgres({ binaries: 'system', settings: { wal_level: 'replica' } });
  const servers: OwnPostgres[] = [primary];
  let proxy: DelayProxy | undefined;
  try {
    await primary.start();
    const standby = await createOwnPostgres({ binaries: 'system', standbyOf: primary });
    servers.push(standby);
    await standby.start();
    const client = new pg.Client({ connectionString: primary.url });
    await client.connect();
    try {
      // Set after the base backup: the standby, once promoted, has no
      // synchronous standby to wait for (it would wait for ever).
      await client.query(`ALTER SYSTEM SET synchronous_standby_names = '*'`);
      await client.query('SELECT pg_reload_conf()');
      for (let tries = 0; ; tries += 1) {
        const { rows } = await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_replication WHERE sync_state = 'sync'`);
        if (rows[0]!.n === 1) break;
        if (tries > 300) throw new Error('the standby never became synchronous');
        await sleep(100);
      }
    } finally {
      await client.end();
    }
    const follower = await startDelayProxy({ target: { host: '127.0.0.1', port: primary.port } });
    proxy = follower;
    return {
      primary,
      standby,
      serverUrl: `postgres://postgres@${follower.address}/postgres`,
      multiHostUrl: (name) =>
        `postgres://postgres@127.0.0.1:${primary.port},127.0.0.1:${standby.port}/${name}?target_session_attrs=read-write`,
      follow: (server) => follower.retarget({ host: '127.0.0.1', port: server.port }),
      async stop() {
        await follower.close();
        for (const server of servers.reverse()) await server.stop();
      },
    };
  } catch (error) {
    await proxy?.close();
    for (const server of servers.reverse()) await server.stop();
    throw error;
  }
}

/** When the first event was handled (its last step written) at or after `since` (epoch ms), through `url`; undefined if none yet. */
async function firstHandledSince(url: string, since: number): Promise<number | undefined> {
  const client = new pg.Client({ connectionString: withApplicationName(url, appNames.fault) });
  client.on('error', () => {});
  await client.connect();
  try {
    const { rows } = await client.query<{ at: string | null }>(
      `SELECT (extract(epoch FROM min(at)) * 1000)::float8::text AS at FROM public.scenario_effect WHERE step = 'second' AND at >= to_timestamp($1 / 1000.0)`,
      [since]);
    return rows[0]?.at === null || rows[0]?.at === undefined ? undefined : Number(rows[0].at);
  } finally {
    await client.end();
  }
}

/**
 * The primary goes, the synchronous standby is promoted and the proxy follows
 * it. `planned`: a switchover, the primary stopped cleanly (a fast shutdown,
 * which sends the standby all its WAL), the standby promoted once it has the
 * primary's last checkpoint, and the old primary started again as a standby
 * of the new one (it answers, read-only: 25006 to any write). `crash`: kill -9
 * of the primary's postmaster, the standby promoted, the old primary left
 * down.
 */
export function failover(kind: 'planned' | 'crash'): Fault {
  return {
    id: kind === 'planned' ? 'switchover' : 'crash-failover',
    title: kind === 'planned'
      ? 'the primary stopped cleanly, the synchronous standby promoted, the old primary back as a standby'
      : 'kill -9 of the primary\'s postmaster, the synchronous standby promoted',
    needsPair: true,
    async prepare(context) {
      const pair = context.pair;
      if (!pair) throw new Error('a failover needs a primary and a standby');
      return {
        async begin() {
          const faultAt = Date.now();
          context.mark(kind === 'planned' ? 'primary stopping' : 'primary killed');
          if (kind === 'planned') await pair.primary.halt();
          else await pair.primary.kill();
          const downAt = Date.now();
          await pair.standby.promote(kind === 'planned' ? { after: pair.primary.latestCheckpoint() } : {});
          pair.follow(pair.standby);
          const promotedAt = Date.now();
          context.mark('standby promoted');
          if (kind === 'planned') {
            await pair.primary.startAsStandbyOf(pair.standby);
            context.mark('old primary back as a standby');
          }
          return {
            async end() {
              // Everything written after the old primary was down was written on the new one.
              const first = await firstHandledSince(context.databaseUrl, downAt).catch(() => undefined);
              return {
                'ms from the fault to the old primary down': downAt - faultAt,
                'ms from the fault to the promotion\'s end': promotedAt - faultAt,
                'ms from the fault to the first event handled on the new primary': first === undefined ? 'none in the fault window' : Math.round(first - faultAt),
                'ms from the promotion\'s end to that event': first === undefined ? '—' : Math.max(0, Math.round(first - promotedAt)),
                'old primary': kind === 'planned' ? 'back as a standby (read-only)' : 'down',
              };
            },
          };
        },
      };
    },
  };
}
