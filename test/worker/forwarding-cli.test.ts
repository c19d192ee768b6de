// `wharf worker` forwards by default and says so; --no-forward turns it off;
// without WHARF_SECRET_KEYS it starts and names the variable; a malformed
// --forward-allow-networks is refused before anything starts.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { waitFor } from '../support/worker-inbox.js';
import { fixtureHandlers, killSpawnedWorkers, spawnWorker } from '../support/worker-process.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});

afterAll(async () => {
  await killSpawnedWorkers();
  await db?.drop();
});

const handlers = ['--handlers', fixtureHandlers('by-type.ts'), '--no-alerts'];

function startedLine(output: string): Record<string, unknown> | undefined {
  const line = output.split('\n').find((text) => text.includes('"msg":"worker started"'));
  return line ? (JSON.parse(line) as Record<string, unknown>) : undefined;
}

it('forwards by default, naming WHARF_SECRET_KEYS when it is not set; --no-forward turns forwarding off', async () => {
  const env = { HANDLES: '', WHARF_SECRET_KEYS: '' };
  const forwarding = spawnWorker({ databaseUrl: db.url, args: handlers, env });
  const quiet = spawnWorker({ databaseUrl: db.url, args: [...handlers, '--no-forward'], env });
  const started = await waitFor(async () => {
    const a = startedLine(forwarding.output());
    const b = startedLine(quiet.output());
    return a && b ? [a, b] : undefined;
  }, 30_000, 'both workers');
  expect(started[0]).toMatchObject({ forwarding: true });
  expect(started[1]).toMatchObject({ forwarding: false });
  expect(forwarding.output()).toContain('WHARF_SECRET_KEYS is not set');
  expect(quiet.output()).not.toContain('WHARF_SECRET_KEYS');
  forwarding.child.kill('SIGTERM');
  quiet.child.kill('SIGTERM');
  expect(await forwarding.exited).toMatchObject({ code: 0 });
  expect(await quiet.exited).toMatchObject({ code: 0 });
});

it('refuses a malformed --forward-allow-networks before starting', async () => {
  const worker = spawnWorker({ databaseUrl: db.url, args: [...handlers, '--forward-allow-networks', '10.0.0.0/40'], env: { HANDLES: '' } });
  const exit = await worker.exited;
  expect(exit.code).not.toBe(0);
  expect(worker.output()).toMatch(/--forward-allow-networks/);
  expect(worker.output()).not.toContain('worker started');
});
