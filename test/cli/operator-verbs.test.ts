// The operator verbs of the real `wharf` binary against a real database:
// tables for people, --json for scripts, and on a mistake a message on stderr
// with a non-zero exit code.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiToken, verifyApiToken } from '../../operator/sql/operator.js';
import { adminToken } from '../support/api-client.js';
import { serveOperatorApi } from '../support/operator-client.js';
import { runWharf, type CliResult } from '../support/wharf-cli.js';
import {
  admitEvent, createConnection, createWorkspace, deadEvent, deadInstallationEvent,
} from '../support/api-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { freePort } from '../../cli/postgres-server.js';
import { testSecretKeys } from '../support/edge-fixtures.js';

let db: TestDatabase;
const wharf = (...args: string[]): Promise<CliResult> => runWharf(args, { DATABASE_URL: db.url });
const json = <T>(result: CliResult): T => {
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as T;
};

beforeAll(async () => {
  db = await createTestDatabase();
});

afterAll(async () => {
  await db?.drop();
});

describe('wharf workspaces, connections and subscriptions', () => {
  it('adds a workspace and a connection, subscribes, and lists them', async () => {
    const added = await wharf('workspaces', 'add', '401');
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout).toMatch(/^ID\s+STATE\s+CONNECTIONS\s+CREATED_AT\n401\s+ACTIVE\s+0\s/);

    const connection = json<{ id: number; state: string }>(await wharf(
      'connections', 'add', '-w', '401', '--provider', 'gitlab', '--source', 'https://gitlab.example.test',
      '--kind', 'webhook', '--external-id', '9', '--route', '{"subject_prefixes":["project:"]}', '--json'));
    expect(connection.state).toBe('ACTIVE');

    const subscribed = await wharf('subscribe', String(connection.id), 'project:9');
    expect(subscribed).toMatchObject({ code: 0, stdout: `subscribed: connection ${connection.id} project:9\n` });
    // Outside the route's subject_prefixes, admission would drop every event: refused now.
    const outside = await wharf('subscribe', String(connection.id), 'repo:acme/api');
    expect(outside).toMatchObject({ code: 1, stdout: '' });
    expect(outside.stderr).toBe(
      `wharf: subject 'repo:acme/api' is outside connection ${connection.id}'s subject_prefixes ["project:"]\n`);

    const [workspaces, connections] = await Promise.all([
      wharf('workspaces', 'list', '--json'),
      wharf('connections', 'list', '-w', '401', '--json'),
    ]);
    expect(json(workspaces)).toEqual([expect.objectContaining({ id: 401, state: 'ACTIVE', connections: 1 })]);
    expect(json(connections)).toEqual([expect.objectContaining({
      id: connection.id, provider: 'gitlab', route: { subject_prefixes: ['project:'] }, subscriptions: ['project:9'],
    })]);
  });
});

describe('wharf events, dead and replay', () => {
  let connection: number;
  beforeAll(async () => {
    await createWorkspace(db.pool, 410);
    connection = await createConnection(db.pool, 410);
  });

  it('lists events as a table and as JSON pages, shows one, and lists dead letters', async () => {
    const queued = await admitEvent(db.pool, connection, { payload: { number: 12 }, headers: { 'x-request-id': 'req-7' } });
    const dead = await deadEvent(db.pool, connection);
    const [table, firstPage, shown, deadList] = await Promise.all([
      wharf('events', 'list', '-w', '410'),
      wharf('events', 'list', '-w', '410', '--limit', '1', '--json'),
      wharf('events', 'show', String(queued), '-w', '410'),
      wharf('dead', 'list', '--workspace', '410', '--json'),
    ]);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout.split('\n')[0]).toMatch(/^ID\s+STATE\s+PROVIDER\s+EVENT_TYPE\s+SUBJECT/);
    expect(table.stdout).toMatch(new RegExp(`^${dead}\\s+DEAD\\s+generic\\s+ping`, 'm'));
    expect(table.stdout).toMatch(new RegExp(`^${queued}\\s+QUEUED\\s+generic\\s+ping`, 'm'));

    expect(json(firstPage)).toEqual({ events: [expect.objectContaining({ id: dead })], next_cursor: dead });
    const secondPage = json<{ events: { id: number }[] }>(await wharf('events', 'list', '-w', '410', '--limit', '1', '--cursor', String(dead), '--json'));
    expect(secondPage.events.map((event) => event.id)).toEqual([queued]);

    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/^state:\s+QUEUED$/m);
    expect(shown.stdout).toContain('"number": 12');
    expect(shown.stdout).toContain('"x-request-id": "req-7"');

    expect(json<{ events: { id: number; state: string }[] }>(deadList).events).toEqual([
      expect.objectContaining({ id: dead, state: 'DEAD', error_class: 'SyntaxError' }),
    ]);
  });

  it('replays a dead letter, and refuses a row that is not DEAD or whose outcome is uncertain', async () => {
    const dead = await deadEvent(db.pool, connection);
    const uncertain = await deadEvent(db.pool, connection, 'uncertain');
    const [replayed, refusedUncertain, missing] = await Promise.all([
      wharf('replay', String(dead), '-w', '410'),
      wharf('replay', String(uncertain), '-w', '410'),
      wharf('replay', '987654', '-w', '410'),
    ]);
    expect(replayed).toMatchObject({ code: 0, stderr: '' });
    expect(replayed.stdout).toMatch(new RegExp(`^replayed event ${dead}: QUEUED, due `));
    expect(refusedUncertain).toMatchObject({ code: 1, stdout: '' });
    expect(refusedUncertain.stderr).toMatch(/--force/);
    expect(missing).toMatchObject({ code: 1, stderr: 'wharf: no event 987654 in workspace 410\n' });

    const [again, forced] = await Promise.all([
      wharf('replay', String(dead), '-w', '410'),
      wharf('replay', String(uncertain), '-w', '410', '--force', '--account', 'alice', '--json'),
    ]);
    expect(again).toMatchObject({ code: 1, stderr: `wharf: event ${dead} is QUEUED; only a DEAD event can be replayed\n` });
    expect(json(forced)).toMatchObject({ id: uncertain, state: 'QUEUED', outcome: null, replayed_by: 'alice' });
  });

  it('replays an installation row with --installation and audits it', async () => {
    const id = await deadInstallationEvent(db.pool);
    const result = await wharf('replay', String(id), '--installation', '--account', 'ops@example', '--json');
    expect(json(result)).toMatchObject({ id, workspace_id: null, state: 'QUEUED' });
    const { rows } = await db.pool.query('SELECT account FROM wharf.replay_audit WHERE event_id = $1', [id]);
    expect(rows).toEqual([{ account: 'ops@example' }]);
  });
});

