// `wharf issues`, `wharf stuck`, `wharf alerts`, `wharf events list
// --payload` and `wharf replay --bulk --payload` through the real binary
// against a real database: a dead letter's issue listed and resolved
// (recorded as the CLI's user), a stuck scope listed and unblocked by moving
// its head to the dead letters, a JSON search and a bulk replay by it (its
// count first, then asked on a terminal, --yes in a script, refused without
// either), an alert rule made, listed, edited (keeping its alerts), tried
// with a test alert (listed as one, with what each alert was about) and
// deleted, and mistakes reported on stderr with exit code 1.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Issue } from '../../operator/sql/issues.js';
import type { StuckScope } from '../../operator/sql/stuck-scopes.js';
import { admitEvent, ageScope, createConnection, createWorkspace, deadEvent, finishEvent } from '../support/api-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { runWharf, type CliResult } from '../support/wharf-cli.js';

let db: TestDatabase;
let connection: number;
const W = 601;
const root = fileURLToPath(new URL('../../', import.meta.url));
const wharf = (...args: string[]): Promise<CliResult> => runWharf(args, { DATABASE_URL: db.url });

/**
 * Runs `wharf args` on a terminal of its own (`script`, as an operator's
 * shell gives it one) and types `answer` once it asks a yes/no question;
 * its exit code and everything the terminal showed.
 */
function wharfOnTerminal(args: string[], answer: string): Promise<{ code: number; output: string }> {
  const command = ['node', 'bin/wharf.js', ...args].map((arg) => `'${arg.replaceAll("'", "'\\''")}'`).join(' ');
  return new Promise((resolve, reject) => {
    const child = spawn('script', ['-qec', command, '/dev/null'], { cwd: root, env: { ...process.env, DATABASE_URL: db.url } });
    let output = '';
    let asked = false;
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      // The question, then readline's cursor moves: no answer before it is asked.
      if (!asked && /\[y\/N\] /.test(output)) {
        asked = true;
        child.stdin.write(`${answer}\r`);
      }
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, output }));
  });
}

async function stateOf(id: number): Promise<string> {
  const { rows } = await db.pool.query<{ state: string }>('SELECT state FROM wharf.provider_event WHERE id = $1', [id]);
  return rows[0]!.state;
}

async function bulkReplays(): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM wharf.bulk_replay WHERE workspace_id = $1', [W]);
  return rows[0]!.n;
}
const json = <T>(result: CliResult): T => {
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as T;
};

beforeAll(async () => {
  db = await createTestDatabase();
  await createWorkspace(db.pool, W);
  connection = await createConnection(db.pool, W);
});

afterAll(async () => {
  await db?.drop();
});

