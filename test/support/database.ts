// One fresh database per test file, migrated, dropped afterwards.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { migrate } from '../../worker/migrate.js';

export interface TestDatabase {
  url: string;
  name: string;
  pool: pg.Pool;
  /** A new client of its own, for tests that need separate sessions. */
  connect(): Promise<pg.Client>;
  drop(): Promise<void>;
}

export function databaseUrl(serverUrl: string, database: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

export async function createTestDatabase(options: { migrate?: boolean } = {}): Promise<TestDatabase> {
  const serverUrl = inject('postgresUrl');
  const name = `wharf_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = databaseUrl(serverUrl, name);
  if (options.migrate ?? true) await migrate({ databaseUrl: url });
  const pool = new pg.Pool({ connectionString: url, max: 20 });
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
      await pool.end();
      const dropper = new pg.Client({ connectionString: serverUrl });
      await dropper.connect();
      try {
        await dropper.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await dropper.end();
      }
    },
  };
}