describe('wharf replay --bulk, pause and resume, rotate-secret', () => {
  let connection: number;
  beforeAll(async () => {
    await createWorkspace(db.pool, 430);
    connection = await createConnection(db.pool, 430);
  });

  it('replays every matching dead letter with progress on stderr and the result on stdout', async () => {
    // One at a time: a subscription changing under an admission makes it retry.
    const dead = [await deadEvent(db.pool, connection), await deadEvent(db.pool, connection), await deadEvent(db.pool, connection)];
    const uncertain = await deadEvent(db.pool, connection, 'uncertain');
    const result = await wharf('replay', '--bulk', '-w', '430', '--error-class', 'SyntaxError', '--json', '--yes');
    const replay = json<{ state: string; matched: number; replayed: number }>(result);
    expect(replay).toMatchObject({ state: 'finished', matched: 3, replayed: 3 });
    expect(result.stderr).toMatch(/replayed 3 of 3 \(100 %\)\n$/);
    const { rows } = await db.pool.query<{ id: number; state: string }>(
      'SELECT id::int, state FROM wharf.provider_event WHERE id = ANY($1) ORDER BY id', [[...dead, uncertain]]);
    expect(rows.map((row) => row.state)).toEqual(['QUEUED', 'QUEUED', 'QUEUED', 'DEAD']);
    const misspelt = await wharf('replay', '--bulk', '-w', '430', '--dead-after', 'last tuesday');
    expect(misspelt).toMatchObject({ code: 1, stdout: '' });
    expect(misspelt.stderr).toMatch(/dead_after/);
  });

  it('pauses and resumes a connection', async () => {
    const paused = json<{ state: string }>(await wharf('pause', '--connection', String(connection), '--json'));
    expect(paused.state).toBe('PAUSED');
    const resumed = await wharf('resume', '--connection', String(connection));
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toMatch(/ACTIVE/);
    const neither = await wharf('pause');
    expect(neither).toMatchObject({ code: 1, stderr: 'wharf: give either --workspace <id> or --connection <id>\n' });
  });

  it('rotate-secret prints the secret alone on stdout and says where it goes on stderr', async () => {
    const added = json<{ id: number }>(await wharf('connections', 'add', '-w', '430', '--provider', 'outline',
      '--source', 'https://outline.example.test', '--kind', 'webhook', '--json'));
    const rotated = await runWharf(['connections', 'rotate-secret', String(added.id)],
      { DATABASE_URL: db.url, WHARF_PUBLIC_URL: 'https://hooks.example.com', WHARF_SECRET_KEYS: testSecretKeys });
    expect(rotated.code, rotated.stderr).toBe(0);
    expect(rotated.stdout).toMatch(/^\S{20,}\n$/);
    expect(rotated.stderr).toContain(`endpoint: https://hooks.example.com/hooks/outline/${added.id}`);
    expect(rotated.stderr).toContain('Outline-Signature');
  });
});

