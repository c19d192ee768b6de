// Workload 1: admission. `admissionClients` clients call wharf.admit as fast
// as they can, against the same clients inserting the same payload into a
// plain inbox table (one INSERT per transaction, with and without pg_notify),
// signed GitHub deliveries through the Node receiver, and the rivals' own
// enqueue calls from the same number of clients: graphile-worker 0.18's
// `graphile_worker.add_job` (without and with a named queue per key) and
// pg-boss 12's `send` (into a standard queue, and into a key_strict_fifo queue
// with the key as singletonKey).
import type pg from 'pg';
import { withBenchDatabase } from '../databases.js';
import { makePayload } from '../payload.js';
import type { BenchResults, Log } from '../results.js';
import type { BenchSettings } from '../settings.js';
import { runReceiverLoad } from '../systems/edge-receiver.js';
import { addGraphileJob, migrateGraphile } from '../systems/graphile.js';
import { pgBossDescription, sendPgBossJob, startPgBoss } from '../systems/pgboss.js';
import { admitPush, setupWharfInstallation, subjectOf } from '../systems/wharf-inbox.js';

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

async function createPlainInbox(pool: pg.Pool): Promise<void> {
  await pool.query(`
    CREATE TABLE plain_inbox (
      id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      provider     text NOT NULL,
      delivery_key text NOT NULL,
      event_type   text NOT NULL,
      subject      text,
      payload      jsonb NOT NULL,
      headers      jsonb NOT NULL DEFAULT '{}',
      received_at  timestamptz NOT NULL DEFAULT now(),
      UNIQUE (provider, delivery_key)
    )`);
}

const plainInsert = `INSERT INTO plain_inbox (provider, delivery_key, event_type, subject, payload, headers)
                     VALUES ('github', $1, 'push', $2, $3, '{}')`;

export async function runAdmission(settings: BenchSettings, results: BenchResults, log: Log): Promise<void> {
  const { admissionClients: clients, admissionEvents: events, orderedScopes: scopes } = settings;
  const poolSize = clients + 2;
  for (let rep = 1; rep <= settings.repetitions; rep += 1) {
    log(`admission, repetition ${rep}/${settings.repetitions} (${clients} clients, ${events} events)`);

    const admitted = await withBenchDatabase(settings.serverUrl, 'admit', { wharf: true, poolSize }, async (db) => {
      await setupWharfInstallation(db.pool, scopes);
      const rate = await timeCalls(db.pool, clients, events, (client, seq) =>
        admitPush(client, `delivery-${seq}`, seq % scopes, seq));
      const { rows } = await db.pool.query<{ n: string }>('SELECT count(*) AS n FROM wharf.provider_event');
      if (Number(rows[0]?.n) !== events) throw new Error(`admit stored ${rows[0]?.n} rows of ${events}`);
      return rate;
    });
    results.add('admission', 'admission.wharf', 'wharf.admit (direct call)', 'events/s', admitted);
    log(`  wharf.admit: ${admitted.toFixed(0)}/s`);

    for (const notify of [false, true]) {
      const inserted = await withBenchDatabase(settings.serverUrl, 'plain_insert', { wharf: false, poolSize }, async (db) => {
        await createPlainInbox(db.pool);
        return timeCalls(db.pool, clients, events, async (client, seq) => {
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
      results.add('admission', id, label, 'events/s', inserted);
      log(`  ${label}: ${inserted.toFixed(0)}/s`);
    }

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
    results.add('admission', 'admission.receiver', 'signed GitHub deliveries through the Node receiver (autocannon)',
      'requests/s', receiver.requestsPerSecond);
    results.add('admission', 'admission.receiver_direct', 'the same deliveries by direct wharf.admit calls',
      'events/s', receiver.directPerSecond);
    // Where each delivery's CPU went on the two paths (absent where /proc is not this server's).
    const cpuRows = [
      ['receiver_cpu.receiver', 'CPU per delivery through the receiver: the receiver process', receiver.receiverCpu.receiver],
      ['receiver_cpu.load', 'CPU per delivery through the receiver: autocannon (the bench process)', receiver.receiverCpu.loadGenerator],
      ['receiver_cpu.postgres', 'CPU per delivery through the receiver: PostgreSQL backends', receiver.receiverCpu.postgres],
      ['direct_cpu.load', 'CPU per direct admit: the calling pg client (the bench process)', receiver.directCpu.loadGenerator],
      ['direct_cpu.postgres', 'CPU per direct admit: PostgreSQL backends', receiver.directCpu.postgres],
    ] as const;
    for (const [id, label, micros] of cpuRows) {
      if (micros !== undefined) results.add('admission', `admission.${id}`, label, 'µs CPU', micros);
    }
  }
}
