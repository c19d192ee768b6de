// Docs that run: every shell block marked runnable in README.md and docs/
// (test/support/runnable-blocks.ts says how) runs here, as its reader runs
// it, so that a renamed flag, variable or script fails CI. Each document is
// a session (test/support/doc-session.ts) in a scratch checkout, starting
// from the environment its prose assumes:
//   - README.md: a new user's shell, without DATABASE_URL: `npm start` runs
//     on the embedded PostgreSQL, as the walk says;
//   - the guides: DATABASE_URL naming a scratch database on the test run's
//     server (its own, empty where the guide migrates it), plus what the
//     guide says to export.
// The Worker recipes of docs/deploy-edge.md are started as written, and this
// test sends each a signed GitHub App delivery and a signed Standard Webhooks
// delivery, which must be answered 202 and stored.
import { readdir, readFile } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { stopLeftoverPostgres } from '../../cli/embedded-postgres.js';
import { signGitHubBody } from '../../edge/adapters/index.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { DocSession } from '../support/doc-session.js';
import { countEvents, freshId, newDeliveryKey, scenario, seedConnection, testSecretKeys } from '../support/edge-fixtures.js';
import { runnableBlocks, type RunnableBlock } from '../support/runnable-blocks.js';
import { waitFor } from '../support/worker-inbox.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

async function documents(): Promise<string[]> {
  const guides = (await readdir(join(root, 'docs'))).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`);
  return ['README.md', ...guides.sort()];
}

async function blocksOf(file: string): Promise<RunnableBlock[]> {
  return runnableBlocks(file, await readFile(join(root, file), 'utf8'));
}

/** A shell's basics, and nothing of this test run's own configuration. */
function userShell(extra: Record<string, string> = {}): Record<string, string> {
  const basics = Object.fromEntries(['PATH', 'HOME', 'USER', 'LANG', 'TMPDIR']
    .flatMap((name) => (process.env[name] !== undefined ? [[name, process.env[name]!]] : [])));
  return { ...basics, ...extra };
}

/** The documents this test runs, with the session each starts in and what it checks between blocks. */
interface DocumentRun {
  env(): Promise<Record<string, string>>;
  /** After the block with this id ran: checks of its own. */
  after?: Record<string, (session: DocSession, block: RunnableBlock) => Promise<void>>;
  cleanUp?(session: DocSession): Promise<void>;
}

const databases: TestDatabase[] = [];
async function scratchDatabase(options: { migrate: boolean }): Promise<TestDatabase> {
  const db = await createTestDatabase(options);
  databases.push(db);
  return db;
}

afterAll(async () => {
  await Promise.all(databases.map((db) => db.drop()));
});

/**
 * What a guide assumes: DATABASE_URL naming a scratch database (migrated, or
 * empty where the guide migrates it), what its prose says to export
 * (`extra`), and what it says is there already (`seed`).
 */
function guide(options: {
  migrate: boolean; extra?: Record<string, string>; seed?: (db: TestDatabase) => Promise<void>;
}): DocumentRun & { db(): TestDatabase } {
  let db: TestDatabase | undefined;
  return {
    db: () => db!,
    env: async () => {
      db = await scratchDatabase({ migrate: options.migrate });
      await options.seed?.(db);
      return userShell({ DATABASE_URL: db.url, ...options.extra });
    },
  };
}

/** Whether something accepts connections on 127.0.0.1:`port`. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * docs/deploy-edge.md: once a recipe's Worker is ready on 8790, a signed
 * delivery for a GitHub App (the demo App the recipe is given the secret of)
 * and one for a Standard Webhooks connection (whose key is stored under the
 * WHARF_SECRET_KEYS the recipe passes on) are each answered 202 and stored;
 * then the Worker is stopped, as the guide says, before the other recipe.
 */
function localWorkerRecipes(): DocumentRun {
  const demoSecret = 'docs-demo-app-webhook-secret-5b0e3f';
  const run = guide({ migrate: false, extra: { WHARF_SECRET_KEYS: testSecretKeys, GITHUB_APP_DEMO_WEBHOOK_SECRET: demoSecret } });
  const workspace = freshId();
  const installation = freshId();
  let generic: Awaited<ReturnType<typeof scenario>> | undefined;

  async function post(path: string, body: string, headers: Record<string, string>): Promise<{ status: number; json: Record<string, unknown> }> {
    const response = await fetch(`http://127.0.0.1:8790${path}`, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
    return { status: response.status, json: (await response.json()) as Record<string, unknown> };
  }

  const deliverAndStop = async (session: DocSession, block: RunnableBlock): Promise<void> => {
    const pool = run.db().pool;
    if (!generic) {
      await seedConnection(pool, {
        workspace, provider: 'github', source: 'https://github.com', kind: 'app_installation',
        externalId: String(installation), subjects: ['repo:acme/docs'],
      });
      generic = await scenario(pool, 'generic', workspace);
    }
    const pushKey = newDeliveryKey();
    const push = JSON.stringify({
      ref: 'refs/heads/main', after: pushKey, installation: { id: installation },
      repository: { full_name: 'acme/docs', owner: { login: 'acme' } }, commits: [],
    });
    const github = await post('/hooks/github/demo', push, {
      'x-github-event': 'push', 'x-github-delivery': pushKey, 'x-hub-signature-256': await signGitHubBody(demoSecret, push),
    });
    const genericKey = newDeliveryKey();
    const invoice = JSON.stringify(generic.payload(genericKey));
    const standard = await post(generic.path, invoice, await generic.sign(invoice, { deliveryKey: genericKey }));
    for (const [what, answer] of [['GitHub App', github], ['Standard Webhooks', standard]] as const) {
      expect(answer.status, `${block.file}:${block.line} (${block.id}): ${what}: ${JSON.stringify(answer.json)}${session.backgroundOutput()}`).toBe(202);
      expect(answer.json.events).toEqual([{ workspace_id: workspace, event_id: expect.any(Number), outcome: 'stored' }]);
    }
    expect([await countEvents(pool, pushKey), await countEvents(pool, genericKey)]).toEqual([1, 1]);
    await session.stop(block);
    // workerd may outlive wrangler by a moment: the next recipe needs the port.
    await waitFor(async () => !(await listening(8790)), 15_000, 'port 8790 to be free');
  };

  return { env: run.env, after: { neon: deliverAndStop, hyperdrive: deliverAndStop } };
}

