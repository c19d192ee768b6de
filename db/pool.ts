// Connections to a primary that may move. Every Node part of Wharf opens its
// pools and clients here, from a database URL:
//
// - libpq's multi-host form, `postgres://h1:5432,h2:5433/db?target_session_attrs=read-write`
//   (or `primary`, or `any`), as pg_auto_failover and Patroni print it, which
//   node-postgres does not read: each new connection goes to the first host,
//   from the last one that worked, that answers and accepts writes; after a
//   connection error it looks again. A single host with target_session_attrs
//   is checked the same way.
// - A connection that answered 25006 (its server is a standby now), 57P01,
//   57P02, 57P03 (shutting down, crashed, starting) or broke is never pooled
//   again, whatever the URL's form: the next statement connects afresh, to
//   wherever the primary is now (a DNS name or proxy that moved included).
//
// A plain single-host URL is given to pg as it is: the same connection as
// before this module existed.
import pg from 'pg';
import { retiresConnection } from './error-codes.js';

export type TargetSessionAttrs = 'any' | 'read-write' | 'primary';

export interface DatabaseHost {
  host: string;
  port: number;
}

export interface DatabaseUrl {
  hosts: DatabaseHost[];
  /** target_session_attrs; `any` when absent. */
  target: TargetSessionAttrs;
  /** The URL of one of `hosts`, without target_session_attrs: what pg connects to. */
  urlFor(index: number): string;
}

/** A URL this module cannot read as given (the message names what, never a password). */
export class DatabaseUrlError extends Error {
  override name = 'DatabaseUrlError';
}

