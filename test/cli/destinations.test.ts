// `wharf destinations …` against a real server (the operator API over HTTP,
// as `wharf serve` runs it, with a workspace token in WHARF_TOKEN): a
// destination made (its secret printed once, never by show or list),
// listed, changed, paused, resumed, its secret rotated, credentials set
// (from stdin too) and cleared without being printed, rules added, listed,
// changed and deleted, a filter tried on a stored event, deliveries and dead
// letters listed, one replayed, the rest replayed after the count (refused
// without --yes in a script, with a progress line per batch), deleted; and
// mistakes (a bad URL or filter, another workspace) reported on stderr with
// exit code 1. The first and the replay-all run the real binary; the rest
// the same program in this process, to spare a Node start each.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Destination, DestinationRule, DeliveryPage } from '../../operator/sql/destinations.js';
import { createApiToken } from '../../operator/sql/operator.js';
import { adminToken } from '../support/api-client.js';
import { admitEvent, createConnection, createWorkspace } from '../support/api-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { serveOperatorApi, type ServedOperatorApi } from '../support/operator-client.js';
import { runWharf, runWharfInProcess, type CliResult } from '../support/wharf-cli.js';

vi.setConfig({ testTimeout: 120_000 });

let db: TestDatabase;
let served: ServedOperatorApi;
let connection: number;
let token: string;
let otherToken: string;
const W = 631;
const OTHER = 632;
const root = fileURLToPath(new URL('../../', import.meta.url));

const env = (as = token) => ({ DATABASE_URL: undefined, WHARF_API_URL: served.url, WHARF_TOKEN: as });
const wharf = (...args: string[]): Promise<CliResult> => runWharfInProcess(['destinations', ...args], env());
const json = <T>(result: CliResult): T => {
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as T;
};

/** The real binary with `input` on its stdin. */
function wharfWithStdin(args: string[], input: string): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['bin/wharf.js', ...args], {
      cwd: root, env: { ...process.env, ...env(), DATABASE_URL: '' }, stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString(); });
    child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString(); });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
    child.stdin.end(input);
  });
}

/** Claims the destination's deliveries due now and fails each for good (DEAD); others go back. */
async function killDeliveries(destinationId: number): Promise<number[]> {
  const { rows } = await db.pool.query<{ delivery_id: string; epoch: string; destination_id: string }>(
    `SELECT delivery_id, epoch, destination_id FROM wharf.claim_deliveries('fixture', 1000)`);
  const dead: number[] = [];
  for (const row of rows) {
    if (Number(row.destination_id) !== destinationId) {
      await db.pool.query('SELECT wharf.release_delivery($1, $2)', [row.delivery_id, row.epoch]);
      continue;
    }
    await db.pool.query(`SELECT wharf.fail_delivery($1, $2, 'permanent', 'HttpStatus422', 422, 3, 'no')`, [row.delivery_id, row.epoch]);
    dead.push(Number(row.delivery_id));
  }
  return dead;
}

beforeAll(async () => {
  db = await createTestDatabase();
  served = await serveOperatorApi({ db: db.pool, adminToken });
  await createWorkspace(db.pool, W);
  await createWorkspace(db.pool, OTHER);
  connection = await createConnection(db.pool, W);
  token = (await createApiToken(db.pool, String(W), 'cli')).token;
  otherToken = (await createApiToken(db.pool, String(OTHER), 'cli')).token;
}, 120_000);

afterAll(async () => {
  await served?.close();
  await db?.drop();
});