describe('wharf --api', () => {
  it('goes through a running API with WHARF_TOKEN, and a workspace token reaches only its workspace', async () => {
    await createWorkspace(db.pool, 440);
    await createWorkspace(db.pool, 441);
    const queued = await admitEvent(db.pool, await createConnection(db.pool, 440));
    const token = (await createApiToken(db.pool, '440', 'cli')).token;
    const served = await serveOperatorApi({ db: db.pool, adminToken });
    try {
      const env = { DATABASE_URL: undefined, WHARF_API_URL: served.url, WHARF_TOKEN: token };
      const mine = await runWharf(['events', 'list', '-w', '440', '--json'], env);
      expect(mine.code, mine.stderr).toBe(0);
      expect((JSON.parse(mine.stdout) as { events: { id: number }[] }).events.map((event) => event.id)).toEqual([queued]);
      const theirs = await runWharf(['events', 'list', '-w', '441'], env);
      expect(theirs).toMatchObject({ code: 1, stdout: '', stderr: 'wharf: this token does not reach that workspace\n' });
      const noToken = await runWharf(['events', 'list', '-w', '440'], { ...env, WHARF_TOKEN: undefined });
      expect(noToken.stderr).toMatch(/WHARF_TOKEN/);
    } finally {
      await served.close();
    }
  });
});

describe('wharf tokens', () => {
  it('prints a new token once, and it verifies for its workspace', async () => {
    await createWorkspace(db.pool, 420);
    const created = await wharf('tokens', 'create', '-w', '420', '--name', 'grafana');
    expect(created.code, created.stderr).toBe(0);
    const token = created.stdout.trim();
    expect(token).toMatch(/^wharf_ws_[0-9a-f]{64}$/);
    expect(await verifyApiToken(db.pool, token)).toMatchObject({ workspace_id: 420, name: 'grafana' });
  });
});

describe('wharf on a mistake', () => {
  // One process each, started together: every spawn loads tsx and the CLI.
  it('exits non-zero with a message on stderr and nothing on stdout', async () => {
    const port = await freePort();
    const cases: [string[], Record<string, string | undefined>, RegExp][] = [
      [['events', 'list', '-w', 'abc'], {}, /workspace must be a positive integer id/],
      [['events', 'list', '-w', '1', '--state', 'FINISHED'], {}, /state must be one of QUEUED, LEASED, DONE, DEAD/],
      [['replay', '5', '-w', '1', '--installation'], {}, /^wharf: give either --workspace or --installation, not both\n$/],
      [['connections', 'add', '-w', '1', '--provider', 'gitlab'], {}, /required option '--source <url>' not specified/],
      [['workspaces', 'suspend', '999999'], {}, /^wharf: unknown workspace 999999\n$/],
      [['workspaces', 'list'], { DATABASE_URL: undefined }, /^wharf: no database: set DATABASE_URL or pass --database-url \(or --api\)\n$/],
      [['workspaces', 'list', '--database-url', `postgres://postgres@127.0.0.1:${port}/wharf`], { DATABASE_URL: undefined },
        /^wharf: the database is unavailable; retry later\n$/],
    ];
    const results = await Promise.all(cases.map(([args, env]) => runWharf(args, { DATABASE_URL: db.url, ...env })));
    results.forEach((result, i) => {
      const [args, , message] = cases[i]!;
      expect(result.code, args.join(' ')).not.toBe(0);
      expect(result.stderr, args.join(' ')).toMatch(message);
      expect(result.stdout, args.join(' ')).toBe('');
    });
  });
});

describe('wharf admissions', () => {
  it('lists a workspace\'s refusals and drops, or every one with --all, and refuses neither or both', async () => {
    await wharf('workspaces', 'add', '451');
    const connection = json<{ id: number }>(await wharf(
      'connections', 'add', '-w', '451', '--provider', 'generic', '--source', 'https://cli-admissions.example', '--kind', 'webhook', '--json'));
    await db.pool.query(`SELECT wharf.admit('generic', 'https://cli-admissions.example', 'cli-drop', 'x', $1, ARRAY['nobody'], '{}', '{}')`,
      [{ connection_id: connection.id }]);
    const mine = json<{ entries: { delivery_key: string; reason: string }[] }>(await wharf('admissions', '-w', '451', '--json'));
    expect(mine.entries.map((entry) => [entry.delivery_key, entry.reason])).toEqual([['cli-drop', 'no-subscriber']]);
    const all = json<{ entries: { delivery_key: string }[] }>(await wharf('admissions', '--all', '--json'));
    expect(all.entries.map((entry) => entry.delivery_key)).toContain('cli-drop');
    const neither = await wharf('admissions');
    expect(neither.code).toBe(1);
    expect(neither.stderr).toContain('give either --workspace <id> or --all');
  });
});