const urlForm = /^(postgres(?:ql)?:\/\/)([^/?#]*)(.*)$/s;
const targets = new Set<string>(['any', 'read-write', 'primary']);

/**
 * Reads a postgres:// URL's host list and target_session_attrs; undefined for
 * a connection string in another form (key=value), which pg reads itself.
 */
export function parseDatabaseUrl(url: string): DatabaseUrl | undefined {
  const match = urlForm.exec(url);
  if (!match) return undefined;
  const [, scheme, authority, rest] = match as unknown as [string, string, string, string];
  const at = authority.lastIndexOf('@');
  const userInfo = at >= 0 ? authority.slice(0, at + 1) : '';
  const hostList = authority.slice(at + 1);
  const hosts = splitHosts(hostList);
  const queryStart = rest.indexOf('?');
  const path = queryStart >= 0 ? rest.slice(0, queryStart) : rest;
  const query = new URLSearchParams(queryStart >= 0 ? rest.slice(queryStart + 1) : '');
  const target = query.get('target_session_attrs') ?? 'any';
  if (!targets.has(target)) {
    throw new DatabaseUrlError(
      `target_session_attrs=${target} is not supported: Wharf writes, so use read-write or primary (or leave it out)`);
  }
  query.delete('target_session_attrs');
  const queryText = query.toString();
  return {
    hosts,
    target: target as TargetSessionAttrs,
    urlFor(index) {
      const { host, port } = hosts[index]!;
      const hostText = host.includes(':') ? `[${host}]` : host;
      return `${scheme}${userInfo}${hostText}:${port}${path}${queryText ? `?${queryText}` : ''}`;
    },
  };
}

function splitHosts(hostList: string): DatabaseHost[] {
  const hosts: DatabaseHost[] = [];
  for (const part of hostList.split(',')) {
    const bracketed = /^\[([^\]]+)\](?::(\d*))?$/.exec(part);
    const plain = /^([^:[\]]*)(?::(\d*))?$/.exec(part);
    const found = bracketed ?? plain;
    if (!found) throw new DatabaseUrlError(`cannot read the host "${part}" of the database URL`);
    const port = found[2] ? Number(found[2]) : 5432;
    if (!Number.isInteger(port) || port < 1 || port > 65_535) {
      throw new DatabaseUrlError(`the port of host "${found[1]}" in the database URL is not a port`);
    }
    hosts.push({ host: found[1] || 'localhost', port });
  }
  return hosts;
}

/** host:port of each host of a URL, for a log line (never the credentials). */
export function describeDatabase(url: string): string {
  try {
    const parsed = parseDatabaseUrl(url);
    if (parsed) return describeHosts(parsed);
  } catch {
    // described below
  }
  return 'the database';
}

/**
 * A host of the URL is a standby (or read-only) now; when it is the last one
 * tried, none accepted this session. A connection failure (08001): retry later.
 */
export class NoPrimaryError extends Error {
  override name = 'NoPrimaryError';
  readonly code = '08001';
}

/** Which host new connections try first, shared by one pool's (or URL's) connections. */
class HostLocator {
  private current = 0;

  constructor(readonly url: DatabaseUrl) {}

  get first(): number {
    return this.current;
  }

  /** The host at `index` failed a connection or stopped being the primary: try the next one first. */
  failed(index: number): void {
    if (this.current === index) this.current = (index + 1) % this.url.hosts.length;
  }
}

/** Errors from one host's connection attempt: another host may still accept. */
const hostFailures = new WeakSet<object>();

function isHostFailure(error: unknown): boolean {
  for (let cause = error, depth = 0; typeof cause === 'object' && cause !== null && depth < 4; depth += 1) {
    if (hostFailures.has(cause)) return true;
    cause = (cause as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * A pg Client that remembers when a statement's error means it must not be
 * used again (retiresConnection), so that its pool drops it instead of
 * handing it out. Statements it runs are unchanged.
 */
class RetiringClient extends pg.Client {
  retired = false;

  // pg's query has a dozen overloads; this passes every form through and
  // only watches the outcome of the promise and callback forms.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  override query(...args: any[]): any {
    const last = args.at(-1);
    if (typeof last === 'function') {
      args[args.length - 1] = (error: unknown, result: unknown) => {
        if (error) this.watch(error);
        (last as (error: unknown, result: unknown) => void)(error, result);
      };
      return (super.query as (...a: unknown[]) => unknown)(...args);
    }
    const result = (super.query as (...a: unknown[]) => unknown)(...args);
    if (result instanceof Promise) result.catch((error: unknown) => this.watch(error));
    return result;
  }

  protected watch(error: unknown): void {
    if (!this.retired && retiresConnection(error)) {
      this.retired = true;
      this.onRetired();
    }
  }

  protected onRetired(): void {}
}

/** The client class of one multi-host URL: each instance connects to the host its locator names, and checks it. */
function multiHostClient(locator: HostLocator): typeof RetiringClient {
  return class MultiHostClient extends RetiringClient {
    private readonly hostIndex: number;

    constructor(config: pg.ClientConfig) {
      const index = locator.first;
      super({ ...config, connectionString: locator.url.urlFor(index) });
      this.hostIndex = index;
    }

    // Callback form for pg-pool, promise form for everyone else.
    override connect(): Promise<void>;
    override connect(callback: (error: Error) => void): void;
    override connect(callback?: (error: Error) => void): Promise<void> | void {
      const connected = this.connectToTarget();
      if (!callback) return connected;
      connected.then(() => callback(undefined as unknown as Error), callback);
    }

    private async connectToTarget(): Promise<void> {
      try {
        await super.connect();
      } catch (error) {
        if (retiresConnection(error)) this.hostFailed(error);
        throw error;
      }
      const target = locator.url.target;
      if (target === 'any') return;
      let accepts: boolean;
      try {
        const { rows } = (await super.query(
          `SELECT pg_is_in_recovery() AS standby, current_setting('transaction_read_only') AS read_only`)) as pg.QueryResult<{ standby: boolean; read_only: string }>;
        accepts = target === 'primary' ? !rows[0]!.standby : rows[0]!.read_only === 'off';
      } catch (error) {
        await this.end().catch(() => {});
        if (retiresConnection(error)) this.hostFailed(error);
        throw error;
      }
      if (!accepts) {
        await this.end().catch(() => {});
        const { host, port } = locator.url.hosts[this.hostIndex]!;
        const error = new NoPrimaryError(
          `${host}:${port} does not accept writes now (target_session_attrs=${target}); the URL's hosts: ${describeHosts(locator.url)}`);
        this.hostFailed(error);
        throw error;
      }
    }

    private hostFailed(error: unknown): void {
      if (typeof error === 'object' && error !== null) hostFailures.add(error);
      locator.failed(this.hostIndex);
    }

    protected override onRetired(): void {
      locator.failed(this.hostIndex);
    }
  };
}

function describeHosts(url: DatabaseUrl): string {
  return url.hosts.map(({ host, port }) => `${host.includes(':') ? `[${host}]` : host}:${port}`).join(',');
}

/** Whether a URL needs the multi-host connector (several hosts, or a target to check). */
function multiHost(url: string): DatabaseUrl | undefined {
  const parsed = parseDatabaseUrl(url);
  return parsed && (parsed.hosts.length > 1 || parsed.target !== 'any') ? parsed : undefined;
}

// pg's own type for a pool client's release.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type PoolRelease = (release?: any) => void;

export type PoolOptions = Omit<pg.PoolConfig, 'connectionString' | 'Client'>;

/**
 * A pg Pool whose connections that stop being a primary's are dropped, never
 * reused; with a multi-host URL, one whose connections go to the primary.
 */
class PrimaryPool extends pg.Pool {
  private readonly attempts: number;

  constructor(connectionString: string, options: PoolOptions) {
    const parsed = multiHost(connectionString);
    const Client = parsed ? multiHostClient(new HostLocator(parsed)) : RetiringClient;
    super(parsed ? { ...options, Client } : { ...options, connectionString, Client });
    // Each host once, and once more: concurrent connects may move the locator past a host.
    this.attempts = parsed ? 2 * parsed.hosts.length : 1;
  }

  override connect(): Promise<pg.PoolClient>;
  override connect(callback: (error: Error | undefined, client: pg.PoolClient | undefined, done: PoolRelease) => void): void;
  override connect(
    callback?: (error: Error | undefined, client: pg.PoolClient | undefined, done: PoolRelease) => void,
  ): Promise<pg.PoolClient> | void {
    const connected = this.connectOnce();
    if (!callback) return connected;
    connected.then((client) => callback(undefined, client, client.release), (error: Error) => callback(error, undefined, () => {}));
  }

  private async connectOnce(): Promise<pg.PoolClient> {
    for (let attempt = 1; ; attempt += 1) {
      let client: pg.PoolClient;
      try {
        client = await super.connect();
      } catch (error) {
        if (attempt < this.attempts && isHostFailure(error)) continue;
        throw error;
      }
      // A retired connection goes back as broken: the pool ends it.
      const release = client.release;
      client.release = (error?: Error | boolean) =>
        release(error || ((client as unknown as RetiringClient).retired ? new Error('connection retired') : undefined));
      return client;
    }
  }
}

/** A pool on `connectionString` (a single- or multi-host URL): see the top of this file. */
export function createPool(connectionString: string, options: PoolOptions = {}): pg.Pool {
  return new PrimaryPool(connectionString, options);
}

/**
 * One connected client (a migration, a scratch statement): to the primary of
 * a multi-host URL, else exactly `new pg.Client(connectionString)`. The caller ends it.
 */
export async function connectClient(connectionString: string, options: Omit<pg.ClientConfig, 'connectionString'> = {}): Promise<pg.Client> {
  const parsed = multiHost(connectionString);
  if (!parsed) {
    const client = new pg.Client({ ...options, connectionString });
    client.on('error', () => {});
    await client.connect();
    return client;
  }
  const Client = multiHostClient(new HostLocator(parsed));
  for (let attempt = 1; ; attempt += 1) {
    const client = new Client(options);
    client.on('error', () => {});
    try {
      await client.connect();
      return client;
    } catch (error) {
      if (attempt >= 2 * parsed.hosts.length || !isHostFailure(error)) throw error;
    }
  }
}