const runs: Record<string, DocumentRun> = {
  'README.md': {
    env: async () => userShell(),
    // PostgreSQL runs in a session of its own: Ctrl-C stops it through
    // `npm start`; this is for a start that was killed.
    cleanUp: async (session) => {
      await stopLeftoverPostgres(join(session.directory, '.wharf', 'pg'), { remove: true });
    },
  },
  'docs/deploy-edge.md': localWorkerRecipes(),
  'docs/workers.md': guide({ migrate: true }),
  // "The examples below use workspace 1, as npm start's database has it."
  'docs/operating.md': guide({ migrate: true, seed: async (db) => { await db.pool.query('SELECT wharf.upsert_workspace(1)'); } }),
  // The release section migrates the database itself.
  'docs/sql.md': guide({ migrate: false }),
  // The receiver and the script that signs requests for it, as the application's developer runs
  // them: Node and the standardwebhooks package, no Wharf and no database.
  'docs/forwarding.md': { env: async () => userShell() },
};

async function runDocument(file: string, run: DocumentRun): Promise<void> {
  const blocks = await blocksOf(file);
  // A renamed id must not leave a check of this test silently unrun.
  const ids = blocks.map((block) => block.id);
  expect(Object.keys(run.after ?? {}).filter((id) => !ids.includes(id)), `${file}: blocks the test hooks after`).toEqual([]);
  const session = await DocSession.open(await run.env());
  try {
    for (const block of blocks) {
      await session.run(block);
      if (block.id !== undefined) await run.after?.[block.id]?.(session, block);
    }
  } finally {
    await session.stop();
    await run.cleanUp?.(session);
    await session.close();
  }
}

it('runs every document that has runnable blocks, and knows the session each starts in', async () => {
  const runnable: string[] = [];
  for (const file of await documents()) if ((await blocksOf(file)).length > 0) runnable.push(file);
  expect(runnable).toContain('README.md');
  expect(runnable.sort()).toEqual(Object.keys(runs).sort());
});

describe.each(Object.keys(runs))('%s', (file) => {
  it('runs its runnable blocks as written', async () => {
    await runDocument(file, runs[file]!);
  }, 240_000);
});