describe('wharf issues', () => {
  it('lists a workspace\'s issues as a table and as JSON, and resolves one as the CLI\'s user', async () => {
    await deadEvent(db.pool, connection);
    const table = await wharf('issues', 'list', '-w', String(W));
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(/^ID\s+STATUS\s+PROVIDER\s+EVENT_TYPE\s+ERROR_CLASS\s+FAILURES\s+DEAD/);
    expect(table.stdout).toMatch(/\sopen\s+generic\s+ping\s+SyntaxError\s+1\s+1\s/);

    const [issue] = json<Issue[]>(await wharf('issues', 'list', '-w', String(W), '--json'));
    const resolved = await wharf('issues', 'resolve', String(issue!.id), '-w', String(W), '--account', 'cli:alice');
    expect(resolved).toMatchObject({ code: 0, stdout: `issue ${issue!.id}: resolved by cli:alice\n` });

    const wrong = await wharf('issues', 'resolve', String(issue!.id), '-w', '404');
    expect(wrong).toMatchObject({ code: 1, stdout: '' });
    expect(wrong.stderr).toBe(`wharf: no issue ${issue!.id} in workspace 404\n`);
    const badStatus = await wharf('issues', 'list', '-w', String(W), '--status', 'closed');
    expect(badStatus.code).toBe(1);
    expect(badStatus.stderr).toMatch(/status must be one of open, acknowledged, resolved, ignored/);
  });

  it('shows where an issue was thrown: its first frame in the list, every frame on its own', async () => {
    const id = await admitEvent(db.pool, connection);
    const { rows } = await db.pool.query<{ id: string; lease_epoch: string }>(`SELECT id, lease_epoch FROM wharf.claim('cli', 100)`);
    for (const row of rows) {
      if (Number(row.id) === id) {
        await db.pool.query(`SELECT wharf.fail($1, $2, 'permanent', 'TypeError', $3)`,
          [row.id, row.lease_epoch, ['app/orders.ts:10:5 charge', 'app/main.ts:3:1']]);
      } else await db.pool.query('SELECT wharf.release($1, $2)', [row.id, row.lease_epoch]);
    }
    const table = await wharf('issues', 'list', '-w', String(W));
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(/^ID\s+STATUS.*\sTHROWN_AT$/m);
    expect(table.stdout).toMatch(/\sping\s+TypeError\s.*\sapp\/orders\.ts:10:5 charge$/m);
    const [issue] = json<Issue[]>(await wharf('issues', 'list', '-w', String(W), '--json')).filter((i) => i.error_class === 'TypeError');
    const shown = await wharf('issues', 'show', String(issue!.id), '-w', String(W));
    expect(shown.stdout).toMatch(/^frames:\s+\["app\/orders\.ts:10:5 charge","app\/main\.ts:3:1"\]$/m);
  });
});

describe('wharf stuck', () => {
  it('lists a stuck scope and unblocks it by moving its head to the dead letters', async () => {
    const subject = 'repo:acme/cli-stuck';
    const head = await admitEvent(db.pool, connection, { subject });
    const next = await admitEvent(db.pool, connection, { subject });
    await ageScope(db.pool, head, 3600);

    const [scope] = json<StuckScope[]>(await wharf('stuck', 'list', '-w', String(W), '--older-than', '10m', '--json'));
    expect(scope).toMatchObject({ subject, reason: 'waiting', behind: 1, head: { id: head } });
    const moved = await wharf('stuck', 'dead-letter', String(head), '-w', String(W), '--scope', scope!.scope_key);
    expect(moved).toMatchObject({ code: 0, stdout: `dead-letter: event ${head} is DEAD\n` });
    const again = await wharf('stuck', 'dead-letter', String(head), '-w', String(W), '--scope', scope!.scope_key);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/no longer heads its scope \(it is DEAD\)/);

    const { rows } = await db.pool.query('SELECT head_id FROM wharf.scope WHERE scope_key = $1', [scope!.scope_key]);
    expect(Number(rows[0]!.head_id)).toBe(next);
  });
});

describe('wharf events list --payload and wharf replay --bulk --payload', () => {
  it('finds the events whose payload contains the value, and replays those dead, saying how many first', async () => {
    const found = await admitEvent(db.pool, connection, { payload: { repository: { full_name: 'acme/cli-search' } } });
    await admitEvent(db.pool, connection, { payload: { repository: { full_name: 'acme/elsewhere' } } });
    await finishEvent(db.pool, found, 'DEAD');
    const search = '{"repository":{"full_name":"acme/cli-search"}}';
    const page = json<{ events: { id: number }[] }>(await wharf('events', 'list', '-w', String(W), '--payload', search, '--json'));
    expect(page.events.map((event) => event.id)).toEqual([found]);

    const replayed = await wharf('replay', '--bulk', '-w', String(W), '--payload', search, '--json', '--yes');
    expect(json<{ matched: number; replayed: number }>(replayed)).toMatchObject({ matched: 1, replayed: 1 });
    expect(replayed.stderr).toMatch(/^1 dead letter matches; replaying\n/);
    const bad = await wharf('replay', '--bulk', '-w', String(W), '--payload', 'acme');
    expect(bad).toMatchObject({ code: 1, stdout: '' });
    expect(bad.stderr).toMatch(/--payload must be a JSON object/);
  });
});

