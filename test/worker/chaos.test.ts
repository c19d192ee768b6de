// Chaos: on a PostgreSQL of its own, three `wharf worker` processes drain
// 3,000 events of 75 scopes while a worker holding leases is killed with
// SIGKILL (and respawned) every 150 events handled, at least a second apart,
// and the database is restarted twice
// with an immediate shutdown (a crash: crash recovery on start). At the end
// every event is DONE exactly once, no step was applied twice, every scope
// was handled in id order, no worker exited unless killed, and the only
// failures charged are the expired leases of killed workers.
import { afterAll, beforeAll, expect, it } from 'vitest';
import pg from 'pg';
import { migrate } from '../../db/migrate.js';
import { createOwnPostgres, type OwnPostgres } from '../support/own-postgres.js';
import { fileSeed, Rng } from '../support/random.js';
import { admitEvents, setSettings, waitFor, type NewEvent } from '../support/worker-inbox.js';
import { fixtureHandlers, killSpawnedWorkers, spawnWorker, type WorkerProcess } from '../support/worker-process.js';
import { sleep } from '../support/sleep.js';
import { jsonLines } from '../support/json-lines.js';

const scopes = 75;
const perScope = 40;
const total = scopes * perScope;
const hostCount = 3;
const concurrency = 4;
/** Restart the database when this share of the events is still to do. */
const restartAt = [0.75, 0.4];
/** Kill workers until only this share of the events is left. */
const killsUntil = 0.05;
/**
 * Kill a worker each time this many more events are done: a count of
 * events, not a clock, so that a slow machine pays as many kills as a fast
 * one. Killed by the clock (every 1–3 s), a loaded machine's slower drain
 * drew more kills, each stranding its rows for a lease and respawning a
 * worker, which slowed the drain further; in a full suite on a slow day
 * that outran the budget.
 */
const killEvery = total / 20;
/**
 * Gives up on the drain after this long (ms). Alone it drains in about 30 s;
 * in the full suite on a 2-core machine, beside a browser test, it took up to
 * 80 s, so the budget leaves twice that.
 */
const drainBudget = 160_000;

/** The admission order's shuffle: printed on failure, WHARF_TEST_SEED replays it. */
const seed = fileSeed(import.meta.url);

let own: OwnPostgres;
let pool: pg.Pool;

beforeAll(async () => {
  own = await createOwnPostgres();
  await own.start();
  await migrate({ databaseUrl: own.url });
  pool = new pg.Pool({ connectionString: own.url, max: 3 });
  // Idle connections die with each restart.
  pool.on('error', () => {});
  await pool.query(`CREATE TABLE step_log (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id bigint NOT NULL, scope_key text NOT NULL, step text NOT NULL, attempt int NOT NULL, pid int NOT NULL)`);
  // Every change of an event's state, failures or error class, with the lease
  // holder it had: who was charged a failure, and for what.
  await pool.query(`CREATE TABLE transition_log (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id bigint NOT NULL, old_state text, new_state text, old_failures int, new_failures int,
    error_class text, leased_by text, at timestamptz NOT NULL DEFAULT clock_timestamp())`);
  await pool.query(`CREATE FUNCTION public.log_transition() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.state IS DISTINCT FROM OLD.state OR NEW.failures IS DISTINCT FROM OLD.failures
         OR NEW.error_class IS DISTINCT FROM OLD.error_class THEN
        INSERT INTO public.transition_log (event_id, old_state, new_state, old_failures, new_failures, error_class, leased_by)
        VALUES (NEW.id, OLD.state, NEW.state, OLD.failures, NEW.failures, NEW.error_class, OLD.leased_by);
      END IF;
      RETURN NULL;
    END $$`);
  await pool.query(`CREATE TRIGGER log_transition AFTER UPDATE ON wharf.provider_event
    FOR EACH ROW EXECUTE FUNCTION public.log_transition()`);
  await setSettings(pool, {
    // A killed worker's rows come back within ~7 s. The lease outlasts a
    // restart of the database (0.1–0.6 s here, loaded) plus the closing
    // writes' reconnect backoff (about as long again) with room to spare, so
    // that an expired lease is always a killed worker's: one that lives
    // through a restart must not be charged for it.
    lease: '6 seconds',
    renew_every: '500 milliseconds',
    base_delay: '100 milliseconds',
    max_delay: '1 second',
    poll_every: '500 milliseconds',
    // A kill must never make a row DEAD: failures are counted, not capped.
    max_attempts: '1000',
  });
}, 120_000);

