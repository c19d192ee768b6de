// The provider registry is one list on each side: wharf.provider in SQL and
// db/providers.ts in TypeScript. They must name the same providers with the
// same secret places; every provider has its adapter; and every adapter's
// signature header is dropped by wharf.safe_headers and never kept.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { providers, providerNames } from '../../db/providers.js';
import { adapters } from '../../edge/adapters/index.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

it('wharf.provider and db/providers.ts name the same providers, each with the same secret place', async () => {
  const { rows } = await db.pool.query<{ name: string; secret: string }>('SELECT name, secret FROM wharf.provider ORDER BY name');
  const typescript = Object.entries(providers).map(([name, { secret }]) => ({ name, secret }))
    .sort((a, b) => (a.name < b.name ? -1 : 1));
  expect(rows).toEqual(typescript);
});

it('a connection of a provider outside the registry is refused, of every provider in it accepted', async () => {
  await db.pool.query('SELECT wharf.upsert_workspace(1)');
  await expect(db.pool.query(`SELECT wharf.upsert_connection(1, 'nosuch', 'https://x.example', 'webhook', 'a')`))
    .rejects.toMatchObject({ code: '22023' });
  // Past the function too: the table's foreign key.
  await expect(db.pool.query(`INSERT INTO wharf.connection (workspace_id, provider, source, kind) VALUES (1, 'nosuch', 'x', 'webhook')`))
    .rejects.toMatchObject({ code: '23503' });
  for (const provider of providerNames) {
    await db.pool.query(`SELECT wharf.upsert_connection(1, $1, 'https://x.example', 'webhook', 'a')`, [provider]);
  }
  const { rows } = await db.pool.query(`SELECT wharf.admit('nosuch', 's', 'k', 't', '{}', '{}', '{}', '{}')`).catch((error) => ({ rows: [error.code] }));
  expect(rows).toEqual(['22023']);
});

it('every provider of the registry has its adapter, under its own name', () => {
  expect([...adapters.keys()].sort()).toEqual([...providerNames].sort());
  for (const [name, adapter] of adapters) expect(adapter.provider).toBe(name);
});

it("wharf.safe_headers drops every adapter's signature headers, and no adapter keeps one", async () => {
  const signatureHeaders = [...adapters.values()].flatMap((adapter) => adapter.signatureHeaders);
  expect(signatureHeaders).toEqual(expect.arrayContaining([
    'stripe-signature', 'x-shopify-hmac-sha256', 'linear-signature', 'paddle-signature', 'x-zm-signature',
    'x-twilio-signature', 'x-hub-signature', 'x-hub-signature-256', 'x-slack-signature', 'x-gitlab-token',
  ]));
  for (const adapter of adapters.values()) {
    expect(adapter.keptHeaders.filter((name) => adapter.signatureHeaders.includes(name))).toEqual([]);
  }
  const sent = Object.fromEntries(signatureHeaders.map((name) => [name, 'secret']));
  for (const headers of [{ ...sent, 'content-type': 'application/json' },
                         // Upper case takes the other path through safe_headers.
                         { ...Object.fromEntries(signatureHeaders.map((name) => [name.toUpperCase(), 'secret'])), 'Content-Type': 'x' }]) {
    const { rows } = await db.pool.query<{ kept: Record<string, string> }>('SELECT wharf.safe_headers($1::jsonb) AS kept', [headers]);
    expect(Object.keys(rows[0]!.kept)).toEqual(['content-type']);
  }
});