describe('wharf replay --bulk asks before it starts', () => {
  it('refuses without a terminal and without --yes, saying so, and replays nothing', async () => {
    const dead = await admitEvent(db.pool, connection, { payload: { repository: { full_name: 'acme/cli-ask' } } });
    await finishEvent(db.pool, dead, 'DEAD');
    const before = await bulkReplays();
    const refused = await wharf('replay', '--bulk', '-w', String(W), '--payload', '{"repository":{"full_name":"acme/cli-ask"}}');
    expect(refused).toMatchObject({
      code: 1, stdout: '',
      stderr: '1 dead letter matches\nwharf: not replayed: no terminal to confirm on; add --yes to replay them without asking\n',
    });
    expect(await stateOf(dead)).toBe('DEAD');
    expect(await bulkReplays(), 'no bulk replay recorded').toBe(before);
  });

  it('on a terminal, shows the count and replays only when the answer is yes', async () => {
    const dead: number[] = [];
    for (let i = 0; i < 2; i += 1) dead.push(await admitEvent(db.pool, connection, { payload: { ask: 'terminal', i } }));
    for (const id of dead) await finishEvent(db.pool, id, 'DEAD');
    const args = ['replay', '--bulk', '-w', String(W), '--payload', '{"ask":"terminal"}'];

    const declined = await wharfOnTerminal(args, 'n');
    expect(declined.output).toContain('2 dead letters match. Replay them? [y/N] ');
    expect(declined.output).toContain('wharf: not replayed');
    expect(declined.code).toBe(1);
    expect(await Promise.all(dead.map(stateOf))).toEqual(['DEAD', 'DEAD']);

    const accepted = await wharfOnTerminal(args, 'y');
    expect(accepted.output).toContain('2 dead letters match. Replay them? [y/N] ');
    expect(accepted.output).toMatch(/bulk replay \d+: replayed 2 of 2\r?\n/);
    expect(accepted.code).toBe(0);
    expect(await Promise.all(dead.map(stateOf))).toEqual(['QUEUED', 'QUEUED']);
  });
});

