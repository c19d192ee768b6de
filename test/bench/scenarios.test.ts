// Each database fault of the scenario runner (bench/scenarios/, issue 36) for
// a few seconds against Wharf under a fixed load: its Node receiver over HTTP
// and two worker processes. They run on a PostgreSQL of this file's own: the
// faults take every free connection slot of the server and terminate
// backends, which must never reach the databases of the suites running beside
// this one on the shared server.
//
// What must hold whatever the machine's speed: nothing acknowledged lost,
// no step applied twice, scope order kept, every worker process still
// running (and stopping cleanly), and the receiver answering only 202, or 503
// with Retry-After, never a 500 and never hanging. Speed (drain rate, claim
// time, recovery) is what `npm run scenarios` reports; it is not asserted here.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { plansOf } from '../../bench/scenarios/plans.js';
import { runCell, type CellRun } from '../../bench/scenarios/rig.js';
import { answerFigures } from '../../bench/scenarios/figures.js';
import { shortScale, type ScenarioName } from '../../bench/scenarios/settings.js';
import { graphileSystem, wharfSystem } from '../../bench/scenarios/systems.js';
import { createOwnPostgres, type OwnPostgres } from '../support/own-postgres.js';

let own: OwnPostgres;

beforeAll(async () => {
  // A 1 s autovacuum nap, so that the snapshot's dead tuples meet a vacuum
  // within the seconds it runs; few slots, so that filling them is quick.
  own = await createOwnPostgres({ settings: { autovacuum_naptime: '1s', max_connections: '50' } });
  await own.start();
}, 120_000);

afterAll(async () => {
  await own?.stop();
}, 60_000);

const settings = shortScale;

async function runWharf(scenario: ScenarioName, faultId?: string): Promise<CellRun> {
  const plan = plansOf(scenario, settings).find((candidate) => faultId === undefined || candidate.fault.id === faultId)!;
  return runCell(plan, wharfSystem, settings, own.url, () => {});
}

/** Every correctness goal of the issue, for any scenario. */
function expectCorrect(run: CellRun): void {
  const { checks } = run;
  expect(checks.acknowledged, 'deliveries acknowledged').toBeGreaterThan(0);
  expect({
    missingRows: checks.missingRows,
    unhandled: checks.unhandled,
    duplicateSteps: checks.duplicateSteps,
    orderViolations: checks.orderViolations,
    workersAlive: checks.workersAlive,
    workersStoppedCleanly: checks.workersStoppedCleanly,
    receiverAlive: checks.receiverAlive,
    unacknowledgedAtEnd: checks.unacknowledgedAtEnd,
  }, run.diagnostics.join('\n')).toEqual({
    missingRows: 0,
    unhandled: 0,
    duplicateSteps: 0,
    orderViolations: 0,
    workersAlive: checks.workers,
    workersStoppedCleanly: checks.workers,
    receiverAlive: true,
    unacknowledgedAtEnd: 0,
  });
  const answers = answerFigures(run, settings.receiverDeadlineMs);
  // Only 202, or 503 with Retry-After: no 500, no 503 without it, no hang, no refused connection.
  expect({ others: answers.otherRefusals, hangs: answers.hangs, transportErrors: answers.transportErrors }, run.diagnostics.join('\n'))
    .toEqual({ others: {}, hangs: 0, transportErrors: 0 });
  expect(answers.accepted + answers.refusedWithRetryAfter).toBe(run.answers.length);
}

describe('database fault scenarios, short scale, Wharf', () => {
  it('a session idle in transaction holds its snapshot', async () => {
    const run = await runWharf('snapshot', 'snapshot-idle');
    expect(run.faultReport['horizon held at xid']).toMatch(/^\d+$/);
    expectCorrect(run);
  }, 120_000);

  it('a REPEATABLE READ reader holds its snapshot', async () => {
    const run = await runWharf('snapshot', 'snapshot-rr');
    expect(run.faultReport['horizon held at xid']).toMatch(/^\d+$/);
    expectCorrect(run);
  }, 120_000);

  it('worker, listener and receiver backends are terminated every half second', async () => {
    const run = await runWharf('kills');
    const killed = Object.values(run.faultReport).reduce<number>((sum, n) => sum + Number(n), 0);
    expect(killed).toBeGreaterThan(0);
    expectCorrect(run);
  }, 120_000);

  it('another client holds every free connection slot', async () => {
    const run = await runWharf('slots');
    expect(run.faultReport['slots taken at first']).toBeGreaterThan(0);
    expectCorrect(run);
  }, 120_000);

  // Each on a primary and synchronous standby of the cell's own (bench/scenarios/failover.ts), not on this file's server.
  it('a planned switchover: the primary stopped, the synchronous standby promoted, the old primary back as a standby', async () => {
    const run = await runWharf('switchover');
    expectCorrect(run);
    expect(run.faultReport['old primary']).toBe('back as a standby (read-only)');
    // Events were handled on the new primary while the load ran, by the same worker processes.
    expect(run.faultReport['ms from the fault to the first event handled on the new primary']).toEqual(expect.any(Number));
  }, 180_000);

  it('a crash failover: kill -9 of the primary\'s postmaster, the synchronous standby promoted', async () => {
    const run = await runWharf('crash');
    expectCorrect(run);
    expect(run.faultReport['ms from the fault to the first event handled on the new primary']).toEqual(expect.any(Number));
  }, 180_000);

  it('a migration holds the inbox in ACCESS EXCLUSIVE mode: the receiver answers 503 with Retry-After, not a hang', async () => {
    const run = await runWharf('lock');
    expectCorrect(run);
    // The lock outlasts the receiver's deadline: deliveries that met it were refused in time, not held until it went.
    expect(answerFigures(run, settings.receiverDeadlineMs).refusedWithRetryAfter).toBeGreaterThan(0);
  }, 120_000);
});

describe('database fault scenarios, short scale, graphile-worker', () => {
  // The rival's side of the runner, so that it cannot rot: it runs and
  // produces figures. Its correctness is its own and reported, not asserted.
  it('runs graphile-worker under the long lock and measures it', async () => {
    const plan = plansOf('lock', settings)[0]!;
    const run = await runCell(plan, graphileSystem, settings, own.url, () => {});
    expect(run.checks.acknowledged).toBeGreaterThan(0);
    expect(run.handled.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
    expect(run.claims.length).toBeGreaterThan(0);
    expect(run.samples.length).toBeGreaterThan(0);
  }, 120_000);
});