afterAll(async () => {
  await killSpawnedWorkers();
  await pool?.end().catch(() => {});
  await own?.stop();
}, 60_000);


/** A query of the test's own that waits out a restart of the database. */
async function query<Row extends pg.QueryResultRow>(text: string, params: unknown[] = []): Promise<Row[]> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      return (await pool.query<Row>(text, params)).rows;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await sleep(100);
    }
  }
}

/** Like query, but undefined while the database is down. */
async function tryQuery<Row extends pg.QueryResultRow>(text: string): Promise<Row[] | undefined> {
  try {
    return (await pool.query<Row>(text)).rows;
  } catch {
    return undefined;
  }
}

interface Host {
  worker: WorkerProcess;
  pid: number;
  /** Set before the test signals it: its exit is no surprise. */
  signalled: boolean;
}

it('drains 3,000 events exactly once, in scope order, through SIGKILLs and immediate restarts of PostgreSQL', async () => {
  // Interleaved scopes: every round takes one event of each scope, shuffled.
  const events: NewEvent[] = [];
  const random = Rng.seeded(seed);
  for (let round = 0; round < perScope; round += 1) {
    const order = random.shuffle(Array.from({ length: scopes }, (_, n) => n));
    events.push(...order.map((n) => ({ scope: `chaos-${n}` })));
  }
  const admitStarted = Date.now();
  // The first round alone (it sets up the connection and its subscriptions),
  // the rest in three streams of disjoint scopes: each scope's events still
  // arrive in order, one statement each.
  const ids = await admitEvents(pool, events.slice(0, scopes));
  const streams = [0, 1, 2].map((stream) => events.slice(scopes).filter((event) => Number(event.scope.split('-')[1]) % 3 === stream));
  for (const admitted of await Promise.all(streams.map((stream) => admitEvents(pool, stream)))) ids.push(...admitted);
  const admitMs = Date.now() - admitStarted;
  expect(new Set(ids).size).toBe(total);

  const args = ['--handlers', fixtureHandlers('chaos-steps.ts'), '--concurrency', String(concurrency), '--reap-every', '1s', '--drain-timeout', '3s'];
  const env = { WHARF_TEST_STEP_PAUSE_MS: '20' };
  const hosts = new Set<Host>();
  const everyHost: Host[] = [];
  const exitedByThemselves: string[] = [];
  const spawnHost = (): Host => {
    const worker = spawnWorker({ databaseUrl: own.url, args, env });
    const host: Host = { worker, pid: worker.child.pid!, signalled: false };
    hosts.add(host);
    everyHost.push(host);
    void worker.exited.then((exit) => {
      hosts.delete(host);
      if (!host.signalled) {
        exitedByThemselves.push(`worker ${host.pid} exited by itself (${JSON.stringify(exit)}):\n${worker.output().slice(-3000)}`);
      }
    });
    return host;
  };
  for (let n = 0; n < hostCount; n += 1) spawnHost();

  const killed = new Set<number>();
  const restarts: Array<{ remaining: number; ms: number }> = [];
  let restarting: Promise<void> | undefined;
  const restartErrors: unknown[] = [];
  const drainStarted = Date.now();
  let remaining = total;
  /** What the drain looked like: time, events left / leased. */
  const timeline: string[] = [];
  let nextKillAt = total - killEvery / 2;
  let earliestKill = drainStarted + 1_000;

  const killOne = async (): Promise<void> => {
    // Prefer a worker that holds leases, so that every kill strands rows.
    const leased = await tryQuery<{ leased_by: string }>(`SELECT DISTINCT leased_by FROM wharf.provider_event WHERE state = 'LEASED'`);
    const holders = new Set((leased ?? []).map((row) => Number(/:(\d+):[0-9a-f]+$/.exec(row.leased_by)?.[1])));
    const live = [...hosts];
    const candidates = live.filter((host) => holders.has(host.pid));
    const choices = candidates.length > 0 ? candidates : live;
    const victim = choices[Math.floor(Math.random() * choices.length)];
    // One that just exited by itself is not killed: its exit must count.
    if (!victim || victim.worker.child.exitCode !== null || victim.worker.child.signalCode !== null) return;
    victim.signalled = true;
    killed.add(victim.pid);
    timeline.push(`kill:${victim.pid}`);
    victim.worker.child.kill('SIGKILL');
    await victim.worker.exited;
    spawnHost();
  };

  while (Date.now() - drainStarted < drainBudget && exitedByThemselves.length === 0) {
    const rows = await tryQuery<{ n: number; leased: number }>(
      `SELECT count(*) FILTER (WHERE state <> 'DONE')::int AS n, count(*) FILTER (WHERE state = 'LEASED')::int AS leased FROM wharf.provider_event`);
    if (rows) remaining = rows[0]!.n;
    timeline.push(`${((Date.now() - drainStarted) / 1000).toFixed(1)}s:${rows ? `${rows[0]!.n}/${rows[0]!.leased}` : 'down'}`);
    if (remaining === 0 && !restarting) break;
    const planned = restartAt[restarts.length];
    if (!restarting && planned !== undefined && remaining <= total * planned) {
      const began = Date.now();
      const record = { remaining, ms: 0 };
      restarts.push(record);
      timeline.push('restart');
      restarting = own.restartImmediate().then(
        () => {
          record.ms = Date.now() - began;
        },
        (error: unknown) => {
          restartErrors.push(error);
        },
      ).finally(() => {
        restarting = undefined;
      });
    }
    // The last few percent drain without kills: each kill's rows wait out a
    // whole lease, and the drain's tail is what the test's time budget pays.
    if (remaining <= nextKillAt && Date.now() >= earliestKill && remaining > total * killsUntil) {
      await killOne();
      nextKillAt = remaining - killEvery;
      earliestKill = Date.now() + 1_000;
    }
    await sleep(200);
  }
  await restarting;
  const drainMs = Date.now() - drainStarted;
  expect(restartErrors).toEqual([]);
  expect(exitedByThemselves).toEqual([]);
  if (remaining > 0) {
    const states = await query(`SELECT state, count(*)::int AS n, max(failures) AS max_failures FROM wharf.provider_event GROUP BY state`);
    throw new Error(`not drained after ${drainMs} ms: ${JSON.stringify(states)}; live workers' last output:\n` +
      [...hosts].map((host) => `--- ${host.pid}\n${host.worker.output().slice(-2000)}`).join('\n'));
  }
  // The chaos happened while they drained.
  expect(restarts.map((restart) => restart.remaining > 0)).toEqual([true, true]);
  expect(killed.size).toBeGreaterThanOrEqual(3);

  // Every surviving worker shuts down cleanly (once it is up: a process
  // still loading has no signal handlers yet).
  const survivors = [...hosts];
  await Promise.all(survivors.map((host) =>
    waitFor(async () => host.worker.output().includes('"msg":"worker started"'), 30_000, `worker ${host.pid} to start`)));
  for (const host of survivors) {
    host.signalled = true;
    host.worker.child.kill('SIGTERM');
  }
  const survivorExits = await Promise.all(survivors.map((host) => host.worker.exited));
  expect(survivorExits).toEqual(survivors.map(() => ({ code: 0, signal: null })));
  expect(exitedByThemselves).toEqual([]);
  // No process crashed or logged a fatal error on the way.
  for (const host of everyHost) {
    expect(host.worker.output(), `worker ${host.pid}`).not.toMatch(/"level":60|Unhandled|uncaught/i);
  }

  // Every event DONE, handled, and DONE exactly once.
  const final = await query<{ state: string; outcome: string; n: number }>(
    `SELECT state, outcome, count(*)::int AS n FROM wharf.provider_event GROUP BY state, outcome`);
  expect(final).toEqual([{ state: 'DONE', outcome: 'handled', n: total }]);
  const doneTwice = await query(`SELECT event_id, count(*)::int AS n FROM transition_log WHERE new_state = 'DONE'
    GROUP BY event_id HAVING count(*) <> 1`);
  expect(doneTwice).toEqual([]);
  const doneTransitions = await query<{ n: number }>(`SELECT count(DISTINCT event_id)::int AS n FROM transition_log WHERE new_state = 'DONE'`);
  expect(doneTransitions[0]!.n).toBe(total);

  // Each step of each event applied exactly once.
  const steps = await query<{ event_id: string; step: string; n: number }>(
    `SELECT event_id, step, count(*)::int AS n FROM step_log GROUP BY event_id, step HAVING count(*) <> 1`);
  expect(steps).toEqual([]);
  const stepCount = await query<{ n: number; events: number }>(`SELECT count(*)::int AS n, count(DISTINCT event_id)::int AS events FROM step_log`);
  expect(stepCount[0]).toEqual({ n: 2 * total, events: total });

  // Scope order: within a scope, steps ran first, second, first, second… in id order.
  const order = await query<{ scope_key: string; ran: string[]; expected: string[] }>(`
    SELECT scope_key,
           array_agg(event_id || ':' || step ORDER BY seq) AS ran,
           array_agg(event_id || ':' || step ORDER BY event_id, step) AS expected
      FROM step_log GROUP BY scope_key`);
  expect(order).toHaveLength(scopes);
  const outOfOrder = order.filter((row) => row.ran.join() !== row.expected.join());
  expect(outOfOrder).toEqual([]);

  // Failures charged: only expired leases, and only of killed workers.
  const charged = await query<{ event_id: string; error_class: string; leased_by: string | null }>(
    `SELECT event_id, error_class, leased_by FROM transition_log WHERE new_failures > old_failures ORDER BY seq`);
  const wrongly = charged.filter((row) => row.error_class !== 'LeaseExpired' ||
    !killed.has(Number(/:(\d+):[0-9a-f]+$/.exec(row.leased_by ?? '')?.[1])));
  expect(wrongly).toEqual([]);
  expect(charged.length).toBeGreaterThan(0);
  // For the record: what went back to the queue uncharged (the restarts'
  // dropped connections, failed as transient), and what the workers said.
  const uncharged = await query<{ error_class: string; n: number }>(
    `SELECT error_class, count(*)::int AS n FROM transition_log
      WHERE old_state = 'LEASED' AND new_state = 'QUEUED' AND new_failures = old_failures AND error_class IS NOT NULL
      GROUP BY error_class ORDER BY n DESC`);
  const said: Record<string, number> = {};
  for (const host of everyHost) {
    for (const entry of jsonLines<{ level?: number; msg?: string; error_class?: string }>(host.worker.output())) {
      if ((entry.level ?? 0) < 40) continue;
      const key = `${entry.msg}${entry.error_class ? ` (${entry.error_class})` : ''}`;
      said[key] = (said[key] ?? 0) + 1;
    }
  }
  console.info(JSON.stringify({
    admitMs, drainMs, workers: everyHost.length, kills: killed.size, restarts, charged: charged.length, uncharged, said,
    timeline: timeline.filter((entry, n) => !/^[0-9]/.test(entry) || n % 5 === 0).join(' '),
  }));
}, 200_000);
