// Workload 1: admission. `admissionClients` clients call wharf.admit as fast
// as they can, against the same clients inserting the same payload into a
// plain inbox table (one INSERT per transaction, with and without pg_notify);
// wharf.admit_many with 32 deliveries per call from the same clients; admit in
// a database routing at scale (10,000 installations, 100,000 subscriptions);
// signed GitHub deliveries through the Node receiver and through a minimal
// receiver (bench/systems/edge-receiver.ts); and the rivals' own enqueue
// calls from the same number of clients: graphile-worker 0.18's
// `graphile_worker.add_job` (without and with a named queue per key) and
// pg-boss 12's `send` (into a standard queue, and into a key_strict_fifo queue
// with the key as singletonKey). PostgreSQL's CPU per delivery is measured
// beside the rates of the direct calls (bench/process-cpu.ts).
import type pg from 'pg';
import { withBenchDatabase } from '../databases.js';
import { makePayload } from '../payload.js';
import { meterDatabaseBackends } from '../process-cpu.js';
import type { BenchResults, Log } from '../results.js';
import type { BenchSettings } from '../settings.js';
import { manyConnections, runReceiverLoad } from '../systems/edge-receiver.js';
import { addGraphileJob, migrateGraphile } from '../systems/graphile.js';
import { createPlainInbox } from '../systems/minimal-receiver.js';
import { pgBossDescription, sendPgBossJob, startPgBoss } from '../systems/pgboss.js';
import { admitPush, githubSource, installationRoute, setupWharfInstallation, subjectOf } from '../systems/wharf-inbox.js';

/** Runs `events` calls spread over `clients` lanes that each await one call at a time; returns calls per second. */
async function timeLanes(clients: number, events: number, call: (seq: number) => Promise<unknown>): Promise<number> {
  let next = 0;
  const began = performance.now();
  await Promise.all(Array.from({ length: clients }, async () => {
    for (let seq = next++; seq < events; seq = next++) await call(seq);
  }));
  return events / ((performance.now() - began) / 1000);
}

/** Runs `events` calls spread over `clients` lanes, each a pooled client of its own; returns calls per second. */
export async function timeCalls(
  pool: pg.Pool,
  clients: number,
  events: number,
  call: (client: pg.PoolClient, seq: number) => Promise<unknown>,
): Promise<number> {
  let next = 0;
  const began = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      const client = await pool.connect();
      try {
        for (let seq = next++; seq < events; seq = next++) await call(client, seq);
      } finally {
        client.release();
      }
    }),
  );
  return events / ((performance.now() - began) / 1000);
}

/** A rate with PostgreSQL's CPU per delivery over the same calls (undefined where /proc is not the server's). */
export interface Metered {
  rate: number;
  postgresMicros?: number;
}

/** timeCalls, with the CPU of the database's backends over the timed calls, per delivery. */
export async function timeCallsMetered(
  pool: pg.Pool, clients: number, calls: number, deliveries: number,
  call: (client: pg.PoolClient, seq: number) => Promise<unknown>,
): Promise<Metered> {
  const postgres = await meterDatabaseBackends(pool);
  const rate = await timeCalls(pool, clients, calls, call);
  const micros = await postgres();
  return { rate: rate * (deliveries / calls), ...(micros !== undefined ? { postgresMicros: micros / deliveries } : {}) };
}

function record(results: BenchResults, id: string, label: string, unit: string, measured: Metered, log: Log): void {
  results.add('admission', id, label, unit, measured.rate);
  if (measured.postgresMicros !== undefined) {
    results.add('admission', `${id}.cpu_postgres`, `${label}: PostgreSQL CPU per delivery`, 'µs CPU', measured.postgresMicros);
  }
  log(`  ${label}: ${measured.rate.toFixed(0)} ${unit}` +
      (measured.postgresMicros !== undefined ? `, PostgreSQL ${measured.postgresMicros.toFixed(0)} µs CPU per delivery` : ''));
}