describe('wharf alerts', () => {
  it('makes a rule (printing a generated secret once), lists it, lists what it sent, and deletes it', async () => {
    const created = await wharf('alerts', 'create', '-w', String(W), '--name', 'cli-pager', '--kind', 'stuck_scope',
      '--window', '15m', '--url', 'https://alerts.example.test/wharf', '--account', 'cli:alice');
    expect(created.code, created.stderr).toBe(0);
    const [line, secretLine] = created.stdout.trim().split('\n');
    expect(line).toMatch(/^alert rule (\d+): cli-pager \(stuck_scope to webhook alerts\.example\.test\)$/);
    const id = /^alert rule (\d+)/.exec(line!)![1]!;
    const secret = /^secret \(shown once, give it to the receiver\): (whsec_\S+)$/.exec(secretLine ?? '')?.[1];
    const { rows } = await db.pool.query('SELECT secret, window_seconds, created_by FROM wharf.alert_rule WHERE id = $1', [id]);
    expect(rows[0]).toEqual({ secret, window_seconds: 900, created_by: 'cli:alice' });

    const rules = json<{ id: number; name: string; destination_host: string }[]>(await wharf('alerts', 'rules', '-w', String(W), '--json'));
    expect(rules.map((r) => [r.id, r.name, r.destination_host])).toEqual([[Number(id), 'cli-pager', 'alerts.example.test']]);
    expect(JSON.stringify(rules), 'never the secret again').not.toContain('whsec_');
    expect(json<unknown[]>(await wharf('alerts', 'sent', '-w', String(W), '--json'))).toEqual([]);

    const incomplete = await wharf('alerts', 'create', '-w', String(W), '--name', 'no-window', '--kind', 'stuck_scope',
      '--url', 'https://alerts.example.test/wharf');
    expect(incomplete.code).toBe(1);
    expect(incomplete.stderr).toMatch(/window_seconds/);
    expect((await wharf('alerts', 'create', '--name', 'x', '--kind', 'never', '--url', 'https://a.example')).stderr)
      .toMatch(/kind must be one of issue_opened, issue_reopened, dead_letter_rate, oldest_due_age, stuck_scope/);

    expect(await wharf('alerts', 'delete', id, '-w', String(W))).toMatchObject({ code: 0, stdout: `alert rule ${id}: deleted\n` });
    const again = await wharf('alerts', 'delete', id, '-w', String(W));
    expect(again.code).toBe(1);
    expect(again.stderr).toBe(`wharf: no alert rule ${id} in workspace ${W}\n`);
  });

  it('sends a test alert, lists it as one with what it was about, and edits the rule in place, keeping its alerts', async () => {
    const secret = 'whsec_c2VjcmV0LXNlY3JldA==';
    const { rows: [made] } = await db.pool.query<{ rule: { id: number } }>(
      `SELECT wharf.create_alert_rule($1, 'cli-pager', 'stuck_scope', NULL, 900, 'webhook', 'https://alerts.example.test/wharf', $2, 'cli:alice') AS rule`,
      [W, secret]);
    const id = String(made!.rule.id);
    // A test alert, listed as one with what it was about.
    const tested = await wharf('alerts', 'test', id, '-w', String(W), '--account', 'cli:bob');
    expect(tested.code, tested.stderr).toBe(0);
    expect(tested.stdout).toMatch(new RegExp(`^test alert \\d+ of rule ${id} \\(cli-pager\\): a worker host sends it within seconds`));
    const sent = await wharf('alerts', 'sent', '-w', String(W));
    expect(sent.stdout.split('\n')[0]).toMatch(/\bABOUT\b.*\bTEST\b/);
    expect(sent.stdout).toMatch(/cli-pager\s+stuck_scope\s+test alert\s+true\s+pending/);
    expect(json<{ test: boolean; facts: unknown }[]>(await wharf('alerts', 'sent', '-w', String(W), '--json')))
      .toEqual([expect.objectContaining({ test: true, facts: { test: true, requested_by: 'cli:bob' } })]);

    // Edited in place: what is not given stays, and so do its alerts.
    const edited = await wharf('alerts', 'edit', id, '-w', String(W), '--name', 'cli-pager-2', '--window', '30m', '--account', 'cli:carol');
    expect(edited.code, edited.stderr).toBe(0);
    expect(edited.stdout).toBe(`alert rule ${id}: cli-pager-2 (stuck_scope to webhook alerts.example.test), edited\n`);
    const { rows: [after] } = await db.pool.query('SELECT name, window_seconds, url, secret, updated_by FROM wharf.alert_rule WHERE id = $1', [id]);
    expect(after).toEqual({ name: 'cli-pager-2', window_seconds: 1800, url: 'https://alerts.example.test/wharf', secret, updated_by: 'cli:carol' });
    const reKinded = json<{ kind: string; window_seconds: number | null }>(
      await wharf('alerts', 'edit', id, '-w', String(W), '--kind', 'issue_opened', '--json'));
    expect(reKinded).toMatchObject({ kind: 'issue_opened', window_seconds: null });
    expect(json<{ rule_name: string }[]>(await wharf('alerts', 'sent', '-w', String(W), '--json')).map((a) => a.rule_name))
      .toEqual(['cli-pager-2']);
    const badEdit = await wharf('alerts', 'edit', id, '-w', String(W), '--kind', 'dead_letter_rate');
    expect(badEdit.code).toBe(1);
    expect(badEdit.stderr).toMatch(/threshold/);
    const otherEdit = await wharf('alerts', 'edit', id, '-w', '404', '--name', 'x');
    expect(otherEdit.code).toBe(1);
    expect((await wharf('alerts', 'test', '999999', '-w', String(W))).stderr).toBe(`wharf: no alert rule 999999 in workspace ${W}\n`);
  }, 180_000);
});
