// db/pool.ts against two real servers: a primary and its streaming standby
// (pg_basebackup -R), then the standby promoted and the old primary rejoined
// as a standby of it. Multi-host URLs find the host that accepts writes; a
// connection that answered 25006 or was terminated is never handed out again.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { connectClient, createPool, DatabaseUrlError, NoPrimaryError, parseDatabaseUrl } from '../../db/pool.js';
import { createOwnPostgres, type OwnPostgres } from '../support/own-postgres.js';

describe('parseDatabaseUrl', () => {
  it('reads every host, its port (5432 by default) and target_session_attrs, and names one host per URL', () => {
    const parsed = parseDatabaseUrl('postgres://app:s3cret@db1:5433,db2,[::1]:6000/wharf?sslmode=disable&target_session_attrs=read-write')!;
    expect(parsed.hosts).toEqual([{ host: 'db1', port: 5433 }, { host: 'db2', port: 5432 }, { host: '::1', port: 6000 }]);
    expect(parsed.target).toBe('read-write');
    expect(parsed.urlFor(1)).toBe('postgres://app:s3cret@db2:5432/wharf?sslmode=disable');
    expect(parsed.urlFor(2)).toBe('postgres://app:s3cret@[::1]:6000/wharf?sslmode=disable');
    expect(parseDatabaseUrl('postgresql://h/db?target_session_attrs=primary')!.target).toBe('primary');
    expect(parseDatabaseUrl('postgres://h/db')!.target).toBe('any');
    expect(parseDatabaseUrl('host=h dbname=db')).toBeUndefined();
  });

  it('refuses a target that would send writes to a standby, and a port that is none, without echoing a password', () => {
    expect(() => parseDatabaseUrl('postgres://u:pw@h1,h2/db?target_session_attrs=standby')).toThrow(DatabaseUrlError);
    expect(() => parseDatabaseUrl('postgres://u:pw@h1,h2/db?target_session_attrs=standby')).toThrow(/read-write or primary/);
    expect(() => parseDatabaseUrl('postgres://u:pw@h1:99999,h2/db')).toThrow(/not a port/);
    try {
      parseDatabaseUrl('postgres://u:pw@h1:x,h2/db');
    } catch (error) {
      expect((error as Error).message).not.toContain('pw');
    }
  });
});

describe('connections to a primary that moves', { timeout: 120_000 }, () => {
  let primary: OwnPostgres;
  let standby: OwnPostgres;
  const pools: pg.Pool[] = [];
  const pool = (url: string): pg.Pool => {
    const created = createPool(url, { connectionTimeoutMillis: 5_000 });
    created.on('error', () => {});
    pools.push(created);
    return created;
  };
  const hostUrl = (...servers: { port: number }[]): string =>
    `postgres://postgres@${servers.map(({ port }) => `127.0.0.1:${port}`).join(',')}/postgres`;
  const serverPort = async (db: pg.Pool | pg.Client): Promise<number> =>
    Number((await db.query<{ port: number }>('SELECT inet_server_port() AS port')).rows[0]!.port);

  beforeAll(async () => {
    primary = await createOwnPostgres({ binaries: 'system', settings: { wal_level: 'replica' } });
    await primary.start();
    standby = await createOwnPostgres({ binaries: 'system', standbyOf: primary });
    await standby.start();
  });

  afterAll(async () => {
    await Promise.all(pools.map((created) => created.end().catch(() => {})));
    await standby?.stop();
    await primary?.stop();
  });

  it('connects to the first host that accepts writes, past a standby and a host that is down', async () => {
    const closedPort = { port: 1 };
    expect(await serverPort(pool(`${hostUrl(standby, primary)}?target_session_attrs=read-write`))).toBe(primary.port);
    expect(await serverPort(pool(`${hostUrl(closedPort, standby, primary)}?target_session_attrs=primary`))).toBe(primary.port);
    // Without a target, the first host that answers, as libpq does.
    expect(await serverPort(pool(hostUrl(standby, primary)))).toBe(standby.port);
    const client = await connectClient(`${hostUrl(standby, primary)}?target_session_attrs=read-write`);
    try {
      expect(await serverPort(client)).toBe(primary.port);
    } finally {
      await client.end();
    }
  });

  it('says which hosts it tried when none accepts writes, without the credentials', async () => {
    const url = `postgres://postgres:hunter2@127.0.0.1:${standby.port},127.0.0.1:1/postgres?target_session_attrs=read-write`;
    const error = await pool(url).query('SELECT 1').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(Error);
    // The last host tried decides the error; both are a connection failure to retry.
    const { code, message } = error as { code?: string; message: string };
    expect(code === '08001' || code === 'ECONNREFUSED').toBe(true);
    expect(message).not.toContain('hunter2');
    const onlyStandby = await pool(`postgres://postgres:hunter2@127.0.0.1:${standby.port}/postgres?target_session_attrs=read-write`)
      .query('SELECT 1').catch((caught: unknown) => caught);
    expect(onlyStandby).toBeInstanceOf(NoPrimaryError);
    expect((onlyStandby as NoPrimaryError).code).toBe('08001');
    expect((onlyStandby as Error).message).toContain(`127.0.0.1:${standby.port}`);
    expect((onlyStandby as Error).message).not.toContain('hunter2');
  });

  it('drops a pooled connection that answered 25006 or was terminated, and keeps one that answered any other error', async () => {
    // A single host, no target: the URL pg connects to as it is (a DNS name that moved, say).
    const onStandby = pool(hostUrl(standby));
    const pidOf = async (client: pg.PoolClient): Promise<number> => (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;

    let client = await onStandby.connect();
    const first = await pidOf(client);
    await expect(client.query('SELECT * FROM no_such_table')).rejects.toMatchObject({ code: '42P01' });
    client.release();
    client = await onStandby.connect();
    expect(await pidOf(client)).toBe(first);

    await expect(client.query('CREATE TABLE wharf_probe ()')).rejects.toMatchObject({ code: '25006' });
    client.release();
    client = await onStandby.connect();
    const second = await pidOf(client);
    expect(second).not.toBe(first);
    client.release();

    // Terminated by the server (57P01) while checked out but idle in a transaction.
    const onPrimary = pool(hostUrl(primary));
    client = await onPrimary.connect();
    client.on('error', () => {});
    const victim = await pidOf(client);
    await client.query('BEGIN');
    await onPrimary.query('SELECT pg_terminate_backend($1)', [victim]);
    await expect(client.query('SELECT 1')).rejects.toThrow();
    client.release();
    client = await onPrimary.connect();
    expect(await pidOf(client)).not.toBe(victim);
    client.release();
  });

  it('follows the promoted standby, and passes over the old primary once it rejoins as a standby', async () => {
    const url = `${hostUrl(primary, standby)}?target_session_attrs=read-write`;
    const followed = pool(url);
    expect(await serverPort(followed)).toBe(primary.port);
    const held = await followed.connect();
    held.on('error', () => {});

    await primary.halt();
    await standby.promote({ after: primary.latestCheckpoint() });
    // The connection to the stopped primary is gone: never handed out again.
    await expect(held.query('SELECT 1')).rejects.toThrow();
    held.release();
    expect(await serverPort(followed)).toBe(standby.port);
    await followed.query('CREATE TABLE after_failover (id int)');

    await primary.startAsStandbyOf(standby);
    // A fresh pool tries the old primary first: it answers, read-only, and is passed over.
    expect(await serverPort(pool(url))).toBe(standby.port);
    const client = await connectClient(url);
    try {
      expect(await serverPort(client)).toBe(standby.port);
    } finally {
      await client.end();
    }
  });
});
