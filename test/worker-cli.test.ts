// `wharf migrate` brings an empty database up to date, and `wharf worker`
// refuses to start without a handler module that exports a handler map.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './support/database.js';

const root = fileURLToPath(new URL('../', import.meta.url));
let db: TestDatabase;

function wharf(args: string[], databaseUrl: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bin/wharf.js', ...args], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: databaseUrl },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('exit', (code) => resolve({ code, output }));
  });
}

beforeAll(async () => {
  db = await createTestDatabase({ migrate: false });
});

afterAll(async () => {
  await db?.drop();
});

it('wharf migrate creates the schema with its settings', async () => {
  const result = await wharf(['migrate'], db.url);
  expect(result.code).toBe(0);
  const { rows } = await db.pool.query(`SELECT value FROM wharf.setting WHERE key = 'poll_every'`);
  expect(rows).toEqual([{ value: '5 seconds' }]);
}, 30_000);

it('wharf worker exits non-zero when the handler module exports no handler map', async () => {
  const result = await wharf(['worker', '--handlers', fileURLToPath(new URL('./support/worker-inbox.ts', import.meta.url))], db.url);
  expect(result.code).not.toBe(0);
  expect(result.output).toContain('exports no handler map');
}, 30_000);