describe('wharf destinations', () => {
  let id = 0;
  let secret = '';

  it('create prints the signing secret once; show and list never do', async () => {
    const created = await runWharf(['destinations', 'create', '-w', String(W), '--name', 'shop', '--url', 'https://shop.example.test/hooks',
      '--rate-limit', '5', '--rate-period', 'minute', '--header', 'X-Team: payments'], env());
    expect(created.code, created.stderr).toBe(0);
    const match = /^destination (\d+): shop → https:\/\/shop\.example\.test\/hooks \(ACTIVE\), created\nsigning secret \(shown once; [^)]*\): (whsec_[A-Za-z0-9+/]{32})\n/.exec(created.stdout);
    expect(match, created.stdout).not.toBeNull();
    id = Number(match![1]);
    secret = match![2]!;

    const shown = json<Destination>(await wharf('show', String(id), '-w', String(W), '--json'));
    expect(shown).toMatchObject({ id, name: 'shop', rate_limit: 5, rate_period: 'minute', headers: { 'X-Team': 'payments' }, has_secret: true });
    expect(shown).not.toHaveProperty('secret');
    const fields = await wharf('show', String(id), '-w', String(W));
    expect(fields.stdout).toMatch(/^id: +\d+\nname: +shop\nurl: +https:\/\/shop\.example\.test\/hooks\nstate: +ACTIVE\n/);
    const table = await wharf('list', '-w', String(W));
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(/^ID\s+NAME\s+STATE\s+URL\s+PER_MINUTE\s+SUCCESS_RATE\s+P50_MS\s+P99_MS\s+QUEUED\s+DEAD\n/);
    expect(table.stdout).toMatch(new RegExp(`\\n${id}\\s+shop\\s+ACTIVE\\s+https://shop\\.example\\.test/hooks\\s+0\\s+-\\s+-\\s+-\\s+0\\s+0\\n`));
    for (const output of [fields.stdout, table.stdout, JSON.stringify(shown)]) expect(output).not.toContain(secret.slice(6));
  });

  it('edit changes only what is given; pause and resume; rotate-secret prints a new secret once', async () => {
    const edited = json<Destination>(await wharf('edit', String(id), '-w', String(W), '--timeout-ms', '2000', '--unordered', '--no-rate-limit', '--json'));
    expect(edited).toMatchObject({ timeout_ms: 2000, ordered: false, rate_limit: null, name: 'shop', headers: { 'X-Team': 'payments' } });
    const nothing = await wharf('edit', String(id), '-w', String(W));
    expect(nothing).toMatchObject({ code: 1, stderr: 'wharf: nothing to change: give the options to change (see --help)\n' });

    expect((await wharf('pause', String(id), '-w', String(W))).stdout).toBe(`destination ${id}: shop → https://shop.example.test/hooks (PAUSED), paused\n`);
    const paused = json<Destination>(await wharf('show', String(id), '-w', String(W), '--json'));
    expect(paused).toMatchObject({ state: 'PAUSED', paused_by: 'token:cli' });
    expect((await wharf('resume', String(id), '-w', String(W))).stdout).toMatch(/\(ACTIVE\), resumed\n$/);

    const rotated = await wharf('rotate-secret', String(id), '-w', String(W));
    expect(rotated.code, rotated.stderr).toBe(0);
    const next = /signing secret \(shown once[^)]*\): (whsec_\S+)\n/.exec(rotated.stdout)?.[1];
    expect(next).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    expect(next).not.toBe(secret);
    expect(rotated.stdout).toMatch(/secret rotated; the previous one signs too until \d{4}-/);
  });

  it('credentials are set (from stdin with -) and cleared, and never printed', async () => {
    const fromStdin = await wharfWithStdin(['destinations', 'credentials', 'set', String(id), '-w', String(W), '--bearer', '-'], 'tok-STDIN-123\n');
    expect(fromStdin.code, fromStdin.stderr).toBe(0);
    expect(fromStdin.stdout).toBe(`destination ${id}: shop → https://shop.example.test/hooks (ACTIVE), bearer credentials set\n`);
    const basic = await wharf('credentials', 'set', String(id), '-w', String(W), '--basic', 'svc:pw-SEKRIT', '--json');
    expect(json<Destination>(basic)).toMatchObject({ has_credentials: true, credentials_type: 'basic' });
    for (const output of [fromStdin.stdout, fromStdin.stderr, basic.stdout, (await wharf('show', String(id), '-w', String(W))).stdout]) {
      expect(output).not.toMatch(/tok-STDIN|pw-SEKRIT/);
    }
    const two = await wharf('credentials', 'set', String(id), '-w', String(W), '--bearer', 'a', '--basic', 'b:c');
    expect(two.code).toBe(1);
    expect(two.stderr).toMatch(/^wharf: give one of --bearer/);
    expect((await wharf('credentials', 'clear', String(id), '-w', String(W))).stdout).toMatch(/credentials cleared\n$/);
    expect(json<Destination>(await wharf('show', String(id), '-w', String(W), '--json'))).toMatchObject({ has_credentials: false });
  });

  it('rules are added, listed, changed and deleted; a bad filter is refused naming its place; a filter is tried on an event', async () => {
    const added = await wharf('rules', 'add', String(id), '-w', String(W), '--event-type', 'ping', '--event-type', 'pull_request.*',
      '--filter', '{"payload": {"action": {"$in": ["opened", "closed"]}}}');
    expect(added.code, added.stderr).toBe(0);
    const rule = Number(/^rule (\d+): routes to destination \d+\n$/.exec(added.stdout)?.[1]);
    const bad = await wharf('rules', 'add', String(id), '-w', String(W), '--filter', '{"payload": {"action": {"$regex": "^o"}}}');
    expect(bad).toMatchObject({ code: 1, stderr: 'wharf: rule filter.payload.action: unknown operator $regex\n' });
    const notJson = await wharf('rules', 'add', String(id), '-w', String(W), '--filter', '{payload');
    expect(notJson.code).not.toBe(0);
    expect(notJson.stderr).toMatch(/--filter must be a JSON object/);

    const listed = json<DestinationRule[]>(await wharf('rules', 'list', '-w', String(W), '--destination', String(id), '--json'));
    expect(listed).toEqual([expect.objectContaining({ id: rule, event_types: ['ping', 'pull_request.*'], filter: { payload: { action: { $in: ['opened', 'closed'] } } } })]);
    const table = await wharf('rules', 'list', '-w', String(W));
    expect(table.stdout).toMatch(/^ID\s+DESTINATION_ID\s+CONNECTION_ID\s+PROVIDER\s+EVENT_TYPES\s+SUBJECT_PREFIX\s+FILTER\s+FORWARD_ONLY\n/);
    const edited = json<DestinationRule>(await wharf('rules', 'edit', String(rule), '-w', String(W), '--clear', 'filter', '--forward-only', '--json'));
    expect(edited).toMatchObject({ id: rule, filter: null, forward_only: true, event_types: ['ping', 'pull_request.*'] });
    expect((await wharf('rules', 'delete', String(rule), '-w', String(W))).stdout).toBe(`rule ${rule}: deleted\n`);
    expect(await wharf('rules', 'delete', String(rule), '-w', String(W))).toMatchObject({ code: 1, stderr: `wharf: no rule ${rule} in workspace ${W}\n` });

    const event = await admitEvent(db.pool, connection, { payload: { action: 'opened' } });
    expect((await wharf('test-filter', '-w', String(W), '--event', String(event), '--filter', '{"payload": {"action": "opened"}}')).stdout)
      .toBe(`event ${event}: matches\n`);
    expect((await wharf('test-filter', '-w', String(W), '--event', String(event), '--filter', '{"payload": {"action": {"$neq": "opened"}}}')).stdout)
      .toBe(`event ${event}: does not match\n`);
  });

  it('deliveries and dead letters are listed; one is replayed; the rest after the count, with --yes and a progress line per batch', async () => {
    const subject = 'repo:acme/cli-forwarded';
    const ruled = await wharf('rules', 'add', String(id), '-w', String(W), '--subject-prefix', subject);
    expect(ruled.code, ruled.stderr).toBe(0);
    for (let i = 0; i < 4; i += 1) await admitEvent(db.pool, connection, { subject });
    const [first, ...rest] = await killDeliveries(id);
    expect(rest).toHaveLength(3);

    const dead = json<DeliveryPage>(await wharf('dead', String(id), '-w', String(W), '--json'));
    expect(dead.deliveries.map((d) => d.id).sort()).toEqual([first, ...rest].sort());
    const table = await wharf('deliveries', String(id), '-w', String(W), '--state', 'DEAD', '--limit', '2');
    expect(table.stdout).toMatch(/^ID\s+EVENT_ID\s+STATE\s+ATTEMPT\s+FAILURES\s+LAST_STATUS\s+ERROR_CLASS\s+EVENT_TYPE\s+SUBJECT\s+NEXT_ATTEMPT_AT\s+DEAD_AT\n/);
    expect(table.stdout, table.stdout).toMatch(/\s+DEAD\s+1\s+\d+\s+422\s+HttpStatus422\s+ping\s+repo:acme\/cli-forwarded\s/);
    expect(table.stdout).toMatch(/\nolder: --cursor \d+\n$/);

    expect((await wharf('replay', String(first), '-w', String(W))).stdout).toBe(`replayed delivery ${first}: QUEUED\n`);
    expect(await wharf('replay', String(first), '-w', String(W)))
      .toMatchObject({ code: 1, stderr: `wharf: delivery ${first} is QUEUED; only a DEAD delivery can be replayed\n` });

    // A script without --yes is told the count and replays nothing.
    const unconfirmed = await runWharf(['destinations', 'replay-all', String(id), '-w', String(W), '--error-class', 'HttpStatus422'], env());
    expect(unconfirmed.code).toBe(1);
    expect(unconfirmed.stderr).toBe('3 dead deliveries match\nwharf: not replayed: no terminal to confirm on; add --yes to replay them without asking\n');
    const replayed = await runWharf(['destinations', 'replay-all', String(id), '-w', String(W), '--error-class', 'HttpStatus422', '--yes', '--batch-size', '2'], env());
    expect(replayed.code, replayed.stderr).toBe(0);
    expect(replayed.stderr).toBe('3 dead deliveries match; replaying\nreplayed 0 of 3 (0 %)\nreplayed 2 of 3 (67 %)\nreplayed 3 of 3 (100 %)\n');
    expect(replayed.stdout).toBe(`destination ${id}: replayed 3 of 3 dead deliveries\n`);
    const { rows } = await db.pool.query<{ state: string }>('SELECT DISTINCT state FROM wharf.destination_delivery WHERE destination_id = $1', [id]);
    expect(rows).toEqual([{ state: 'QUEUED' }]);
  });

  it('reports mistakes on stderr with exit code 1: a bad URL, another workspace, an unknown id', async () => {
    const badUrl = await wharf('create', '-w', String(W), '--name', 'bad', '--url', 'ftp://shop.example.test/');
    expect(badUrl).toMatchObject({ code: 1, stdout: '' });
    expect(badUrl.stderr).toMatch(/^wharf: destination url: must be an https:\/\/ /);
    expect(json<Destination[]>(await wharf('list', '-w', String(W), '--json')).map((d) => d.name)).toEqual(['shop']);

    const elsewhere = await runWharfInProcess(['destinations', 'show', String(id), '-w', String(W)], env(otherToken));
    expect(elsewhere).toMatchObject({ code: 1, stderr: 'wharf: this token does not reach that workspace\n' });
    const notTheirs = await runWharfInProcess(['destinations', 'pause', String(id), '-w', String(OTHER)], env(otherToken));
    expect(notTheirs).toMatchObject({ code: 1, stderr: `wharf: no destination ${id} in workspace ${OTHER}\n` });
    expect(json<Destination>(await wharf('show', String(id), '-w', String(W), '--json')).state).toBe('ACTIVE');
    expect(await wharf('list')).toMatchObject({ code: 1, stderr: 'wharf: give --workspace <id>\n' });

    expect((await wharf('delete', String(id), '-w', String(W))).stdout).toBe(`destination ${id}: deleted\n`);
    expect(await wharf('show', String(id), '-w', String(W))).toMatchObject({ code: 1, stderr: `wharf: no destination ${id} in workspace ${W}\n` });
  });
});
