// The worker library as a host application meets it: `npm pack`, installed
// from the tarball into a fresh application outside the repository, a typed
// `github:push` handler that type-checks (and one reading a field the push
// payload lacks that does not), and the installed `wharf-inbox` command
// migrating a database and handling one admitted event.
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { waitFor } from '../support/worker-inbox.js';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../../', import.meta.url));

const handlersSource = `import type { HandlerMap } from 'wharf-inbox';

export const handlers = {
  'github:push': async (ctx) => {
    const { repository, ref, after } = ctx.event.payload;
    await ctx.step(\`push:\${repository.id}:\${after}\`, async (tx) => {
      await tx.query('INSERT INTO app.pushes (delivery, repository, ref) VALUES ($1, $2, $3)',
        [ctx.event.deliveryKey, repository.full_name, ref]);
    });
  },
  'github:*': async () => {},
} satisfies HandlerMap;
`;

const wrongHandlersSource = `import type { HandlerMap } from 'wharf-inbox';

export const handlers = {
  'github:push': async (ctx) => {
    console.log(ctx.event.payload.no_such_field);
  },
} satisfies HandlerMap;
`;

const clientSource = `import { answerOf, operatorApiClient } from 'wharf-inbox/operator-client';

const api = operatorApiClient('https://wharf.example.test/api', { token: 'wharf_ws_x' });

export async function deadCount(): Promise<number> {
  const page = await answerOf(api.workspaces[':ws'].dead.$get({ param: { ws: '1' }, query: {} }));
  return page.events.filter((event) => event.state === 'DEAD').length;
}
`;

const wrongClientSource = clientSource.replace("param: { ws: '1' }", "param: { workspace: '1' }");

describe('the packed worker library in a host application', () => {
  let app: string;
  let db: TestDatabase;

  beforeAll(async () => {
    app = await mkdtemp(join(tmpdir(), 'wharf-host-'));
    const packs = await mkdtemp(join(tmpdir(), 'wharf-pack-'));
    await run('npm', ['pack', '--pack-destination', packs, '--silent'], { cwd: root, maxBuffer: 16 * 1024 * 1024 });
    const tarball = join(packs, (await readdir(packs)).find((file) => file.endsWith('.tgz'))!);
    await writeFile(join(app, 'package.json'), JSON.stringify({ name: 'host-app', private: true, type: 'module' }));
    await writeFile(join(app, 'tsconfig.json'), JSON.stringify({
      compilerOptions: {
        strict: true, module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022',
        outDir: 'build', types: ['node'], skipLibCheck: false,
      },
      include: ['handlers.ts', 'client.ts'],
    }));
    await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball, 'typescript@5.9.3', '@types/node@20'],
      { cwd: app, maxBuffer: 16 * 1024 * 1024 });
    db = await createTestDatabase({ migrate: false });
  }, 240_000);

  afterAll(async () => {
    await db?.drop();
    if (app) await rm(app, { recursive: true, force: true });
  });

  it('type-checks a typed github:push handler, and refuses a field the push payload lacks', async () => {
    await writeFile(join(app, 'client.ts'), clientSource);
    await writeFile(join(app, 'handlers.ts'), wrongHandlersSource);
    const wrong = await run('npx', ['tsc', '--noEmit'], { cwd: app }).then(() => undefined, (error: { stdout: string }) => error.stdout);
    expect(wrong).toMatch(/Property 'no_such_field' does not exist on type 'PushEvent'/);

    await writeFile(join(app, 'handlers.ts'), handlersSource);
    await run('npx', ['tsc'], { cwd: app });
  }, 240_000);

  it('type-checks a script on the typed operator API client, and refuses a path parameter the route lacks', async () => {
    await writeFile(join(app, 'client.ts'), wrongClientSource);
    const wrong = await run('npx', ['tsc', '--noEmit'], { cwd: app }).then(() => undefined, (error: { stdout: string }) => error.stdout);
    expect(wrong).toMatch(/client\.ts.*'workspace' does not exist/s);

    await writeFile(join(app, 'client.ts'), clientSource);
    await run('npx', ['tsc', '--noEmit'], { cwd: app });
    // Two whole type-checks of a host application: on a loaded two-core machine
    // a minute was not always enough (it is a bound on finishing, not a speed).
  }, 240_000);

  it('migrates with the installed command and handles an admitted event with the installed worker', async () => {
    const env = { ...process.env, DATABASE_URL: db.url };
    await run('npx', ['wharf-inbox', 'migrate'], { cwd: app, env });
    await db.pool.query('CREATE SCHEMA app; CREATE TABLE app.pushes (delivery text PRIMARY KEY, repository text, ref text)');
    await db.pool.query(`
      SELECT wharf.upsert_workspace(1);
      SELECT wharf.subscribe(wharf.upsert_connection(1, 'github', 'https://github.com', 'app_installation', '42'), 'repo:acme/api');
      SELECT wharf.admit('github', 'https://github.com', 'delivery-1', 'push', '{"installation_id": "42"}',
                         ARRAY['repo:acme/api', 'org:acme'],
                         '{"ref": "refs/heads/main", "after": "abc", "repository": {"id": 7, "full_name": "acme/api"},
                           "installation": {"id": 42}}', '{}')`);

    // The installed bin itself, not npx, so that SIGTERM reaches the worker.
    const worker = spawn(join(app, 'node_modules/.bin/wharf-inbox'), ['worker', '--handlers', 'build/handlers.js'], { cwd: app, env, stdio: 'pipe' });
    let output = '';
    worker.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    worker.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => worker.once('exit', resolve));
    try {
      const rows = await waitFor(async () => {
        const { rows } = await db.pool.query('SELECT delivery, repository, ref FROM app.pushes');
        return rows.length > 0 ? rows : undefined;
      }, 30_000, `the installed worker to handle the push (output: ${output})`);
      expect(rows).toEqual([{ delivery: 'delivery-1', repository: 'acme/api', ref: 'refs/heads/main' }]);
    } finally {
      worker.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
  }, 90_000);
});