async function expectRows(pool: pg.Pool, table: string, expected: number, what: string): Promise<void> {
  const { rows } = await pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`);
  if (Number(rows[0]?.n) !== expected) throw new Error(`${what} stored ${rows[0]?.n} rows of ${expected}`);
}

/** Deliveries per wharf.admit_many call in the batch case (issue 33's figure). */
export const admitManyBatch = 32;

/**
 * Deliveries first … first+count-1 as admit_many's elements: the pushes
 * admitPush sends one by one, keyed `<label>-<seq>`, each about the subject
 * `subjectFor` gives its seq (by default one of `scopes` in turn).
 */
export function pushDeliveries(
  first: number, count: number, scopes: number,
  { label = 'delivery', subjectFor = (seq: number) => subjectOf(seq % scopes) }: { label?: string; subjectFor?: (seq: number) => string } = {},
): string {
  return JSON.stringify(Array.from({ length: count }, (_, i) => {
    const seq = first + i;
    const subject = subjectFor(seq);
    return {
      provider: 'github', source: githubSource, delivery_key: `${label}-${seq}`, event_type: 'push', route: installationRoute,
      subjects: [subject], payload: makePayload(subject, seq), headers: {}, body_sha256: null,
    };
  }));
}

/**
 * Routing at scale: `installations` GitHub App installations on one source,
 * ten per workspace, each subscribed to ten repositories of its own
 * (`repo:org<i>/r<k>`). Connections through the SQL API; the subscriptions
 * in one INSERT, as wharf.subscribe leaves them: 100,000 calls would hold
 * 100,000 connection locks in one transaction, or take minutes in many.
 */
async function setupRoutingScale(pool: pg.Pool, installations: number): Promise<void> {
  const workspaces = Math.max(1, Math.floor(installations / 10));
  await pool.query('SELECT wharf.upsert_workspace(w) FROM generate_series(1, $1::int) w', [workspaces]);
  await pool.query(
    `SELECT wharf.upsert_connection(1 + (i % $2::int), 'github', $3, 'app_installation', i::text)
       FROM generate_series(1, $1::int) i`,
    [installations, workspaces, githubSource]);
  await pool.query(
    `INSERT INTO wharf.subscription (connection_id, subject)
     SELECT c.id, 'repo:org' || c.external_id || '/r' || k
       FROM wharf.connection c, generate_series(0, 9) k
      WHERE c.provider = 'github' AND c.kind = 'app_installation'`);
  await pool.query('ANALYZE wharf.workspace, wharf.connection, wharf.subscription');
}

/**
 * The routing-scale deliveries: as many (installation, repository) pairs as
 * the one-installation case has scopes, spread evenly over the
 * installations, so that both cases store into the same number of scopes
 * and differ only in what routing has to look through.
 */
function routedPush(seq: number, scopes: number, installations: number) {
  const pair = seq % scopes;
  const installation = 1 + Math.floor((pair * installations) / scopes);
  const subject = `repo:org${installation}/r${pair % 10}`;
  return { route: { installation_id: String(installation) }, subject, payload: makePayload(subject, seq) };
}

export const plainInsert = `INSERT INTO plain_inbox (provider, delivery_key, event_type, subject, payload, headers)
                     VALUES ('github', $1, 'push', $2, $3, '{}')`;

export async function runAdmission(settings: BenchSettings, results: BenchResults, log: Log): Promise<void> {
  const { admissionClients: clients, admissionEvents: events, orderedScopes: scopes } = settings;
  const poolSize = clients + 2;
  for (let rep = 1; rep <= settings.repetitions; rep += 1) {
    log(`admission, repetition ${rep}/${settings.repetitions} (${clients} clients, ${events} events)`);

    const admitted = await withBenchDatabase(settings.serverUrl, 'admit', { wharf: true, poolSize }, async (db) => {
      await setupWharfInstallation(db.pool, scopes);
      const measured = await timeCallsMetered(db.pool, clients, events, events, (client, seq) =>
        admitPush(client, `delivery-${seq}`, seq % scopes, seq));
      await expectRows(db.pool, 'wharf.provider_event', events, 'admit');
      return measured;
    });
    record(results, 'admission.wharf', 'wharf.admit (direct call)', 'events/s', admitted, log);

    for (const notify of [false, true]) {
      const inserted = await withBenchDatabase(settings.serverUrl, 'plain_insert', { wharf: false, poolSize }, async (db) => {
        await createPlainInbox(db.pool);
        return timeCallsMetered(db.pool, clients, events, events, async (client, seq) => {
          const subject = subjectOf(seq % scopes);
          const values = [`delivery-${seq}`, subject, makePayload(subject, seq)];
          if (!notify) return client.query(plainInsert, values);
          // One transaction, as a queue that wakes its workers on every insert.
          await client.query('BEGIN');
          await client.query(plainInsert, values);
          await client.query(`SELECT pg_notify('plain_inbox', '')`);
          return client.query('COMMIT');
        });
      });
      const id = notify ? 'admission.plain_notify' : 'admission.plain';
      const label = notify ? 'plain INSERT + pg_notify (one transaction)' : 'plain single-row INSERT';
      record(results, id, label, 'events/s', inserted, log);
    }

    const batched = await withBenchDatabase(settings.serverUrl, 'admit_many', { wharf: true, poolSize }, async (db) => {
      await setupWharfInstallation(db.pool, scopes);
      const calls = Math.ceil(events / admitManyBatch);
      const measured = await timeCallsMetered(db.pool, clients, calls, events, async (client, call) => {
        const first = call * admitManyBatch;
        const { rows } = await client.query<{ receipts: { error?: unknown }[] }>('SELECT wharf.admit_many($1::jsonb) AS receipts',
          [pushDeliveries(first, Math.min(admitManyBatch, events - first), scopes)]);
        if (rows[0]!.receipts.some((receipt) => receipt.error)) throw new Error('admit_many refused a bench delivery');
      });
      await expectRows(db.pool, 'wharf.provider_event', events, 'admit_many');
      return measured;
    });
    record(results, 'admission.admit_many32', `wharf.admit_many, ${admitManyBatch} deliveries per call`, 'events/s', batched, log);

    const routed = await withBenchDatabase(settings.serverUrl, 'admit_routing', { wharf: true, poolSize }, async (db) => {
      await setupRoutingScale(db.pool, settings.routingInstallations);
      const measured = await timeCallsMetered(db.pool, clients, events, events, (client, seq) => {
        const push = routedPush(seq, scopes, settings.routingInstallations);
        return client.query(`SELECT wharf.admit('github', $1, $2, 'push', $3, $4, $5, '{}')`,
          [githubSource, `delivery-${seq}`, push.route, [push.subject], push.payload]);
      });
      await expectRows(db.pool, 'wharf.provider_event', events, 'routing-scale admit');
      return measured;
    });
    record(results, 'admission.routing_scale',
      `wharf.admit, ${settings.routingInstallations.toLocaleString('en-US')} installations and ` +
      `${(settings.routingInstallations * 10).toLocaleString('en-US')} subscriptions on one source`, 'events/s', routed, log);

    for (const perKeyQueue of [false, true]) {
      const added = await withBenchDatabase(settings.serverUrl, 'graphile_add_job', { wharf: false, poolSize }, async (db) => {
        await migrateGraphile(db.url);
        const rate = await timeCalls(db.pool, clients, events, (client, seq) =>
          addGraphileJob(client, { key: subjectOf(seq % scopes), seq }, perKeyQueue));
        const { rows } = await db.pool.query<{ n: string }>('SELECT count(*) AS n FROM graphile_worker.jobs');
        if (Number(rows[0]?.n) !== events) throw new Error(`add_job stored ${rows[0]?.n} jobs of ${events}`);
        return rate;
      });
      const id = perKeyQueue ? 'admission.graphile_add_job_queue' : 'admission.graphile_add_job';
      const label = perKeyQueue ? 'graphile-worker add_job, queue_name per key' : 'graphile-worker add_job, no queue';
      results.add('admission', id, label, 'events/s', added);
      log(`  ${label}: ${added.toFixed(0)}/s`);
    }

    for (const mode of ['unordered', 'ordered'] as const) {
      const sent = await withBenchDatabase(settings.serverUrl, 'pgboss_send', { wharf: false, poolSize: 2 }, async (db) => {
        const queue = await startPgBoss({ connectionString: db.url, poolSize: clients, mode });
        try {
          return await timeLanes(clients, events, (seq) => sendPgBossJob(queue, { key: subjectOf(seq % scopes), seq }));
        } finally {
          await queue.stop();
        }
      });
      const id = mode === 'ordered' ? 'admission.pgboss_send_fifo' : 'admission.pgboss_send';
      const label = `pg-boss send (${pgBossDescription(mode)})`;
      results.add('admission', id, label, 'events/s', sent);
      log(`  ${label}: ${sent.toFixed(0)}/s`);
    }

    const receiver = await runReceiverLoad(settings, log);
    for (const [connections, suffix] of [[clients, ''], [manyConnections, `_c${manyConnections}`]] as const) {
      const wharf = receiver.throughput.wharf.get(connections)!;
      const minimal = receiver.throughput.minimal.get(connections)!;
      results.add('admission', `admission.receiver${suffix}`,
        `signed GitHub deliveries through the Node receiver, ${connections} connections (autocannon)`, 'requests/s', wharf.perSecond);
      results.add('admission', `admission.minimal_receiver${suffix}`,
        `the same through the minimal receiver (one plain INSERT each), ${connections} connections`, 'requests/s', minimal.perSecond);
      // (The Node receiver's at the clients' number is among the CPU rows below.)
      for (const [id, label, micros] of [
        ...(suffix ? [[`receiver${suffix}_cpu.receiver`, `CPU per delivery through the Node receiver, ${connections} connections: its process`, wharf.cpu.receiver]] as const : []),
        [`minimal_receiver${suffix}_cpu.receiver`, `CPU per delivery through the minimal receiver, ${connections} connections: its process`, minimal.cpu.receiver],
      ] as const) {
        if (micros !== undefined) results.add('admission', `admission.${id}`, label, 'µs CPU', micros);
      }
    }
    results.add('admission', 'admission.receiver_direct', 'the same deliveries by direct wharf.admit calls',
      'events/s', receiver.direct.perSecond);
    const eight = receiver.throughput.wharf.get(clients)!;
    // Where each delivery's CPU went on the two paths (absent where /proc is not this server's).
    const cpuRows = [
      ['receiver_cpu.receiver', 'CPU per delivery through the receiver: the receiver process', eight.cpu.receiver],
      ['receiver_cpu.load', 'CPU per delivery through the receiver: autocannon (the bench process)', eight.cpu.loadGenerator],
      ['receiver_cpu.postgres', 'CPU per delivery through the receiver: PostgreSQL backends', eight.cpu.postgres],
      ['direct_cpu.load', 'CPU per direct admit: the calling pg client (the bench process)', receiver.direct.cpu.loadGenerator],
      ['direct_cpu.postgres', 'CPU per direct admit: PostgreSQL backends', receiver.direct.cpu.postgres],
    ] as const;
    for (const [id, label, micros] of cpuRows) {
      if (micros !== undefined) results.add('admission', `admission.${id}`, label, 'µs CPU', micros);
    }
    for (const [mode, summary] of [['coalesced', receiver.latency.coalesced], ['uncoalesced', receiver.latency.uncoalesced]] as const) {
      for (const key of ['p50', 'p99'] as const) {
        results.add('admission', `admission.receiver_latency.${mode}.${key}`,
          `Node receiver at ${settings.latencyRate} requests/s, coalescing ${mode === 'coalesced' ? 'on' : 'off'}: ${key}`, 'ms', summary[key]);
      }
    }
  }
}
