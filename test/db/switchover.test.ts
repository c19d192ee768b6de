// A failover under load, end to end: a primary and its synchronous standby
// (pg_basebackup -R, synchronous_standby_names), the Node receiver and one
// `wharf worker` process, both given the multi-host URL
// (target_session_attrs=read-write). Deliveries go in before, during and
// after the fault: a planned switchover (the primary stopped, the standby
// promoted, the old primary back as a standby of the new one, answering
// read-only), or a crash (an immediate shutdown of the primary, the
// synchronous standby promoted). A provider retries a 503, as providers do. At
// the end: every 202 has its row on the new primary, every row was handled
// once (each step applied once) in scope order, events admitted after the
// promotion were handled by the same worker process, which never exited, and
// no answer was anything but 202 or 503 with Retry-After.
import { afterAll, expect, it } from 'vitest';
import type pg from 'pg';
import { Registry } from 'prom-client';
import { migrate } from '../../db/migrate.js';
import { createPool } from '../../db/pool.js';
import { readSynchronousStandby } from '../../db/synchronous-standby.js';
import { startNodeServer, type NodeServer } from '../../server/node.js';
import { edgeEnv, freshId, newDeliveryKey, recorder, scenario, type ProviderScenario } from '../support/edge-fixtures.js';
import { createOwnPostgres, type OwnPostgres } from '../support/own-postgres.js';
import { setSettings, waitFor } from '../support/worker-inbox.js';
import { fixtureHandlers, killSpawnedWorkers, spawnWorker, type WorkerProcess } from '../support/worker-process.js';

const scopes = 4;
/** 202s wanted before the switchover and after it. */
const perPhase = 40;

const servers: OwnPostgres[] = [];
const pools: pg.Pool[] = [];
const receivers: NodeServer[] = [];

interface Pair {
  primary: OwnPostgres;
  standby: OwnPostgres;
  /** Both hosts, the primary first, target_session_attrs=read-write. */
  url: string;
  pool: pg.Pool;
}

