// Retention runs on one host at a time (transaction-scoped advisory lock), a
// failed run leaves the rows and is counted, and /metrics shows every metric.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker, startMetricsServer, workerRegistry, type RetentionResult, type Worker } from '../../worker/index.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { admitEvents, waitFor } from '../support/worker-inbox.js';
import { metricValue } from '../support/worker-metrics.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});

afterAll(async () => {
  await db?.drop();
});

/** Inserts `count` rows already DONE for ten days: past the 3-day replay window. */
async function insertExpiredDone(count: number, scope: string): Promise<string[]> {
  const client = await db.connect();
  await client.query('BEGIN');
  const ids = await admitEvents(client, Array.from({ length: count }, () => ({ scope })));
  await client.query(
    `UPDATE wharf.provider_event SET state = 'DONE', outcome = 'handled', handled_at = now() - interval '10 days',
                                      received_at = now() - interval '10 days 1 minute'
      WHERE id = ANY($1::bigint[])`,
    [ids],
  );
  await client.query('COMMIT');
  await client.end();
  return ids;
}

async function remaining(ids: string[]): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM wharf.provider_event WHERE id = ANY($1::bigint[])',
    [ids],
  );
  return rows[0]!.n;
}

function host(name: string, retentionEvery: number): { worker: Worker; results: RetentionResult[] } {
  const worker = createWorker({
    pool: db.pool,
    handlers: {},
    concurrency: 1,
    workerId: name,
    settings: { retentionEvery, reapEvery: 60_000 },
  });
  const results: RetentionResult[] = [];
  worker.on('retention', (result) => results.push(result));
  return { worker, results };
}

describe('retention', () => {
  it('purges on one host while the other, finding the lock taken, skips', async () => {
    const ids = await insertExpiredDone(5, 'retention-lock');
    // Hold the admission log so that whichever host wins the lock stays
    // inside its first batch (purge_logs deletes from it) until the test
    // lets go. (A locked event row would not do: purge passes over it.)
    const holder = await db.connect();
    await holder.query('BEGIN');
    await holder.query('LOCK TABLE wharf.admission_log IN SHARE MODE');

    const a = host('host-a', 200);
    const b = host('host-b', 200);
    await Promise.all([a.worker.start(), b.worker.start()]);
    const skipped = (results: RetentionResult[]): number => results.filter((result) => !result.purged && !('failed' in result)).length;
    // One host is stuck in its purge (it reports nothing yet); the other keeps finding the lock taken.
    const [purger, skipper] = await waitFor(async () => {
      if (a.results.length === 0 && skipped(b.results) >= 3) return [a, b] as const;
      if (b.results.length === 0 && skipped(a.results) >= 3) return [b, a] as const;
      return undefined;
    }, 10_000, 'one host inside purge while the other skips');
    expect(await remaining(ids)).toBe(5);

    await holder.query('COMMIT');
    const purged = await waitFor(async () => purger.results.find((result) => result.purged), 10_000, 'the purge to finish');
    await Promise.all([a.worker.stop(), b.worker.stop()]);

    expect(purged).toEqual({ purged: true, doneDeleted: 5, deadDeleted: 0, logsDeleted: 0, batches: 2 });
    expect(skipper.results.every((result) => !result.purged || result.doneDeleted === 0)).toBe(true);
    expect(await remaining(ids)).toBe(0);
  });

  it('a failed run leaves the rows in place and counts a retention failure', async () => {
    const ids = await insertExpiredDone(3, 'retention-failure');
    const before = await metricValue('integration_consumer_inbox_retention_failures_total');
    await db.pool.query('ALTER FUNCTION wharf.purge() RENAME TO purge_unavailable');
    const a = host('host-failing', 200);
    try {
      await a.worker.start();
      await waitFor(async () => a.results.some((result) => 'failed' in result), 10_000, 'a failed retention run');
    } finally {
      await a.worker.stop();
      await db.pool.query('ALTER FUNCTION wharf.purge_unavailable() RENAME TO purge');
    }
    expect(await remaining(ids)).toBe(3);
    expect(await metricValue('integration_consumer_inbox_retention_failures_total')).toBeGreaterThan(before);
  });
});

describe('/metrics', () => {
  it('serves every worker metric, with queue depth and oldest due age read from the database', async () => {
    let unblock!: () => void;
    const blocked = new Promise<void>((resolve) => (unblock = resolve));
    const worker = createWorker({
      pool: db.pool,
      handlers: { 'generic:block': () => blocked, 'generic:later': 'ignore' },
      concurrency: 1,
      settings: { pollEvery: 100 },
    });
    const settled: string[] = [];
    worker.on('settled', ({ eventId }) => settled.push(eventId));
    await worker.start();
    const server = await startMetricsServer(workerRegistry, 0, { readiness: () => worker.readiness() });
    try {
      const [blocking] = await admitEvents(db.pool, [{ scope: 'metrics-a', eventType: 'block' }]);
      await waitFor(async () => {
        const { rows } = await db.pool.query(`SELECT 1 FROM wharf.provider_event WHERE id = $1 AND state = 'LEASED'`, [blocking]);
        return rows.length > 0;
      }, 10_000, 'the blocking event to be leased');
      // Due, but the only slot is taken: it ages.
      await admitEvents(db.pool, [{ scope: 'metrics-b', eventType: 'later' }]);
      await new Promise((resolve) => setTimeout(resolve, 300));

      const response = await fetch(`http://127.0.0.1:${server.port}/metrics`);
      expect(response.status).toBe(200);
      const body = await response.text();
      for (const name of [
        'integration_consumer_claimed_total',
        'integration_consumer_completed_total',
        'integration_consumer_retry_total',
        'integration_consumer_dead_total',
        'integration_consumer_released_total',
        'integration_consumer_reaped_total',
        'integration_consumer_lease_lost_total',
        'integration_consumer_dropped_total',
        'integration_consumer_inbox_retention_failures_total',
        'integration_consumer_queue_depth',
        'integration_consumer_oldest_due_age_seconds',
        'integration_consumer_handler_duration_seconds',
      ]) {
        expect(body).toContain(`# TYPE ${name} `);
      }
      expect(body).toMatch(/^integration_consumer_queue_depth\{state="LEASED"\} 1$/m);
      expect(body).toMatch(/^integration_consumer_queue_depth\{state="QUEUED"\} 1$/m);
      const age = Number(/^integration_consumer_oldest_due_age_seconds (\S+)$/m.exec(body)?.[1]);
      expect(age).toBeGreaterThan(0.2);
      expect(body).toMatch(/^integration_consumer_claimed_total [1-9]/m);
      expect((await fetch(`http://127.0.0.1:${server.port}/other`)).status).toBe(404);
      expect((await fetch(`http://127.0.0.1:${server.port}/healthz`)).status).toBe(200);
      expect(await (await fetch(`http://127.0.0.1:${server.port}/readyz`)).json()).toEqual({ status: 'ready' });
    } finally {
      unblock();
      await waitFor(async () => settled.length >= 2, 10_000, 'both events');
      await server.close();
      await worker.stop();
    }
    expect(await metricValue('integration_consumer_completed_total', { outcome: 'ignored' })).toBeGreaterThanOrEqual(1);
  });
});
