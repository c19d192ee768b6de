// A database of its own on a shared server, created migrated (or empty) and
// dropped afterwards. Tests (database.ts) and the benchmark both use it; it
// imports nothing of vitest so that tsx can load it outside a test run.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { databaseUrlFor } from '../db/database-url.js';
import { migrate } from '../db/migrate.js';

export interface ScratchDatabase {
  url: string;
  name: string;
  pool: pg.Pool;
  /** A new client of its own, for work that needs separate sessions. */
  connect(): Promise<pg.Client>;
  drop(): Promise<void>;
}

export interface ScratchDatabaseOptions {
  /** Database names are `<prefix>_<random>`: lower-case letters, digits, `_`. */
  prefix: string;
  /** Apply migrations/ (default true). */
  migrate?: boolean;
  /**
   * Copy this database instead of migrating (CREATE DATABASE … TEMPLATE): a
   * migrated template makes each test database in milliseconds. Nothing may
   * be connected to the template while it is copied.
   */
  template?: string;
  poolSize?: number;
}

/** Runs `work` on a client of its own connected to `serverUrl`, ended afterwards. */
export async function onServer<T>(serverUrl: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

export async function createScratchDatabase(serverUrl: string, options: ScratchDatabaseOptions): Promise<ScratchDatabase> {
  const name = `${options.prefix.replace(/[^a-z0-9_]+/gi, '_').toLowerCase()}_${randomBytes(6).toString('hex')}`;
  const dropDatabase = () => onServer(serverUrl, (client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
  const template = options.template ? ` TEMPLATE ${options.template}` : '';
  await onServer(serverUrl, (client) => client.query(`CREATE DATABASE ${name}${template}`));
  const url = databaseUrlFor(serverUrl, name);
  try {
    if ((options.migrate ?? true) && !options.template) await migrate({ databaseUrl: url });
  } catch (error) {
    await dropDatabase();
    throw error;
  }
  const pool = new pg.Pool({ connectionString: url, max: options.poolSize ?? 20 });
  pool.on('error', () => {});
  const clients: pg.Client[] = [];
  return {
    url,
    name,
    pool,
    async connect() {
      const client = new pg.Client({ connectionString: url });
      client.on('error', () => {});
      await client.connect();
      clients.push(client);
      return client;
    },
    async drop() {
      await Promise.allSettled(clients.map((client) => client.end()));
      if (!pool.ending) await pool.end();
      await dropDatabase();
    },
  };
}