/** A primary and its synchronous standby, migrated, with the step log of the handlers. */
async function pairWithSynchronousStandby(): Promise<Pair> {
  const primary = await createOwnPostgres({ binaries: 'system', settings: { wal_level: 'replica' } });
  servers.push(primary);
  await primary.start();
  const standby = await createOwnPostgres({ binaries: 'system', standbyOf: primary });
  servers.push(standby);
  await standby.start();
  const url = `postgres://postgres@127.0.0.1:${primary.port},127.0.0.1:${standby.port}/postgres?target_session_attrs=read-write`;
  const pool = createPool(url, { max: 4, connectionTimeoutMillis: 5_000 });
  pools.push(pool);
  pool.on('error', () => {});
  // Synchronous: a commit returns once the standby has its WAL.
  await pool.query(`ALTER SYSTEM SET synchronous_standby_names = '*'`);
  await pool.query('SELECT pg_reload_conf()');
  await waitFor(async () => (await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_replication WHERE sync_state = 'sync'`)).rows[0]!.n === 1, 30_000, 'a synchronous standby');
  expect(await readSynchronousStandby(pool)).toEqual({ synchronous: true });
  await migrate({ databaseUrl: url });
  await pool.query(`CREATE TABLE step_log (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id bigint NOT NULL, scope_key text NOT NULL, step text NOT NULL, attempt int NOT NULL, pid int NOT NULL)`);
  await setSettings(pool, { renew_every: '1 second', poll_every: '500 milliseconds', base_delay: '100 milliseconds', max_delay: '1 second' });
  return { primary, standby, url, pool };
}

afterAll(async () => {
  await killSpawnedWorkers();
  for (const receiver of receivers) await receiver.close().catch(() => {});
  for (const pool of pools) await pool.end().catch(() => {});
  for (const server of servers) await server.stop();
}, 60_000);

interface Answer {
  key: string;
  status: number | 'hung' | 'refused';
  retryAfter: string | null;
  phase: 'before' | 'during' | 'after';
}

/**
 * `switchover`: the primary stopped cleanly (a fast shutdown sends the standby all its WAL), the
 * standby promoted once it has the primary's last checkpoint, the old primary back as a standby of
 * the new one (read-only, first in the URL's host list). `crash`: the primary's postmaster and
 * backends gone at once (an immediate shutdown, no checkpoint), the synchronous standby promoted
 * with whatever it had confirmed; the old primary stays down.
 */
async function failOver(kind: 'switchover' | 'crash'): Promise<void> {
  const { primary, standby, url, pool } = await pairWithSynchronousStandby();
  const workspace = freshId();
  const senders: ProviderScenario[] = [];
  for (let n = 0; n < scopes; n += 1) senders.push(await scenario(pool, 'generic', workspace));
  const log = recorder();
  const server = await startNodeServer({ databaseUrl: url, env: { ...edgeEnv, WHARF_DATABASE_TIMEOUT_MS: '5000' }, registry: new Registry(), logger: log.logger });
  receivers.push(server);
  const worker = spawnWorker({
    databaseUrl: url,
    args: ['--handlers', fixtureHandlers('chaos-steps.ts'), '--concurrency', '4', '--reap-every', '1s', '--drain-timeout', '3s'],
    env: { WHARF_TEST_STEP_PAUSE_MS: '5' },
  });
  let workerExit: unknown;
  void worker.exited.then((exit) => (workerExit = exit));
  const workerPid = worker.child.pid;

  const answers: Answer[] = [];
  const acknowledged = new Set<string>();
  let phase: Answer['phase'] = 'before';
  let sent = 0;
  /** One delivery, posted again after each 503 (as a provider retries), until a 202 or a budget. */
  const deliver = async (sender: ProviderScenario): Promise<void> => {
    const key = newDeliveryKey();
    const body = JSON.stringify(sender.payload(key));
    const deadline = Date.now() + 60_000;
    for (;;) {
      const headers = { 'content-type': 'application/json', ...(await sender.sign(body, { deliveryKey: key })) };
      let answer: Answer;
      try {
        const response = await fetch(`${server.url}${sender.path}`, { method: 'POST', headers, body, signal: AbortSignal.timeout(20_000) });
        await response.arrayBuffer();
        answer = { key, status: response.status, retryAfter: response.headers.get('retry-after'), phase };
      } catch (error) {
        answer = { key, status: (error as Error).name === 'TimeoutError' ? 'hung' : 'refused', retryAfter: null, phase };
      }
      answers.push(answer);
      if (answer.status === 202) {
        acknowledged.add(key);
        return;
      }
      if (answer.status !== 503 || Date.now() > deadline) return;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  };
  // Four providers, each sending its scope's deliveries one after another (a scope's order is its arrival order).
  let sending = true;
  const streams = senders.map(async (sender) => {
    while (sending) {
      sent += 1;
      await deliver(sender);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  });
  const handledCount = async (): Promise<number> =>
    (await pool.query<{ n: number }>(`SELECT count(DISTINCT event_id)::int AS n FROM step_log WHERE step = 'second'`)).rows[0]!.n;

  try {
    await waitFor(async () => acknowledged.size >= perPhase && (await handledCount()) >= perPhase / 2, 60_000, 'deliveries handled before the switchover');

    phase = 'during';
    if (kind === 'switchover') {
      await primary.halt();
      await standby.promote({ after: primary.latestCheckpoint() });
      await primary.startAsStandbyOf(standby);
    } else {
      await primary.halt({ immediate: true });
      await standby.promote();
    }
    phase = 'after';
    const ackedBeforeAfter = acknowledged.size;
    await waitFor(async () => acknowledged.size >= ackedBeforeAfter + perPhase, 90_000, 'deliveries acknowledged after the switchover');
  } finally {
    sending = false;
    await Promise.all(streams);
  }

  // Every 202 has its row on the new primary, and every row gets handled.
  const onNewPrimary = createPool(`postgres://postgres@127.0.0.1:${standby.port}/postgres`, { max: 2 });
  try {
    expect(Number((await onNewPrimary.query<{ port: number }>('SELECT inet_server_port() AS port')).rows[0]!.port)).toBe(standby.port);
    const stored = new Set((await onNewPrimary.query<{ delivery_key: string }>(
      `SELECT delivery_key FROM wharf.provider_event WHERE workspace_id = $1`, [workspace])).rows.map((row) => row.delivery_key));
    const lost = [...acknowledged].filter((key) => !stored.has(key));
    expect(lost).toEqual([]);
    const total = stored.size;
    await waitFor(async () => (await onNewPrimary.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM wharf.provider_event WHERE workspace_id = $1 AND state = 'DONE'`, [workspace])).rows[0]!.n === total,
    90_000, 'every stored row handled');

    // Each step applied once; each scope's events handled in id order.
    const twice = await onNewPrimary.query(`SELECT event_id, step, count(*)::int AS n FROM step_log GROUP BY 1, 2 HAVING count(*) <> 1`);
    expect(twice.rows).toEqual([]);
    const order = await onNewPrimary.query<{ scope_key: string; ran: string[]; expected: string[] }>(`
      SELECT scope_key, array_agg(event_id || ':' || step ORDER BY seq) AS ran,
             array_agg(event_id || ':' || step ORDER BY event_id, step) AS expected
        FROM step_log GROUP BY scope_key`);
    expect(order.rows).toHaveLength(scopes);
    expect(order.rows.filter((row) => row.ran.join() !== row.expected.join())).toEqual([]);
    const steps = await onNewPrimary.query<{ events: number; pids: number[] }>(
      `SELECT count(DISTINCT event_id)::int AS events, array_agg(DISTINCT pid) AS pids FROM step_log`);
    expect(steps.rows[0]!.events).toBe(total);
    // One worker process did it all, before and after the switchover, and still runs.
    expect(steps.rows[0]!.pids).toEqual([workerPid]);
    expect(workerExit).toBeUndefined();
    expect(worker.child.exitCode).toBeNull();
  } finally {
    await onNewPrimary.end();
  }

  // The receiver answered 202, or 503 with Retry-After while no primary could take the write; nothing else, nothing hung.
  const odd = answers.filter((answer) => answer.status !== 202 && !(answer.status === 503 && answer.retryAfter !== null));
  expect(odd).toEqual([]);
  // The worker said the outage about once per thing it was doing (at most two leases per handler
  // slot were open), not once per retry, and never crashed; its LISTEN connection came back on the
  // new primary without a warning per attempt while the old one was down or in recovery.
  const output = worker.output();
  expect(output).not.toMatch(/"level":60|Unhandled|uncaught/i);
  const warnings = output.split('\n').filter((line) => /"level":(40|50)/.test(line));
  expect(warnings.length, warnings.join('\n')).toBeLessThan(40);
  expect(warnings.filter((line) => line.includes('listener connection lost')).length).toBeLessThanOrEqual(2);
  console.info(JSON.stringify({
    kind,
    sent, acknowledged: acknowledged.size,
    answers: Object.fromEntries(['before', 'during', 'after'].map((p) => [p, answers.filter((a) => a.phase === p)
      .reduce<Record<string, number>>((counts, a) => ({ ...counts, [String(a.status)]: (counts[String(a.status)] ?? 0) + 1 }), {})])),
    workerWarnings: warnings.length,
  }));
  if (process.env.WHARF_SHOW_WARNINGS) console.info(warnings.join('\n'));
}

it('loses no acknowledged delivery through a switchover, and the worker follows the new primary by itself', () => failOver('switchover'), 240_000);

it('loses no acknowledged delivery when the primary crashes and its synchronous standby takes over', () => failOver('crash'), 240_000);
